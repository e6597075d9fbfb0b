#!/usr/bin/env bash
# The README's quick starts for a machine with rxe and for an ND porter, run in the guest as
# written, from a scratch directory that holds the tree's target/, tests/ and nd-shim/ (the tree
# itself is read-only here), with the packages installed (the packages suite calls this between
# its install and its remove). Not run, each for its reason: `rdma link add ... eth0` (the rig's
# rxe0 is on veth0, made at boot), `apt install` of Debian packages (no network in the guest) and
# of ./target/packages/*.deb (the suite installed them with dpkg -i), and `cargo build`/
# `tests/link-libs.sh`/`packaging/build.sh` (the host built the tree, its links and the packages). app.cpp and app.c, which the
# porter's lines compile, are a minimal ND2 program and the NDK program of docs/status.md.
# Prints each command with its output; exits 1 on the first that fails or does not say what its
# README comment promises.
set -uo pipefail
: "${RIG_ROOT:?}" "${RIG_OUT:?}"

work=$(mktemp -d -p "$RIG_OUT" readme.XXXXXX) || { echo "mktemp in $RIG_OUT failed"; exit 1; }
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
ln -s "$RIG_ROOT/target" "$RIG_ROOT/tests" "$RIG_ROOT/nd-shim" .

cat > app.cpp << 'CPP'
#include <ndsupport.h>
#include <arpa/inet.h>
#include <stdio.h>

int main()
{
    sockaddr_in address = {};
    address.sin_family = AF_INET;
    inet_pton(AF_INET, "198.18.0.1", &address.sin_addr);
    if (FAILED(NdStartup()))
        return 1;
    IND2Adapter *adapter = nullptr;
    HRESULT hr = NdOpenAdapter(IID_IND2Adapter, reinterpret_cast<const sockaddr *>(&address),
                               sizeof(address), reinterpret_cast<void **>(&adapter));
    printf("NdOpenAdapter: 0x%08x\n", static_cast<unsigned>(hr));
    if (SUCCEEDED(hr))
        adapter->Release();
    NdCleanup();
    return FAILED(hr);
}
CPP
# The NDK program of docs/status.md, as a reader would copy it.
awk '/^```c$/ { on = 1; next } on && /^```$/ { exit } on' "$RIG_ROOT/docs/status.md" > app.c
[[ -s app.c ]] || { echo "no C program in docs/status.md"; exit 1; }

# The lines of the two sections' sh blocks, comments cut (a "# ..." after the command says what
# it prints), the ones the rig cannot run left out.
mapfile -t lines < <(awk '
    /^## Quick start: a machine with rxe/ || /^## Quick start: an ND porter/ { section = 1; next }
    /^## / { section = 0 }
    section && /^```sh$/ { block = 1; next }
    block && /^```$/ { block = 0; next }
    block { print }' "$RIG_ROOT/README.md")
((${#lines[@]} > 10)) || { echo "found only ${#lines[@]} lines in README's quick starts"; exit 1; }

check_promise() { # check_promise PROMISE OUTPUT: what a README comment says the output shows
    local word
    for word in "state ACTIVE" PORT_ACTIVE "rxe_rs: claimed the device" "-lnd_shim"; do
        if [[ $1 == *"$word"* && $2 != *"$word"* ]]; then
            echo "the README promises '$word'"
            return 1
        fi
    done
}

ran=0 output=
for line in "${lines[@]}"; do
    # A comment is two or more spaces, then "# "; a line of comment only speaks of the command before.
    command=$(sed -E 's/[[:space:]]{2,}#[[:space:]].*$//; s/^[[:space:]]*#[[:space:]].*$//' <<< "$line")
    promise=$(sed -nE 's/^(.*[[:space:]]{2,}|[[:space:]]*)#[[:space:]](.*)$/\2/p' <<< "$line")
    if [[ -z ${command//[[:space:]]/} ]]; then
        check_promise "$promise" "$output" || exit 1
        continue
    fi
    case $command in
        "rdma link add "* | "apt install "* | "cargo build"*) echo "not run: $command"; continue ;;
    esac
    echo "\$ $command"
    output=$(bash -c "$command" 2>&1 < /dev/null)
    status=$?
    [[ -n $output ]] && sed 's/^/  /' <<< "$output"
    ((status == 0)) || { echo "exit $status"; exit 1; }
    check_promise "$promise" "$output" || exit 1
    ran=$((ran + 1))
done
# The porter's programs run, and the probe saw rxe_rs serve.
for app in ./app; do
    "$app" || { echo "$app failed"; exit 1; }
done
grep -q ' rxe0 rxe_rs ' /tmp/served || { echo "/tmp/served names no rxe0 served by rxe_rs"; exit 1; }
echo "$ran of ${#lines[@]} README lines ran as written"
