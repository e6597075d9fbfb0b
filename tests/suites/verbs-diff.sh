# verbs-diff (tests/verbs/diff.c): the create verbs (CQ, QP RC/UC/UD with and without SRQ, SRQ,
# MR, MW, basic and _ex) over every attribute's range and random combinations, and post_send /
# post_recv shapes, run with the stock provider and with rxe_rs in this boot, the two sweeps at
# once on rxe0 (each alone on its objects; see "At once" below), and compared by
# tests/verbs/diff-compare.py: the same success or failure, errno differences only as listed in
# tests/verbs/diff-known.txt, caps reported back ours >= stock, every object's use the same.
# RIG_DIFF_SEED (default: from the clock, printed) and RIG_DIFF_RANDOM (random QP combinations,
# default 1500: with the one-at-a-time sweeps about 10,500 combinations per provider; each run
# draws new ones from its seed, and the suite took 439 s and 583 s with 3000 in two checks, the
# Debian 12 boot being the check's longest path) make a run reproducible or longer.
source "$RIG_ROOT/tests/rig/guest/lib.sh"

diff_dir=$RIG_OUT/verbs-diff
mkdir -p "$diff_dir"
seed=${RIG_DIFF_SEED:-$(date +%s)}
random_count=${RIG_DIFF_RANDOM:-1500}
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

# At once: each sweep holds at most one QP, SRQ or CQ under test (with one MR, AH and helper CQ)
# at a time, far below rxe's device limits, and nothing it prints depends on the other's objects
# (no QP numbers or keys, only outcomes, caps and completion statuses). What they share is the
# guest's memory: rxe allocates a queue's ring in the kernel, up to a GB for one near the maximum
# depth, and two at once could fail where one alone does not. verbs-diff takes the lock file
# VERBS_DIFF_LOCK for every combination with a queue deeper than 4096 from its create to its
# destroy, so big queues are made one at a time, as in a sweep alone.
export VERBS_DIFF_LOCK=$diff_dir/big-queues.lock
declare -A sweep_pid
for provider in stock rxe_rs; do
    sweep "$provider" > "$RIG_OUT/logs/$RIG_SUITE.sweep.$provider.log" 2>&1 &
    sweep_pid[$provider]=$!
done
for provider in stock rxe_rs; do
    if wait "${sweep_pid[$provider]}"; then
        record pass "sweep.$provider"
    else
        record fail "sweep.$provider" "exit $?, log: logs/$RIG_SUITE.sweep.$provider.log"
        sed 's/^/    | /' "$RIG_OUT/logs/$RIG_SUITE.sweep.$provider.log" | tail -n 30
    fi
done
grep -h '^verbs-diff:' "$RIG_OUT"/logs/"$RIG_SUITE".sweep.*.log | sed 's/^/    /'
run_test compare python3 "$RIG_ROOT/tests/verbs/diff-compare.py" \
    "$diff_dir/stock.out" "$diff_dir/rxe_rs.out" "$RIG_ROOT/tests/verbs/diff-known.txt"
sed 's/^/    /' "$RIG_OUT/logs/$RIG_SUITE.compare.log" | head -n 60
