#!/usr/bin/env bash
# tests/sanitize-build.sh [asan] [tsan]: the sanitized builds the rig suites load (both when no
# argument is given).
# - asan: rxe_rs and nd-shim with AddressSanitizer (nightly -Zsanitizer=address) into
#   target/asan/x86_64-unknown-linux-gnu/release, for the suite `sanitized`, which loads them into
#   every process with GCC's libasan preloaded. tests/check.sh builds it on the host before the
#   Debian 12 boot.
# - tsan: rxe_rs with ThreadSanitizer (-Zsanitizer=thread) into target/tsan/x86_64-unknown-linux-gnu/
#   release, with the standard library rebuilt instrumented (-Zbuild-std: an uninstrumented std's
#   locks, atomics and Arc would be invisible to TSan, a flood of false reports), for the suite
#   `sanitized-tsan`, which preloads GCC's libtsan into the threaded verbs programs over it. The
#   same flags, profile and target directory as tests/check.sh's ThreadSanitizer step, which runs
#   first in the check: the instrumented std is built once for both. The programs (verbs-race,
#   verbs-stress, verbs-split-pairs) and the runtime's missing entry points (tests/tsan-rig-mem.c)
#   are built here too, with the host's gcc, into target/tsan/rig-verbs: the Debian 12 guest runs
#   on the host's root, and gcc under emulation took two minutes of the guest for the three.
#   tests/check.sh builds it beside the Debian 12 boot; while target/tsan/rig-build-pending exists
#   (check.sh makes it before the boot; this build removes it when it ends, built or not), the
#   suite waits for it.
# Each build's links (librxe_rs-rdmav<PABI>.so, libnd_shim.so.0) come from tests/link-libs.sh.
# --target keeps the build scripts and proc-macros uninstrumented. The nightly toolchain (with
# rust-src) comes from tests/rig/setup-host.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
(($#)) || set -- asan tsan
for build; do
    case $build in
        asan)
            RUSTFLAGS="-Zsanitizer=address" cargo +nightly build --release --target x86_64-unknown-linux-gnu \
                --target-dir target/asan -p rxe-rs-provider -p nd-shim
            tests/link-libs.sh target/asan/x86_64-unknown-linux-gnu/release
            ;;
        tsan)
            trap 'rm -f target/tsan/rig-build-pending' EXIT
            RUSTFLAGS="-Zsanitizer=thread" cargo +nightly build -Zbuild-std --release --target x86_64-unknown-linux-gnu \
                --target-dir target/tsan -p rxe-rs-provider
            tests/link-libs.sh target/tsan/x86_64-unknown-linux-gnu/release
            tests/verbs/build.sh target/tsan/rig-verbs race stress split-pairs
            gcc -shared -fPIC -O2 -fno-builtin -Wall -Wextra -Werror -o target/tsan/rig-verbs/libtsan-rig-mem.so \
                tests/tsan-rig-mem.c
            ;;
        *)
            echo "usage: tests/sanitize-build.sh [asan] [tsan]" >&2
            exit 2
            ;;
    esac
done
