#!/usr/bin/env bash
# Makes, once, the root filesystem of a Debian line's own guest: debootstrap of SUITE (trixie,
# sid) with that line's kernel, rdma-core, its peers and python3-pyverbs, into
# $RIG_CACHE/<suite>/ (default /var/cache/rxe-rs-rig), outside the tree. A finished root has
# $RIG_CACHE/<suite>/.rxe-rs-root (the package versions); an unfinished one is made again.
#
#   tests/rig/make-root.sh SUITE           make it if missing
#   tests/rig/make-root.sh --check SUITE   make nothing; exit non-zero if missing
set -euo pipefail

MIRROR=http://deb.debian.org/debian
# As the host's APT_PACKAGES in setup-host.sh, for what the guest runs.
PACKAGES=(
    linux-image-amd64 kmod udev iproute2 procps
    rdma-core ibverbs-providers ibverbs-utils rdmacm-utils perftest python3-pyverbs
    libstdc++6 # the ND2 programs of tests/nd2 (C++), which peers-rxe_rs runs on these lines
)

check_only=false
[[ ${1:-} == --check ]] && { check_only=true; shift; }
suite=${1:?usage: make-root.sh [--check] SUITE}
cache=${RIG_CACHE:-/var/cache/rxe-rs-rig}
root=$cache/$suite
marker=$root/.rxe-rs-root

[[ -e $marker ]] && exit 0
if $check_only; then
    echo "make-root: no $suite root in $root (tests/rig/make-root.sh $suite makes it)" >&2
    exit 1
fi

# One maker per root: a second rig run of that line (two engineers, or the lines run beside
# another) waits here for the root instead of removing it half-made.
mkdir -p "$cache"
exec {lock}>"$cache/make-root-$suite.lock"
flock "$lock"
[[ -e $marker ]] && exit 0

rm -rf "$root.partial"
started=$SECONDS
echo "make-root: debootstrap $suite into $root (once; several minutes)"
debootstrap --variant=minbase --include="$(IFS=,; echo "${PACKAGES[*]}")" "$suite" "$root.partial" "$MIRROR" \
    >"$cache/make-root-$suite.log" 2>&1 || {
    tail -20 "$cache/make-root-$suite.log" >&2
    exit 1
}
chroot "$root.partial" dpkg-query -W -f='${Package} ${Version}\n' "${PACKAGES[@]}" >"$root.partial/.rxe-rs-root"
rm -rf "$root"
mv "$root.partial" "$root"
echo "make-root: $suite root made in $((SECONDS - started)) s: $(paste -sd';' "$marker")"
