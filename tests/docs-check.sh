#!/usr/bin/env bash
# The documents' cheap checks, on the host: every relative link of README.md and docs/*.md names
# a file or directory of the tree (and, for a link into a Markdown file with #anchor, a heading
# of that file), and every tests/ or packaging/ script README's sh blocks run exists and is
# executable.
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

((status == 0)) && echo "docs-check: $links relative links resolve; README's ${#scripts[@]} scripts exist (${scripts[*]})"
exit "$status"
