#!/usr/bin/env bash
# Builds rxe_rs and nd-shim with AddressSanitizer (nightly -Zsanitizer=address) into
# target/asan/x86_64-unknown-linux-gnu/release, for the rig suite `sanitized` (tests/suites/
# sanitized.sh), which loads them into every process with GCC's libasan preloaded. --target keeps
# the build scripts and proc-macros uninstrumented. tests/check.sh runs it; the nightly toolchain
# comes from tests/rig/setup-host.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
RUSTFLAGS="-Zsanitizer=address" cargo +nightly build --release --target x86_64-unknown-linux-gnu \
    --target-dir target/asan -p rxe-rs-provider -p nd-shim
