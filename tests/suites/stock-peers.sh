# The rig's own proof, with rdma-core's stock C provider on both ends: traffic really crosses
# from rxe1 to rxe0 over the veth pair, through libibverbs alone and through rdma_cm.
source "$RIG_ROOT/tests/rig/guest/lib.sh"

run_test ibv_rc_pingpong pair stock stock tcp:18515 \
    ibv_rc_pingpong -d rxe0 -g 1 -n 200 -- \
    ibv_rc_pingpong -d rxe1 -g 1 -n 200 "$RIG_SERVER_IP"

run_test rping pair stock stock cm:7174 \
    rping -s -a "$RIG_SERVER_IP" -p 7174 -C 10 -- \
    rping -c -a "$RIG_SERVER_IP" -I "$RIG_CLIENT_IP" -p 7174 -C 10 -v
