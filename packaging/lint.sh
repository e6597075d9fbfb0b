#!/usr/bin/env bash
# The packages packaging/build.sh made, linted as a distribution would: lintian (findings of every
# kind but info and pedantic fail; those print) and rpmlint with packaging/rpmlint.toml (0 errors,
# 0 warnings). tests/check.sh runs it on the host; the rig's packages suite runs it when asked to
# (RIG_PACKAGES_LINTED unset), with the same tools, since the guest's userland is the host's.
#
#   packaging/lint.sh [deb|rpm]    (both without an argument)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
packages=$root/target/packages

lint_debs() {
    lintian --fail-on error,warning "$packages"/*.deb
}

lint_rpms() {
    local out
    out=$(rpmlint -c "$root/packaging/rpmlint.toml" "$packages"/*.rpm 2>&1)
    echo "$out"
    grep -q ' 0 errors, 0 warnings, ' <<< "$out"
}

case ${1:-all} in
    deb) lint_debs ;;
    rpm) lint_rpms ;;
    all) lint_debs && lint_rpms ;;
    *) echo "usage: packaging/lint.sh [deb|rpm]" >&2; exit 2 ;;
esac
