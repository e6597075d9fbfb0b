#!/usr/bin/env bash
# The rig's entry point inside the guest: sets up rxe0/rxe1, then runs either the named suites
# (tests/suites/NAME.sh) or the job file the host wrote, and prints the totals.
# Usage (from tests/rig/vm): run.sh suites NAME... | run.sh job FILE
set -u
export RIG_ROOT RIG_OUT
source "$RIG_ROOT/tests/rig/guest/lib.sh"

rig_setup_network || { rig_log "could not set up rxe0/rxe1"; exit 2; }
: > "$RIG_RESULTS"

mode=$1
shift
case $mode in
    job)
        bash "$1"
        exit $?
        ;;
    suites)
        for suite in "$@"; do
            file=$RIG_ROOT/tests/suites/$suite.sh
            [[ -f $file ]] || { rig_log "no suite $suite ($file)"; record fail "$suite" "no such suite"; continue; }
            echo "== suite $suite"
            started=$SECONDS
            RIG_SUITE=$suite bash "$file"
            status=$?
            ((status == 0)) || grep -q "^$suite	fail	" "$RIG_RESULTS" ||
                RIG_SUITE=$suite record fail "$suite" "suite script exited $status"
            echo "== suite $suite done in $((SECONDS - started)) s"
        done
        echo "== results"
        for suite in "$@"; do
            p=$(grep -c "^$suite	pass	" "$RIG_RESULTS")
            f=$(grep -c "^$suite	fail	" "$RIG_RESULTS")
            printf '%-24s %4d passed, %d failed\n' "$suite" "$p" "$f"
        done
        p=$(grep -c "	pass	" "$RIG_RESULTS")
        f=$(grep -c "	fail	" "$RIG_RESULTS")
        echo "rig: $p passed, $f failed"
        ((f == 0 && p > 0))
        ;;
    *)
        rig_log "usage: run.sh suites NAME... | run.sh job FILE"
        exit 2
        ;;
esac
