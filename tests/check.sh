#!/usr/bin/env bash
# The test command: installs what the machine lacks, checks the formatting, the man pages and the
# documents' links, clippy (with the workspace lints) and the API docs' links, runs the host-side
# tests of the workspace, builds once (and the .deb/.rpm from that build), then runs every rig suite (tests/suites/*.sh) in one
# Debian 12 boot, then the other Debian lines in their own userlands and the two-machine run
# (tests/lines.sh: Debian 13 and sid, one boot each, then two guests). Each boot prints its time;
# the last line sums them up.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
started=$SECONDS

tests/rig/setup-host.sh

# The other lines' roots (tests/rig/make-root.sh: debootstrap into /var/cache/rxe-rs-rig/, first
# run only; a made root returns at once) are made in the background while the host builds.
mkdir -p target/rig
declare -A root_pid
for line in trixie sid; do
    tests/rig/make-root.sh "$line" > "target/rig/make-root-$line.log" 2>&1 &
    root_pid[$line]=$!
done

echo "== host: cargo fmt --check"
cargo fmt --check

echo "== host: man pages render without a warning, docs' links resolve (tests/man-check.sh, tests/docs-check.sh)"
tests/man-check.sh
tests/docs-check.sh

echo "== host: cargo clippy --workspace --all-targets (workspace lints, warnings denied)"
cargo clippy --workspace --all-targets --release -- -D warnings

echo "== host: cargo doc --workspace --no-deps (broken or private intra-doc links denied)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --release

echo "== host: cargo test --workspace"
cargo test --workspace --release

# Miri and loom (docs/safety.md): each prints its time.
step_started=$SECONDS
echo "== host: Miri (the selected host unit tests of rxe_rs and nd-shim under Stacked Borrows; docs/safety.md)"
# The selection and what is left out, with the reasons: docs/safety.md.
MIRIFLAGS="-Zmiri-disable-isolation -Zmiri-ignore-leaks" cargo +nightly miri test -p rxe-rs-provider --lib -- \
    --test-threads=1 ah:: boundary:: command:: context:: cq:: device:: libibverbs::layout:: libibverbs::qp:: lifecycle:: \
    lock::tests::a_pair lock::tests::an_unlocked lock::tests::with_unlocks mr:: mw:: pd:: qp::control:: wqe::
MIRIFLAGS="-Zmiri-disable-isolation" cargo +nightly miri test -p nd-shim --lib -- connection_data:: listen::
echo "miri: $((SECONDS - step_started)) s"

step_started=$SECONDS
echo "== host: loom models (rxe_rs's lock, nd-shim's request completion; docs/safety.md)"
# LOOM_MAX_PREEMPTIONS: nd-shim's waiting model reads the real clock (Pending::wait_for), which
# an unbounded exploration outlasts (docs/safety.md); the lock's models exhaust unbounded as well.
LOOM_MAX_PREEMPTIONS=3 RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
    cargo test --release --target x86_64-unknown-linux-gnu -p rxe-rs-provider -p nd-shim --lib loom_
echo "loom: $((SECONDS - step_started)) s"

echo "== host: cargo build --release --workspace, packaging/build.sh"
cargo build --release --workspace
tests/nd2/build.sh # the ND2 C++ programs the rig suite nd2 runs (the guest sees the tree read-only)
packaging/build.sh

echo "== host: lintian and rpmlint of the packages (packaging/lint.sh)"
packaging/lint.sh
export RIG_PACKAGES_LINTED=host # the packages suite need not lint them again under emulation

# aarch64, cross-built (Debian's gcc-aarch64-linux-gnu links; .cargo/config.toml): the workspace,
# the layout tests (the mirrors against clang's aarch64 layout of the arm64 headers) and the
# provider's unit tests under qemu-aarch64, and the arm64 .deb and aarch64 .rpm, linted.
echo "== host: aarch64: cargo clippy and build --release --target aarch64-unknown-linux-gnu --workspace, layout and unit tests under qemu-aarch64, packages"
aarch64_started=$SECONDS
# c_char is u8 there: what clippy says of a cast differs.
cargo clippy --target aarch64-unknown-linux-gnu --workspace --all-targets --release -- -D warnings
cargo build --release --target aarch64-unknown-linux-gnu --workspace
cargo test --release --target aarch64-unknown-linux-gnu -p kernel-abi -p rxe-rs-provider --lib --test c_layout
PACKAGE_ARCH=arm64 packaging/build.sh
PACKAGE_ARCH=arm64 packaging/lint.sh
echo "aarch64: $((SECONDS - aarch64_started)) s"

host_seconds=$((SECONDS - started))

status=0
mapfile -t suites < <(find tests/suites -name '*.sh' -printf '%f\n' | sed 's/\.sh$//' | sort)
echo "== rig: Debian 12: ${suites[*]}"
debian12_started=$SECONDS
tests/rig/vm suites "${suites[@]}" || status=1
debian12_seconds=$((SECONDS - debian12_started))

roots_started=$SECONDS
for line in "${!root_pid[@]}"; do
    wait "${root_pid[$line]}" || status=1
    cat "target/rig/make-root-$line.log"
done
roots_waited=$((SECONDS - roots_started))

echo "== rig: the other lines and two machines (tests/lines.sh)"
lines_started=$SECONDS
tests/lines.sh || status=1
lines_seconds=$((SECONDS - lines_started))

echo "check: host $host_seconds s, Debian 12 boot $debian12_seconds s, waited $roots_waited s for the roots," \
    "lines and two guests $lines_seconds s; $((SECONDS - started)) s in all, $([[ $status == 0 ]] && echo passed || echo FAILED)"
exit "$status"
