# nd-shim at scale (target/release/nd-scale): 1,000 connections from one shared endpoint to
# distinct destinations, and a storm of 200 connects on a listener with backlog 8; each case
# prints its counts per outcome and checks that fds, cm ids and QPs return to their starting
# counts. Passive on rxe0 198.18.0.1, active on rxe1 198.18.0.2, once over each provider in
# RIG_ND_PROVIDERS (default: the stock C provider and rxe_rs).
source "$RIG_ROOT/tests/rig/guest/lib.sh"

nd_scale=$RIG_ROOT/target/release/nd-scale

scale_case() { # scale_case PROVIDER CASE
    local served=$RIG_OUT/nd-scale.$2.$1.served RIG_TIMEOUT=600
    with_provider "$1" "$served" "$nd_scale" "$2" || return 1
    served_by "$served"
    expect_provider "$served" "$1"
}

for provider in ${RIG_ND_PROVIDERS:-stock rxe_rs}; do
    for name in $("$nd_scale" --list); do
        run_test "$name.$provider" scale_case "$provider" "$name"
        # The counts per outcome go into the suite's output, pass or fail.
        grep -E '^  [^ ]' "$RIG_OUT/logs/$RIG_SUITE.$name.$provider.log" | grep -v provider | sed 's/^/    /'
    done
done
