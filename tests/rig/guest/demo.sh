# The demo's guest side (see tests/demo.sh). Each step prints what it runs and which provider
# library served each device the process touched.
source "$RIG_ROOT/tests/rig/guest/lib.sh"

step() { printf '\n== %s\n' "$*"; }

show_served() { # show_served PROVIDER COMMAND...: runs COMMAND, prints its output and who served it
    local provider=$1 served
    shift
    served=$(mktemp -p "$RIG_OUT" served.XXXX)
    printf '$ %s%s\n' "$( [[ $provider == rxe_rs ]] && echo "RDMAV_DRIVERS=$RIG_OURS_PREFIX ")" "$*"
    with_provider "$provider" "$served" "$@" 2>&1 | sed 's/^/    /'
    echo "  served by:"
    served_by "$served"
}

step "rdma_rxe devices on the veth pair"
rdma link show

step "rxe0 through our provider, rxe_rs (Rust, speaking the uverbs ABI itself)"
show_served rxe_rs ibv_devinfo -d rxe0

step "rxe0 through rdma-core's stock C provider, for comparison"
show_served stock ibv_devinfo -d rxe0

step "ibv_rc_pingpong: rxe0 (198.18.0.1) <-> rxe1 (198.18.0.2), rxe_rs on both ends"
pair rxe_rs rxe_rs tcp:18515 ibv_rc_pingpong -d rxe0 -g 1 -n 1000 -- \
    ibv_rc_pingpong -d rxe1 -g 1 -n 1000 "$RIG_SERVER_IP" 2>&1 | sed 's/^/    /'

step "rping over rdma_cm: rxe_rs server, stock client"
pair rxe_rs stock cm:7174 rping -s -a "$RIG_SERVER_IP" -p 7174 -C 3 -- \
    rping -c -a "$RIG_SERVER_IP" -I "$RIG_CLIENT_IP" -p 7174 -C 3 -v 2>&1 | sed 's/^/    /'

step "nd-shim's ND2 COM face over rxe_rs: an ND2 C++ program (tests/nd2/nd2-pingpong.cpp, written against ndspi.h's IND2Adapter, IND2Connector, IND2QueuePair and IND2CompletionQueue, built with g++ and -lnd_shim) between rxe0 and rxe1, rxe_rs serving both ends"
RIG_PAIR_SERVER_GRACE=10 pair rxe_rs rxe_rs cm:7401 "$RIG_ROOT/target/nd2/nd2-pingpong" server "$RIG_SERVER_IP" 7401 --iters 200 -- \
    "$RIG_ROOT/target/nd2/nd2-pingpong" client "$RIG_CLIENT_IP" "$RIG_SERVER_IP" 7401 --iters 200 2>&1 | sed 's/^/    /'

step "nd-shim: an ND2 connector handshake (Connect, Accept, CompleteConnect) with private data and read limits, then data both ways, over rdma_cm"
show_served stock "$RIG_ROOT/target/release/nd-conformance" connect-accept-data

step "nd-shim: ND return codes as Windows applications expect them"
for case in no-listener-refused private-data-limit shared-endpoint; do
    "$RIG_ROOT/target/release/nd-conformance" "$case" 2>/dev/null | sed 's/^/    /'
done
