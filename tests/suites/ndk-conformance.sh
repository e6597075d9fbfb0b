# nd-shim's NDK face (include/ndk_shim.h) from C: tests/ndk-conformance is built here with gcc
# against target/release/libnd_shim.so, and each of its cases is one test, both sides in one
# process (passive on rxe0 198.18.0.1, active on rxe1 198.18.0.2), once over each provider in
# RIG_ND_PROVIDERS (default: the stock C provider and rxe_rs).
source "$RIG_ROOT/tests/rig/guest/lib.sh"

ndk_dir=$RIG_OUT/ndk-conformance
ndk_conformance=$ndk_dir/ndk-conformance

ndk_case() { # ndk_case PROVIDER CASE [ENV=VALUE...]
    local provider=$1
    shift
    local name=$1
    shift
    local served=$RIG_OUT/ndk-conformance.$name.$provider.served rc=0
    with_provider "$provider" "$served" env "$@" "$ndk_conformance" "$name" || rc=1
    # The rej-* cases and disconnect-peer-vanished put a netem qdisc on veth0; a case that failed
    # half-way leaves it there. Not after io-timeout: it runs in the background beside them.
    [[ $name == io-timeout ]] || tc qdisc del dev veth0 root 2> /dev/null || true
    ((rc == 0)) || return 1
    served_by "$served"
    expect_provider "$served" "$provider"
}

mkdir -p "$ndk_dir"
# TMPDIR: the guest sees the host read-only except RIG_OUT.
if ! TMPDIR=$ndk_dir "$RIG_ROOT/tests/ndk-conformance/build.sh" "$ndk_dir" "$RIG_ROOT/target/release" > "$RIG_OUT/logs/$RIG_SUITE.build.log" 2>&1; then
    record fail build "gcc against ndk_shim.h, log: logs/$RIG_SUITE.build.log"
    sed 's/^/    | /' "$RIG_OUT/logs/$RIG_SUITE.build.log" | tail -n 30
    exit 0
fi
record pass build

# io-timeout: 198.18.0.51 resolves (on rxe1's veth1) to a MAC that no interface has, so its REQ
# goes out and nobody answers; the IB CM gives up after about 100 s.
ip neigh replace 198.18.0.51 lladdr 02:00:00:00:00:51 dev veth1 nud permanent

providers=${RIG_ND_PROVIDERS:-stock rxe_rs}

# io-timeout only waits out the kernel CM's REQ retries (about 100 s): it runs in the background,
# once per provider, while the other cases run, binding from its own port range (away from the
# range ports-exhausted counts on); the suite waits for it at the end.
timers=()
for provider in $providers; do
    RIG_TIMEOUT=200 run_test "io-timeout.$provider" ndk_case "$provider" io-timeout ND_SHIM_PORT_RANGE=60100-60199 ND_SHIM_LOG=debug &
    timers+=($!)
done

for provider in $providers; do
    for name in $("$ndk_conformance" --list); do
        case $name in
            ports-exhausted) run_test "$name.$provider" ndk_case "$provider" "$name" ND_SHIM_PORT_RANGE=50000-50003 ND_SHIM_LOG=debug ;;
            io-timeout) ;; # in the background, above
            disconnect-peer-vanished) ;; # below, the providers at once
            *) run_test "$name.$provider" ndk_case "$provider" "$name" ND_SHIM_LOG=debug ;;
        esac
    done
done
# disconnect-peer-vanished waits out the IB CM's DREQ retries (about 100 s): one process per
# provider at once, each on its own port, meeting at barriers (NDK_VANISH_TOGETHER) so that all
# are connected before veth0 drops every frame and all are done before it stops; nothing else
# runs meanwhile (the loss would cut the other cases off too).
vanish_dir=$ndk_dir/vanish-barrier
rm -rf "$vanish_dir"
mkdir -p "$vanish_dir"
read -ra vanishing <<< "$providers"
vanish_runs=()
vanish_port=7140 # 7140, 7141: no other case uses them
for provider in "${vanishing[@]}"; do
    RIG_TIMEOUT=300 run_test "disconnect-peer-vanished.$provider" ndk_case "$provider" disconnect-peer-vanished \
        ND_SHIM_LOG=debug NDK_VANISH_PORT=$vanish_port NDK_VANISH_TOGETHER="$vanish_dir:${#vanishing[@]}" &
    vanish_runs+=($!)
    vanish_port=$((vanish_port + 1))
done
wait "${vanish_runs[@]}"
tc qdisc del dev veth0 root 2> /dev/null || true
wait "${timers[@]}"
