#!/usr/bin/env bash
# The demo: boots the rig once and shows rxe0 through our provider and through the stock one, a
# ping-pong between rxe1 and rxe0, an ND2 C++ program over rxe_rs, and which provider library
# served each process.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

tests/rig/setup-host.sh
cargo build --release --workspace
tests/link-libs.sh
tests/nd2/build.sh
exec tests/rig/vm run -- 'bash "$RIG_ROOT/tests/rig/guest/demo.sh"'
