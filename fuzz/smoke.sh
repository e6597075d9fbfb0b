#!/usr/bin/env bash
# The fuzz smoke of tests/check.sh: builds every target of fuzz/ (cargo-fuzz, nightly, ASan and
# debug assertions), then runs each for FUZZ_SECONDS (default 20) from its committed corpus
# (fuzz/corpus/TARGET, read only: new inputs go to a scratch directory). Prints executions and
# time per target; a crash, leak, timeout or failed assertion fails the step, its input saved under
# fuzz/artifacts/TARGET/. `fuzz/smoke.sh TARGET...` runs only those.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
seconds=${FUZZ_SECONDS:-20}
mapfile -t targets < <(if (($#)); then printf '%s\n' "$@"; else cargo +nightly fuzz list; fi)

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
started=$SECONDS
if ! cargo +nightly fuzz build > "$scratch/build.log" 2>&1; then
    tail -60 "$scratch/build.log"
    echo "fuzz: build failed" >&2
    exit 1
fi
echo "fuzz: built ${#targets[@]} targets in $((SECONDS - started)) s"
total_runs=0
for t in "${targets[@]}"; do
    mkdir -p "$scratch/$t" "corpus/$t"
    t0=$SECONDS
    if ! cargo +nightly fuzz run "$t" "$scratch/$t" "corpus/$t" -- \
        -max_total_time="$seconds" -timeout=10 -print_final_stats=1 > "$scratch/$t.log" 2>&1; then
        tail -40 "$scratch/$t.log"
        echo "fuzz: $t FAILED (input under fuzz/artifacts/$t/)" >&2
        exit 1
    fi
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$scratch/$t.log")
    cov=$(grep -Eo 'cov: [0-9]+' "$scratch/$t.log" | tail -1 || true)
    printf 'fuzz: %-20s %10s executions in %3d s (%s, corpus %d inputs)\n' \
        "$t" "$runs" $((SECONDS - t0)) "$cov" "$(find "corpus/$t" -type f | wc -l)"
    total_runs=$((total_runs + ${runs:-0}))
done
echo "fuzz: ${#targets[@]} targets, $total_runs executions, $((SECONDS - started)) s in all"
