#!/usr/bin/env bash
# The test command: installs what the machine lacks, checks the formatting, clippy (with the workspace lints) and the
# API docs' links, runs the host-side tests of the workspace,
# builds once (and the .deb/.rpm from that build), then runs every rig suite (tests/suites/*.sh) in one
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

echo "== host: cargo clippy --workspace --all-targets (workspace lints, warnings denied)"
cargo clippy --workspace --all-targets --release -- -D warnings

echo "== host: cargo doc --workspace --no-deps (broken or private intra-doc links denied)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --release

echo "== host: cargo test --workspace"
cargo test --workspace --release

echo "== host: fuzz smoke (fuzz/smoke.sh: each cargo-fuzz target ${FUZZ_SECONDS:-20} s from its corpus)"
fuzz_started=$SECONDS
fuzz/smoke.sh
echo "fuzz smoke: $((SECONDS - fuzz_started)) s"

echo "== host: cargo build --release --workspace, packaging/build.sh"
cargo build --release --workspace
tests/nd2/build.sh # the ND2 C++ programs the rig suite nd2 runs (the guest sees the tree read-only)
packaging/build.sh

echo "== host: lintian and rpmlint of the packages (packaging/lint.sh)"
packaging/lint.sh
export RIG_PACKAGES_LINTED=host # the packages suite need not lint them again under emulation

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
