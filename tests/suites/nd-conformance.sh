# nd-shim's ND2/NDK connector conformance: each case of target/release/nd-conformance is one
# test, both sides in one process (passive on rxe0 198.18.0.1, active on rxe1 198.18.0.2),
# over the stock C provider, which serves rdma_cm here.
source "$RIG_ROOT/tests/rig/guest/lib.sh"

nd_conformance=$RIG_ROOT/target/release/nd-conformance

nd_case() { # nd_case CASE [ENV=VALUE...]
    local name=$1
    shift
    local served=$RIG_OUT/nd-conformance.$name.served
    with_provider stock "$served" env "$@" "$nd_conformance" "$name" || return 1
    served_by "$served"
}

for name in $("$nd_conformance" --list); do
    case $name in
        ports-exhausted) run_test "$name" nd_case "$name" ND_SHIM_PORT_RANGE=50000-50003 ND_SHIM_LOG=debug ;;
        *) run_test "$name" nd_case "$name" ND_SHIM_LOG=debug ;;
    esac
done
