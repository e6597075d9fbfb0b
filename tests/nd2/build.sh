#!/usr/bin/env bash
# Builds the ND2 example programs (tests/nd2/*.cpp with g++, and the C ND2 client nd2-bindio.c
# with gcc) against nd-shim's ND2 headers only,
# linked with -lnd_shim from target/release (cargo build --release first; it makes the link
# libnd_shim.so.0 there with tests/link-libs.sh), into target/nd2/ (or
# ND2_OUT). Rebuilds a program only when it is older than its source, the shared headers, the ND2
# headers or the library; with ND2_CHECK_ONLY=1, only fails if one would be rebuilt.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${ND2_OUT:-$root/target/nd2}
lib=$root/target/release/libnd_shim.so
[[ -f $lib ]] || { echo "build.sh: $lib missing (cargo build --release first)" >&2; exit 1; }
if [[ -z ${ND2_CHECK_ONLY:-} ]]; then
    mkdir -p "$out"
    "$root/tests/link-libs.sh" "$root/target/release" # the programs ask for libnd_shim.so.0
fi
for src in "$root"/tests/nd2/*.cpp "$root"/tests/nd2/nd2-bindio.c; do
    bin=$out/$(basename "${src%.*}")
    if [[ -x $bin && $bin -nt $src && $bin -nt $root/tests/nd2/nd2-common.h && $bin -nt $root/tests/nd2/nd2-check.h && $bin -nt $root/tests/bench/thread-counts.h && $bin -nt $root/tests/bench/round-trips.h && $bin -nt $lib ]] &&
        [[ -z $(find "$root/nd-shim/include/nd2" -newer "$bin") ]]; then
        continue
    fi
    [[ -z ${ND2_CHECK_ONLY:-} ]] || { echo "$bin is missing or stale"; exit 1; }
    if [[ $src == *.c ]]; then
        compile=(gcc -std=c11 -pthread)
    else
        compile=(g++ -std=c++11)
    fi
    echo "${compile[0]} $(basename "$src")"
    # A program that also calls libibverbs or librdmacm itself says so in a line "nd2-build: LIBS".
    read -ra extra <<< "$(sed -n 's/^ \* nd2-build: //p' "$src")"
    "${compile[@]}" -O2 -Wall -Wextra -Werror -I"$root/nd-shim/include/nd2" -o "$bin" "$src" \
        -L"$root/target/release" -lnd_shim -Wl,-rpath,"$root/target/release" "${extra[@]}"
done
