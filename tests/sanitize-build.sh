#!/usr/bin/env bash
# Builds, for the rig suite `sanitized` (tests/suites/sanitized.sh):
# - rxe_rs and nd-shim with AddressSanitizer (nightly -Zsanitizer=address) into
#   target/asan/x86_64-unknown-linux-gnu/release; the suite loads them into every process with
#   GCC's libasan preloaded;
# - rxe_rs with ThreadSanitizer (-Zsanitizer=thread) into target/tsan-rig/x86_64-unknown-linux-gnu/
#   release, with the standard library rebuilt instrumented (-Zbuild-std: an uninstrumented std's
#   locks, atomics and Arc would be invisible to TSan, a flood of false reports; the same reason
#   as tests/check.sh's host TSan step); the suite sanitized-tsan preloads GCC's libtsan into the
#   threaded verbs programs over it. Those programs (verbs-race, verbs-stress, verbs-split-pairs)
#   and the runtime's missing entry points (tests/tsan-rig-mem.c) are built here too, with the
#   host's gcc and libibverbs, into target/tsan-rig/verbs: the Debian 12 guest runs on the host's
#   root, and gcc under emulation took two minutes of the guest for the three.
# --target keeps the build scripts and proc-macros uninstrumented. tests/check.sh runs it; the
# nightly toolchain (with rust-src) comes from tests/rig/setup-host.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
RUSTFLAGS="-Zsanitizer=address" cargo +nightly build --release --target x86_64-unknown-linux-gnu \
    --target-dir target/asan -p rxe-rs-provider -p nd-shim
RUSTFLAGS="-Zsanitizer=thread" cargo +nightly build -Zbuild-std --release --target x86_64-unknown-linux-gnu \
    --target-dir target/tsan-rig -p rxe-rs-provider
tests/verbs/build.sh target/tsan-rig/verbs race stress split-pairs
gcc -shared -fPIC -O2 -fno-builtin -Wall -Wextra -Werror -o target/tsan-rig/verbs/libtsan-rig-mem.so tests/tsan-rig-mem.c
