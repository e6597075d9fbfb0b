#!/usr/bin/env bash
# The test command: installs what the machine lacks, checks the formatting, clippy (with the workspace lints) and the
# API docs' links, runs the host-side tests of the workspace,
# builds once (and the .deb/.rpm from that build), then runs every rig suite (tests/suites/*.sh) in one VM boot.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

tests/rig/setup-host.sh

echo "== host: cargo fmt --check"
cargo fmt --check

echo "== host: cargo clippy --workspace --all-targets (workspace lints, warnings denied)"
cargo clippy --workspace --all-targets --release -- -D warnings

echo "== host: cargo doc --workspace --no-deps (broken or private intra-doc links denied)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --release

echo "== host: cargo test --workspace"
cargo test --workspace --release

echo "== host: cargo build --release --workspace, packaging/build.sh"
cargo build --release --workspace
tests/nd2/build.sh # the ND2 C++ programs the rig suite nd2 runs (the guest sees the tree read-only)
packaging/build.sh

echo "== host: lintian and rpmlint of the packages (packaging/lint.sh)"
packaging/lint.sh
export RIG_PACKAGES_LINTED=host # the packages suite need not lint them again under emulation

mapfile -t suites < <(find tests/suites -name '*.sh' -printf '%f\n' | sed 's/\.sh$//' | sort)
echo "== rig: ${suites[*]}"
tests/rig/vm suites "${suites[@]}"
