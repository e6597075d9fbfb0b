# Sourced inside the guest by the rig's runner and by every suite. Provides the network and device
# setup, provider selection with proof of which library served, client/server pairs, and result
# bookkeeping. Needs RIG_ROOT (the source tree) and RIG_OUT (a writable folder shared with the host).

: "${RIG_ROOT:?}" "${RIG_OUT:?}"

RIG_SERVER_IP=198.18.0.1   # rxe0 on veth0
RIG_CLIENT_IP=198.18.0.2   # rxe1 on veth1
RIG_SERVER_IP6=2001:2::1   # veth0 and veth1 while `rig_ipv6 on` (RFC 5180's benchmarking range)
RIG_CLIENT_IP6=2001:2::2
RIG_PROBE=${RIG_PROBE:-$RIG_ROOT/target/rig/libprovider-probe.so}   # the arm64 guest: its aarch64 build
RIG_CM_GATE=${RIG_CM_GATE:-$RIG_ROOT/target/rig/libcm-connect-gate.so}   # see tests/rig/cm-connect-gate.c
RIG_OURS_PREFIX=${RIG_OURS_PREFIX:-$RIG_ROOT/target/release/librxe_rs}
RIG_TIMEOUT=${RIG_TIMEOUT:-120}
RIG_RESULTS=$RIG_OUT/results

rig_log() { printf 'rig: %s\n' "$*" >&2; }

# rxe0 and rxe1 on the two ends of one veth pair, in one network namespace: rdma_rxe in kernel 6.1
# receives only in the initial namespace. Both addresses are local, so by default the kernel would
# route between them through `lo` and rxe would never see the packets. Rules that apply to locally
# generated traffic only (iif lo) send each address's packets out of its own veth, ahead of the
# local table; accept_local lets the other end take packets whose source is a local address.
rig_setup_network() {
    modprobe rdma_rxe || { rig_log "modprobe rdma_rxe failed"; return 1; }
    ip link set lo up
    # Fixed MAC addresses: a veth made with a random one gets another from udev a moment later
    # (MACAddressPolicy=persistent, as on Debian 13 and sid), and an rxe device made before that
    # keeps a default GID (index 0, the link-local address of the first MAC) that no address
    # answers for any more: every test that picks it fails its AH or RTR with ETIMEDOUT (sid's
    # stock pyverbs run on rxe0 did, 68 tests). An address given here is left alone by udev.
    ip link add veth0 address 02:00:c6:12:00:01 type veth peer name veth1 address 02:00:c6:12:00:02
    udevadm settle --timeout=10 2> /dev/null || true
    ip addr add "$RIG_SERVER_IP/24" dev veth0
    ip addr add "$RIG_CLIENT_IP/24" dev veth1
    ip link set veth0 up
    ip link set veth1 up
    local k
    for k in all default veth0 veth1; do
        sysctl -qw "net.ipv4.conf.$k.accept_local=1" "net.ipv4.conf.$k.rp_filter=0"
    done
    ip rule add pref 10 iif lo from "$RIG_CLIENT_IP" to "$RIG_SERVER_IP" lookup 10
    ip route add "$RIG_SERVER_IP" dev veth1 src "$RIG_CLIENT_IP" table 10
    ip rule add pref 11 iif lo from "$RIG_SERVER_IP" to "$RIG_CLIENT_IP" lookup 11
    ip route add "$RIG_CLIENT_IP" dev veth0 src "$RIG_SERVER_IP" table 11
    ip rule add pref 100 lookup local
    ip rule del pref 0
    rdma link add rxe0 type rxe netdev veth0 || return 1
    rdma link add rxe1 type rxe netdev veth1 || return 1
    local i active=
    for i in $(seq 50); do
        rdma link show rxe0/1 | grep -q 'state ACTIVE' && rdma link show rxe1/1 | grep -q 'state ACTIVE' &&
            { active=1; break; }
        sleep 0.1
    done
    [[ -n $active ]] || { rig_log "rxe0/rxe1 did not become ACTIVE"; return 1; }
    # The veths' IPv6 link-local addresses are GIDs too: a test that resolves one while duplicate
    # address detection still runs fails its AH or RTR with ETIMEDOUT, with either provider (the
    # first pyverbs suite of a boot did). Wait for it to end (a few seconds), at most 60 s: until
    # both veths have their link-local address (just after the link comes up it is not there yet,
    # so "nothing tentative" alone can pass too early) and none is tentative.
    for i in $(seq 600); do
        [[ -n $(ip -6 addr show dev veth0 scope link) && -n $(ip -6 addr show dev veth1 scope link) &&
            -z $(ip -6 addr show tentative) ]] && return 0
        sleep 0.1
    done
    rig_log "the veths' IPv6 link-local addresses still missing or tentative after 60 s; going on"
    return 0
}

# rig_ipv6 on|off: gives veth0 and veth1 (so rxe0 and rxe1, whose GID tables follow the netdevs'
# addresses) a global IPv6 address each, routed across the pair as rig_setup_network routes IPv4,
# or takes them away again. Only while a case needs them: every other case keeps the GID tables
# of rig_setup_network (pyverbs and perftest pick GIDs by index). nodad: usable at once. The
# rules match on the output device, not `iif lo` as IPv4's: rdma_cm checks an incoming IPv6
# request with an output-style route lookup (rt6_lookup, oif = the receiving netdev), which an
# `iif lo` rule would send out of the other veth, and refuse the request (REJ 28, no listener).
# The senders (rdma_cm's address resolution, rxe) name their netdev as oif.
rig_ipv6() {
    local op=add rule=(add) i
    [[ $1 == on ]] || { op=del; rule=(del); }
    ip -6 addr "$op" "$RIG_SERVER_IP6/64" dev veth0 nodad || [[ $op == del ]] || return 1
    ip -6 addr "$op" "$RIG_CLIENT_IP6/64" dev veth1 nodad || [[ $op == del ]] || return 1
    ip -6 rule "${rule[@]}" pref 10 from "$RIG_CLIENT_IP6" to "$RIG_SERVER_IP6" oif veth1 lookup 10
    ip -6 rule "${rule[@]}" pref 11 from "$RIG_SERVER_IP6" to "$RIG_CLIENT_IP6" oif veth0 lookup 11
    if [[ $op == add ]]; then
        ip -6 route add "$RIG_SERVER_IP6" dev veth1 src "$RIG_CLIENT_IP6" table 10
        ip -6 route add "$RIG_CLIENT_IP6" dev veth0 src "$RIG_SERVER_IP6" table 11
        ip -6 rule add pref 100 lookup local
        ip -6 rule del pref 0
        # The addresses' GIDs appear in rxe0/rxe1 a moment after the address.
        for i in $(seq 50); do
            grep -qs '^2001:0002:0000' /sys/class/infiniband/rxe0/ports/1/gids/* &&
                grep -qs '^2001:0002:0000' /sys/class/infiniband/rxe1/ports/1/gids/* && return 0
            sleep 0.1
        done
        rig_log "the IPv6 addresses' GIDs did not appear in rxe0/rxe1"
        return 1
    fi
    ip -6 rule add pref 0 lookup local
    ip -6 rule del pref 100 lookup local
    ip -6 route flush table 10 2> /dev/null
    ip -6 route flush table 11 2> /dev/null
    return 0
}

# The `env` arguments that select a provider. `stock` is rdma-core's C provider from
# /etc/libibverbs.d; `rxe_rs` is ours, loaded first through RDMAV_DRIVERS so it claims rxe devices.
rig_provider_env() {
    case $1 in
        stock) echo "-u RDMAV_DRIVERS -u IBV_DRIVERS" ;;
        rxe_rs) echo "RDMAV_DRIVERS=$RIG_OURS_PREFIX" ;;
        *) rig_log "unknown provider '$1' (stock or rxe_rs)"; return 1 ;;
    esac
}

# with_provider PROVIDER LOG COMMAND...: runs COMMAND with PROVIDER selected, under a timeout, with
# the probe recording into LOG which provider library served each device the process touched.
with_provider() {
    local provider=$1 log=$2
    shift 2
    local selector
    selector=$(rig_provider_env "$provider") || return 2
    # shellcheck disable=SC2086 # the selector is several env arguments
    env $selector LD_PRELOAD="$RIG_PROBE${LD_PRELOAD:+:$LD_PRELOAD}" RIG_PROVIDER_LOG="$log" \
        timeout --kill-after=5 "$RIG_TIMEOUT" "$@"
}

# served_by LOG: one line per (program, event, device, provider, library) that LOG recorded.
served_by() {
    [[ -s $1 ]] || { echo "  (no device was listed or opened)"; return; }
    awk '{ printf "  %s %s %s: provider %s from %s\n", $2, $3, $4, $5, $6 }' "$1" | sort -u
}

# rig_pabi: the private ABI of the guest's libibverbs, read off the name of rdma-core's own rxe
# provider file (librxe-rdmav<PABI>.so).
rig_pabi() {
    local f
    for f in /usr/lib/*-linux-gnu/libibverbs/librxe-rdmav*.so; do
        [[ $f =~ librxe-rdmav([0-9]+)\.so$ ]] && { echo "${BASH_REMATCH[1]}"; return 0; }
    done
    rig_log "no librxe-rdmav<PABI>.so in /usr/lib/<multiarch triplet>/libibverbs"
    return 1
}

# The name a provider registers with libibverbs: the stock C provider is "rxe".
provider_name() { [[ $1 == stock ]] && echo rxe || echo "$1"; }

# expect_provider LOG PROVIDER: every rxe device in LOG was served by PROVIDER, and at least one was.
expect_provider() {
    local log=$1 provider=$2
    [[ -s $log ]] || { rig_log "no process recorded a device"; return 1; }
    if awk -v want="$(provider_name "$provider")" '$4 ~ /^rxe/ && $5 != want { bad = 1 } END { exit !bad }' "$log"; then
        rig_log "a device was served by another provider than $provider:"
        served_by "$log" >&2
        return 1
    fi
}

# wait_for_tcp_listener PORT: until something listens on TCP PORT (the peers' out-of-band exchange).
wait_for_tcp_listener() {
    local i
    for i in $(seq 300); do
        ss -Hltn "sport = :$1" | grep -q . && return 0
        sleep 0.1
    done
    return 1
}

# wait_for_cm_listener PORT: until an rdma_cm id listens on PORT.
wait_for_cm_listener() {
    local i
    for i in $(seq 300); do
        rdma resource show cm_id 2>/dev/null | grep -q "state LISTEN .* src-addr [^ ]*:$1 " && return 0
        sleep 0.1
    done
    return 1
}

# wait_until_no_tcp_listener PORT, wait_until_no_cm_listener PORT: until nothing listens there.
wait_until_no_tcp_listener() {
    local i
    for i in $(seq 300); do
        ss -Hltn "sport = :$1" | grep -q . || return 0
        sleep 0.1
    done
    return 1
}

wait_until_no_cm_listener() {
    local i
    for i in $(seq 300); do
        rdma resource show cm_id 2>/dev/null | grep -q "state LISTEN .* src-addr [^ ]*:$1 " || return 0
        sleep 0.1
    done
    return 1
}

# wait_for_listener WAIT, wait_until_no_listener WAIT: either of the above for WAIT as pair takes
# it (tcp:PORT, cm:PORT, cm2:PORT).
wait_for_listener() {
    case $1 in
        tcp:*) wait_for_tcp_listener "${1#tcp:}" ;;
        cm:* | cm2:*) wait_for_cm_listener "${1#*:}" ;;
        *) return 2 ;;
    esac
}
wait_until_no_listener() {
    case $1 in
        tcp:*) wait_until_no_tcp_listener "${1#tcp:}" ;;
        cm:* | cm2:*) wait_until_no_cm_listener "${1#*:}" ;;
        *) return 0 ;;
    esac
}

# cm_listener_ids: the number of every listening rdma_cm id, one per line.
cm_listener_ids() {
    rdma resource show cm_id 2>/dev/null | awk '/state LISTEN/ { for (i = 1; i < NF; i++) if ($i == "cm-idn") print $(i + 1) }' | sort -u
}

# open_connect_gate FILE SERVER_PID: creates FILE once a listening rdma_cm id shows up that was not
# there when it started (perftest -R's server listening for the test's connection), and returns 1
# if SERVER_PID ends first. Started in the background once the server's first listener is up, before
# its client starts; the client, run with gated_client, waits for FILE before its second connection
# (tests/rig/cm-connect-gate.c).
open_connect_gate() {
    local gate=$1 spid=$2 before id
    before=$(cm_listener_ids)
    while kill -0 "$spid" 2>/dev/null; do
        for id in $(cm_listener_ids); do
            grep -qx "$id" <<< "$before" || { : > "$gate"; return 0; }
        done
        sleep 0.1
    done
    return 1
}

# gated_client FILE COMMAND...: COMMAND with every rdma_connect after its first held until FILE exists.
gated_client() {
    local gate=$1
    shift
    LD_PRELOAD="$RIG_CM_GATE${LD_PRELOAD:+:$LD_PRELOAD}" RIG_CM_CONNECT_GATE=$gate "$@"
}

# nd2_programs: sets nd2_bin to the folder of tests/nd2's programs: target/nd2 as the host built
# it, or, when that is missing or stale (the guest sees the tree read-only), a build made here into
# RIG_OUT/nd2. Returns 1 when that build fails.
nd2_programs() {
    nd2_bin=$RIG_ROOT/target/nd2
    ND2_CHECK_ONLY=1 "$RIG_ROOT/tests/nd2/build.sh" > /dev/null 2>&1 && return 0
    rig_log "target/nd2 is missing or stale; building the ND2 programs in the guest"
    nd2_bin=$RIG_OUT/nd2
    ND2_OUT=$nd2_bin "$RIG_ROOT/tests/nd2/build.sh" || { rig_log "tests/nd2/build.sh failed"; return 1; }
}

# Results. A test is a name and a command; the command's status decides, its output goes to a file
# under RIG_OUT/logs and is shown only on failure. Suites print their own totals at the end.
RIG_SUITE=${RIG_SUITE:-adhoc}
mkdir -p "$RIG_OUT/logs"

record() { # record pass|fail NAME [DETAIL]
    printf '%s\t%s\t%s\t%s\n' "$RIG_SUITE" "$1" "$2" "${3:-}" >> "$RIG_RESULTS"
    if [[ $1 == pass ]]; then printf '  PASS %s%s\n' "$2" "${3:+ ($3)}"; else printf '  FAIL %s%s\n' "$2" "${3:+ ($3)}"; fi
}

# run_test NAME COMMAND...: records pass when COMMAND succeeds, with the case's time (what a
# suite spends where: the test command's time is a budget). A NAME listed in RIG_SKIP (names
# separated by spaces; the caller says why) is not run, and says so.
run_test() {
    local name=$1
    shift
    [[ " ${RIG_SKIP:-} " == *" $name "* ]] && { echo "  skipped $name (RIG_SKIP)"; return 0; }
    local log=$RIG_OUT/logs/$RIG_SUITE.${name//[^A-Za-z0-9_.-]/_}.log
    local case_started=$SECONDS
    if "$@" > "$log" 2>&1; then
        record pass "$name" "$((SECONDS - case_started)) s"
    else
        record fail "$name" "exit $?, $((SECONDS - case_started)) s, log: ${log#"$RIG_OUT"/}"
        sed 's/^/    | /' "$log" | tail -n 30
    fi
}

# show_log NAME ERE: the lines of case NAME's log (run_test's) that match ERE, indented, in the
# suite's output: a case's counts, shown pass or fail.
show_log() {
    grep -E "$2" "$RIG_OUT/logs/$RIG_SUITE.${1//[^A-Za-z0-9_.-]/_}.log" | sed 's/^/    /'
}

# stop_background PID: stops what `with_provider ... &` started as PID. PID is the subshell that runs
# with_provider, and killing it would leave its child, timeout, and the command running; timeout
# passes the TERM on to the command (and KILLs it 5 s later if it is still there).
stop_background() {
    pkill -TERM -P "$1" 2>/dev/null
    kill "$1" 2>/dev/null
}

# pair SERVER_PROVIDER CLIENT_PROVIDER WAIT SERVER_CMD -- CLIENT_CMD: runs a server and a client,
# each under its own provider, and checks both exit 0 and each was served by its provider.
# WAIT is "tcp:PORT", "cm:PORT" or "none" (readiness of the server before the client starts), or
# "cm2:PORT" for perftest -R: cm:PORT, and the client's second connection waits for the server's
# second listener (open_connect_gate).
# With RIG_PAIR_SERVER_GRACE=SECONDS, a server still running that long after its client failed is
# stopped instead of waiting out RIG_TIMEOUT (a server that waits for a dead client waits forever).
pair() {
    local sp=$1 cp=$2 wait=$3
    shift 3
    local server=() client=()
    while (($#)) && [[ $1 != -- ]]; do server+=("$1"); shift; done
    shift
    client=("$@")
    local slog clog
    slog=$(mktemp -p "$RIG_OUT" served.XXXX)
    clog=$(mktemp -p "$RIG_OUT" served.XXXX)
    # A listener the previous pair's server left behind can still be listed for a moment while the
    # kernel tears it down; the client must not mistake it for the new server's.
    wait_until_no_listener "$wait" || { rig_log "port of $wait still in use before the server started"; return 1; }
    with_provider "$sp" "$slog" "${server[@]}" &
    local spid=$!
    if [[ $wait == none ]]; then sleep 1; else wait_for_listener "$wait"; fi || {
        rig_log "server did not start listening ($wait)"
        stop_background "$spid"
        wait "$spid"
        return 1
    }
    local gate= gate_pid=
    if [[ $wait == cm2:* ]]; then
        gate=$slog.gate # beside the server's log, whose name mktemp made unique
        open_connect_gate "$gate" "$spid" &
        gate_pid=$!
        gated_client "$gate" with_provider "$cp" "$clog" "${client[@]}"
    else
        with_provider "$cp" "$clog" "${client[@]}"
    fi
    local crc=$?
    if ((crc != 0)) && [[ -n ${RIG_PAIR_SERVER_GRACE:-} ]]; then
        local i
        for ((i = 0; i < RIG_PAIR_SERVER_GRACE * 10; i++)); do
            kill -0 "$spid" 2>/dev/null || break
            sleep 0.1
        done
        kill -0 "$spid" 2>/dev/null &&
            { rig_log "client failed; stopping the server after ${RIG_PAIR_SERVER_GRACE} s"; stop_background "$spid"; }
    fi
    wait "$spid"
    local src=$?
    [[ -z $gate_pid ]] || { wait "$gate_pid"; rm -f "$gate"; }
    echo "server ($sp) exit $src, client ($cp) exit $crc"
    echo "served:"
    served_by "$slog"
    served_by "$clog"
    ((src == 0 && crc == 0)) && expect_provider "$slog" "$sp" && expect_provider "$clog" "$cp"
}

# unbound_clients_on_rxe1 on|off: puts on rxe1 the clients that cannot be told their source
# address. librdmacm's rdma_client has no option for it, and perftest's client in Debian 12
# (perftest 4.5-0.17) has a broken one: its option table has two long options named source_ip,
# getopt_long takes the first (the raw-Ethernet -j), and the rdma_cm one is never reached (perftest
# 23.07 renamed it --bind_source_ip). Their rdma_cm ids take their source from the routing table,
# and to 198.18.0.1, a local address, that is 198.18.0.1: both ends would sit on rxe0. While such a
# client runs, a rule for route lookups that have no source yet (from 0.0.0.0/32: unbound sockets
# and cm_ids; everything bound keeps its own rules) sends traffic to the server out of veth1 from
# 198.18.0.2, so the client's cm_id, and its QP, land on rxe1. Callers turn it off again (and on
# EXIT).
unbound_clients_on_rxe1() {
    local rule=(pref 12 iif lo from 0.0.0.0/32 to "$RIG_SERVER_IP" lookup 10)
    if [[ $1 == on ]]; then ip rule add "${rule[@]}"; else ip rule del "${rule[@]}" 2>/dev/null; fi
}

# perftest_pair SERVER_PROVIDER CLIENT_PROVIDER TEST ARGS...: TEST -R between rxe0 (server) and rxe1
# (client), as pair runs it (unbound_clients_on_rxe1 must be on); fails too if the client's QP was
# not on rxe1 (perftest prints each end's GID: 198.18.0.2 must be one of them). With
# PERFTEST_CLIENT_OUT=FILE the client's own output also goes to FILE; with PERFTEST_RESTARTS=FILE
# each run started again is listed there.
# -R makes two rdma_cm connections: one to exchange parameters, then, after a handshake over it, the
# test's. The server listens for the second only after that handshake, so a client that gets there
# first (a server descheduled for a moment) is rejected with reason 8, invalid service ID: nothing
# listens yet. perftest means to retry then (rdma_cm_client_connection: 10 tries, 100 ms apart), but
# in 4.5-0.17 (and 25.01 in Debian 13 and sid) the retry reuses the cm ids and nodes it has just
# destroyed and freed: the client crashes (SIGSEGV) or fails, and the server waits for the second
# connection forever. (Fixed upstream in perftest 26.04, commit 3d9d8d0 "Fix crashes and logical
# flaws in RDMA CM connection retry".) So the client's second rdma_connect waits until the server
# lists its second listener (cm2:PORT in pair; tests/rig/cm-connect-gate.c). Should that rejection
# still show in the log (the gate gave up after 60 s), the whole run is started again, at most
# twice.
perftest_pair() {
    local sp=$1 cp=$2 t=$3 out rc attempt
    shift 3
    local client=("$t" -d rxe1 -R "$@" "$RIG_SERVER_IP")
    if [[ -n ${PERFTEST_CLIENT_OUT:-} ]]; then
        client=(bash -c 'set -o pipefail; "$@" | tee "$0"' "$PERFTEST_CLIENT_OUT" "${client[@]}")
    fi
    for attempt in 1 2 3; do
        out=$(RIG_PAIR_SERVER_GRACE=10 pair "$sp" "$cp" cm2:18515 "$t" -d rxe0 -R "$@" -- "${client[@]}" 2>&1)
        rc=$?
        printf '%s\n' "$out"
        ((rc != 0 && attempt < 3)) && grep -q 'RDMA_CM_EVENT_REJECTED; error: 8\.' <<< "$out" || break
        echo "== run $attempt: the test's connection was rejected before the server listened; again"
        [[ -z ${PERFTEST_RESTARTS:-} ]] || printf '%s.%s-%s (run %s)\n' "$t" "$sp" "$cp" "$attempt" >> "$PERFTEST_RESTARTS"
    done
    ((rc == 0)) || return "$rc"
    grep -q 'GID: .*:198:18:00:02' <<< "$out" || { echo "no end of the connection was on rxe1"; return 1; }
}

# by_function ANNOTATE N: callgrind_annotate's self cost per function (inlined code, which it
# lists under the file it came from, added to the function it was inlined into), divided by N
# (the pairs or exchanges counted). For the benchmarks in tests/bench/.
by_function() {
    awk -v n="$2" '
        /file:function/ { on = 1; next }
        on && /^-+$/ { if (on++ > 1) exit; next }
        on && $1 ~ /^[0-9,]+$/ {
            ir = $1; gsub(",", "", ir)
            line = $0; sub(/^ *[0-9,]+ +\( *[0-9.]+%\) +/, "", line)
            obj = ""; if (match(line, / \[[^]]*\]$/)) { obj = substr(line, RSTART + 2, RLENGTH - 3); line = substr(line, 1, RSTART - 1) }
            fn = substr(line, index(line, ":") + 1)
            cost[fn] += ir; if (obj != "") { sub(".*/", "", obj); where[fn] = obj }
        }
        END { for (f in cost) printf "%10.1f  %s [%s]\n", cost[f] / n, f, where[f] }' "$1" | sort -rn
}
