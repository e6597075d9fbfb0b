#!/usr/bin/env bash
# Fetches, once, the C headers the host layout tests compare our mirrors with, for every line
# Debian ships: libibverbs-dev and linux-libc-dev of bookworm, trixie and sid (apt-get download),
# for amd64 and for arm64, unpacked into $RIG_CACHE/headers/<suite>/ (amd64) and
# $RIG_CACHE/headers/<suite>.arm64/ (default /var/cache/rxe-rs-rig), outside the tree, with the
# package versions in VERSIONS. The tests read them there and need no network (the aarch64 run
# of the layout tests, under qemu-aarch64, reads the .arm64 ones with the arm64 libc headers of
# libc6-dev-arm64-cross).
#
# apt runs with its own sources list, lists and archive cache under $RIG_CACHE/apt/<suite>/, so
# the host's sources and what it installs by default are neither used nor changed.
#
#   tests/rig/fetch-headers.sh          fetch what is missing
#   tests/rig/fetch-headers.sh --check  fetch nothing; exit non-zero naming the missing suites
set -euo pipefail

SUITES=(bookworm trixie sid)
# Debian architecture -> the folder suffix its headers go in.
declare -A ARCH_SUFFIX=([amd64]='' [arm64]=.arm64)
MIRROR=http://deb.debian.org/debian
cache=${RIG_CACHE:-/var/cache/rxe-rs-rig}

complete() { [[ -e $cache/headers/$1/VERSIONS ]]; }

if [[ ${1:-} == --check ]]; then
    missing=()
    for suite in "${SUITES[@]}"; do
        for arch in "${!ARCH_SUFFIX[@]}"; do
            complete "$suite${ARCH_SUFFIX[$arch]}" || missing+=("$suite${ARCH_SUFFIX[$arch]}")
        done
    done
    if ((${#missing[@]})); then
        echo "fetch-headers: no headers for ${missing[*]} in $cache/headers" >&2
        exit 1
    fi
    exit 0
fi

# The suite being fetched unpacks into a scratch folder; a failure (or an interrupt) leaves none.
work=
trap 'rm -rf "$work"' EXIT

fetch_suite() {
    local suite=$1 arch=$2 dir=$1${ARCH_SUFFIX[$2]}
    local apt_dir=$cache/apt/$dir
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$cache/headers"
    printf 'deb %s %s main\n' "$MIRROR" "$suite" >"$apt_dir/sources.list"
    # An empty dpkg status: the suite's own versions are the candidates, not the host's.
    : >"$apt_dir/status"
    local apt=(apt-get -q
        -o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
        -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
        -o "Dir::State::status=$apt_dir/status" -o APT::Sandbox::User=root
        -o "APT::Architecture=$arch" -o "APT::Architectures::=$arch"
        # Signatures are checked; the Release file's Valid-Until is not: a mirror that lags (or a
        # snapshot of one) serves a sid whose Release has expired, and headers do not go stale.
        -o Acquire::Check-Valid-Until=false)
    work=$(mktemp -d "$cache/headers/.$dir.XXXXXX")
    "${apt[@]}" update >"$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; return 1; }
    mkdir "$work/deb" "$work/root"
    (cd "$work/deb" && "${apt[@]}" download libibverbs-dev linux-libc-dev) >>"$work/apt.log" 2>&1 ||
        { cat "$work/apt.log" >&2; return 1; }
    local deb
    for deb in "$work"/deb/*.deb; do
        dpkg-deb -x "$deb" "$work/root"
        dpkg-deb --show --showformat='${Package} ${Version}\n' "$deb" >>"$work/root/VERSIONS"
    done
    rm -rf "$cache/headers/$dir"
    mv "$work/root" "$cache/headers/$dir"
    rm -rf "$work"
    work=
    echo "fetch-headers: $suite ($arch): $(paste -sd';' "$cache/headers/$dir/VERSIONS")"
}

for suite in "${SUITES[@]}"; do
    for arch in amd64 arm64; do
        complete "$suite${ARCH_SUFFIX[$arch]}" || fetch_suite "$suite" "$arch"
    done
done
