# verbs-stress (tests/verbs/stress.c, built here with gcc against libibverbs): threads posting on
# one RC QP, QPs sharing a CQ, RQ and SRQ receives, a QP moved to error and one destroyed
# mid-flight; every work request must complete exactly once. Both ends in one process (rxe1 to
# rxe0), with rxe_rs (the test) and with the stock C provider (the control: the same program on
# rdma-core's provider). RIG_STRESS_SENDS (100000): the number of sends; about as many receives
# complete beside them.
# The control's result is printed, not counted: the stock stack itself has failed it (a clean
# clone's CI run on 2026-11-22: two sends completed with success and never received, one receive
# completed with a length no send had, all with the stock provider on kernel 6.1's rxe, while
# rxe_rs passed in the same boot), and that is not this project's to pass or fail.
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

# The counts go into the suite's output, pass or fail.
show_counts() {
    grep -E '^(provider|note|SRQ|work requests|\[|  |send |receive |wr_id )' "$1" | grep -v ' provider rx' | sed 's/^/    /'
}

run_test stress.rxe_rs stress_run rxe_rs
show_counts "$RIG_OUT/logs/$RIG_SUITE.stress.rxe_rs.log"

control_log=$RIG_OUT/logs/$RIG_SUITE.stress.stock-control.log
if stress_run stock > "$control_log" 2>&1; then
    echo "  control (stock provider): every work request completed exactly once"
else
    echo "  control (stock provider): FAILED, not counted (log: logs/$RIG_SUITE.stress.stock-control.log)"
fi
show_counts "$control_log"

# verbs-split-pairs (tests/verbs/split-pairs.c): ibv_wr_start on one thread and ibv_wr_complete on
# another, ibv_start_poll on one and ibv_end_poll on another, RIG_SPLIT_ROUNDS (200) rounds; over
# both providers, and on a thread domain over rxe_rs (the stock provider has no thread domains).
split_run() { # split_run PROVIDER [td]
    local served=$RIG_OUT/verbs-split-pairs.$1${2:+.$2}.served RIG_TIMEOUT=120
    with_provider "$1" "$served" "$stress_dir/verbs-split-pairs" "${RIG_SPLIT_ROUNDS:-200}" ${2:+"$2"} || return 1
    served_by "$served"
    expect_provider "$served" "$1"
}
for provider in stock rxe_rs; do
    run_test "split-pairs.$provider" split_run "$provider"
done
run_test split-pairs-td.rxe_rs split_run rxe_rs td
# The RESET purge never waits for a CQ lock: two threads, each inside an ibv_start_poll of one
# CQ, move to RESET a QP of the CQ the other polls (RIG_ABBA_ROUNDS, 20); both must return.
abba_run() { # abba_run PROVIDER
    local served=$RIG_OUT/verbs-split-pairs.$1.abba.served RIG_TIMEOUT=120
    with_provider "$1" "$served" "$stress_dir/verbs-split-pairs" "${RIG_ABBA_ROUNDS:-20}" abba || return 1
    served_by "$served"
    expect_provider "$served" "$1"
}
for provider in stock rxe_rs; do
    run_test "purge-abba.$provider" abba_run "$provider"
done

# verbs-purge (tests/verbs/purge.c): what a QP's CQ hands out once ibv_modify_qp(RESET) or
# ibv_destroy_qp returned, while the CQ is in use: another thread inside ibv_start_poll on it
# (reset-busy, destroy-busy), the resetting thread inside its own (reset-self), the CQ on a thread
# domain and mid-poll on the thread using it (reset-td), or idle (destroy); RIG_PURGE_ROUNDS (3)
# rounds each. rxe_rs must show none of the QP's five completions after the call, the other QP's
# kept (exit 0: docs/provider-architecture.md, "The RESET and destroy purge"); the stock provider
# leaves all five in the CQ by design (exit 3, printed) and has no thread domains (exit 2).
purge_run() { # purge_run PROVIDER MODE
    local served=$RIG_OUT/verbs-purge.$1.$2.served RIG_TIMEOUT=120 want=0 status=0
    [[ $1 == stock ]] && want=3
    [[ $1 == stock && $2 == reset-td ]] && want=2
    with_provider "$1" "$served" "$stress_dir/verbs-purge" "$2" "${RIG_PURGE_ROUNDS:-3}" || status=$?
    ((status == want)) || { echo "verbs-purge $2: exit $status, expected $want"; return 1; }
    served_by "$served"
    expect_provider "$served" "$1"
}
for mode in reset-busy reset-self reset-td destroy-busy destroy; do
    for provider in stock rxe_rs; do
        run_test "purge.$mode.$provider" purge_run "$provider" "$mode"
        grep -E '^(reset|destroy|round|thread)' "$RIG_OUT/logs/$RIG_SUITE.purge.$mode.$provider.log" | tail -n 2 | sed 's/^/    /'
    done
done

# verbs-privdrop (tests/verbs/privdrop.c): a program drops CAP_IPC_LOCK after opening rxe0 (the
# kernel then refuses its write() commands: "changed security contexts"), then posts on two
# connected RC QPs: rxe_rs must complete a SEND and its receive, fill the send queue with RDMA
# WRITEs to ENOMEM, complete them all and post again (its doorbell goes by ioctl once write() is
# refused); the stock provider's post must fail with EACCES (its doorbell is a write()), which is
# printed. Then it exhausts MRs (the 17th 64 KiB MR under a 1 MiB RLIMIT_MEMLOCK: ENOMEM), CQs and
# QPs (under an RLIMIT_AS: ENOMEM), each kind created again after freeing one; never EACCES. Over
# both providers: the commands go through the ioctl interface, which has no such check.
privdrop_run() { # privdrop_run PROVIDER
    local served=$RIG_OUT/verbs-privdrop.$1.served RIG_TIMEOUT=300 posts=ok
    [[ $1 == stock ]] && posts=EACCES
    with_provider "$1" "$served" "$stress_dir/verbs-privdrop" rxe0 "$posts" || return 1
    served_by "$served"
    expect_provider "$served" "$1"
}
for provider in stock rxe_rs; do
    run_test "privdrop.$provider" privdrop_run "$provider"
    show_log "privdrop.$provider" '^(control|post|MR|CQ|QP|CAP)'
done

# verbs-disassociate (tests/verbs/disassociate.c): the device is removed (`rdma link delete
# rxe0`) under a program holding a PD, MR, MW, CQ, SRQ, QP and AH. A kernel whose rxe
# disassociates sends IBV_EVENT_DEVICE_FATAL, after which every destroy must return 0
# (RDMAV_ALLOW_DISASSOC_DESTROY, libibverbs' switch: the kernel answers EIO); Linux 6.1's rxe
# cannot disassociate (no disassociate_ucontext), so the removal waits for the program to close
# the device, and its destroys must succeed all the same. Either way rxe0 is then added again
# and must answer. Last in this suite, the last of the boot, since it takes rxe0 away for a
# moment.
disassociate_run() { # disassociate_run PROVIDER
    local out=$stress_dir/disassociate.$1.out served=$RIG_OUT/verbs-disassociate.$1.served status=0
    with_provider "$1" "$served" env RDMAV_ALLOW_DISASSOC_DESTROY=1 "$stress_dir/verbs-disassociate" rxe0 10 \
        > "$out" 2>&1 &
    local program=$!
    local waited=0
    until grep -q '^ready' "$out" 2>/dev/null; do
        ((waited++ < 120)) || { echo "not ready in 60 s"; cat "$out"; stop_background "$program"; return 1; }
        kill -0 "$program" 2>/dev/null || { cat "$out"; return 1; }
        sleep 0.5
    done
    # The kernel finishes the removal once the program closed the device: in the background.
    timeout 120 rdma link delete rxe0 &
    local removal=$!
    wait "$program" || status=1
    wait "$removal" || { echo "rdma link delete rxe0 failed or hung"; status=1; }
    cat "$out"
    rdma link add rxe0 type rxe netdev veth0 || { echo "rdma link add rxe0 failed"; return 1; }
    ibv_devinfo -d rxe0 | grep -q PORT_ACTIVE || { echo "rxe0 is not back"; return 1; }
    ((status == 0)) || return 1
    served_by "$served"
    expect_provider "$served" "$1"
}
for provider in stock rxe_rs; do
    run_test "disassociate.$provider" disassociate_run "$provider"
done
