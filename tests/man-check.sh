#!/usr/bin/env bash
# The man pages of man/ (installed by packaging/build.sh): each renders through groff with every
# warning on (-ww) and through man(1) as lintian runs it, and any warning fails; every ".so" page
# points at a page that exists; every C function that ndk_shim.h and ndsupport.h declare has a
# page of its own name (a full page or a ".so" link to one).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
status=0
fail() { echo "man-check: $*" >&2; status=1; }

mapfile -t pages < <(find man -name '*.[1-9]' | sort)
((${#pages[@]})) || fail "no pages under man/"
for page in "${pages[@]}"; do
    target=$(sed -n '1s|^\.so \(man[0-9]/.*\)$|\1|p' "$page")
    if [[ -n $target ]]; then
        [[ -f man/$target ]] || fail "$page: .so $target, which does not exist"
        continue
    fi
    warnings=$(cd man && groff -s -man -Tutf8 -ww -z "${page#man/}" 2>&1) || fail "$page: groff failed"
    [[ -z $warnings ]] || fail "$page: groff: $warnings"
    # What lintian's manpages check runs (man-db's --warnings: groff's -w mac and others).
    warnings=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 -Z "$page" 2>&1 > /dev/null) ||
        fail "$page: man -l failed"
    [[ -z $warnings ]] || fail "$page: man: $warnings"
    grep -q '^\.SH NAME$' "$page" || fail "$page: no NAME section"
done

# The C entry points: every function the two public headers declare (not the dispatch tables'
# members, which ndk_shim.h itself documents and NdkOpenAdapter(3) lists).
mapfile -t functions < <(grep -hoE '^[A-Z][A-Za-z_ ]+ ([A-Z_]+ )?(Nd[A-Za-z0-9]+|Dll[A-Za-z]+)\(' \
    nd-shim/include/ndk_shim.h nd-shim/include/nd2/ndsupport.h | grep -oE '[A-Za-z0-9]+\($' | tr -d '(')
((${#functions[@]} >= 10)) || fail "found only ${#functions[@]} functions in the headers: ${functions[*]}"
for f in "${functions[@]}"; do
    [[ -f man/man3/$f.3 ]] || fail "$f (declared in nd-shim/include) has no man/man3/$f.3"
done

((status == 0)) && echo "man-check: ${#pages[@]} pages render without a warning; ${#functions[@]} C functions each have one"
exit "$status"
