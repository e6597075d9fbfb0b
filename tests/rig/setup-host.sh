#!/usr/bin/env bash
# Installs everything the build and the VM rig need on a fresh Debian 12 machine (run as root).
# Idempotent: a second run only checks. `tests/rig/setup-host.sh --check` installs nothing and
# exits non-zero naming what is missing.
#
# What it puts on the host: the Debian packages below (apt); virtme-ng from PyPI in its own
# virtual environment, $RIG_VENV (Debian's python3 -m venv: the system Python stays untouched, as
# PEP 668 asks), whose vng the rig scripts put on PATH themselves; and, under $RIG_CACHE/debs,
# ibverbs-providers' .deb for the packages suite's reinstall (apt-get download); and, with rustup,
# a nightly toolchain with miri and rust-src (tests/check.sh's Miri step, and its ThreadSanitizer
# step's -Zbuild-std; docs/safety.md) and its Miri sysroot (`cargo +nightly miri setup`). Nothing
# else.
set -euo pipefail

# Debian packages: the kernel the rig boots (with rdma_rxe.ko), QEMU and the busybox virtme-ng puts
# in its initramfs, the real rdma-core userspace and its peers, and the build's needs (cmake and
# libclang for rdma-mummy-sys' bindgen, gcc and clang for the C layout probes and the rig's
# provider probe), rpm and dpkg-dev (dpkg-shlibdeps) for packaging/build.sh, lintian and rpmlint
# for the packages suite, man-db and groff-base for tests/man-check.sh (lintian needs them too),
# python3-venv for virtme-ng's environment, debootstrap for tests/rig/fresh-machine.sh; for the
# aarch64 build, Debian's cross toolchain (gcc-aarch64-linux-gnu, whose binutils strip the arm64
# packages) and arm64 libc (libc6-dev-arm64-cross: the linker's and the aarch64 layout test's),
# qemu-user, whose qemu-aarch64 runs that test (.cargo/config.toml), and qemu-system-arm and cpio
# (its initramfs) for tests/rig/arm64's guest; gdb, which nd2-stress runs in the guest (from this
# root) to print every thread's stack when a phase overruns.
APT_PACKAGES=(
    linux-image-amd64 qemu-system-x86 busybox-static udev iproute2 kmod procps
    rdma-core ibverbs-providers ibverbs-utils rdmacm-utils perftest python3-pyverbs
    libibverbs-dev librdmacm-dev
    gcc g++ clang libclang-dev cmake pkg-config valgrind rpm
    qperf
    dpkg-dev lintian rpmlint man-db groff-base
    python3-venv debootstrap
    gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user qemu-system-arm cpio
    gdb
)
# The Rust targets beside the host's (rustup, with the toolchain's own components).
RUST_TARGETS=(aarch64-unknown-linux-gnu)
VIRTME_NG_VERSION=1.42
RIG_VENV=${RIG_VENV:-/opt/rxe-rs-rig/venv}
RIG_CACHE=${RIG_CACHE:-/var/cache/rxe-rs-rig}

missing_packages() {
    local p
    for p in "${APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || echo "$p"
    done
}

have_vng() { [[ -x $RIG_VENV/bin/vng ]] && "$RIG_VENV/bin/vng" --version > /dev/null 2>&1; }

# The installed ibverbs-providers' own .deb (the packages suite reinstalls it under rxe-rs).
providers_deb() {
    local version
    version=$(dpkg-query -W -f='${Version}' ibverbs-providers 2>/dev/null) || return 1
    echo "$RIG_CACHE/debs/ibverbs-providers_${version/*:/}_amd64.deb"
}

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
        echo "setup-host: missing virtme-ng (vng) in $RIG_VENV, from PyPI" >&2
        exit 1
    fi
    echo "setup-host: installing virtme-ng $VIRTME_NG_VERSION from PyPI into $RIG_VENV"
    # Debian's own Python, whatever else is first on PATH.
    /usr/bin/python3 -m venv "$RIG_VENV"
    "$RIG_VENV/bin/python" -m pip install -q --disable-pip-version-check "virtme-ng==$VIRTME_NG_VERSION"
    have_vng || { echo "setup-host: $RIG_VENV/bin/vng does not run after installing virtme-ng" >&2; exit 1; }
fi

deb=$(providers_deb)
if [[ ! -f $deb ]]; then
    if $check_only; then
        echo "setup-host: missing $deb" >&2
        exit 1
    fi
    mkdir -p "${deb%/*}"
    # As root into a root-owned folder: no sandbox user (_apt) for this one download.
    (cd "${deb%/*}" && apt-get download -q -o APT::Sandbox::User=root "ibverbs-providers=$(dpkg-query -W -f='${Version}' ibverbs-providers)")
fi

# The Debian headers of every line the layout tests compare with (outside the tree, fetched once).
if $check_only; then
    "$(dirname "${BASH_SOURCE[0]}")/fetch-headers.sh" --check
else
    "$(dirname "${BASH_SOURCE[0]}")/fetch-headers.sh"
fi

if ! command -v cargo >/dev/null 2>&1; then
    echo "setup-host: no Rust toolchain (cargo) on PATH; install one with rustup" >&2
    exit 1
fi

for target in "${RUST_TARGETS[@]}"; do
    rustup target list --installed 2>/dev/null | grep -x "$target" > /dev/null && continue
    if $check_only; then
        echo "setup-host: missing the Rust target $target (rustup target add $target)" >&2
        exit 1
    fi
    echo "setup-host: rustup target add $target"
    rustup target add "$target"
done

# Miri, ThreadSanitizer (rust-src, for -Zbuild-std; the TSan runtime comes with the toolchain's
# rust-std), the sanitized build and the fuzz smoke of tests/check.sh (docs/safety.md): the current
# nightly with miri and rust-src, whichever day's it is (nothing pinned: a fresh machine gets
# today's), Miri's sysroot, built once, and cargo-fuzz; each installed only when absent.
have_miri() { rustup run nightly cargo miri --version > /dev/null 2>&1; }
if $check_only; then
    have_miri || { echo "setup-host: missing: the nightly toolchain with miri (rustup toolchain install nightly --profile minimal --component miri,rust-src)" >&2; exit 1; }
    cargo fuzz --version > /dev/null 2>&1 || { echo "setup-host: missing cargo-fuzz (cargo install --locked cargo-fuzz)" >&2; exit 1; }
else
    if ! have_miri; then
        command -v rustup > /dev/null 2>&1 || { echo "setup-host: Miri needs rustup" >&2; exit 1; }
        rustup toolchain install nightly --profile minimal --component miri,rust-src
    fi
    cargo +nightly miri setup > /dev/null
    cargo fuzz --version > /dev/null 2>&1 || cargo install --locked cargo-fuzz
fi
