#!/usr/bin/env bash
# Builds the NDK-face conformance program against nd-shim's C header and shared library:
# build.sh OUT_DIR [LIB_DIR]. LIB_DIR (default: target/release of this tree) holds libnd_shim.so;
# the program finds it there at run time through its rpath.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${1:?usage: build.sh OUT_DIR [LIB_DIR]}
lib=${2:-$root/target/release}
mkdir -p "$out"
gcc -std=c11 -O2 -g -Wall -Wextra -Werror -pthread \
    -I "$root/nd-shim/include" \
    -o "$out/ndk-conformance" "$root/tests/ndk-conformance/ndk_conformance.c" \
    -L "$lib" -Wl,-rpath,"$lib" -lnd_shim
