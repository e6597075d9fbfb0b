# nd-shim's connection setup and teardown against rdma_cm used directly (rdmacm-utils' cmtime),
# from rxe1 to rxe0 over the stock C provider: target/release/nd-bench prints the figures per
# phase and the ratio shim / rdma_cm. RIG_BENCH_CONNECTIONS (100) and RIG_BENCH_ROUNDS (3).
source "$RIG_ROOT/tests/rig/guest/lib.sh"

RIG_TIMEOUT=1200 with_provider stock "$RIG_OUT/bench-nd.served" "$RIG_ROOT/target/release/nd-bench" \
    "${RIG_BENCH_CONNECTIONS:-100}" "${RIG_BENCH_ROUNDS:-3}"
