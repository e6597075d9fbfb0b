# The ND2 send/receive ping-pong (tests/nd2/nd2-pingpong: ND2's COM face over nd-shim) against
# the same exchange written directly on librdmacm and libibverbs (tests/bench/verbs-pingpong.c,
# built here with gcc), in one boot: server on rxe0, client on rxe1, over each provider in
# RIG_ND_PROVIDERS (stock rxe_rs). Both event-driven by default (ND2: the completion port and CQ
# Notify; verbs: ibv_req_notify_cq and the completion channel), both polling with
# RIG_BENCH_POLL=1 (under software emulation two spinning processes starve the kernel's rxe
# work on 2 CPUs, so polled figures there measure the scheduler more than the stack). The two
# programs alternate which goes first in each round. Prints each run's mean round trip and
# exchanges per second side by side, then the medians over the rounds and the ratios ND2 / verbs;
# never fails on a time. RIG_BENCH_ITERATIONS (1000), RIG_BENCH_SIZE (64), RIG_BENCH_ROUNDS (3).
source "$RIG_ROOT/tests/rig/guest/lib.sh"

iterations=${RIG_BENCH_ITERATIONS:-1000}
size=${RIG_BENCH_SIZE:-64}
rounds=${RIG_BENCH_ROUNDS:-3}
mode=() mode_name=event-driven
[[ -n ${RIG_BENCH_POLL:-} ]] && mode=(--poll) mode_name=polling
export RIG_TIMEOUT=1200

nd2_bin=$RIG_ROOT/target/nd2
if ! ND2_CHECK_ONLY=1 "$RIG_ROOT/tests/nd2/build.sh" >/dev/null 2>&1; then
    nd2_bin=$RIG_OUT/nd2
    ND2_OUT=$nd2_bin "$RIG_ROOT/tests/nd2/build.sh" || exit 1
fi
verbs_bin=$RIG_OUT/verbs-pingpong
gcc -O2 -Wall -Wextra -Werror -o "$verbs_bin" "$RIG_ROOT/tests/bench/verbs-pingpong.c" -lrdmacm -libverbs || exit 1

# one PROVIDER PROGRAM [OPTION...]: one ping-pong; prints "ROUND_TRIP_US EXCHANGES_PER_S" or fails
one() {
    local provider=$1 program=$2 out
    shift 2
    out=$(pair "$provider" "$provider" cm:7460 "$program" server "$RIG_SERVER_IP" 7460 \
        --iters "$iterations" --size "$size" "$@" -- \
        "$program" client "$RIG_CLIENT_IP" "$RIG_SERVER_IP" 7460 --iters "$iterations" --size "$size" "$@" 2>&1) ||
        { printf '%s\n' "$out" | sed 's/^/    | /' >&2; return 1; }
    sed -n 's/.*mean round trip \([0-9.]*\) us, \([0-9]*\) exchanges\/s.*/\1 \2/p' <<< "$out"
}

# median: the median of the numbers on stdin, one a line
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "send/receive ping-pong, $iterations exchanges of $size bytes, $mode_name; server rxe0, client rxe1"
printf '%-8s %-6s %24s %24s\n' provider round "ND2: round trip us, /s" "verbs: round trip us, /s"
status=0
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
                verbs=$(one "$provider" "$verbs_bin" "${mode[@]}") || status=1
            fi
        done
        [[ -n $nd2 && -n $verbs ]] || { echo "$provider round $round: a run failed"; continue; }
        read -r nrt nrate <<< "$nd2"
        read -r vrt vrate <<< "$verbs"
        printf '%-8s %-6s %14s %9s %14s %9s\n' "$provider" "$round" "$nrt" "$nrate" "$vrt" "$vrate"
        runs+=("$nrt $nrate $vrt $vrate")
    done
    ((${#runs[@]} > 0)) || continue
    # Medians over the rounds: a round the emulator stalled in moves a mean, not a median.
    nrt=$(printf '%s\n' "${runs[@]}" | awk '{ print $1 }' | median)
    vrt=$(printf '%s\n' "${runs[@]}" | awk '{ print $3 }' | median)
    nrate=$(printf '%s\n' "${runs[@]}" | awk '{ print $2 }' | median)
    vrate=$(printf '%s\n' "${runs[@]}" | awk '{ print $4 }' | median)
    awk -v p="$provider" -v nrt="$nrt" -v nrate="$nrate" -v vrt="$vrt" -v vrate="$vrate" 'BEGIN {
        printf "%-8s %-6s %14.1f %9.0f %14.1f %9.0f   ND2/verbs: round trip %.3f, rate %.3f\n",
            p, "median", nrt, nrate, vrt, vrate, nrt / vrt, nrate / vrate }'
done
exit $status
