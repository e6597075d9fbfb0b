#!/usr/bin/env bash
# tests/link-libs.sh [DIR...]: the names the libraries are loaded by, as links beside what cargo
# built in each DIR (default: target/release), for use from the tree without installing:
# - librxe_rs-rdmav<PABI>.so -> librxe_rs.so for each private ABI in provider/pabis.txt:
#   libibverbs loads `RDMAV_DRIVERS=DIR/librxe_rs` as DIR/librxe_rs-rdmav<PABI>.so (it appends
#   `-rdmav<PABI>.so`), and cargo cannot put a hyphen in a library's file name;
# - libnd_shim.so.0 -> libnd_shim.so, the SONAME (read from the library) that programs linked with
#   `-L DIR -lnd_shim` ask for at run time.
# A library DIR does not hold is skipped (a build of the provider only); a DIR with neither fails.
# Run after every `cargo build` whose output a program loads from the tree: tests/check.sh,
# tests/demo.sh, tests/sanitize-build.sh, tests/nd2/build.sh and packaging/build.sh call it.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
(($#)) || set -- "$root/target/release"
read -ra pabis < "$root/provider/pabis.txt"
((${#pabis[@]})) || { echo "link-libs: no private ABI in provider/pabis.txt" >&2; exit 1; }
for dir; do
    made=0
    if [[ -f $dir/librxe_rs.so ]]; then
        for pabi in "${pabis[@]}"; do
            ln -sfn librxe_rs.so "$dir/librxe_rs-rdmav$pabi.so"
        done
        made=1
    fi
    if [[ -f $dir/libnd_shim.so ]]; then
        soname=$(readelf -d "$dir/libnd_shim.so" | sed -n 's/.*Library soname: \[\(.*\)\]$/\1/p')
        [[ -n $soname ]] || { echo "link-libs: $dir/libnd_shim.so has no SONAME" >&2; exit 1; }
        ln -sfn libnd_shim.so "$dir/$soname"
        made=1
    fi
    ((made)) || { echo "link-libs: neither librxe_rs.so nor libnd_shim.so in $dir (cargo build first)" >&2; exit 1; }
done
