# The cost of creating queues at the adapter's maximum depth (16,384): ND2's CreateCompletionQueue
# and CreateQueuePair against ibv_create_cq and ibv_create_qp (+ RESET -> INIT, as nd-shim does)
# with the same depths from the same process on rxe0 (tests/nd2/nd2-queue-setup.cpp), over each
# provider in RIG_ND_PROVIDERS (stock rxe_rs), the two paths alternating which goes first.
# Prints each step's median in milliseconds and the ratio ND2 / verbs. RIG_BENCH_ROUNDS (5),
# RIG_BENCH_DEPTH (the adapter's maximum).
source "$RIG_ROOT/tests/rig/guest/lib.sh"

nd2_programs || exit 1
status=0
for provider in ${RIG_ND_PROVIDERS:-stock rxe_rs}; do
    echo "-- $provider"
    with_provider "$provider" "$RIG_OUT/queue-setup.$provider.served" "$nd2_bin/nd2-queue-setup" "$RIG_SERVER_IP" \
        --rounds "${RIG_BENCH_ROUNDS:-5}" ${RIG_BENCH_DEPTH:+--depth "$RIG_BENCH_DEPTH"} || status=1
    expect_provider "$RIG_OUT/queue-setup.$provider.served" "$provider" || status=1
done
exit $status
