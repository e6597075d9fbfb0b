# rdma-core's pyverbs conformance suite, the copy Debian's python3-pyverbs ships (some modules
# gzip-compressed), against rxe0 with each provider in RIG_PYVERBS_PROVIDERS (default: stock).
# A provider passes when its run has no failure or error beyond the ones expected of this kernel.
source "$RIG_ROOT/tests/rig/guest/lib.sh"

PYVERBS_TESTS=/usr/share/doc/rdma-core/tests
# Kernel 6.1's rxe has no atomic write: the test errors with the stock provider too.
EXPECTED_ERRORS="test_qp_ex_rc_atomic_write"

tests_dir=$(mktemp -d)
cp -r "$PYVERBS_TESTS" "$tests_dir/tests"
gunzip -f "$tests_dir"/tests/*.gz

pyverbs_run() { # pyverbs_run PROVIDER
    local provider=$1
    local log=$RIG_OUT/logs/pyverbs.$provider.log served=$RIG_OUT/pyverbs.$provider.served
    # The system interpreter: python3-pyverbs is built for it, not for a python3 earlier on PATH.
    RIG_TIMEOUT=1800 with_provider "$provider" "$served" \
        /usr/bin/python3 "$tests_dir/tests/run_tests.py" --dev rxe0 -v > "$log" 2>&1
    local ran passed skipped failed errors unexpected
    ran=$(sed -n 's/^Ran \([0-9]*\) tests\? in.*/\1/p' "$log")
    skipped=$(grep -cE '\.\.\. skipped' "$log")
    failed=$(grep -cE '\.\.\. FAIL$' "$log")
    errors=$(grep -cE '\.\.\. ERROR$' "$log")
    passed=$(grep -cE '\.\.\. ok$' "$log")
    echo "  pyverbs with $provider: ran ${ran:-0}, $passed passed, $skipped skipped, $failed failed, $errors errors"
    echo "  served:"
    served_by "$served"
    unexpected=$(grep -E '\.\.\. (FAIL|ERROR)$' "$log" | awk '{print $1}' |
        grep -vxF -f <(tr ' ' '\n' <<< "$EXPECTED_ERRORS") || true)
    if [[ -z $ran ]]; then
        record fail "pyverbs-$provider" "the suite did not finish; log: logs/pyverbs.$provider.log"
        tail -n 20 "$log" | sed 's/^/    | /'
    elif [[ -n $unexpected ]]; then
        record fail "pyverbs-$provider" "unexpected: $(echo $unexpected)"
    elif ! expect_provider "$served" "$provider"; then
        record fail "pyverbs-$provider" "rxe0 was not served by $provider"
    else
        record pass "pyverbs-$provider" "$passed of $ran passed, $skipped skipped, $((failed + errors)) expected errors"
    fi
}

for provider in ${RIG_PYVERBS_PROVIDERS:-stock}; do
    pyverbs_run "$provider"
done
