#!/bin/bash
# The guest side of `tests/rig/arm64 suites` (run by tests/rig/arm64-init, from this tree mounted
# read-only at /rig; /out is target/rig/arm64-suites/out/ on the host). What a Debian root would
# have mounted, then tests/rig/guest/run.sh with the suites the host named in /out/env, as in the
# x86 guest. Prints arm64-guest: lines, "arm64-guest: passed" when run.sh passed.
set -u
up() { cut -d' ' -f1 /proc/uptime; }
mount -t tmpfs tmpfs /tmp
mkdir -p /dev/shm /run /dev/pts
mount -t tmpfs shm /dev/shm   # Python's multiprocessing (the rdmacm tests) wants it
mount -t tmpfs run /run
mount -t devpts devpts /dev/pts
# What udev makes on a Debian root: bash's process substitution reads /dev/fd/N.
ln -sfn /proc/self/fd /dev/fd
ln -sf /proc/self/fd/0 /dev/stdin
ln -sf /proc/self/fd/1 /dev/stdout
ln -sf /proc/self/fd/2 /dev/stderr
hostname arm64-guest
source /out/env
export RIG_ROOT=/rig RIG_OUT=/out
export RIG_OURS_PREFIX=/rig/target/aarch64-unknown-linux-gnu/release/librxe_rs
# rdma_ucm: /dev/infiniband/rdma_cm (rdma-core's udev rules load it on a Debian root).
for module in veth crc32_generic rdma_rxe rdma_ucm; do
    modprobe "$module" || echo "arm64-guest: modprobe $module failed"
done
echo "arm64-guest: suites $RIG_SUITES at $(up) s ($(nproc) cpus, $(cat /etc/debian_version))"
# shellcheck disable=SC2086 # the names, separated by spaces
bash "$RIG_ROOT/tests/rig/guest/run.sh" suites $RIG_SUITES 2>&1 | tee /out/run.log | sed 's/^/arm64-guest| /'
status=${PIPESTATUS[0]}
if ((status == 0)); then
    echo "arm64-guest: passed at $(up) s"
else
    echo "arm64-guest: FAILED (run.sh exit $status) at $(up) s"
fi
sync
