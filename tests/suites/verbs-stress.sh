# verbs-stress (tests/verbs/stress.c, built here with gcc against libibverbs): threads posting on
# one RC QP, QPs sharing a CQ, RQ and SRQ receives, a QP moved to error and one destroyed
# mid-flight; every work request must complete exactly once. Both ends in one process (rxe1 to
# rxe0), with rxe_rs and with the stock C provider as the control. RIG_STRESS_SENDS (100000): the
# number of sends; about as many receives complete beside them.
source "$RIG_ROOT/tests/rig/guest/lib.sh"

stress_dir=$RIG_OUT/verbs-stress
stress=$stress_dir/verbs-stress
mkdir -p "$stress_dir"

stress_run() { # stress_run PROVIDER
    local served=$RIG_OUT/verbs-stress.$1.served RIG_TIMEOUT=300
    with_provider "$1" "$served" "$stress" "${RIG_STRESS_SENDS:-100000}" || return 1
    served_by "$served"
    expect_provider "$served" "$1"
}

# TMPDIR: the guest sees the host read-only except RIG_OUT.
if ! TMPDIR=$stress_dir "$RIG_ROOT/tests/verbs/build.sh" "$stress_dir" > "$RIG_OUT/logs/$RIG_SUITE.build.log" 2>&1; then
    record fail build "gcc against libibverbs, log: logs/$RIG_SUITE.build.log"
    sed 's/^/    | /' "$RIG_OUT/logs/$RIG_SUITE.build.log" | tail -n 30
    exit 0
fi
record pass build

for provider in rxe_rs stock; do
    run_test "stress.$provider" stress_run "$provider"
    # The counts go into the suite's output, pass or fail.
    grep -E '^(provider|note|SRQ|work requests|\[|  )' "$RIG_OUT/logs/$RIG_SUITE.stress.$provider.log" |
        grep -v ' provider rx' | sed 's/^/    /'
done
