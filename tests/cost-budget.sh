#!/usr/bin/env bash
# The data path's cost, held by a budget: builds the provider's unit-test binary (release), runs
# its instruction-count harnesses (entry::qp::tests::hot_path_pairs*: a post (post_send, the
# ibv_wr_* calls of one WRITE, or post_srq_recv) + the poll_cq of its completion, through the C
# entries on fake rings, the doorbell to /dev/null) under callgrind, which counts exactly, and
# compares the provider's own instructions per pair (those in the test binary, so not libc's
# write() wrapper of the doorbell) with provider/perf-budget.txt. Prints the figures; exits 1
# when a case is above its budget plus the file's margin.
#
#   tests/cost-budget.sh              # the tree's provider
#   COST_TREE=/path/to/tree tests/cost-budget.sh
#                                     # another checkout's provider against this tree's budget
#                                     # (built in its own target/; cases it lacks are reported)
#
# RXE_RS_HOT_PATH_PAIRS (default 10,000): pairs per run. docs/provider-performance.md,
# "Counting on the host".
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
budget_file=$PWD/provider/perf-budget.txt
tree=${COST_TREE:-$PWD}
pairs=${RXE_RS_HOT_PATH_PAIRS:-10000}
export RXE_RS_HOT_PATH_PAIRS=$pairs

command -v valgrind > /dev/null || {
    echo "cost-budget: valgrind is not installed (tests/rig/setup-host.sh installs it)" >&2
    exit 2
}

# The test binary: cargo prints "Executable unittests src/lib.rs (target/release/deps/rxe_rs-HASH)".
build_log=$(cd "$tree" && cargo test --release -p rxe-rs-provider --lib --no-run 2>&1) || {
    printf '%s\n' "$build_log" >&2
    exit 2
}
bin=$(printf '%s\n' "$build_log" | sed -n 's/.*Executable unittests src\/lib\.rs (\(.*\))$/\1/p' | tail -n 1)
[[ -n $bin ]] || {
    printf '%s\ncost-budget: no test binary in cargo'"'"'s output\n' "$build_log" >&2
    exit 2
}
[[ $bin = /* ]] || bin=$tree/$bin
bin=$(realpath "$bin") # as valgrind names the object
listed=$("$bin" --list --ignored 2>/dev/null)

margin=$(awk '$1 == "margin-percent" { print $2 }' "$budget_file")
[[ -n $margin ]] || {
    echo "cost-budget: no margin-percent in $budget_file" >&2
    exit 2
}
recorded_rustc=$(awk '$1 == "rustc" { print "rustc " $2 }' "$budget_file")
echo "cost-budget: $(cd "$tree" && git log -1 --format='%h %s' 2>/dev/null | cut -c1-72) ($tree)"
echo "cost-budget: $(rustc --version), $(valgrind --version); the budget was set with ${recorded_rustc:-an unrecorded rustc}"
echo "cost-budget: instructions per post + poll_cq pair, $pairs pairs, callgrind (exact)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
while read -r case test budget; do
    if ! grep -qx "entry::qp::tests::$test: test" <<< "$listed"; then
        printf '  %-9s (%s) not in this tree: not counted\n' "$case" "$test"
        continue
    fi
    out=$work/$case.out
    valgrind --tool=callgrind --callgrind-out-file="$out" \
        --toggle-collect='rxe_rs::entry::qp::post_send' --toggle-collect='rxe_rs::entry::cq::poll_cq' \
        --toggle-collect='rxe_rs::entry::wr::wr_*' --toggle-collect='rxe_rs::entry::srq::post_srq_recv' \
        "$bin" --ignored --exact "entry::qp::tests::$test" --test-threads=1 > "$work/$case.log" 2>&1 || {
        cat "$work/$case.log" >&2
        echo "cost-budget: $test failed under callgrind" >&2
        exit 2
    }
    # Self cost per object (the line after calls= is a call's inclusive cost: skipped), and per
    # function of the test binary. Names are compressed: "ob=(3) /path" once, then "ob=(3)".
    awk -v pairs="$pairs" -v bin="$bin" -v case="$case" -v budget="$budget" -v margin="$margin" '
        function name(kind, s,    id) {
            if (match(s, /^\([0-9]+\)/)) {
                id = substr(s, 2, RLENGTH - 2)
                s = substr(s, RLENGTH + 1)
                sub(/^ /, "", s)
                if (s == "") return names[kind, id]
                names[kind, id] = s
            }
            return s
        }
        /^ob=/ { ob = name("ob", substr($0, 4)); next }
        /^cob=/ { name("ob", substr($0, 5)); next }
        /^fn=/ { fn = name("fn", substr($0, 4)); next }
        /^cfn=/ { name("fn", substr($0, 5)); next }
        /^calls=/ { skip = 1; next }
        /^[0-9+*-]/ {
            if (skip) { skip = 0; next }
            if (ob == bin) { own += $2; per_fn[fn] += $2 } else { other += $2 }
        }
        END {
            limit = budget * (1 + margin / 100)
            verdict = own / pairs > limit ? "ABOVE THE BUDGET" : "ok"
            printf "0 %12.2f  %-9s %7.2f own (budget %d, at most %.2f with %s%%)  + %.2f libc  %s\n",
                0, case, own / pairs, budget, limit, margin, other / pairs, verdict
            for (f in per_fn)
                if (per_fn[f] / pairs >= 0.5) printf "1 %12.2f            %7.2f %s\n", 1e6 - per_fn[f] / pairs, per_fn[f] / pairs, f
            exit verdict != "ok"
        }' "$out" | sort -k1,1n -k2,2n | cut -c15- || status=1
done < <(awk '$1 == "pair" { print $2, $3, $4 }' "$budget_file")

if ((status)); then
    echo "cost-budget: FAILED: the data path costs more than $budget_file allows"
else
    echo "cost-budget: within the budget"
fi
exit "$status"
