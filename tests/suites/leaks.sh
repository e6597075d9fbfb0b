# leaks: memory that outlives its object. verbs-churn (tests/verbs/churn.c) creates and destroys
# every verbs object RIG_CHURN_ROUNDS times (2000; docs/safety.md has a 10^5 run) over each
# provider and fails when RSS or the mapping count grows; then, under valgrind's memcheck and over
# rxe_rs, verbs-churn (20 rounds) and nd2-memory's lifetime-rss (ND2_LIFETIME_ROUNDS=100: regions,
# windows, CQs, connectors, adapters through nd-shim; its RSS bound left unjudged, as valgrind
# holds freed blocks back on purpose) must leave no block definitely lost and no memory error.
source "$RIG_ROOT/tests/rig/guest/lib.sh"

leaks_dir=$RIG_OUT/leaks
mkdir -p "$leaks_dir"
# TMPDIR: the guest sees the host read-only except RIG_OUT.
if ! TMPDIR=$leaks_dir "$RIG_ROOT/tests/verbs/build.sh" "$leaks_dir" churn > "$RIG_OUT/logs/$RIG_SUITE.build.log" 2>&1; then
    record fail build "gcc against libibverbs, log: logs/$RIG_SUITE.build.log"
    sed 's/^/    | /' "$RIG_OUT/logs/$RIG_SUITE.build.log" | tail -n 30
    exit 0
fi
record pass build

nd2_programs

churn() { # churn PROVIDER
    local served=$RIG_OUT/leaks.churn.$1.served RIG_TIMEOUT=${RIG_CHURN_TIMEOUT:-900}
    with_provider "$1" "$served" "$leaks_dir/verbs-churn" rxe0 "${RIG_CHURN_ROUNDS:-2000}" || return 1
    served_by "$served"
    expect_provider "$served" "$1"
}

# memcheck PROVIDER NAME [ENV=VALUE...] -- PROGRAM ARGS...: PROGRAM under valgrind's memcheck with
# PROVIDER; a definite leak or a memory error makes valgrind exit 9. The summary lines go into
# the case's log, and the report's end when it failed.
memcheck() {
    local provider=$1 name=$2 settings=()
    shift 2
    while [[ $1 != -- ]]; do settings+=("$1"); shift; done
    shift
    local log=$leaks_dir/$name.$provider.valgrind.log served=$RIG_OUT/leaks.$name.$provider.served rc=0
    RIG_TIMEOUT=900 with_provider "$provider" "$served" env "${settings[@]}" valgrind --leak-check=full \
        --show-leak-kinds=definite --errors-for-leak-kinds=definite --error-exitcode=9 --num-callers=30 \
        --log-file="$log" "$@" || rc=$?
    grep -E 'definitely lost|ERROR SUMMARY' "$log"
    ((rc == 0)) || { echo "exit $rc, valgrind's report: leaks/${log##*/}"; tail -n 60 "$log"; return 1; }
    served_by "$served"
    expect_provider "$served" "$provider"
}

for provider in stock rxe_rs; do
    run_test "churn.$provider" churn "$provider"
    show_log "churn.$provider" '^[A-Za-z].*(rounds|not supported)'
done
# Under valgrind over rxe_rs only (a minute each under emulation): the two libraries are ours;
# a leak of the stock stack's would not be ours to fix. RIG_LEAKS_MEMCHECK="stock rxe_rs" adds it.
for provider in ${RIG_LEAKS_MEMCHECK:-rxe_rs}; do
    run_test "churn-memcheck.$provider" memcheck "$provider" churn-memcheck -- "$leaks_dir/verbs-churn" rxe0 20 100000
    run_test "nd2-memcheck.$provider" memcheck "$provider" nd2-memcheck ND2_LIFETIME_ROUNDS=100 ND2_LIFETIME_RSS=unjudged -- \
        "$nd2_bin/nd2-memory" lifetime-rss "$RIG_SERVER_IP" "$RIG_CLIENT_IP"
done
