# nd-shim's ND2 COM face: the C++ ND2 programs of tests/nd2 (built on the host by
# tests/nd2/build.sh into target/nd2; the guest sees the tree read-only, so a missing or stale
# build is redone into RIG_OUT), run between rxe0 (198.18.0.1, server) and rxe1 (198.18.0.2,
# client) once over each provider in RIG_ND_PROVIDERS (default: the stock C provider and rxe_rs).
# nd2-conformance runs both sides in one process (passive on rxe0, active on rxe1). Its io-timeout
# case waits out about 100 s of the IB CM's REQ retries per provider: it starts in the background
# first, with a port range of its own, and is collected at the end, so it overlaps the others.
source "$RIG_ROOT/tests/rig/guest/lib.sh"

nd2_programs

nd2_adapter_info() { # nd2_adapter_info PROVIDER [--expect IP]...: rxe0's and rxe1's IPv4 addresses and those
    local served=$RIG_OUT/nd2-adapter-info.$1.served
    with_provider "$1" "$served" "$nd2_bin/nd2-adapter-info" --expect "$RIG_SERVER_IP" --expect "$RIG_CLIENT_IP" \
        "${@:2}" || return 1
    served_by "$served"
    expect_provider "$served" "$1"
}

nd2_pair() { # nd2_pair PROGRAM PROVIDER PORT [OPTIONS...]: server on rxe0, client on rxe1
    local program=$1 provider=$2 port=$3 server=${ND2_SERVER_IP:-$RIG_SERVER_IP} client=${ND2_CLIENT_IP:-$RIG_CLIENT_IP}
    shift 3
    RIG_PAIR_SERVER_GRACE=10 pair "$provider" "$provider" "cm:$port" \
        "$nd2_bin/$program" server "$server" "$port" "$@" -- \
        "$nd2_bin/$program" client "$client" "$server" "$port" "$@"
}

# nd2_pair6 PROGRAM PROVIDER PORT [OPTIONS...]: nd2_pair over the IPv6 addresses of rig_ipv6; fails
# unless the exchange crossed the veth pair (veth1's transmit count grew by at least 100 packets).
nd2_pair6() {
    local sent=/sys/class/net/veth1/statistics/tx_packets before
    before=$(< "$sent")
    ND2_SERVER_IP=$RIG_SERVER_IP6 ND2_CLIENT_IP=$RIG_CLIENT_IP6 nd2_pair "$@" || return 1
    echo "veth1 sent $(($(< "$sent") - before)) packets"
    (($(< "$sent") - before >= 100))
}

nd2_overlapped() { # nd2_overlapped PROVIDER CASE PORT: one OVERLAPPED-rule case, on rxe0
    local served=$RIG_OUT/nd2-overlapped.$2.$1.served
    with_provider "$1" "$served" env ND_SHIM_LOG=debug "$nd2_bin/nd2-overlapped" "$2" "$RIG_SERVER_IP" "$3" ||
        return 1
    served_by "$served"
    expect_provider "$served" "$1"
}

nd2_cq_notify() { # nd2_cq_notify PROVIDER CASE [--count N]: one Notify case, passive on rxe0, active on rxe1
    local served=$RIG_OUT/nd2-cq-notify.$2.$1.served
    with_provider "$1" "$served" env ND_SHIM_LOG=debug "$nd2_bin/nd2-cq-notify" "$2" "$RIG_SERVER_IP" \
        "$RIG_CLIENT_IP" "${@:3}" || return 1
    served_by "$served"
    expect_provider "$served" "$1"
}

nd2_memory() { # nd2_memory PROVIDER CASE: one IND2MemoryRegion/IND2MemoryWindow/lifetime case
    local served=$RIG_OUT/nd2-memory.$2.$1.served
    with_provider "$1" "$served" "$nd2_bin/nd2-memory" "$2" "$RIG_SERVER_IP" "$RIG_CLIENT_IP" || return 1
    served_by "$served"
    expect_provider "$served" "$1"
}

nd2_win32() { # nd2_win32 PROVIDER CASE: one Win32-surface case, both ends in one process
    local served=$RIG_OUT/nd2-win32.$2.$1.served
    with_provider "$1" "$served" env ND_SHIM_LOG=debug "$nd2_bin/nd2-win32" "$2" "$RIG_SERVER_IP" "$RIG_CLIENT_IP" ||
        return 1
    served_by "$served"
    expect_provider "$served" "$1"
}

nd2_bindio() { # nd2_bindio PROVIDER CASE: one BindIoCompletionCallback case of the C client, both ends in one process
    local served=$RIG_OUT/nd2-bindio.$2.$1.served
    with_provider "$1" "$served" env ND_SHIM_LOG=debug "$nd2_bin/nd2-bindio" "$2" "$RIG_SERVER_IP" "$RIG_CLIENT_IP" ||
        return 1
    served_by "$served"
    expect_provider "$served" "$1"
}

# nd2_stress PROVIDER: nd2-stress, RIG_ND2_STRESS completions (default 10^5, the issue's size: sends,
# receives, and 1000 RDMA Reads into regions registered just before each) over four QPs with every
# kind of waiter at once, both ends in one process, then its lockstep (1000 single Sends, each
# end's Notify complete for its one completion). About 20 s per provider with one emulated vCPU.
nd2_stress() {
    local served=$RIG_OUT/nd2-stress.$1.served
    with_provider "$1" "$served" "$nd2_bin/nd2-stress" "$RIG_SERVER_IP" "$RIG_CLIENT_IP" \
        --completions "${RIG_ND2_STRESS:-100000}" || return 1
    served_by "$served"
    expect_provider "$served" "$1"
}

nd2_conformance() { # nd2_conformance PROVIDER CASE: one IND2Connector/IND2Listener code case
    local served=$RIG_OUT/nd2-conformance.$2.$1.served range=()
    # ports-exhausted needs a narrow ND port range to use up
    [[ $2 == ports-exhausted ]] && range=(ND_SHIM_PORT_RANGE=50000-50003)
    [[ $2 == io-timeout ]] && range=(ND_SHIM_PORT_RANGE=50300-50309)
    with_provider "$1" "$served" env ND_SHIM_LOG=debug "${range[@]}" \
        "$nd2_bin/nd2-conformance" "$2" "$RIG_SERVER_IP" "$RIG_CLIENT_IP" || return 1
    served_by "$served"
    expect_provider "$served" "$1"
}

# nd2-queue-pair's token-order case starts a plain verbs peer, built here (a C program, not ND2).
nd2_verbs_peer=$RIG_OUT/nd2-verbs-peer
gcc -std=c11 -O2 -Wall -Wextra -Werror -o "$nd2_verbs_peer" "$RIG_ROOT/tests/nd2/nd2-verbs-peer.c" -lrdmacm -libverbs ||
    rig_log "gcc nd2-verbs-peer.c failed"

nd2_queue_pair() { # nd2_queue_pair PROVIDER CASE: one queue-pair case (limits, inline, tokens, codes)
    local served=$RIG_OUT/nd2-queue-pair.$2.$1.served
    with_provider "$1" "$served" env ND_SHIM_LOG=debug ND2_VERBS_PEER="$nd2_verbs_peer" \
        "$nd2_bin/nd2-queue-pair" "$2" "$RIG_SERVER_IP" "$RIG_CLIENT_IP" || return 1
    served_by "$served"
    expect_provider "$served" "$1"
}

# io-timeout: 198.18.0.52 resolves (on rxe1's veth1) to a MAC that no interface has, so its REQ
# goes out and nobody answers.
ip neigh replace 198.18.0.52 lladdr 02:00:00:00:00:52 dev veth1 nud permanent

io_timeout_runs=()
for provider in ${RIG_ND_PROVIDERS:-stock rxe_rs}; do
    RIG_TIMEOUT=240 run_test "conformance-io-timeout.$provider" nd2_conformance "$provider" io-timeout &
    io_timeout_runs+=($!)
done

for provider in ${RIG_ND_PROVIDERS:-stock rxe_rs}; do
    for name in $("$nd2_bin/nd2-overlapped" --list); do
        run_test "overlapped-$name.$provider" nd2_overlapped "$provider" "$name" 7410
    done
    # Each case program's cases, run by its function nd2_PROGRAM (conformance's io-timeout above).
    for program in win32 bindio conformance queue-pair cq-notify memory; do
        for name in $("$nd2_bin/nd2-$program" --list); do
            [[ $program-$name == conformance-io-timeout ]] && continue
            run_test "$program-$name.$provider" "nd2_${program//-/_}" "$provider" "$name"
        done
    done
    RIG_TIMEOUT=240 run_test "stress.$provider" nd2_stress "$provider"
    run_test "adapter-info.$provider" nd2_adapter_info "$provider"
    run_test "pingpong-event.$provider" nd2_pair nd2-pingpong "$provider" 7401 --iters 500
    run_test "pingpong-poll.$provider" nd2_pair nd2-pingpong "$provider" 7402 --iters 500 --poll
    run_test "pingpong-event-4k.$provider" nd2_pair nd2-pingpong "$provider" 7403 --iters 100 --size 4096
    # Waits, then polls of the Notify with nobody waiting (issue 29 item 8). No time asserted here:
    # --stall-check, which fails on a slow polled exchange, is for a quiet machine, by hand.
    run_test "pingpong-mixed.$provider" nd2_pair nd2-pingpong "$provider" 7411 --iters 160 --mixed 20
    # A Notify polled in memory alone, on a thread that never waited, right after a waited exchange
    # parked nd-shim's relay: read at its event, not at the relay's tick (fails at 5 ms typical).
    run_test "pingpong-memory-poll.$provider" nd2_pair nd2-pingpong "$provider" 7414 --iters 100 --mixed 1 \
        --memory-poll
    # Contexts with their top bits set: nd-shim's record path (the others take the direct one).
    run_test "pingpong-recorded.$provider" nd2_pair nd2-pingpong "$provider" 7408 --iters 200 \
        --context-base 0xfc00000000000000
    run_test "rdma-pingpong.$provider" nd2_pair nd2-rdma-pingpong "$provider" 7404 --iters 300
    run_test "rdma-pingpong-4k.$provider" nd2_pair nd2-rdma-pingpong "$provider" 7405 --iters 50 --size 4096
    run_test "mr-latency.$provider" nd2_pair nd2-mr-latency "$provider" 7406 --iters 20
    run_test "mr-latency-event.$provider" nd2_pair nd2-mr-latency "$provider" 7407 --iters 10 --sizes 4096,65536 --event
done

# IPv6: each end with a global address (rig_ipv6), listed by NdQueryAddressList beside its IPv4
# one, and a connection with private data both ways, sends and RDMA over it.
if rig_ipv6 on; then
    for provider in ${RIG_ND_PROVIDERS:-stock rxe_rs}; do
        run_test "adapter-info-ipv6.$provider" nd2_adapter_info "$provider" --expect "$RIG_SERVER_IP6" \
            --expect "$RIG_CLIENT_IP6"
        run_test "pingpong-ipv6.$provider" nd2_pair6 nd2-pingpong "$provider" 7412 --iters 100
        run_test "rdma-pingpong-ipv6.$provider" nd2_pair6 nd2-rdma-pingpong "$provider" 7413 --iters 50
    done
    rig_ipv6 off
else
    run_test "ipv6-setup" false
fi

# The background io-timeout runs record their own results; wait for them (RIG_TIMEOUT bounds each).
wait "${io_timeout_runs[@]}"

# Device removal, last: it deletes rxe0 under a waiting ND2 program and makes it again as
# rig_setup_network did. rxe has no disassociate_ucontext, so `rdma link delete` returns only
# once the program has closed the device: the program must be woken (ND_DEVICE_REMOVED) for
# removal to finish at all, and once it has released its objects, removal must finish while it
# still runs (it waits for $ready.gone).
nd2_removal() { # nd2_removal PROVIDER
    local served=$RIG_OUT/nd2-removal.$1.served ready=$RIG_OUT/nd2-removal.$1.ready rc=0 program remover i
    rm -f "$ready"
    with_provider "$1" "$served" env ND_SHIM_LOG=info "$nd2_bin/nd2-removal" waiting "$RIG_SERVER_IP" \
        "$RIG_CLIENT_IP" "$ready" &
    program=$!
    for i in $(seq 300); do [[ -e $ready ]] && break; sleep 0.1; done
    if [[ -e $ready ]]; then
        rm -f "$ready.released" "$ready.gone"
        rdma link delete rxe0 &
        remover=$!
        for i in $(seq 300); do
            [[ -e $ready.released ]] || ! kill -0 "$program" 2> /dev/null && break
            sleep 0.1
        done
        for i in $(seq 150); do kill -0 "$remover" 2> /dev/null || break; sleep 0.1; done
        kill -0 "$remover" 2> /dev/null || touch "$ready.gone"
        wait "$program" || rc=1
        for i in $(seq 200); do kill -0 "$remover" 2> /dev/null || break; sleep 0.1; done
        if kill -0 "$remover" 2> /dev/null; then
            rig_log "rdma link delete rxe0 still waits 20 s after the program exited"
            rc=1
        fi
        wait "$remover" || { rig_log "rdma link delete rxe0 failed"; rc=1; }
    else
        rig_log "the program did not get ready in 30 s"
        wait "$program"
        rc=1
    fi
    rdma link show rxe0 > /dev/null 2>&1 || rdma link add rxe0 type rxe netdev veth0 || rc=1
    for i in $(seq 100); do rdma link show rxe0/1 2> /dev/null | grep -q 'state ACTIVE' && break; sleep 0.1; done
    rdma link show rxe0/1 | grep -q 'state ACTIVE' || { rig_log "rxe0 is not ACTIVE again"; rc=1; }
    served_by "$served"
    expect_provider "$served" "$1" || rc=1
    return $rc
}
for provider in ${RIG_ND_PROVIDERS:-stock rxe_rs}; do
    run_test "removal-waiting.$provider" nd2_removal "$provider"
done
