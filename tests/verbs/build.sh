#!/usr/bin/env bash
# Builds the libibverbs consumers of tests/verbs (verbs-stress, verbs-bench, verbs-diff, verbs-contended) with gcc
# against the system's libibverbs: build.sh OUT_DIR [NAME...] (NAME: stress, bench, diff, contended; default
# all). The rig suites build what they run in the guest, into RIG_OUT.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:?usage: build.sh OUT_DIR [NAME...]}
shift
mkdir -p "$out"
(($#)) || set -- stress bench diff contended
for prog in "$@"; do
    gcc -std=gnu11 -O2 -g -Wall -Wextra -Werror -pthread \
        -o "$out/verbs-$prog" "$here/$prog.c" "$here/loopback.c" -libverbs -ldl
done
