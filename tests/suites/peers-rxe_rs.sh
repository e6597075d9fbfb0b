# Our provider against itself and against rdma-core's stock C provider, between rxe0 (server) and
# rxe1 (client): libibverbs' pingpongs (RC, UC, UD, SRQ), rdma_cm's rping and rdma_server/client, and
# perftest over rdma_cm (-R).
# perftest's _bw runs are left out: over rdma_cm they hang now and then (one side times out), with
# the stock provider on both ends too (ib_write_bw), more often when the host is loaded.
source "$RIG_ROOT/tests/rig/guest/lib.sh"

# The pairings: server provider, client provider.
PAIRINGS=("rxe_rs rxe_rs" "rxe_rs stock" "stock rxe_rs")

for pairing in "${PAIRINGS[@]}"; do
    read -r sp cp <<< "$pairing"
    tag=$sp-$cp
    for pp in ibv_rc_pingpong ibv_uc_pingpong ibv_ud_pingpong; do
        run_test "$pp.$tag" pair "$sp" "$cp" tcp:18515 \
            "$pp" -d rxe0 -g 1 -n 500 -- \
            "$pp" -d rxe1 -g 1 -n 500 "$RIG_SERVER_IP"
    done

    # SRQ: the server's QPs receive through one shared receive queue.
    run_test "ibv_srq_pingpong.$tag" pair "$sp" "$cp" tcp:18515 \
        ibv_srq_pingpong -d rxe0 -g 1 -n 500 -- \
        ibv_srq_pingpong -d rxe1 -g 1 -n 500 "$RIG_SERVER_IP"

    run_test "rping.$tag" pair "$sp" "$cp" cm:7174 \
        rping -s -a "$RIG_SERVER_IP" -p 7174 -C 10 -- \
        rping -c -a "$RIG_SERVER_IP" -I "$RIG_CLIENT_IP" -p 7174 -C 10 -v

    # librdmacm's own examples. rdma_client has no option for a source address, so the kernel
    # routes it through rxe0 too: both ends on one device, each with its own provider.
    run_test "rdma_server-client.$tag" pair "$sp" "$cp" cm:7471 \
        rdma_server -- rdma_client -s "$RIG_SERVER_IP"

    for pt in ib_send_lat ib_write_lat ib_read_lat ib_atomic_lat; do
        run_test "$pt.$tag" pair "$sp" "$cp" cm:18515 \
            "$pt" -d rxe0 -R -n 500 -- \
            "$pt" -d rxe1 -R -n 500 --source_ip "$RIG_CLIENT_IP" "$RIG_SERVER_IP"
    done
done
