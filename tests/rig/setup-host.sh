#!/usr/bin/env bash
# Installs everything the build and the VM rig need on a fresh Debian 12 machine (run as root).
# Idempotent: a second run only checks. `tests/rig/setup-host.sh --check` installs nothing and
# exits non-zero naming what is missing.
set -euo pipefail

# Debian packages: the kernel the rig boots (with rdma_rxe.ko), QEMU and the busybox virtme-ng puts
# in its initramfs, the real rdma-core userspace and its peers, and the build's needs (cmake and
# libclang for rdma-mummy-sys' bindgen, gcc and clang for the C layout probes and the rig's
# provider probe), and rpm for packaging/build.sh.
APT_PACKAGES=(
    linux-image-amd64 qemu-system-x86 busybox-static udev iproute2 kmod procps
    rdma-core ibverbs-providers ibverbs-utils rdmacm-utils perftest python3-pyverbs
    libibverbs-dev librdmacm-dev
    gcc g++ clang libclang-dev cmake pkg-config valgrind rpm
)
VIRTME_NG_VERSION=1.42

missing_packages() {
    local p
    for p in "${APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || echo "$p"
    done
}

have_vng() { command -v vng >/dev/null 2>&1; }

check_only=false
[[ ${1:-} == --check ]] && check_only=true

mapfile -t missing < <(missing_packages)
if ((${#missing[@]})); then
    if $check_only; then
        echo "setup-host: missing Debian packages: ${missing[*]}" >&2
        exit 1
    fi
    echo "setup-host: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if ! have_vng; then
    if $check_only; then
        echo "setup-host: missing virtme-ng (vng), from PyPI" >&2
        exit 1
    fi
    echo "setup-host: installing virtme-ng $VIRTME_NG_VERSION from PyPI"
    python3 -m pip install -q "virtme-ng==$VIRTME_NG_VERSION"
    hash -r
    have_vng || { echo "setup-host: vng is not on PATH after installing virtme-ng" >&2; exit 1; }
fi

if ! command -v cargo >/dev/null 2>&1; then
    echo "setup-host: no Rust toolchain (cargo) on PATH; install one with rustup" >&2
    exit 1
fi
