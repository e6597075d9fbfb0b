#!/usr/bin/env bash
# The fresh-machine check: tests/rig/setup-host.sh on a plain Debian 12 whose only Python is
# Debian's (PEP 668's EXTERNALLY-MANAGED in place), in a debootstrapped root used as a chroot.
# It must install everything, leave the system Python alone (virtme-ng in its own environment)
# and then pass its own --check; vng must run from where the rig scripts look for it.
#
# The Rust toolchain is the README's prerequisite, not something setup-host.sh installs: the
# host's rustup toolchain is bind-mounted read-only (and the check fails without one).
#
# Cost: the debootstrapped root and the downloaded .debs stay in /var/cache/rxe-rs-rig/
# fresh-bookworm/ (first run: about 2 minutes of debootstrap); each run copies the pristine
# root and runs the setup in the copy. When setup-host.sh (and fetch-headers.sh, which it runs) is unchanged since a run that passed,
# the check says so and stops (FRESH_MACHINE_FORCE=1 runs it anyway). It prints its time.
#
#   tests/rig/fresh-machine.sh            (root; network to the Debian archive and PyPI)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cache=/var/cache/rxe-rs-rig/fresh-bookworm
pristine=$cache/pristine
chroot_dir=$cache/run
started=$SECONDS
die() { echo "fresh-machine: $*" >&2; exit 1; }
say() { echo "fresh-machine: $*"; }

((EUID == 0)) || die "run as root (debootstrap, chroot)"
command -v debootstrap > /dev/null || die "debootstrap is missing (tests/rig/setup-host.sh installs it)"
cargo_home=$(dirname "$(dirname "$(command -v cargo)")") || die "no cargo on PATH"
rustup_home=${RUSTUP_HOME:-$HOME/.rustup}

# The setup is setup-host.sh and the scripts it runs.
setup_sum=$(cat "$root/tests/rig/setup-host.sh" "$root/tests/rig/fetch-headers.sh" | sha256sum | cut -d' ' -f1)
if [[ -z ${FRESH_MACHINE_FORCE:-} && -f $cache/passed && $(cat "$cache/passed") == "$setup_sum" ]]; then
    say "setup-host.sh ($setup_sum) passed here before: not run again (FRESH_MACHINE_FORCE=1 to run)"
    exit 0
fi

if [[ ! -f $pristine/.complete ]]; then
    say "debootstrapping Debian 12 (bookworm, minbase) into $pristine"
    rm -rf "$pristine"
    mkdir -p "$cache/archives"
    debootstrap --variant=minbase --cache-dir="$cache/archives" bookworm "$pristine" \
        http://deb.debian.org/debian > "$cache/debootstrap.log" 2>&1 ||
        { tail -n 20 "$cache/debootstrap.log"; die "debootstrap failed"; }
    touch "$pristine/.complete"
    say "debootstrapped in $((SECONDS - started)) s"
fi

mounted=()
cleanup() {
    local m
    for ((m = ${#mounted[@]} - 1; m >= 0; m--)); do umount -l "${mounted[m]}" 2> /dev/null || true; done
}
trap cleanup EXIT
bind() { # bind SOURCE TARGET [ro]
    mkdir -p "$2"
    mount --bind "$1" "$2"
    mounted+=("$2")
    [[ ${3:-} != ro ]] || mount -o remount,bind,ro "$2"
}

# The toolchain is the host's, read-only in the chroot: the Rust targets setup-host.sh adds to it
# (RUST_TARGETS there) are added here first, as setup-host.sh would on the host.
mapfile -t rust_targets < <(sed -n 's/^RUST_TARGETS=(\(.*\))$/\1/p' "$root/tests/rig/setup-host.sh" | tr ' ' '\n')
for target in "${rust_targets[@]}"; do
    rustup target list --installed | grep -x "$target" > /dev/null || rustup target add "$target"
done

rm -rf "$chroot_dir"
cp -a "$pristine" "$chroot_dir"
cp /etc/resolv.conf "$chroot_dir/etc/resolv.conf"
# The network is the host's: where the host reaches PyPI through a TLS-intercepting proxy with
# its own CA (pip's "cert" in /etc/pip.conf), the chroot gets that CA and pip setting too.
# Nothing else of the host's Python set-up goes in.
host_pip_cert=$(sed -n 's/^[[:space:]]*cert[[:space:]]*=[[:space:]]*//p' /etc/pip.conf 2> /dev/null | head -n 1)
if [[ -n $host_pip_cert && -f $host_pip_cert ]]; then
    cp "$host_pip_cert" "$chroot_dir/etc/rxe-rs-rig-host-ca.crt"
    printf '[global]\ncert = /etc/rxe-rs-rig-host-ca.crt\n' > "$chroot_dir/etc/pip.conf"
fi
mount -t proc proc "$chroot_dir/proc"
mounted+=("$chroot_dir/proc")
bind /dev "$chroot_dir/dev"
bind /sys "$chroot_dir/sys" ro
bind "$cache/archives" "$chroot_dir/var/cache/apt/archives"
bind "$root" "$chroot_dir/src" ro
bind "$cargo_home" "$chroot_dir/opt/rust/cargo" ro
bind "$rustup_home" "$chroot_dir/opt/rust/rustup" ro
# No services start in the chroot while packages install.
printf '#!/bin/sh\nexit 101\n' > "$chroot_dir/usr/sbin/policy-rc.d"
chmod 0755 "$chroot_dir/usr/sbin/policy-rc.d"

in_chroot() {
    chroot "$chroot_dir" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
        PATH=/opt/rust/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        CARGO_HOME=/opt/rust/cargo RUSTUP_HOME=/opt/rust/rustup "$@"
}

say "the chroot's Pythons: $(in_chroot sh -c 'ls /usr/bin/python3* /usr/local/bin/python* 2>/dev/null | tr "\n" " "')"

log=$cache/setup-host.log
say "running tests/rig/setup-host.sh in the chroot (log: $log)"
if ! in_chroot bash /src/tests/rig/setup-host.sh > "$log" 2>&1; then
    tail -n 30 "$log"
    die "setup-host.sh failed on a fresh Debian 12 after $((SECONDS - started)) s"
fi
in_chroot bash /src/tests/rig/setup-host.sh --check || die "setup-host.sh --check fails right after the setup"
# PEP 668 held: the system Python has nothing from PyPI, and pip still refuses to write to it.
in_chroot sh -c 'ls /usr/lib/python3*/EXTERNALLY-MANAGED' ||
    die "Debian's EXTERNALLY-MANAGED marker is gone"
if in_chroot /usr/bin/python3 -c 'import virtme_ng' 2> /dev/null; then
    die "virtme-ng went into the system Python"
fi
in_chroot /opt/rxe-rs-rig/venv/bin/vng --version || die "vng does not run from /opt/rxe-rs-rig/venv"
echo "$setup_sum" > "$cache/passed"
say "passed in $((SECONDS - started)) s"
