# verbs-diff (tests/verbs/diff.c): the create verbs (CQ, QP RC/UC/UD with and without SRQ, SRQ,
# MR, MW, basic and _ex) over every attribute's range and random combinations, and post_send /
# post_recv shapes, run with the stock provider and with rxe_rs in this boot and compared by
# tests/verbs/diff-compare.py: the same success or failure, errno differences only as listed in
# tests/verbs/diff-known.txt, caps reported back ours >= stock, every object's use the same.
# RIG_DIFF_SEED (default: from the clock, printed) and RIG_DIFF_RANDOM (random QP combinations,
# default 3000: with the one-at-a-time sweeps about 12,000 combinations per provider, inside CI's time) make a
# run reproducible or longer.
source "$RIG_ROOT/tests/rig/guest/lib.sh"

diff_dir=$RIG_OUT/verbs-diff
mkdir -p "$diff_dir"
seed=${RIG_DIFF_SEED:-$(date +%s)}
random_count=${RIG_DIFF_RANDOM:-3000}
echo "  seed $seed, $random_count random QP combinations (RIG_DIFF_SEED=$seed reproduces the run)"

if ! TMPDIR=$diff_dir "$RIG_ROOT/tests/verbs/build.sh" "$diff_dir" diff > "$RIG_OUT/logs/$RIG_SUITE.build.log" 2>&1; then
    record fail build "gcc against libibverbs, log: logs/$RIG_SUITE.build.log"
    sed 's/^/    | /' "$RIG_OUT/logs/$RIG_SUITE.build.log" | tail -n 30
    exit 0
fi
record pass build

sweep() { # sweep PROVIDER: the program's lines into diff_dir/PROVIDER.out
    local served=$RIG_OUT/verbs-diff.$1.served RIG_TIMEOUT=${RIG_DIFF_TIMEOUT:-1200}
    with_provider "$1" "$served" "$diff_dir/verbs-diff" "$seed" "$random_count" > "$diff_dir/$1.out" || return 1
    served_by "$served"
    expect_provider "$served" "$1"
}

run_test sweep.stock sweep stock
run_test sweep.rxe_rs sweep rxe_rs
grep -h '^verbs-diff:' "$RIG_OUT"/logs/"$RIG_SUITE".sweep.*.log | sed 's/^/    /'
run_test compare python3 "$RIG_ROOT/tests/verbs/diff-compare.py" \
    "$diff_dir/stock.out" "$diff_dir/rxe_rs.out" "$RIG_ROOT/tests/verbs/diff-known.txt"
sed 's/^/    /' "$RIG_OUT/logs/$RIG_SUITE.compare.log" | head -n 60
