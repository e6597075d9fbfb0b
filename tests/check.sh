#!/usr/bin/env bash
# The test command: installs what the machine lacks, checks the formatting, clippy (with the workspace lints) and the
# API docs' links, runs the host-side tests of the workspace,
# builds once (and the .deb/.rpm from that build), then runs every rig suite (tests/suites/*.sh) in one Debian 12
# boot and then two machines (tests/rig/two-guests: Debian 12 and 13 across a QEMU link); beside them, at a lower
# priority, the other Debian lines in their own userlands (tests/lines.sh: Debian 13 and sid, one boot each).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

tests/rig/setup-host.sh

# The other lines' roots (debootstrap, once per machine, outside the tree) are made while the host builds.
mkdir -p target/rig
lines=(trixie sid)
echo "== host: the roots of ${lines[*]} (tests/rig/make-root.sh, in the background; log target/rig/make-roots.log)"
# Each background job is a session of its own, so that a check that stops early takes its guests down.
setsid bash -c 'for line; do tests/rig/make-root.sh "$line" || exit 1; done' make-roots "${lines[@]}" \
    > target/rig/make-roots.log 2>&1 &
roots=$!
lines_job=
trap 'kill -- -"$roots" ${lines_job:+-"$lines_job"} 2> /dev/null || true' EXIT

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

wait "$roots" || { cat target/rig/make-roots.log; echo "check: the roots of ${lines[*]} could not be made"; exit 1; }
cat target/rig/make-roots.log

# Two lanes: the Debian 12 boot and then the two-guest run; beside them, the lines' boots one after
# the other, at idle priority (SCHED_IDLE). A guest keeps about two thirds of this machine's two
# cores busy; the idle lane runs on what the other leaves, and a guest thread of the first lane
# that wakes preempts it at once (a niced lane, which does not, made the first lane's
# latency-bound suites up to 3 times slower). Every boot prints its time; the lines' output is
# shown when they are done.
started=$SECONDS
echo "== rig, beside the Debian 12 boot: ${lines[*]} (tests/lines.sh --lines-only, SCHED_IDLE; log target/rig/lines.log)"
setsid chrt --idle 0 tests/lines.sh --lines-only "${lines[@]}" > target/rig/lines.log 2>&1 &
lines_job=$!

mapfile -t suites < <(find tests/suites -name '*.sh' -printf '%f\n' | sed 's/\.sh$//' | sort)
echo "== rig: ${suites[*]}"
status=0
tests/rig/vm suites "${suites[@]}" || status=1

echo "== rig: two machines (tests/rig/two-guests)"
tests/rig/two-guests || status=1

echo "== rig: waiting for ${lines[*]} ($((SECONDS - started)) s since they began)"
lines_status=0
wait "$lines_job" || lines_status=1
cat target/rig/lines.log
((lines_status == 0)) || status=1
echo "== rig: every boot done in $((SECONDS - started)) s"
exit "$status"
