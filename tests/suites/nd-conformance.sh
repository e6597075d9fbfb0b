# nd-shim's ND2/NDK connector conformance: each case of target/release/nd-conformance is one
# test, both sides in one process (passive on rxe0 198.18.0.1, active on rxe1 198.18.0.2), once
# over each provider in RIG_ND_PROVIDERS (default: the stock C provider and rxe_rs). The mp-*
# cases start a second process (this program in --child mode, or plain-peer: a plain librdmacm
# program built here from tests/nd-conformance/plain_peer.c), as does read-limits-plain-peer.
source "$RIG_ROOT/tests/rig/guest/lib.sh"

nd_conformance=$RIG_ROOT/target/release/nd-conformance

nd_case() { # nd_case PROVIDER CASE [ENV=VALUE...]
    local provider=$1
    shift
    local name=$1 RIG_TIMEOUT=$RIG_TIMEOUT
    # io-timeout waits out the IB CM's REQ retries (about 100 s in the rig).
    [[ $name == io-timeout ]] && RIG_TIMEOUT=240
    shift
    local served=$RIG_OUT/nd-conformance.$name.$provider.served
    with_provider "$provider" "$served" env "$@" "$nd_conformance" "$name" || return 1
    served_by "$served"
    expect_provider "$served" "$provider"
}

plain_dir=$RIG_OUT/nd-conformance
mkdir -p "$plain_dir"
if ! gcc -std=c11 -O2 -Wall -Wextra -Werror -o "$plain_dir/plain-peer" "$RIG_ROOT/tests/nd-conformance/plain_peer.c" \
    -lrdmacm -libverbs > "$RIG_OUT/logs/$RIG_SUITE.build.log" 2>&1; then
    record fail build "gcc plain_peer.c, log: logs/$RIG_SUITE.build.log"
    exit 0
fi
record pass build
export ND_PLAIN_PEER=$plain_dir/plain-peer

# io-timeout: 198.18.0.50 resolves (on rxe1's veth1) to a MAC that no interface has, so its REQ
# goes out and nobody answers.
ip neigh replace 198.18.0.50 lladdr 02:00:00:00:00:50 dev veth1 nud permanent

providers=${RIG_ND_PROVIDERS:-stock rxe_rs}

# The cases that only wait on the kernel's CM timers run in the background, once per provider,
# while the other cases run; the suite waits for them at the end. io-timeout (about 100 s) binds
# from its own port range, away from the ranges the port cases count on. unanswered-survival
# (many minutes of the kernel's MRA handling, issue 9 item 7) runs when asked for with
# RIG_ND_SLOW=1, each on its own two ports.
timers=()
survival_port=7030
for provider in $providers; do
    run_test "io-timeout.$provider" nd_case "$provider" io-timeout ND_SHIM_PORT_RANGE=60000-60099 ND_SHIM_LOG=debug &
    timers+=($!)
    if [[ ${RIG_ND_SLOW:-0} == 1 ]]; then
        RIG_TIMEOUT=${RIG_ND_SURVIVAL_TIMEOUT:-1800} run_test "unanswered-survival.$provider" \
            nd_case "$provider" unanswered-survival ND_SURVIVAL_PORT=$survival_port ND_SHIM_LOG=info &
        timers+=($!)
        survival_port=$((survival_port + 2))
    fi
done

for provider in $providers; do
    for name in $("$nd_conformance" --list); do
        case $name in
            ports-exhausted) run_test "$name.$provider" nd_case "$provider" "$name" ND_SHIM_PORT_RANGE=50000-50003 ND_SHIM_LOG=debug ;;
            # 100 ports for the two processes' 50 binds each; three for the plain holders' case.
            mp-port-zero) run_test "$name.$provider" nd_case "$provider" "$name" ND_SHIM_PORT_RANGE=50100-50199 ND_SHIM_LOG=debug ;;
            mp-plain-holders) run_test "$name.$provider" nd_case "$provider" "$name" ND_SHIM_PORT_RANGE=50200-50202 ND_SHIM_LOG=debug ;;
            io-timeout | unanswered-survival) ;; # in the background, above
            *) run_test "$name.$provider" nd_case "$provider" "$name" ND_SHIM_LOG=debug ;;
        esac
    done
done
wait "${timers[@]}"
