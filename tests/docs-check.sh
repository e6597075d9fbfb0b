#!/usr/bin/env bash
# The documents' cheap checks, on the host: every relative link of README.md and docs/*.md names
# a file or directory of the tree (and, for a link into a Markdown file with #anchor, a heading
# of that file), every tests/ or packaging/ script README's sh blocks run exists and is
# executable, and the supported rdma-core range agrees between the provider, the packages and
# the documents.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
status=0
fail() { echo "docs-check: $*" >&2; status=1; }

# GitHub's anchor of a heading: lower case, punctuation but - and _ dropped, spaces to -.
anchors() {
    sed -n 's/^#\{1,6\} \(.*\)$/\1/p' "$1" | tr '[:upper:]' '[:lower:]' |
        sed -e 's/[^a-z0-9 _-]//g' -e 's/ /-/g'
}

links=0
for doc in README.md docs/*.md; do
    dir=$(dirname "$doc")
    # [text](target): targets without a scheme, outside code spans.
    while IFS= read -r target; do
        [[ $target == *://* || $target == mailto:* ]] && continue
        links=$((links + 1))
        file=${target%%#*}
        anchor=
        [[ $target == *#* ]] && anchor=${target#*#}
        [[ -z $file ]] && file=$(basename "$doc")
        path=$dir/$file
        if [[ ! -e $path ]]; then
            fail "$doc: link to $target: no $path"
        elif [[ -n $anchor && $path == *.md ]] && ! anchors "$path" | grep -qxF "$anchor"; then
            fail "$doc: link to $target: $path has no heading with anchor #$anchor"
        fi
    done < <(sed -e 's/`[^`]*`//g' "$doc" | grep -oE '\]\([^) ]+\)' | sed -e 's/^](//' -e 's/)$//')
done

# The scripts README's sh blocks run (tests/demo.sh, tests/check.sh, packaging/build.sh, ...).
mapfile -t scripts < <(awk '/^```sh/{on=1; next} /^```/{on=0} on' README.md |
    grep -oE '(^|[ ;&(])(tests|packaging)/[A-Za-z0-9_./-]+' | sed -E 's/^[ ;&(]//' | sort -u)
for script in "${scripts[@]}"; do
    if [[ $script == *.c || $script == *.cpp ]]; then
        [[ -f $script ]] || fail "README.md runs $script, which does not exist"
    else
        [[ -x $script ]] || fail "README.md runs $script, which is not an executable file"
    fi
done

# The rdma-core releases rxe_rs serves: RELEASES in provider/src/libibverbs/layout.rs, which its
# refusals print, and any "vN to vM" in that file's text. The packages' dependency on libibverbs (libibverbs_upper
# in packaging/build.sh, per private ABI) stops just above the newest; every "v<oldest> to v<N>"
# in the README, the docs and the man pages ends at the newest release or at the last release
# of a private ABI (v36 to v56: ABI 34), never anywhere else.
mapfile -t ranges < <({
    sed -n 's/^pub const RELEASES: .* = \([0-9]*\)\.\.=\([0-9]*\);/v\1 to v\2/p' provider/src/libibverbs/layout.rs
    grep -ohE 'v[0-9]+ to v[0-9]+' provider/src/libibverbs/layout.rs
} | sort -u)
if ((${#ranges[@]} != 1)); then
    fail "provider/src/libibverbs/layout.rs states ${#ranges[@]} release ranges (${ranges[*]:-none}) in RELEASES and its text, not one"
else
    range=${ranges[0]}
    oldest=${range%% *}
    newest=${range##* v}
    read -ra pabis < provider/pabis.txt
    ((${#pabis[@]})) || fail "provider/pabis.txt names no private ABI"
    ends=()
    for pabi in "${pabis[@]}"; do
        below=$(sed -n "s/.*[ (]$pabi) echo \([0-9]*\) ;;.*/\1/p" packaging/build.sh)
        [[ -n $below ]] || fail "packaging/build.sh: libibverbs_upper does not know private ABI $pabi"
        ends+=($((below - 1)))
    done
    [[ ${ends[-1]:-} == "$newest" ]] ||
        fail "packaging/build.sh: the newest private ABI's releases end at v${ends[-1]:-?}; the provider serves $range"
    while IFS= read -r hit; do
        end=${hit##*v}
        [[ " ${ends[*]} " == *" $end "* ]] || fail "${hit%:*}: '${hit#*:*:}' ends at no private ABI's last release (${ends[*]}); the provider serves $range"
    done < <(grep -onE "$oldest to v[0-9]+" README.md docs/*.md man/man*/*)
fi

((status == 0)) && echo "docs-check: $links relative links resolve; README's ${#scripts[@]} scripts exist (${scripts[*]}); the release range $range agrees"
exit "$status"
