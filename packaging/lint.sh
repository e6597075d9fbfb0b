#!/usr/bin/env bash
# The packages packaging/build.sh made, linted as a distribution would: lintian (findings of every
# kind but info and pedantic fail; those print) and rpmlint with packaging/rpmlint.toml (0 errors,
# 0 warnings). tests/check.sh runs it on the host; the rig's packages suite runs it when asked to
# (RIG_PACKAGES_LINTED unset), with the same tools, since the guest's userland is the host's.
#
#   packaging/lint.sh [deb|rpm]    (both without an argument)
#   PACKAGE_ARCH=arm64 packaging/lint.sh   the arm64 ones (target/packages-arm64/)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# rpm_isa: rpm's %{_isa} of the packages' architecture. rpmlint takes it from the host's rpm macros
# (to see whether nd-shim-devel requires nd-shim%{?_isa}): for arm64 it is given aarch64's.
case ${PACKAGE_ARCH:-amd64} in
    amd64) packages=$root/target/packages rpm_isa= ;;
    arm64) packages=$root/target/packages-arm64 rpm_isa='(aarch-64)' ;;
    *) echo "packaging/lint.sh: PACKAGE_ARCH is amd64 or arm64, not '$PACKAGE_ARCH'" >&2; exit 2 ;;
esac

lint_debs() {
    lintian --fail-on error,warning "$packages"/*.deb
}

lint_rpms() {
    local out home=$HOME
    if [[ -n $rpm_isa ]]; then
        home=$(mktemp -d)
        echo "%_isa $rpm_isa" > "$home/.rpmmacros"
    fi
    out=$(HOME=$home rpmlint -c "$root/packaging/rpmlint.toml" "$packages"/*.rpm 2>&1) || true
    [[ $home == "$HOME" ]] || rm -rf "$home"
    echo "$out"
    grep -q ' 0 errors, 0 warnings, ' <<< "$out"
}

case ${1:-all} in
    deb) lint_debs ;;
    rpm) lint_rpms ;;
    all) lint_debs && lint_rpms ;;
    *) echo "usage: packaging/lint.sh [deb|rpm]" >&2; exit 2 ;;
esac
