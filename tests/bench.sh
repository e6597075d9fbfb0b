#!/usr/bin/env bash
# Benchmarks: programs that print figures, never pass/fail on a time (docs/design.md). Boots the
# rig once and runs tests/bench/NAME.sh for each NAME (all of tests/bench/*.sh without one) in the
# guest, one after the other; each script prints its own figures. Output and logs: RIG_OUT.
#
#   tests/bench.sh [NAME...]
#
# Build first: cargo build --release --workspace.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

names=("$@")
if ((${#names[@]} == 0)); then
    mapfile -t names < <(find tests/bench -name '*.sh' -printf '%f\n' | sed 's/\.sh$//' | sort)
fi
for name in "${names[@]}"; do
    [[ -f tests/bench/$name.sh ]] || { echo "bench: no tests/bench/$name.sh" >&2; exit 2; }
done

job='status=0'
for name in "${names[@]}"; do
    printf -v line '\necho "== bench %s"; RIG_SUITE=bench-%s bash "$RIG_ROOT/tests/bench/%s.sh" || status=1' \
        "$name" "$name" "$name"
    job+=$line
done
job+=$'\nexit $status'
tests/rig/vm run -- "$job"
