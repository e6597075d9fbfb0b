# The ND2 send/receive ping-pong (tests/nd2/nd2-pingpong: ND2's COM face over nd-shim) against
# the same exchange written directly on librdmacm and libibverbs (tests/bench/verbs-pingpong.c,
# built here with gcc), in one boot: server on rxe0, client on rxe1, over each provider in
# RIG_ND_PROVIDERS (stock rxe_rs). Both event-driven by default (ND2: the completion port and CQ
# Notify; verbs: ibv_req_notify_cq and the completion channel), both polling with
# RIG_BENCH_POLL=1, one mode after the other with RIG_BENCH_POLL=both (under software emulation
# two spinning processes starve the kernel's rxe work on 2 CPUs, so polled figures there measure
# the scheduler more than the stack; on one CPU, the instruction clock's, both programs poll with
# --yield: sched_yield between empty polls); RIG_BENCH_POLL=mixed adds a mixed mode after the
# event-driven one (both programs --mixed 1: every other exchange polled, sched_yield between
# empty polls, so it runs on one CPU too; ND2's polled exchange polls its CQ's Notify with
# GetOverlappedResult(FALSE), nobody waiting in the shim), RIG_BENCH_POLL=all all three. The two programs alternate which goes first in each round.
# Prints each run's mean round trip, exchanges per second, CQ polls, CPU time per exchange and
# typical round trip (the median of the run's exchanges, each timed: tests/bench/round-trips.h)
# side by side, with the clients' context switches and system calls per exchange, per thread
# (tests/bench/thread-counts.h: exact counts, unlike the times), and each client's slowest
# exchange (its round trip, and which exchange, from 0), then the medians over the rounds and
# the ratios ND2 / verbs, and each program's best typical round trip over the rounds and their
# ratio; never fails on a time. RIG_BENCH_ITERATIONS (1000),
# RIG_BENCH_SIZE (64), RIG_BENCH_ROUNDS (3).
# Then, per provider, both clients polling under valgrind's callgrind (their servers polling
# natively), only the exchanges counted: user-space instructions per exchange, the polls per
# exchange, and the functions they go to (callgrind_annotate, kept in RIG_OUT/bench-nd2/).
# RIG_BENCH_CALLGRIND_ITERS (200; 0 skips it); RIG_BENCH_CALLGRIND_POLL=0 counts the event-driven
# clients instead (both ends event-driven; the default on one CPU).
# Last, per provider, both clients event-driven under `strace -c -f` (their servers native): the
# system calls per exchange by name, every thread of the process counted (kept in
# RIG_OUT/bench-nd2/strace.*). RIG_BENCH_STRACE_ITERS (300; 0 skips it).
# RIG_BENCH_VERBS_OPTIONS adds options to the verbs program's runs: `--epoll` makes it wait as
# nd-shim's leader does (epoll_wait, then the read), which tells the wait's cost from the rest;
# `--touch-pages N` makes it read a byte of each of N pages after every completion (a bigger
# working set per wake-up: docs/nd2-performance.md, "What the emulator's wake-up costs are not").
# On one CPU (tests/rig/vm's RIG_CLOCK=instructions), the whole run is SCHED_BATCH: a waking end
# then does not preempt the running one, and each end sleeps once per exchange, as it does with
# a CPU of its own; under the default policy whether the server's wake-up preempts the client is
# the scheduler's call, and it did for half of the verbs program's exchanges but a sixth of
# ND2's, so the two programs were not timed doing the same thing.
source "$RIG_ROOT/tests/rig/guest/lib.sh"
if (($(nproc) == 1)) && [[ $(chrt --pid $$) != *SCHED_BATCH* ]]; then
    echo "one CPU: the ping-pongs run SCHED_BATCH (chrt --batch 0)"
    exec chrt --batch 0 bash "${BASH_SOURCE[0]}" "$@"
fi

iterations=${RIG_BENCH_ITERATIONS:-1000}
size=${RIG_BENCH_SIZE:-64}
rounds=${RIG_BENCH_ROUNDS:-3}
case ${RIG_BENCH_POLL:-} in
    '') modes=(event-driven) ;;
    both) modes=(event-driven polling) ;;
    mixed) modes=(event-driven mixed) ;;
    all) modes=(event-driven polling mixed) ;;
    *) modes=(polling) ;;
esac
# On one CPU a spinning end holds the CPU for its whole time slice: both programs' polling runs
# then yield between empty polls (--yield), so the other end runs.
poll_mode=(--poll)
if (($(nproc) == 1)); then
    poll_mode=(--poll --yield)
    [[ ${modes[*]} != *polling* ]] || echo "one CPU: the polling runs yield between empty polls (--poll --yield)"
fi
[[ ${RIG_CLOCK:-host} != instructions ]] ||
    echo "the guest's clock counts instructions (RIG_CLOCK=instructions): a microsecond is 1,000 guest instructions"
export RIG_TIMEOUT=1200

# The client's counts per thread (tests/bench/thread-counts.h, which says why they are asked
# for); the system-call counters need tracefs.
export THREAD_COUNTS=1
[[ -e /sys/kernel/tracing/events ]] || mount -t tracefs tracefs /sys/kernel/tracing 2> /dev/null || true

nd2_programs || exit 1
verbs_bin=$RIG_OUT/verbs-pingpong
gcc -O2 -Wall -Wextra -Werror -I"$RIG_ROOT/tests/bench" -o "$verbs_bin" "$RIG_ROOT/tests/bench/verbs-pingpong.c" \
    -lrdmacm -libverbs || exit 1

# run_pair PROVIDER PROGRAM ITERS [OPTION...] [-- WRAPPER...]: one ping-pong of PROGRAM, server on
# rxe0 and client on rxe1, both with the OPTIONs, the client run under WRAPPER (valgrind, strace)
# if one is given.
run_pair() {
    local provider=$1 program=$2 iters=$3 options=()
    shift 3
    while (($#)) && [[ $1 != -- ]]; do options+=("$1"); shift; done
    (($#)) && shift
    pair "$provider" "$provider" cm:7460 "$program" server "$RIG_SERVER_IP" 7460 \
        --iters "$iters" --size "$size" "${options[@]}" -- \
        "$@" "$program" client "$RIG_CLIENT_IP" "$RIG_SERVER_IP" 7460 --iters "$iters" --size "$size" "${options[@]}"
}

# both_clients FUNCTION: FUNCTION PROVIDER NAME PROGRAM for each provider, ND2's program then verbs'.
both_clients() {
    local provider
    for provider in ${RIG_ND_PROVIDERS:-stock rxe_rs}; do
        "$1" "$provider" nd2 "$nd2_bin/nd2-pingpong" || status=1
        "$1" "$provider" verbs "$verbs_bin" || status=1
    done
}

# failed PROVIDER NAME WHAT LOG: says the run failed, with the end of its log.
failed() {
    echo "  $1 $2: $3 run failed:"
    tail -n 20 "$4" | sed 's/^/    | /'
}

# one PROVIDER PROGRAM [OPTION...]: one ping-pong; prints "ROUND_TRIP_US EXCHANGES_PER_S POLLS CPU_US
# TYPICAL_US VOLUNTARY INVOLUNTARY SYSCALLS", on a second line the client's counts per thread and
# on a third its slowest exchange ("MAX us (exchange I)", I from 0: round-trips.h), or fails
# (ROUND_TRIP_US: the mean; POLLS: CQ polls per exchange, two of which find a completion;
# CPU_US: the client process's CPU time per exchange, every thread; TYPICAL_US: the median of the
# exchanges' round trips, or n/a if the client did not print it: tests/bench/round-trips.h;
# VOLUNTARY, INVOLUNTARY: its context switches per exchange, every thread; SYSCALLS: its system
# calls per exchange, every thread, or n/a: tests/bench/thread-counts.h)
one() {
    local provider=$1 program=$2 out typical
    shift 2
    out=$(run_pair "$provider" "$program" "$iterations" "$@" 2>&1) ||
        { printf '%s\n' "$out" | sed 's/^/    | /' >&2; return 1; }
    typical=$(sed -n 's/^client latency per exchange: typical \([0-9.]*\) us,.*/\1/p' <<< "$out")
    echo "$(sed -n 's/.*mean round trip \([0-9.]*\) us, \([0-9]*\) exchanges\/s, \([0-9.]*\) .*, \([0-9.]*\) us of CPU.*/\1 \2 \3 \4/p' <<< "$out")" \
        "${typical:-n/a}" \
        "$(sed -n 's/^client counts per exchange: total \([0-9.]*\) voluntary, \([0-9.]*\) involuntary, \([0-9.n/a]*\) syscalls.*/\1 \2 \3/p' <<< "$out")"
    grep '^client counts per exchange' <<< "$out" | sed 's/^client counts per exchange: total [^|]*| //'
    echo "$(sed -n 's/^client latency per exchange: .* max \([0-9.]* us (exchange [0-9]*\) of.*/\1)/p' <<< "$out")"
}

cg_iters=${RIG_BENCH_CALLGRIND_ITERS:-200}
strace_iters=${RIG_BENCH_STRACE_ITERS:-300}
cg_mode=(--poll) cg_mode_name=polling
# One CPU: event-driven unless asked (see the polling runs above).
(($(nproc) == 1)) && [[ -z ${RIG_BENCH_CALLGRIND_POLL:-} ]] && RIG_BENCH_CALLGRIND_POLL=0
[[ ${RIG_BENCH_CALLGRIND_POLL:-1} == 0 ]] && cg_mode=() cg_mode_name=event-driven
cg_dir=$RIG_OUT/bench-nd2
mkdir -p "$cg_dir"

# callgrind_one PROVIDER NAME PROGRAM: the polling client of PROGRAM under callgrind.
callgrind_one() {
    local provider=$1 name=$2 program=$3 out log total
    out=$cg_dir/callgrind.$name.$provider.out
    log=$cg_dir/callgrind.$name.$provider.log
    if ! run_pair "$provider" "$program" "$cg_iters" "${cg_mode[@]}" -- env TMPDIR="$cg_dir" \
        valgrind --tool=callgrind --vgdb=no --collect-atstart=no --callgrind-out-file="$out" > "$log" 2>&1; then
        failed "$provider" "$name" callgrind "$log"
        return 1
    fi
    total=$(awk '/^(summary|totals):/ { print $2; exit }' "$out")
    callgrind_annotate --inclusive=no --threshold=100 --auto=no "$out" > "$cg_dir/callgrind.$name.$provider.annotate" 2>&1
    callgrind_annotate --inclusive=yes --threshold=100 --auto=no "$out" > "$cg_dir/callgrind.$name.$provider.inclusive" 2>&1
    callgrind_annotate --tree=caller --inclusive=yes --auto=no "$out" > "$cg_dir/callgrind.$name.$provider.callers" 2>&1
    by_function "$cg_dir/callgrind.$name.$provider.annotate" "$cg_iters" > "$cg_dir/callgrind.$name.$provider.functions"
    echo "  $provider $name: $total Ir / $cg_iters = $(awk -v t="$total" -v n="$cg_iters" 'BEGIN { printf "%.1f", t / n }') per exchange;" \
        "$(grep -o '[0-9.]* \(GetResults\|ibv_poll_cq\) per exchange' "$log")"
    echo "    per exchange by function (self):"
    head -n 16 "$cg_dir/callgrind.$name.$provider.functions" | sed 's/^/    /'
}

# strace_one PROVIDER NAME PROGRAM: the event-driven client of PROGRAM under strace -c -f; prints
# the system calls per exchange by name.
strace_one() {
    local provider=$1 name=$2 program=$3 out log
    out=$cg_dir/strace.$name.$provider.txt
    log=$cg_dir/strace.$name.$provider.log
    if ! run_pair "$provider" "$program" "$strace_iters" -- strace -c -f -o "$out" > "$log" 2>&1; then
        failed "$provider" "$name" strace "$log"
        return 1
    fi
    # strace -c's table: % time, seconds, usecs/call, calls, [errors,] syscall.
    echo "  $provider $name ($strace_iters exchanges, set-up and teardown included):" \
        "$(awk -v n="$strace_iters" '$NF == "total" { printf "%.1f system calls per exchange", $4 / n }' "$out")"
    awk -v n="$strace_iters" '$1 ~ /^[0-9.]+$/ && $NF != "total" && $4 / n >= 0.05 {
        printf "    %-16s %6.2f per exchange\n", $NF, $4 / n }' "$out" | sort -k2 -g -r
}

# median: the median of the numbers on stdin, one a line
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

status=0
for mode_name in "${modes[@]}"; do
    mode=()
    [[ $mode_name == polling ]] && mode=("${poll_mode[@]}")
    [[ $mode_name == mixed ]] && mode=(--mixed 1)
    echo "send/receive ping-pong, $iterations exchanges of $size bytes, $mode_name; server rxe0, client rxe1"
    printf '%-8s %-6s %51s %51s\n' provider round "ND2: round trip us, /s, polls, cpu us, typical us" \
        "verbs: round trip us, /s, polls, cpu us, typical us"
    for provider in ${RIG_ND_PROVIDERS:-stock rxe_rs}; do
        runs=()
        for ((round = 1; round <= rounds; round++)); do
            order=(nd2 verbs)
            ((round % 2 == 0)) && order=(verbs nd2)
            nd2='' verbs=''
            for which in "${order[@]}"; do
                if [[ $which == nd2 ]]; then
                    nd2=$(one "$provider" "$nd2_bin/nd2-pingpong" "${mode[@]}") || status=1
                else
                    verbs=$(one "$provider" "$verbs_bin" "${mode[@]}" ${RIG_BENCH_VERBS_OPTIONS:-}) || status=1
                fi
            done
            [[ -n $nd2 && -n $verbs ]] || { echo "$provider round $round: a run failed"; continue; }
            read -r nrt nrate npolls ncpu ntyp nvol ninv nsys <<< "$(head -n 1 <<< "$nd2")"
            read -r vrt vrate vpolls vcpu vtyp vvol vinv vsys <<< "$(head -n 1 <<< "$verbs")"
            printf '%-8s %-6s %16s %9s %7s %6s %9s %16s %9s %7s %6s %9s\n' "$provider" "$round" "$nrt" "$nrate" \
                "$npolls" "$ncpu" "$ntyp" "$vrt" "$vrate" "$vpolls" "$vcpu" "$vtyp"
            # Per exchange, the client's: context switches voluntary/involuntary, system calls.
            printf '  counts  ND2 %s/%s/%s: %s\n' "$nvol" "$ninv" "$nsys" "$(sed -n 2p <<< "$nd2")"
            printf '  counts  verbs %s/%s/%s: %s\n' "$vvol" "$vinv" "$vsys" "$(sed -n 2p <<< "$verbs")"
            printf '  max     ND2 %s, verbs %s\n' "$(sed -n 3p <<< "$nd2")" "$(sed -n 3p <<< "$verbs")"
            runs+=("$nrt $nrate $vrt $vrate $ncpu $vcpu $ntyp $vtyp")
        done
        ((${#runs[@]} > 0)) || continue
        # Medians over the rounds: a round the emulator stalled in moves a mean, not a median.
        nrt=$(printf '%s\n' "${runs[@]}" | awk '{ print $1 }' | median)
        vrt=$(printf '%s\n' "${runs[@]}" | awk '{ print $3 }' | median)
        nrate=$(printf '%s\n' "${runs[@]}" | awk '{ print $2 }' | median)
        vrate=$(printf '%s\n' "${runs[@]}" | awk '{ print $4 }' | median)
        ncpu=$(printf '%s\n' "${runs[@]}" | awk '{ print $5 }' | median)
        vcpu=$(printf '%s\n' "${runs[@]}" | awk '{ print $6 }' | median)
        # The rounds that have a typical round trip (none: 0, shown as n/a).
        ntyp=$(printf '%s\n' "${runs[@]}" | awk '$7 != "n/a" { print $7 }' | median)
        vtyp=$(printf '%s\n' "${runs[@]}" | awk '$8 != "n/a" { print $8 }' | median)
        awk -v p="$provider" -v nrt="$nrt" -v nrate="$nrate" -v vrt="$vrt" -v vrate="$vrate" -v ncpu="$ncpu" \
            -v vcpu="$vcpu" -v ntyp="$ntyp" -v vtyp="$vtyp" 'BEGIN {
            nt = ntyp > 0 ? sprintf("%.1f", ntyp) : "n/a"
            vt = vtyp > 0 ? sprintf("%.1f", vtyp) : "n/a"
            typical = ntyp > 0 && vtyp > 0 ? sprintf("%.3f", ntyp / vtyp) : "n/a"
            printf "%-8s %-6s %16.1f %9.0f %7s %6.1f %9s %16.1f %9.0f %7s %6.1f %9s   ND2/verbs: round trip %.3f, rate %.3f, cpu %.3f, typical %s\n",
                p, "median", nrt, nrate, "", ncpu, nt, vrt, vrate, "", vcpu, vt, nrt / vrt, nrate / vrate, ncpu / vcpu, typical }'
        # The fastest round's typical exchange of each program: the emulator puts a whole run in a
        # fast or a slow state (typical round trips of about 47 or 90 us, polled, in one boot), and
        # its stalls only ever add time, so the best rounds compare the programs in the same state.
        ntyp=$(printf '%s\n' "${runs[@]}" | awk '$7 != "n/a" { print $7 }' | sort -g | head -n 1)
        vtyp=$(printf '%s\n' "${runs[@]}" | awk '$8 != "n/a" { print $8 }' | sort -g | head -n 1)
        if [[ -n $ntyp && -n $vtyp ]]; then
            awk -v p="$provider" -v n="$ntyp" -v v="$vtyp" 'BEGIN {
                printf "%-8s best typical round trip over the rounds: ND2 %.1f us, verbs %.1f us, ND2/verbs %.3f\n", p, n, v, n / v }'
        fi
    done
done

if ((cg_iters > 0)); then
    echo "user-space instructions of the $cg_mode_name clients per exchange (callgrind, $cg_iters exchanges)"
    both_clients callgrind_one
fi
if ((strace_iters > 0)) && ! command -v strace > /dev/null; then
    echo "system calls: strace is not installed in this guest; skipped"
elif ((strace_iters > 0)); then
    echo "system calls of the event-driven clients (strace -c -f, $strace_iters exchanges)"
    both_clients strace_one
fi
exit $status
