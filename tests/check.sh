#!/usr/bin/env bash
# The test command: installs what the machine lacks, checks the formatting, the man pages and the
# documents' links, clippy (with the workspace lints) and the API docs' links, runs the host-side
# tests of the workspace and holds the data path to its instruction budget (tests/cost-budget.sh),
# builds once (the .deb/.rpm from that build, and an AddressSanitizer
# build), then starts the rig suites (tests/suites/*.sh) in one Debian 12 boot and, beside it,
# runs the host's analyses (Miri, loom, ThreadSanitizer and the rig's TSan build, the fuzz smoke,
# the aarch64 build and tests: docs/safety.md; the arm64 guest: docs/lines.md) and the other
# Debian lines in their own userlands (tests/lines.sh: Debian 13 and sid, one boot each), then a
# second Debian 12 boot for the late suites; once no guest runs, the two-machine run. Two guests at a time at most, one vCPU each: the machine has two cores. Each
# boot prints its time and the CPU it used; the last line sums them up.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
started=$SECONDS

tests/rig/setup-host.sh

# The other lines' roots (tests/rig/make-root.sh: debootstrap into /var/cache/rxe-rs-rig/, first
# run only; a made root returns at once) are made in the background while the host builds.
mkdir -p target/rig
# What fails is named again in the last lines (CI keeps only the output's end); the rig's
# results files are this run's alone.
failed=()
rm -f target/rig/{out,debian12-late,trixie,sid,two-guests}/results*
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
cargo test --workspace --release --no-fail-fast # every failing test binary, not only the first

echo "== host: the data path's instructions per post_send + poll_cq against provider/perf-budget.txt (tests/cost-budget.sh, callgrind)"
tests/cost-budget.sh


echo "== host: cargo build --release --workspace, tests/link-libs.sh, packaging/build.sh"
cargo build --release --workspace
tests/link-libs.sh # the names libibverbs and the NDK programs load the libraries by
# ... and it refuses a directory that holds neither library, saying so.
no_libs=$(mktemp -d)
if tests/link-libs.sh "$no_libs" 2> "$no_libs/err" || ! grep -q 'cargo build first' "$no_libs/err"; then
    echo "check: tests/link-libs.sh accepted a directory without the libraries"
    exit 1
fi
rm -r "$no_libs"
tests/nd2/build.sh # the ND2 C++ programs the rig suite nd2 runs (the guest sees the tree read-only)
packaging/build.sh

echo "== host: lintian and rpmlint of the packages (packaging/lint.sh)"
packaging/lint.sh
export RIG_PACKAGES_LINTED=host # the packages suite need not lint them again under emulation

echo "== host: rxe_rs and nd-shim with AddressSanitizer for the rig suite sanitized (tests/sanitize-build.sh asan)"
step_started=$SECONDS
tests/sanitize-build.sh asan
echo "asan build: $((SECONDS - step_started)) s"
# The rig suite sanitized-tsan waits for its build, made beside the boot after the host's
# ThreadSanitizer step (which builds the same instrumented std): see tsan_rig below.
mkdir -p target/tsan
: > target/tsan/rig-build-pending

host_seconds=$((SECONDS - started))

# One vCPU per guest: two guests side by side on the machine's two cores, each with two vCPUs,
# each took about three times as long as alone (nd2 731 s against 236 s, Debian 13's packages 497 s
# against 139 s); with one vCPU each, 297 s and 133 s (2026-11-26). Likely cause: under software
# emulation, a vCPU that loses the host core while holding a guest spinlock leaves the other
# spinning.
export RIG_CPUS=${RIG_CPUS:-1}
# Every suite in one Debian 12 boot but the late ones, which a second Debian 12 boot runs after
# the other lines: the two lanes then take about as long (times in docs/rig.md).
late_suites=(ndk-conformance)
mapfile -t suites < <(find tests/suites -name '*.sh' -printf '%f\n' | sed 's/\.sh$//' | sort |
    grep -vxF -f <(printf '%s\n' "${late_suites[@]}"))

# From here the Debian 12 boot runs beside the host's analyses and then the other lines: a
# guest waits on timers much of the time (each boot prints the share of a core it used), so
# side by side they take less than one after the other. The boot's lines are marked [debian12].
echo "== rig: Debian 12, in the background: ${suites[*]}"
debian12_started=$SECONDS
rm -f target/rig/debian12.seconds
(
    code=0
    # It shares the host with the analyses and the other lines: a longer limit than a lone boot's
    # (CI's last run of it took 2,982 s).
    RIG_BOOT_TIMEOUT=${RIG_BOOT_TIMEOUT:-4200} tests/rig/vm suites "${suites[@]}" 2>&1 |
        sed -u 's/^/[debian12] /' || code=$?
    echo "[debian12] the boot and its suites: $((SECONDS - debian12_started)) s, exit $code"
    echo "$((SECONDS - debian12_started))" > target/rig/debian12.seconds
    exit "$code"
) &
debian12_pid=$!

# The analyses run while the boot does: a failing one is recorded, and the rest still run.
miri() {
    # The selection and what is left out, with the reasons: docs/safety.md.
    MIRIFLAGS="-Zmiri-disable-isolation -Zmiri-ignore-leaks -Zmiri-no-short-fd-operations" \
        cargo +nightly miri test -p rxe-rs-provider --lib -- --test-threads=1 \
        --skip lock::tests::excludes_other_threads --skip lock::tests::of_two_racing_closes_one_releases \
        --skip libibverbs::private_context_releases::tests::every_layout_only_adds_ops \
        --skip libibverbs::private_context_releases::tests::newer_tables_carry_our_ops --skip ops::tests::advise_mr_is_offered &&
        MIRIFLAGS="-Zmiri-disable-isolation -Zmiri-ignore-leaks" cargo +nightly miri test -p nd-shim --lib -- cm_event:: connection:: connection_data:: \
            endpoint:: engine:: listen:: ndk:: sync:: sys:: nd2::cq:: nd2::data_verbs:: nd2::doorbell:: nd2::entry_data:: nd2::int_map:: nd2::mr:: nd2::mw:: \
            nd2::overlapped:: nd2::qp:: nd2::requests:: nd2::tests::a_body nd2::tests::a_call_in_progress \
            nd2::tests::null_and_foreign nd2::tests::socket_addresses \
            nd2::adapter:: nd2::ind2_adapter:: nd2::registration:: nd2::provider:: nd2::win32:: status:: \
            --skip notify_and_get_results_keep_the_order --skip waiting_result_is_woken_by_a_completion_on_another_thread \
            --skip closing_a_port_wakes_its_waiters --skip wait_multiple_wakes_on_another_threads_set \
            --skip wait_any_takes_the_lowest_signalled_index --skip factory_gives_providers_and_counts_them \
            --skip a_slot_read_while_it_changes_hands --skip record_path_exchanges --skip stay_bounded
}
loom_models() {
    # LOOM_MAX_PREEMPTIONS: nd-shim's waiting model reads the real clock (Pending::wait_for), which
    # an unbounded exploration outlasts (docs/safety.md); the lock's models exhaust unbounded as well.
    LOOM_MAX_PREEMPTIONS=3 RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
        cargo test --release --target x86_64-unknown-linux-gnu -p rxe-rs-provider -p nd-shim --lib loom_
}
tsan() {
    # Every unit test of both libraries, on the harness's parallel threads (so the tests' shared
    # statics race too), with the standard library rebuilt instrumented (-Zbuild-std: an
    # uninstrumented std's locks and atomics would be invisible, a flood of false reports);
    # halt_on_error: the first report fails the run (exit 66). RUST_BACKTRACE=0: the expected
    # panics of the panic-boundary tests would each symbolise a backtrace (13 s for the first in a
    # debug build). --release: the rig's TSan build (tsan_rig) then shares this std. What TSan
    # cannot see, and the figures: docs/safety.md.
    RUST_BACKTRACE=0 TSAN_OPTIONS="halt_on_error=1" RUSTFLAGS="-Zsanitizer=thread" CARGO_TARGET_DIR=target/tsan \
        cargo +nightly test -Zbuild-std --release --target x86_64-unknown-linux-gnu -p rxe-rs-provider -p nd-shim --lib
}
# The ThreadSanitizer build of rxe_rs and its C programs for the rig suite sanitized-tsan, which
# the Debian 12 boot reaches half an hour in: right after tsan, whose instrumented std it reuses
# (about 30 s then; over 3 minutes on its own).
tsan_rig() {
    tests/sanitize-build.sh tsan
}
# aarch64, cross-built (Debian's gcc-aarch64-linux-gnu links; .cargo/config.toml): clippy (c_char
# is u8 there: what clippy says of a cast differs), the workspace, the layout tests (the mirrors
# against clang's aarch64 layout of the arm64 headers) and the provider's unit tests under
# qemu-aarch64, and the arm64 .deb and aarch64 .rpm, linted.
aarch64() {
    cargo clippy --target aarch64-unknown-linux-gnu --workspace --all-targets --release -- -D warnings &&
        cargo build --release --target aarch64-unknown-linux-gnu --workspace &&
        tests/link-libs.sh target/aarch64-unknown-linux-gnu/release &&
        cargo test --release --target aarch64-unknown-linux-gnu -p kernel-abi -p rxe-rs-provider --lib --test c_layout &&
        PACKAGE_ARCH=arm64 packaging/build.sh &&
        PACKAGE_ARCH=arm64 packaging/lint.sh
}
analysis() { # analysis NAME FUNCTION TITLE
    echo "== host: $3"
    local step_started=$SECONDS
    "$2" || { echo "check: $1 FAILED"; failed+=("$1"); }
    echo "$1: $((SECONDS - step_started)) s"
}
analyses_started=$SECONDS
analysis miri miri "Miri (the selected host unit tests of rxe_rs and nd-shim under Stacked Borrows; docs/safety.md)"
analysis loom loom_models "loom models (rxe_rs's lock, nd-shim's request completion and ND2 doorbell; docs/safety.md)"
analysis tsan tsan "ThreadSanitizer (every unit test of rxe_rs and nd-shim, std rebuilt instrumented; docs/safety.md)"
analysis "tsan rig build" tsan_rig "rxe_rs with ThreadSanitizer for the rig suite sanitized-tsan (tests/sanitize-build.sh tsan)"
# FUZZ_SECONDS 10 here (fuzz/smoke.sh's own default is 20): the check's analyses lane is its
# longest, and the corpus replay is what guards a regression; longer runs are fuzz/smoke.sh's.
export FUZZ_SECONDS=${FUZZ_SECONDS:-10}
analysis "fuzz smoke" fuzz/smoke.sh "fuzz smoke (fuzz/smoke.sh: each cargo-fuzz target $FUZZ_SECONDS s from its corpus)"
analysis aarch64 aarch64 "aarch64: clippy, cargo build --release --target aarch64-unknown-linux-gnu --workspace, layout and unit tests under qemu-aarch64, packages"
analysis "arm64 guest" tests/rig/arm64 "the arm64 guest (tests/rig/arm64: Debian 12's arm64 kernel and verbs userland under qemu-system-aarch64; ibv_devinfo and an RC pingpong over rdma-core's provider and over the aarch64 rxe_rs)"
analyses_seconds=$((SECONDS - analyses_started))

roots_started=$SECONDS
for line in "${!root_pid[@]}"; do
    wait "${root_pid[$line]}" || failed+=("the $line root")
    cat "target/rig/make-root-$line.log"
done
roots_waited=$((SECONDS - roots_started))

echo "== rig: the other lines (tests/lines.sh --lines-only), beside the Debian 12 boot"
lines_started=$SECONDS
tests/lines.sh --lines-only || failed+=("the other lines")
lines_seconds=$((SECONDS - lines_started))

echo "== rig: Debian 12 again, the late suites: ${late_suites[*]}"
late_started=$SECONDS
RIG_OUT=$PWD/target/rig/debian12-late tests/rig/vm suites "${late_suites[@]}" || failed+=("the late Debian 12 suites")
late_seconds=$((SECONDS - late_started))

echo "== rig: waiting for the Debian 12 boot"
wait "$debian12_pid" || failed+=("the Debian 12 boot")
debian12_seconds=$(cat target/rig/debian12.seconds 2> /dev/null || echo "?")

# Two guests are two cores' work: they start when no other guest runs (more vCPUs than cores slow
# every guest far more than its share: docs/rig.md).
echo "== rig: two machines (tests/lines.sh --two-guests-only), alone"
two_started=$SECONDS
tests/lines.sh --two-guests-only || failed+=("two guests")
two_seconds=$((SECONDS - two_started))

if ((${#failed[@]})); then
    echo "== what failed: $(printf '%s; ' "${failed[@]}")the rig's failing cases, each with its log's end:"
    for results in target/rig/{out,debian12-late,trixie,sid,two-guests}/results*; do
        [[ -f $results ]] || continue
        { grep $'\tfail\t' "$results" || true; } | while IFS=$'\t' read -r suite _ name detail; do
            echo "  ${results#target/rig/}: $suite $name: $detail"
            log=$(dirname "$results")/logs/$suite.${name//[^A-Za-z0-9_.-]/_}.log
            [[ ! -f $log ]] || tail -n 15 "$log" | sed 's/^/      /'
        done
    done
fi
echo "check: host $host_seconds s; then side by side: Debian 12 boot $debian12_seconds s," \
    "host analyses $analyses_seconds s, waited $roots_waited s for the roots, the other lines $lines_seconds s," \
    "the late Debian 12 suites $late_seconds s;" \
    "then two guests $two_seconds s; $((SECONDS - started)) s in all, $( ((${#failed[@]})) && echo FAILED || echo passed)"
((${#failed[@]} == 0))
