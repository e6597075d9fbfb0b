#!/usr/bin/env bash
# The other Debian lines, each in its own userland and kernel, and two machines: tests/check.sh runs
# the lines beside its Debian 12 boot and the two machines after it (docs/lines.md has the
# times). Builds nothing: run by tests/check.sh, or alone after `cargo build --release --workspace
# && tests/nd2/build.sh && packaging/build.sh`.
#
#   tests/lines.sh [--lines-only] [LINE...]    LINE: trixie, sid (default: both), then the
#                                              two-guest run (not with --lines-only)
#   tests/lines.sh --two-guests-only           the two-guest run alone (tests/check.sh starts it
#                                              once no other guest runs: two guests are two
#                                              cores' work, and a third guest beside them slows
#                                              all three past their peers' timeouts)
#
# Per line, one boot: provider-load, packages, pyverbs (stock and rxe_rs, compared test by test)
# and peers-rxe_rs; results in target/rig/LINE/. Then tests/rig/two-guests (Debian 12 server,
# Debian 13 client; RIG_DEBIAN picks the client's line). The roots are made on the first run
# (tests/rig/make-root.sh: 89 s and 127 s at once on a quiet host; tests/check.sh makes them
# while it builds). Every boot prints its time.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

two_guests=true run_lines=true
case ${1:-} in
--lines-only) two_guests=false; shift ;;
--two-guests-only) run_lines=false; shift ;;
esac
lines=("$@")
((${#lines[@]})) || lines=(trixie sid)
$run_lines || lines=()
status=0
# The peers on each line: rxe_rs against itself and against stock, as server on Debian 13 and
# as client on sid (Debian 12's boot runs all three pairings); about 100 s less per line.
declare -A pairings=([trixie]="rxe_rs-rxe_rs rxe_rs-stock" [sid]="rxe_rs-rxe_rs stock-rxe_rs")
for line in ${lines[@]+"${lines[@]}"}; do
    echo "== $line: provider-load packages pyverbs peers-rxe_rs"
    started=$SECONDS
    RIG_PEERS_PAIRINGS=${RIG_PEERS_PAIRINGS:-${pairings[$line]:-}} RIG_DEBIAN=$line RIG_OUT=$PWD/target/rig/$line \
        tests/rig/vm suites provider-load packages pyverbs peers-rxe_rs || status=1
    echo "== $line: $((SECONDS - started)) s"
done
if $two_guests; then
    echo "== two guests"
    started=$SECONDS
    tests/rig/two-guests || status=1
    echo "== two guests: $((SECONDS - started)) s"
fi
exit "$status"
