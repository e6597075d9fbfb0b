#!/usr/bin/env bash
# Builds the libibverbs consumers of tests/verbs (verbs-stress, verbs-bench, verbs-diff,
# verbs-contended, verbs-split-pairs, verbs-disassociate, verbs-privdrop, verbs-churn, verbs-purge, verbs-race, verbs-baseline) with gcc
# against the system's libibverbs: build.sh OUT_DIR [NAME...] (NAME: stress, bench, diff, contended,
# split-pairs, disassociate, privdrop, churn, purge, race, baseline, dump (bench.c's ring dump); default all but
# race, which only the ThreadSanitizer suite runs). The rig suites build what they run in the guest, into RIG_OUT.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:?usage: build.sh OUT_DIR [NAME...]}
shift
mkdir -p "$out"
(($#)) || set -- stress bench diff contended dump split-pairs disassociate privdrop churn purge baseline
# The programs build at once (under the rig's emulation each gcc takes 5 to 10 s of one vCPU);
# each one's status is checked.
pids=()
for prog in "$@"; do
    # dump: bench.c with its own write(), exported (-rdynamic) so that it takes the provider's
    # doorbell; verbs-bench itself keeps libc's write() (the callgrind counts).
    src=$prog extra=()
    [[ $prog == dump ]] && src=bench extra=(-DVERBS_BENCH_DUMP -rdynamic)
    gcc "${extra[@]}" -std=gnu11 -O2 -g -Wall -Wextra -Werror -pthread \
        -o "$out/verbs-$prog" "$here/$src.c" "$here/loopback.c" -libverbs -ldl &
    pids+=($!)
done
failed=0
for pid in "${pids[@]}"; do
    wait "$pid" || failed=1
done
exit "$failed"
