# Our provider against the stock C provider, both in this one boot, RC from rxe1 to rxe0:
#   (a) verbs-bench's post_send + poll_cq busy loop (8-byte RDMA WRITE and SEND): ops/s;
#   (b) the same pair under valgrind's callgrind: user-space instructions per pair, and the
#       functions they go to (callgrind_annotate, kept in RIG_OUT/bench-verbs/); the WRITE
#       pair on a parent domain with a thread domain (write-td: no lock on the data path); and
#       the other paths: the WRITE by ibv_wr_* (wr-write), a SEND on UD (ud-send), and a receive
#       through an SRQ (srq-recv: ibv_post_srq_recv + the poll_cq that takes its completion);
#   (c) perftest over rdma_cm (-R), server on rxe0 and client on rxe1 (perftest_pair in lib.sh),
#       both ends on one provider: ib_send_bw/ib_write_bw with 8-byte
#       messages for the message rate, ib_send_lat/ib_write_lat for the latency (t_typical);
#   (d) contended: verbs-contended, 4 and then 8 threads posting 8-byte RDMA WRITEs on one QP
#       and polling its one CQ (the guest has 2 vCPUs): ops/s;
#   (e) what the kernel receives for one WRITE (not in the default parts): the bytes of the
#       send-ring slot each provider hands the kernel for the same ibv_send_wr (verbs-dump,
#       diffed), and the system calls of a rate loop (strace -c -f), per provider.
#   (f) RDMA READ of 4 KiB: ib_read_bw -F -s 4096 -n RIG_BENCH_READ_ITERS (20000) over rdma_cm as
#       in (c) (MB/s), and verbs-bench's loop of one 4 KiB READ at a time (rate read, as (a), the
#       same number of pairs; ops/s), RIG_BENCH_READ_ROUNDS (4) rounds, the providers taking turns
#       (stock first in odd rounds), every round printed, the median in the summary; then the
#       READ pair's instructions under callgrind as in (b);
#   (g) memory: verbs-baseline (tests/verbs/baseline.c), VmRSS before and after
#       ibv_get_device_list, ibv_open_device(rxe0) and ibv_alloc_pd, and, after the PD, each
#       mapped file's resident and private-dirty KiB; 2 rounds, the providers taking turns (the
#       summary shows the last round's); then 2 rounds more with our library copied to tmpfs
#       (cached whole, as on a local disk).
# Prints the figures and the ratio ours / stock, then one summary table. RIG_BENCH_ITERS (20000)
# pairs in (a), RIG_BENCH_CALLGRIND_ITERS (2000) pairs in (b), RIG_BENCH_PERF_ITERS (10000)
# iterations in (c) (a quarter of that for the latency runs); RIG_BENCH_ROUNDS (3) rounds of (a)
# and (c), the providers taking turns (in (a) stock runs first in odd rounds and ours in even
# ones); the median is what the summary shows. RIG_BENCH_LOOP_OPS ("write send") the loops of (a),
# RIG_BENCH_LOOP_PAUSE (0) seconds slept before each of its runs. RIG_BENCH_CONTENDED_ITERS
# (20000) completions per run of (d), RIG_BENCH_CONTENDED_ROUNDS (3) rounds. RIG_BENCH_PARTS
# (abcdfg) picks the parts to run; RIG_BENCH_COUNT_OPS ("write send write-td wr-write ud-send
# srq-recv") the pairs of (b). Under software
# emulation on a shared host the timed figures vary by a factor of two between rounds: compare
# the instruction counts, which are exact, and read the timed ratios as "no large loss".
source "$RIG_ROOT/tests/rig/guest/lib.sh"

dir=$RIG_OUT/bench-verbs
bench=$dir/verbs-bench
iters=${RIG_BENCH_ITERS:-20000}
cg_iters=${RIG_BENCH_CALLGRIND_ITERS:-2000}
perf_iters=${RIG_BENCH_PERF_ITERS:-10000}
rounds=${RIG_BENCH_ROUNDS:-3}
providers=(stock rxe_rs)
parts=${RIG_BENCH_PARTS:-abcdfg}
loop_ops=${RIG_BENCH_LOOP_OPS:-write send}
loop_pause=${RIG_BENCH_LOOP_PAUSE:-0}
contended_iters=${RIG_BENCH_CONTENDED_ITERS:-20000}
contended_rounds=${RIG_BENCH_CONTENDED_ROUNDS:-3}
count_ops=${RIG_BENCH_COUNT_OPS:-write send write-td wr-write ud-send srq-recv}
summary=()

mkdir -p "$dir"
# TMPDIR: the guest sees the host read-only except RIG_OUT.
# Only the programs the parts run (each gcc takes several seconds of a vCPU under emulation).
TMPDIR=$dir "$RIG_ROOT/tests/verbs/build.sh" "$dir" bench contended dump baseline > "$dir/build.log" 2>&1 ||
    { echo "build of tests/verbs failed:"; cat "$dir/build.log"; exit 1; }

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "n/a"; else printf "%.2f", a / b }'; }

# row WHAT UNIT STOCK OURS: prints one figure for both and keeps it for the summary.
row() {
    local line
    printf -v line '%-34s %14s %14s %8s  %s' "$1" "${3:-n/a}" "${4:-n/a}" "$(ratio "$4" "$3")" "$2"
    echo "$line"
    summary+=("$line")
}

[[ $parts == *a* ]] &&
echo "-- (a) post_send + poll_cq busy loop, $iters pairs, median of $rounds rounds (providers alternate, stock first in odd rounds)"
# shellcheck disable=SC2086 # the ops are a list
[[ $parts == *a* ]] && for op in $loop_ops; do
    declare -A rate=()
    for p in "${providers[@]}"; do : > "$dir/rate.$op.$p.figures"; done
    for ((r = 1; r <= rounds; r++)); do
        order=("${providers[@]}")
        ((r % 2)) || order=("${providers[1]}" "${providers[0]}")
        for p in "${order[@]}"; do
            log=$dir/rate.$op.$p.$r.log
            sleep "$loop_pause"
            with_provider "$p" "$dir/rate.$op.$p.served" "$bench" rate "$op" "$iters" > "$log" 2>&1 &&
                expect_provider "$dir/rate.$op.$p.served" "$p" &&
                awk '/^rate/ { for (i = 1; i < NF; i++) if ($(i + 1) == "ops/s") print $i }' "$log" \
                    >> "$dir/rate.$op.$p.figures"
            sed "s/^/  round $r: /" "$log"
        done
    done
    for p in "${providers[@]}"; do
        echo "  $op $p, rounds in order: $(paste -sd' ' "$dir/rate.$op.$p.figures")"
        rate[$p]=$(median < "$dir/rate.$op.$p.figures")
    done
    row "loop $op ops/s (median)" "higher is better" "${rate[stock]:-}" "${rate[rxe_rs]:-}"
    unset rate
done

[[ $parts == *b* ]] &&
echo "-- (b) user-space instructions per post_send + poll_cq pair (srq-recv: post_srq_recv + poll_cq), callgrind, $cg_iters pairs"
# write-td: the WRITE pair with the client's QP and CQ on a parent domain with a thread domain
# (no lock on their data path); the stock provider has no thread domains (n/a).
# shellcheck disable=SC2086 # the ops are a list
[[ $parts == *b* ]] && for op in $count_ops; do
    declare -A ir=()
    mode=count
    [[ $op == *-td ]] && mode=count-td
    for p in "${providers[@]}"; do
        out=$dir/callgrind.$op.$p.out
        log=$dir/callgrind.$op.$p.log
        if TMPDIR=$dir with_provider "$p" "$dir/callgrind.$op.$p.served" valgrind --tool=callgrind --vgdb=no \
            --collect-atstart=no --callgrind-out-file="$out" "$bench" "$mode" "${op%-td}" "$cg_iters" > "$log" 2>&1 &&
            expect_provider "$dir/callgrind.$op.$p.served" "$p"; then
            total=$(awk '/^(summary|totals):/ { print $2; exit }' "$out")
            ir[$p]=$(awk -v t="$total" -v n="$cg_iters" 'BEGIN { printf "%.1f", t / n }')
            callgrind_annotate --inclusive=no --threshold=100 --auto=no "$out" > "$dir/callgrind.$op.$p.annotate" 2>&1
            callgrind_annotate --tree=caller --inclusive=yes --auto=no "$out" > "$dir/callgrind.$op.$p.callers" 2>&1
            by_function "$dir/callgrind.$op.$p.annotate" "$cg_iters" > "$dir/callgrind.$op.$p.functions"
            echo "  $p $op: $total Ir / $cg_iters = ${ir[$p]} per pair; per pair by function (self, inlined code included):"
            head -n 14 "$dir/callgrind.$op.$p.functions" | sed 's/^/    /'
            awk '{ o = $NF; c[o] += $1 } END { for (o in c) printf "      %-28s %8.1f\n", o, c[o] }' \
                "$dir/callgrind.$op.$p.functions" | sort -k2 -rn | sed '1i\    per object:'
        elif grep -q '^count-td: ibv_alloc_td' "$log"; then
            echo "  $p $op: no thread domains: $(grep '^count-td' "$log")"
        else
            echo "  $p $op: callgrind run failed:"
            tail -n 20 "$log" | sed 's/^/    | /'
        fi
    done
    row "instructions per $op pair" "lower is better" "${ir[stock]:-}" "${ir[rxe_rs]:-}"
    unset ir
done

# perf_run PROVIDER TEST ARGS...: TEST between rxe0 (server) and rxe1 (client), both on PROVIDER
# (perftest_pair in lib.sh); the client's output goes to $dir/TEST.PROVIDER.out.
perf_run() {
    local p=$1 t=$2
    shift 2
    PERFTEST_CLIENT_OUT=$dir/$t.$p.out RIG_TIMEOUT=${RIG_BENCH_PERF_TIMEOUT:-120} \
        perftest_pair "$p" "$p" "$t" "$@" > "$dir/$t.$p.log" 2>&1
}

# perf_figure FILE COLUMN: the COLUMN-th field of perftest's result line (the first line of figures
# after the header that starts with #bytes).
perf_figure() {
    awk -v c="$2" '/^ *#bytes/ { hdr = 1; next } hdr && $1 ~ /^[0-9]+$/ && NF >= c { print $c; exit }' "$1"
}

# perf_round NAME COLUMN [UNIT]: round $r of perftest $t with ${args[@]} on provider $p (perf_run):
# its figure (perf_figure's COLUMN) added to $dir/NAME.$p.figures and printed, its output kept as
# NAME.$p.$r.out; its log kept as NAME.$p.$r.log when it failed.
perf_round() {
    local name=$1 col=$2 unit=${3:+ $3} f
    if perf_run "$p" "$t" "${args[@]}"; then
        f=$(perf_figure "$dir/$t.$p.out" "$col")
        cp "$dir/$t.$p.out" "$dir/$name.$p.$r.out"
        # perftest prints inf (or, with -F, 0) when it failed to measure its clock: no figure then.
        if [[ $f =~ ^[0-9]+(\.[0-9]+)?$ && ! $f =~ ^0+(\.0+)?$ ]]; then
            echo "$f" >> "$dir/$name.$p.figures"
            echo "  round $r: $p $t ${args[*]}: $f$unit"
        else
            echo "  round $r: $p $t ${args[*]}: no figure (${f:-none}; bench-verbs/$name.$p.$r.out)"
        fi
    else
        cp "$dir/$t.$p.log" "$dir/$name.$p.$r.log"
        echo "  round $r: $p $t ${args[*]}: failed or timed out (bench-verbs/$name.$p.$r.log):"
        tail -n 8 "$dir/$t.$p.log" | sed 's/^/    | /'
    fi
}

[[ $parts == *d* ]] &&
echo "-- (d) contended: threads posting on one QP and polling one CQ, $contended_iters WRITEs, median of $contended_rounds rounds (providers alternate)"
[[ $parts == *d* ]] && for threads in 4 8; do
    declare -A rate=()
    for p in "${providers[@]}"; do : > "$dir/contended.$threads.$p.figures"; done
    for ((r = 1; r <= contended_rounds; r++)); do
        for p in "${providers[@]}"; do
            log=$dir/contended.$threads.$p.$r.log
            with_provider "$p" "$dir/contended.$threads.$p.served" "$dir/verbs-contended" "$threads" \
                "$contended_iters" > "$log" 2>&1 &&
                expect_provider "$dir/contended.$threads.$p.served" "$p" &&
                awk '/^contended/ { for (i = 1; i < NF; i++) if ($(i + 1) == "ops/s") print $i }' "$log" \
                    >> "$dir/contended.$threads.$p.figures"
            sed "s/^/  round $r: /" "$log"
        done
    done
    for p in "${providers[@]}"; do rate[$p]=$(median < "$dir/contended.$threads.$p.figures"); done
    row "contended $threads threads ops/s (median)" "higher is better" "${rate[stock]:-}" "${rate[rxe_rs]:-}"
    unset rate
done

[[ $parts == *c* ]] &&
echo "-- (c) perftest over rdma_cm, both ends on one provider, median of $rounds rounds (providers alternate)"
if [[ $parts == *c* ]]; then
    trap 'unbound_clients_on_rxe1 off' EXIT
    unbound_clients_on_rxe1 on
fi
[[ $parts == *c* ]] && for t in ib_send_bw ib_write_bw ib_send_lat ib_write_lat; do
    declare -A fig=()
    # Message rate from the _bw runs; from the _lat runs t_typical (perftest's median), as t_avg
    # follows the emulator's stalls of 100 ms and more.
    # -F: a _bw report whose own clock measurement failed (under the emulator it often does)
    # would exit before perftest's closing handshake and leave the other end waiting forever
    # (tests/suites/peers-rxe_rs.sh); with -F it reports rates of 0, which count as no figure.
    case $t in
        *_bw) args=(-F -s 8 -n "$perf_iters"); col=5; what="$t msg rate Mpps"; better="higher is better" ;;
        *_lat) args=(-s 8 -n $((perf_iters / 4))); col=5; what="$t t_typical usec"; better="lower is better" ;;
    esac
    for p in "${providers[@]}"; do : > "$dir/$t.$p.figures"; done
    for ((r = 1; r <= rounds; r++)); do
        for p in "${providers[@]}"; do
            perf_round "$t" "$col"
        done
    done
    for p in "${providers[@]}"; do fig[$p]=$(median < "$dir/$t.$p.figures"); done
    row "$what (median)" "$better" "${fig[stock]:-}" "${fig[rxe_rs]:-}"
    unset fig
done

read_iters=${RIG_BENCH_READ_ITERS:-20000}
read_rounds=${RIG_BENCH_READ_ROUNDS:-4}
[[ $parts == *f* ]] &&
echo "-- (f) ib_read_bw -s 4096 over rdma_cm, both ends on one provider, $read_rounds rounds (providers alternate, stock first in odd rounds)"
if [[ $parts == *f* ]]; then
    [[ $parts == *c* ]] || { trap 'unbound_clients_on_rxe1 off' EXIT; unbound_clients_on_rxe1 on; }
    declare -A fig=()
    t=ib_read_bw args=(-F -s 4096 -n "$read_iters")
    for p in "${providers[@]}"; do : > "$dir/read4k.$p.figures"; : > "$dir/rate.read.$p.figures"; done
    for ((r = 1; r <= read_rounds; r++)); do
        order=("${providers[@]}")
        ((r % 2)) || order=("${providers[1]}" "${providers[0]}")
        for p in "${order[@]}"; do
            # Column 4 of ib_read_bw's result line: BW average[MB/sec].
            perf_round read4k 4 MB/s
            log=$dir/rate.read.$p.$r.log
            with_provider "$p" "$dir/rate.read.$p.served" "$bench" rate read "$read_iters" > "$log" 2>&1 &&
                expect_provider "$dir/rate.read.$p.served" "$p" &&
                awk '/^rate/ { for (i = 1; i < NF; i++) if ($(i + 1) == "ops/s") print $i }' "$log" \
                    >> "$dir/rate.read.$p.figures"
            sed "s/^/  round $r: /" "$log"
        done
    done
    for p in "${providers[@]}"; do
        echo "  read 4 KiB $p, rounds in order: $(paste -sd' ' "$dir/read4k.$p.figures")"
        fig[$p]=$(median < "$dir/read4k.$p.figures")
    done
    row "ib_read_bw 4 KiB MB/s (median)" "higher is better" "${fig[stock]:-}" "${fig[rxe_rs]:-}"
    for p in "${providers[@]}"; do
        echo "  loop read 4 KiB $p, rounds in order: $(paste -sd' ' "$dir/rate.read.$p.figures")"
        fig[$p]=$(median < "$dir/rate.read.$p.figures")
    done
    row "loop read 4 KiB ops/s (median)" "higher is better" "${fig[stock]:-}" "${fig[rxe_rs]:-}"
    for p in "${providers[@]}"; do
        out=$dir/callgrind.read.$p.out
        if TMPDIR=$dir with_provider "$p" "$dir/callgrind.read.$p.served" valgrind --tool=callgrind --vgdb=no \
            --collect-atstart=no --callgrind-out-file="$out" "$bench" count read "$cg_iters" \
            > "$dir/callgrind.read.$p.log" 2>&1 && expect_provider "$dir/callgrind.read.$p.served" "$p"; then
            fig[$p]=$(awk -v n="$cg_iters" '/^(summary|totals):/ { printf "%.1f", $2 / n; exit }' "$out")
            callgrind_annotate --inclusive=no --threshold=100 --auto=no "$out" > "$dir/callgrind.read.$p.annotate" 2>&1
            echo "  $p read: ${fig[$p]} instructions per pair; by function:"
            by_function "$dir/callgrind.read.$p.annotate" "$cg_iters" | head -n 8 | sed 's/^/    /'
        else
            fig[$p]=
            echo "  $p read: callgrind run failed:"
            tail -n 20 "$dir/callgrind.read.$p.log" | sed 's/^/    | /'
        fi
    done
    row "instructions per read pair" "lower is better" "${fig[stock]:-}" "${fig[rxe_rs]:-}"
    unset fig
fi

[[ $parts == *g* ]] &&
echo "-- (g) memory: VmRSS of a process that opens rxe0 and allocates a PD (verbs-baseline), 2 rounds (providers alternate)"
if [[ $parts == *g* ]]; then
    declare -A fig=() lib=()
    for r in 1 2; do
        order=("${providers[@]}")
        ((r % 2)) || order=("${providers[1]}" "${providers[0]}")
        for p in "${order[@]}"; do
            log=$dir/baseline.$p.$r.log
            if with_provider "$p" "$dir/baseline.$p.served" "$dir/verbs-baseline" rxe0 "$dir/baseline.$p.$r.smaps" \
                > "$log" 2>&1 && expect_provider "$dir/baseline.$p.served" "$p"; then
                fig[$p]=$(awk '/^baseline ibv_alloc_pd/ { print $4 }' "$log")
                lib[$p]=$(awk '$2 == "map" && $3 ~ /^librxe/ { s += $5 } END { print s + 0 }' "$log")
            fi
            echo "  round $r: $p"
            sed 's/^baseline /    /' "$log"
        done
    done
    row "VmRSS KiB after open + PD" "lower is better" "${fig[stock]:-}" "${fig[rxe_rs]:-}"
    row "Rss KiB of librxe* mappings" "lower is better" "${lib[stock]:-}" "${lib[rxe_rs]:-}"
    # Again with our library read from tmpfs, cached whole as a file on a local disk is once read or
    # installed: the rig's shared root caches only the pages processes faulted, and the kernel's
    # fault-around maps only cached pages (docs/provider-performance.md, "Memory").
    fig=() lib=()
    cached=/dev/shm/rxe-rs-bench-g
    pabi=$(rig_pabi) && mkdir -p "$cached" && cp "$RIG_OURS_PREFIX-rdmav$pabi.so" "$cached/librxe_rs-rdmav$pabi.so"
    for r in 1 2; do
        order=("${providers[@]}")
        ((r % 2)) || order=("${providers[1]}" "${providers[0]}")
        for p in "${order[@]}"; do
            log=$dir/baseline-cached.$p.$r.log
            if RIG_OURS_PREFIX=$cached/librxe_rs with_provider "$p" "$dir/baseline-cached.$p.served" \
                "$dir/verbs-baseline" rxe0 > "$log" 2>&1 && expect_provider "$dir/baseline-cached.$p.served" "$p"; then
                fig[$p]=$(awk '/^baseline ibv_alloc_pd/ { print $4 }' "$log")
                lib[$p]=$(awk '$2 == "map" && $3 ~ /^librxe/ { s += $5 } END { print s + 0 }' "$log")
            fi
            echo "  librxe_rs from tmpfs, round $r: $p: VmRSS ${fig[$p]:-?} KiB after the PD, librxe* Rss ${lib[$p]:-?} KiB"
        done
    done
    rm -rf "$cached"
    row "VmRSS KiB, ours from tmpfs" "lower is better" "${fig[stock]:-}" "${fig[rxe_rs]:-}"
    row "Rss KiB of librxe*, from tmpfs" "lower is better" "${lib[stock]:-}" "${lib[rxe_rs]:-}"
    unset fig lib
fi

[[ $parts == *e* ]] && echo "-- (e) what the kernel receives for one 8-byte WRITE, per provider"
[[ $parts == *e* ]] && for p in "${providers[@]}"; do
    with_provider "$p" "$dir/dump.$p.served" "$dir/verbs-dump" dump write 3 > "$dir/dump.$p.log" 2>&1 &&
        expect_provider "$dir/dump.$p.served" "$p" || { echo "  $p: dump failed"; tail -n 20 "$dir/dump.$p.log"; }
    echo "  $p: the uverbs mappings' non-zero 8-byte words at each POST_SEND doorbell:"
    sed 's/^/    /' "$dir/dump.$p.log"
done
[[ $parts == *e* ]] && { echo "  diff stock rxe_rs:"; diff "$dir/dump.stock.log" "$dir/dump.rxe_rs.log" | sed 's/^/    /'; }
[[ $parts == *e* ]] && for p in "${providers[@]}"; do
    echo "  $p: strace -c -f of verbs-bench rate write $iters ($iters + 1000 warm-up pairs)"
    with_provider "$p" "$dir/strace.$p.served" strace -c -f -o "$dir/strace.$p.txt" "$bench" rate write "$iters" \
        > "$dir/strace.$p.log" 2>&1 || echo "  $p: strace run failed"
    sed 's/^/    /' "$dir/strace.$p.log" "$dir/strace.$p.txt"
done

echo "-- summary (ratio = rxe_rs / stock)"
printf '%-34s %14s %14s %8s\n' "" stock rxe_rs ratio
printf '%s\n' "${summary[@]}"
