# rdma-core's pyverbs conformance suite, the copy Debian's python3-pyverbs ships (some modules
# gzip-compressed), with each provider in RIG_PYVERBS_PROVIDERS (default: both; both run at once,
# stock on rxe0 and rxe_rs on rxe1, see the end; one alone runs on rxe0). Each test's seconds are
# recorded with its outcome and the 10 slowest of each run are printed.
# A provider passes when its run has no failure or error beyond the ones expected of this kernel.
# When both stock and rxe_rs run, rxe_rs must also match stock test by test: pass what stock
# passes, run what stock runs, and fail nothing stock does not, except for the known gaps listed
# in pyverbs-rxe_rs-known-gaps.txt.
source "$RIG_ROOT/tests/rig/guest/lib.sh"

PYVERBS_TESTS=/usr/share/doc/rdma-core/tests
# Tests that error with the stock provider too on this guest's kernel: not held against either
# provider, and not compared (a lucky pass with stock is no verdict on rxe_rs).
# Kernel 6.1's rxe has no atomic write.
EXPECTED_ERRORS="tests.test_qpex.QpExTestCase.test_qp_ex_rc_atomic_write"
# Kernel 6.12 (Debian 13): test_resize_cq's six UD sends are polled after a resize of the CQ and
# one is missing at its poll timeout: 11 of 12 runs with stock in one boot (1 passed).
case $(uname -r) in
    6.12.*) EXPECTED_ERRORS+=" tests.test_cq.CQTest.test_resize_cq" ;;
esac
# Tests that kill the interpreter on a line with the stock provider, and so are not run there by
# either (the comparison needs both runs whole): on rdma-core 56 (Debian 13), DvCqTest's traffic
# tests (test_dv_cq_cqe_size_128, then test_dv_cq_cqe_size_64 when the first is left out) create
# mlx5 DV resources on rxe, closing their CQ fails with EBADF and Python dies of SIGSEGV with
# stock, ending the suite (with rxe_rs the same EBADF, no crash). The whole class is left out.
# FlowTest the same way: its raw packet QP is refused (type 8) after its CQ was made, and a
# later garbage collection closes that CQ with EBADF with both providers; with stock, on 56,
# Python died of SIGSEGV in the next test class but one (test_mlx5_crypto), with rxe_rs the run
# went on. Every FlowTest test skips with both providers where it runs.
# rdma-core 65 (sid) has the same tests unchanged; left out there too without having been seen
# to crash.
# (The arm64 guest's initramfs has no dpkg database: Debian 12 there, nothing to leave out.)
case $(dpkg-query -W -f='${Version}' python3-pyverbs 2> /dev/null) in
    56.* | 65.*) export PYVERBS_EXCLUDE="tests.test_mlx5_cq.DvCqTest tests.test_flow.FlowTest" ;;
esac

MAX_CRASHES=5
outcomes() { echo "$RIG_OUT/pyverbs.$1.outcomes"; }
count() { awk -F'\t' -v o="$2" '$2 == o' "$(outcomes "$1")" | wc -l; }

# pyverbs_tests PROVIDER DEVICE: the suite with PROVIDER on DEVICE, into the outcomes file; fails
# when it did not finish. Prints nothing: both providers' runs can go at once (see the end).
pyverbs_tests() {
    local provider=$1 device=$2
    local log=$RIG_OUT/logs/pyverbs.$provider.log served=$RIG_OUT/pyverbs.$provider.served
    local file current status resume= crashed=0 tests_dir
    file=$(outcomes "$provider")
    rm -f "$file" "$file.current" "$log" "$served"
    # A copy of the suite for each run: the interpreter writes its __pycache__ into it.
    tests_dir=$(mktemp -d)
    cp -r "$PYVERBS_TESTS" "$tests_dir/tests"
    gunzip -f "$tests_dir"/tests/*.gz
    # A test that kills the interpreter is recorded as crashed and the run goes on past it (at
    # most MAX_CRASHES times): the stock provider of rdma-core 56 dies of SIGSEGV at a place that
    # moves from run to run.
    while :; do
        # The system interpreter: python3-pyverbs is built for it, not for a python3 earlier on PATH.
        status=0
        RIG_TIMEOUT=1800 with_provider "$provider" "$served" env PYVERBS_RESUME="$resume" /usr/bin/python3 \
            "$RIG_ROOT/tests/rig/guest/pyverbs_run.py" "$tests_dir/tests" "$file" \
            --dev "$device" -v >> "$log" 2>&1 || status=$?
        # The test that was running when the interpreter died, if it did.
        current=$(cat "$file.current" 2> /dev/null || true)
        rm -f "$file.current"
        [[ -n $current ]] && ((crashed < MAX_CRASHES)) || break
        # (It may have died between tests, with this one's outcome written.)
        awk -F'\t' -v id="$current" '$1 == id { found = 1 } END { exit !found }' "$file" 2> /dev/null ||
            printf '%s\tcrash\tthe interpreter died in it (exit status %s); the run went on past it\t\n' \
                "$current" "$status" >> "$file"
        echo "== pyverbs_run.py died in or after $current (exit status $status): the rest of the suite again" >> "$log"
        crashed=$((crashed + 1))
        resume=1
    done
    rm -rf "$tests_dir"
    [[ -s $file && -z $current ]]
}

# pyverbs_verdict PROVIDER DEVICE FINISHED: the counts, the slowest tests and the result of the run
# pyverbs_tests made (FINISHED: its status, 0 when it finished).
pyverbs_verdict() {
    local provider=$1 device=$2 finished=$3
    local log=$RIG_OUT/logs/pyverbs.$provider.log served=$RIG_OUT/pyverbs.$provider.served file
    file=$(outcomes "$provider")
    if ((finished != 0)); then
        record fail "pyverbs-$provider" "the suite did not finish; log: logs/pyverbs.$provider.log"
        tail -n 20 "$log" | sed 's/^/    | /'
        return
    fi
    local ran passed skipped broken unexpected
    ran=$(($(wc -l < "$file") - $(count "$provider" excluded)))
    passed=$(count "$provider" pass)
    skipped=$(count "$provider" skip)
    broken=$(($(count "$provider" fail) + $(count "$provider" error)))
    echo "  pyverbs with $provider on $device: ran $ran, $passed passed, $skipped skipped," \
        "$(count "$provider" fail) failed, $(count "$provider" error) errors, $(count "$provider" crash) crashed," \
        "$(count "$provider" excluded) not run (PYVERBS_EXCLUDE)"
    echo "  the 10 slowest tests with $provider (seconds, setUp and tearDown included):"
    awk -F'\t' '$4 != ""' "$file" | sort -t $'\t' -k4,4gr | head -n 10 |
        awk -F'\t' '{ printf "    %7.2f  %s (%s)\n", $4, $1, $2 }'
    echo "  served:"
    served_by "$served"
    awk -F'\t' '$2 == "crash" { printf "    | crashed: %s\n", $1 }' "$file"
    # A crash is held against rxe_rs; the stock provider's own crashes are reported, and the
    # comparison leaves those tests out.
    # (Files, not process substitution: the arm64 guest's /dev/fd is made by hand, and a failed
    # grep here or join below would read as "nothing unexpected".)
    local expected=$RIG_OUT/pyverbs.expected-errors
    tr ' ' '\n' <<< "$EXPECTED_ERRORS" > "$expected"
    unexpected=$(awk -F'\t' -v p="$provider" '$2 == "fail" || $2 == "error" || ($2 == "crash" && p != "stock") { print $1 }' "$file" |
        grep -vxF -f "$expected")
    (($? < 2)) || { record fail "pyverbs-$provider" "grep could not read $expected"; return; }
    if [[ -n $unexpected ]]; then
        record fail "pyverbs-$provider" "unexpected failures: $(echo $unexpected)"
        awk -F'\t' '$2 == "fail" || $2 == "error" || $2 == "crash" { printf "    | %s: %s\n", $1, $3 }' "$file"
    elif ! expect_provider "$served" "$provider"; then
        record fail "pyverbs-$provider" "$device was not served by $provider"
    else
        record pass "pyverbs-$provider" "$passed of $ran passed, $skipped skipped, $broken expected errors, $(count "$provider" crash) crashed"
    fi
}

# Tests rxe_rs does not match stock on yet, each with the reason; the list only shrinks. A test
# that becomes worse and is not listed fails the comparison, and so does a listed test that now
# matches (take it off the list).
KNOWN_GAPS=$RIG_ROOT/tests/suites/pyverbs-rxe_rs-known-gaps.txt

# compare_with_stock: rxe_rs against stock, test by test.
compare_with_stock() {
    local stock ours
    stock=$(outcomes stock)
    ours=$(outcomes rxe_rs)
    [[ -s $stock && -s $ours ]] || { record fail pyverbs-rxe_rs-vs-stock "a run is missing"; return; }
    local worse=$RIG_OUT/pyverbs.worse known=$RIG_OUT/pyverbs.known-gaps joined=$RIG_OUT/pyverbs.joined
    cut -f1,2 "$stock" | sort > "$RIG_OUT/pyverbs.stock.sorted"
    sort "$ours" > "$RIG_OUT/pyverbs.rxe_rs.sorted"
    join -t $'\t' -a 1 -e missing -o 0,1.2,2.2,2.3 "$RIG_OUT/pyverbs.stock.sorted" "$RIG_OUT/pyverbs.rxe_rs.sorted" > "$joined" ||
        { record fail pyverbs-rxe_rs-vs-stock "join failed"; return; }
    (($(wc -l < "$joined") >= $(wc -l < "$stock"))) ||
        { record fail pyverbs-rxe_rs-vs-stock "$(wc -l < "$joined") of stock's $(wc -l < "$stock") tests joined"; return; }
    awk -F'\t' '
        $2 == "crash" { next }
        $2 == "pass" && $3 != "pass" { printf "%s\tstock passes, rxe_rs %s (%s)\n", $1, $3, $4; next }
        $2 != "skip" && $3 == "skip" { printf "%s\tstock runs it, rxe_rs skips (%s)\n", $1, $4; next }
        ($3 == "fail" || $3 == "error" || $3 == "crash") && $2 != $3 { printf "%s\trxe_rs %s, stock %s (%s)\n", $1, $3, $2, $4 }' "$joined" |
        awk -F'\t' -v expected="$EXPECTED_ERRORS" 'BEGIN { n = split(expected, e, " "); for (i = 1; i <= n; i++) skip[e[i]] = 1 }
            !($1 in skip)' | sort > "$worse"
    sed 's/[[:space:]]*#.*//; /^$/d' "$KNOWN_GAPS" | sort -u > "$known"
    local regressions stale
    regressions=$(join -t $'\t' -v 1 "$worse" "$known")
    stale=$(join -t $'\t' -v 2 "$worse" "$known")
    echo "  rxe_rs vs stock: $(wc -l < "$worse") tests not matched yet, $(wc -l < "$known") listed as known gaps"
    if [[ -n $regressions || -n $stale ]]; then
        record fail pyverbs-rxe_rs-vs-stock \
            "$(grep -c . <<< "$regressions") worse and not listed, $(grep -c . <<< "$stale") listed but matching now"
        [[ -n $regressions ]] && sed 's/^/    | worse: /; s/\t/: /' <<< "$regressions"
        [[ -n $stale ]] && sed 's/^/    | matches now, take off the list: /' <<< "$stale"
    else
        record pass pyverbs-rxe_rs-vs-stock "no test worse than stock beyond the $(wc -l < "$known") known gaps"
    fi
}

providers=${RIG_PYVERBS_PROVIDERS:-stock rxe_rs}
both=
[[ " $providers " == *" stock "* && " $providers " == *" rxe_rs "* ]] && both=1
# With both providers the two runs go at once, stock on rxe0 and rxe_rs on rxe1 (the rig's two
# devices, alike but for their veth and address): the suite takes about the longer run's time, not the
# sum, when the guest's two vCPUs have the host's cores. Neither run can
# reach the other's objects: every test keeps to the device it is given, the rdmacm tests listen
# on a fixed port (7471) of the device's own address and join a multicast group made from that
# address (230.x.y.z from 198.18.0.x), so each run has its own, and no test changes the device,
# the port, the GID table or the network. What they share is the two vCPUs: the tests' own time
# limits (10 s for a CQ poll, 15 s for the rdmacm tests' two processes) are above the slowest whole
# test's time, which the verdicts print (sid, both at once on a loaded host: 8.9 s, a multicast
# rdmacm test with stock; Debian 12: 2.4 s). RIG_PYVERBS_SERIAL=1 runs them one after the other,
# both on rxe0.
declare -A device pid finished
for provider in $providers; do
    device[$provider]=rxe0
done
if [[ -n $both && -z ${RIG_PYVERBS_SERIAL:-} ]]; then
    device[rxe_rs]=rxe1
    echo "  stock on rxe0 and rxe_rs on rxe1 at once"
    for provider in $providers; do
        pyverbs_tests "$provider" "${device[$provider]}" &
        pid[$provider]=$!
    done
    for provider in $providers; do
        finished[$provider]=0
        wait "${pid[$provider]}" || finished[$provider]=$?
    done
else
    for provider in $providers; do
        finished[$provider]=0
        pyverbs_tests "$provider" "${device[$provider]}" || finished[$provider]=$?
    done
fi
for provider in $providers; do
    pyverbs_verdict "$provider" "${device[$provider]}" "${finished[$provider]}"
done
[[ -n $both ]] && compare_with_stock
true
