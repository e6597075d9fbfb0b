#!/usr/bin/env bash
# One of the two guests of tests/rig/two-guests: each has its own kernel and one rxe device, rxe0,
# on the NIC that joins it to the other guest (a QEMU socket link on the host's loopback). The
# server guest (198.18.0.1) runs the servers, the client guest (198.18.0.2) the clients; every
# test runs with each pairing of providers, the server's first.
#
# The guests agree on each step through files in RIG_OUT/ctl, which both see (the host's folder):
# the server posts ready.STEP.ATTEMPT once its server listens, the client runs its client and posts
# done.STEP.ATTEMPT with its exit status, whether its provider served it, and whether the server
# should start again. Each guest records its own end of every test in RIG_OUT/results.ROLE; the
# host puts them together.
#
# Usage (from tests/rig/two-guests): two-guests.sh server|client
set -u
export RIG_ROOT RIG_OUT
RIG_SUITE=two-guests
source "$RIG_ROOT/tests/rig/guest/lib.sh"

role=$1
RIG_RESULTS=$RIG_OUT/results.$role
CTL=$RIG_OUT/ctl
LOGS=$RIG_OUT/logs
# How long one end waits for the other: a step's timeout and the other guest's boot on a busy host.
PEER_WAIT=${RIG_PEER_WAIT:-900}

case $role in
    server) mac=52:54:00:18:00:01 ip=$RIG_SERVER_IP ;;
    client) mac=52:54:00:18:00:02 ip=$RIG_CLIENT_IP ;;
    *) rig_log "usage: two-guests.sh server|client"; exit 2 ;;
esac

post() { # post NAME WORDS...: the other guest sees NAME appear whole
    printf '%s\n' "${*:2}" > "$CTL/.$1.tmp" && mv "$CTL/.$1.tmp" "$CTL/$1"
}

await() { # await NAME SECONDS: prints NAME's content once the other guest posted it
    local i
    for ((i = 0; i < $2 * 5; i++)); do
        [[ -e $CTL/$1 ]] && { cat "$CTL/$1"; return 0; }
        sleep 0.2
    done
    rig_log "the other guest did not post $1 within $2 s"
    return 1
}

# rxe0 on the NIC with the link's MAC address (the guest has no other).
setup_link() {
    modprobe rdma_rxe || { rig_log "modprobe rdma_rxe failed"; return 1; }
    ip link set lo up
    local d nic=
    for d in /sys/class/net/*; do
        [[ $(cat "$d/address") == "$mac" ]] && nic=${d##*/}
    done
    [[ -n $nic ]] || { rig_log "no NIC with MAC $mac"; return 1; }
    ip addr add "$ip/24" dev "$nic" && ip link set "$nic" up || return 1
    rdma link add rxe0 type rxe netdev "$nic" || return 1
    local i
    for i in $(seq 100); do
        rdma link show rxe0/1 | grep -q 'state ACTIVE' && { rdma link show rxe0/1; return 0; }
        sleep 0.1
    done
    rig_log "rxe0 did not become ACTIVE"
    return 1
}

# gid_index: the index of rxe0's GID for this guest's IPv4 address (::ffff:a.b.c.d).
gid_index() {
    local want g
    want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' ${ip//./ })
    for g in /sys/class/infiniband/rxe0/ports/1/gids/*; do
        [[ $(cat "$g" 2>/dev/null) == "$want" ]] && { echo "${g##*/}"; return 0; }
    done
    return 1
}

log_of() { echo "$LOGS/two-guests.$1.$2.log"; } # log_of TEST.PAIRING server|client

# step NAME SERVER_PROVIDER CLIENT_PROVIDER WAIT SERVER_COMMAND CLIENT_COMMAND: this guest's end of
# one test. The commands are words without quoting; WAIT is tcp:PORT, cm:PORT or cm2:PORT (as in
# pair, tests/rig/guest/lib.sh: perftest -R's second connection waits for the second listener).
step() {
    # RIG_TWO_TESTS: only these tests (names as in the results, without the pairing).
    [[ -z ${RIG_TWO_TESTS:-} || " $RIG_TWO_TESTS " == *" $1 "* ]] || return 0
    local name=$1.$2-$3 sp=$2 cp=$3 wait=$4 attempt key
    local server client
    read -ra server <<< "$5"
    read -ra client <<< "$6"
    for attempt in 1 2 3; do
        key=$name.$attempt
        if [[ $role == server ]]; then
            server_end "$key" "$sp" "$wait" "${server[@]}" || continue
        else
            client_end "$key" "$cp" "$wait" "${client[@]}" || continue
        fi
        break
    done
}

# server_end KEY PROVIDER WAIT COMMAND...: returns 1 when the client asks for the run again.
server_end() {
    local key=$1 sp=$2 wait=$3
    shift 3
    local log served spid reply crc cserved again elapsed src
    log=$(log_of "${key%.*}" server)
    served=$RIG_OUT/served.$key.server
    # The previous server's listener can still be listed for a moment while the kernel tears it
    # down; the client must not be told to go on by it.
    wait_until_no_listener "$wait"
    with_provider "$sp" "$served" "$@" > "$log" 2>&1 &
    spid=$!
    local gate_pid=
    if wait_for_listener "$wait"; then
        # The client's root sees CTL too: it waits there for the gate (client_end).
        [[ $wait == cm2:* ]] && { open_connect_gate "$CTL/gate.$key" "$spid" & gate_pid=$!; }
        post "ready.$key" ok
    else
        post "ready.$key" fail
    fi
    reply=$(await "done.$key" "$PEER_WAIT") || reply="none no stop 0"
    read -r crc cserved again elapsed <<< "$reply"
    if [[ $crc != 0 ]]; then
        # A server whose client failed may wait for it forever: give it 10 s to notice.
        local i
        for ((i = 0; i < 100; i++)); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$spid" 2>/dev/null && stop_background "$spid"
    fi
    wait "$spid"
    src=$?
    [[ -z $gate_pid ]] || wait "$gate_pid"
    [[ $again == again ]] && { echo "  ${key%.*}: the client asks for the run again (attempt ${key##*.})"; return 1; }
    local detail="server exit $src, client exit $crc, ${elapsed} ms"
    if ((src == 0)) && [[ $crc == 0 && $cserved == yes ]] && expect_provider "$served" "$sp" 2> /dev/null; then
        record pass "${key%.*}" "$detail"
    else
        [[ $cserved == yes ]] || detail+=", the client was not served by its provider"
        expect_provider "$served" "$sp" 2> /dev/null || detail+=", the server was not served by $sp"
        record fail "${key%.*}" "$detail"
        sed 's/^/    | server: /' "$log" | tail -n 15
        sed 's/^/    | client: /' "$(log_of "${key%.*}" client)" | tail -n 15
    fi
}

# client_end KEY PROVIDER WAIT COMMAND...: returns 1 when it asked the server for the run again.
client_end() {
    local key=$1 cp=$2 wait=$3
    shift 3
    local log served state crc started elapsed cserved=no again=stop
    log=$(log_of "${key%.*}" client)
    served=$RIG_OUT/served.$key.client
    state=$(await "ready.$key" "$PEER_WAIT") || state=none
    if [[ $state != ok ]]; then
        echo "the server did not start ($state)" > "$log"
        post "done.$key" 1 no stop 0
        record fail "${key%.*}" "the server did not start ($state)"
        return 0
    fi
    started=$(date +%s%N)
    if [[ $wait == cm2:* ]]; then
        gated_client "$CTL/gate.$key" with_provider "$cp" "$served" "$@" > "$log" 2>&1
    else
        with_provider "$cp" "$served" "$@" > "$log" 2>&1
    fi
    crc=$?
    elapsed=$((($(date +%s%N) - started) / 1000000))
    echo "elapsed_ms $elapsed" >> "$log"
    expect_provider "$served" "$cp" 2>> "$log" && cserved=yes
    # perftest -R: should the test's own connection still reach the server before it listens again
    # (the gate gave up), the client's retry in Debian's perftest crashes (see perftest_pair in
    # lib.sh). Start over then.
    ((crc != 0 && ${key##*.} < 3)) && grep -q 'RDMA_CM_EVENT_REJECTED; error: 8\.' "$log" && again=again
    post "done.$key" "$crc" "$cserved" "$again" "$elapsed"
    [[ $again == again ]] && return 1
    if ((crc == 0)) && [[ $cserved == yes ]]; then
        record pass "${key%.*}" "$elapsed ms"
    else
        record fail "${key%.*}" "client exit $crc, served by the expected provider: $cserved"
    fi
}

started=$SECONDS
mkdir -p "$CTL" "$LOGS"
if ! setup_link; then
    post "up.$role" fail
    exit 2
fi
gid=$(gid_index) || { rig_log "rxe0 has no GID for $ip"; post "up.$role" fail; exit 2; }
echo "rig: $role guest: rxe0 on $ip, GID index $gid, $(uname -r), libibverbs $(dpkg-query -W -f='${Version}' libibverbs1)"
post "up.$role" ok "$(uname -r)"
other=client
[[ $role == client ]] && other=server
[[ $(await "up.$other" "$PEER_WAIT") == ok* ]] || { rig_log "the $other guest did not come up"; exit 2; }
: > "$RIG_RESULTS"

S=$RIG_SERVER_IP
C=$RIG_CLIENT_IP
# nd-shim's ND2 programs, built on the host (tests/rig/two-guests runs tests/nd2/build.sh); the
# client's root sees this tree at the same path. ND_SHIM_LOG=debug: the connection's events in
# the log.
ND2="env ND_SHIM_LOG=debug $RIG_ROOT/target/nd2"
PAIRINGS=(${RIG_TWO_PAIRINGS:-rxe_rs-rxe_rs rxe_rs-stock stock-rxe_rs stock-stock})
for pairing in "${PAIRINGS[@]}"; do
    sp=${pairing%-*} cp=${pairing#*-}
    for pingpong in ibv_rc_pingpong ibv_ud_pingpong; do
        step $pingpong "$sp" "$cp" tcp:18515 "$pingpong -d rxe0 -g $gid -n 200" "$pingpong -d rxe0 -g $gid -n 200 $S"
    done
    step rping "$sp" "$cp" cm:7174 \
        "rping -s -a $S -p 7174 -C 50" "rping -c -a $S -I $C -p 7174 -C 50"
    step rdma_server-client "$sp" "$cp" cm:7471 \
        "rdma_server" "rdma_client -s $S"
    # -F: perftest's own CPU clock measurement fails under emulation (see peers-rxe_rs.sh).
    step ib_send_bw "$sp" "$cp" cm2:18515 \
        "ib_send_bw -d rxe0 -R -F -n 200" "ib_send_bw -d rxe0 -R -F -n 200 $S"
    step ib_write_lat "$sp" "$cp" cm2:18515 \
        "ib_write_lat -d rxe0 -R -n 200" "ib_write_lat -d rxe0 -R -n 200 $S"
    # ND2 across the link: connect and accept with private data checked both ways, 64-byte
    # send/receive exchanges, the client's disconnect seen by the server (NotifyDisconnect).
    step nd2-pingpong "$sp" "$cp" cm:7401 \
        "$ND2/nd2-pingpong server $S 7401 --iters 200" "$ND2/nd2-pingpong client $C $S 7401 --iters 200"
    # The server rejects the first request with 148 bytes of private data (the client's Connect:
    # ND_CONNECTION_REFUSED, the bytes read back), accepts the retry on the same connector, and
    # disconnects at the end: the client sees it through NotifyDisconnect.
    step nd2-reject "$sp" "$cp" cm:7402 \
        "$ND2/nd2-pingpong server $S 7402 --iters 20 --reject --server-disconnects" \
        "$ND2/nd2-pingpong client $C $S 7402 --iters 20 --reject --server-disconnects"
    # RDMA Write and Read through memory windows, Invalidate seen by the peer's Read.
    step nd2-rdma-pingpong "$sp" "$cp" cm:7404 \
        "$ND2/nd2-rdma-pingpong server $S 7404 --iters 50" "$ND2/nd2-rdma-pingpong client $C $S 7404 --iters 50"
done
post "end.$role" "$(grep -c '	pass	' "$RIG_RESULTS") $(grep -c '	fail	' "$RIG_RESULTS")"
echo "rig: $role guest done in $((SECONDS - started)) s"
