# An A/B of libnd_shim builds in one boot: tests/bench/nd2.sh once per library, in the order
# given, each pass's callgrind files kept in RIG_OUT/bench-nd2-passN/ (nd2.sh writes them to
# RIG_OUT/bench-nd2/, which the next pass overwrites). A library is a directory holding a
# libnd_shim.so.0, given to the programs through LD_LIBRARY_PATH, or `tree` for the tree's own
# (the programs' RUNPATH). On the instruction clock the passes' figures compare directly:
#   RIG_CLOCK=instructions RIG_BENCH_STRACE_ITERS=0 tests/rig/vm run -- \
#       'bash "$RIG_ROOT/tests/rig/guest/nd2-ab.sh" tree /tmp/candidate'
# The nd2.sh settings (RIG_BENCH_ROUNDS, ...) apply to every pass.
(($# > 0)) || { echo "usage: nd2-ab.sh tree|DIR [tree|DIR...]" >&2; exit 2; }
for lib in "$@"; do
    [[ $lib == tree || -e $lib/libnd_shim.so.0 ]] || { echo "nd2-ab: no $lib/libnd_shim.so.0" >&2; exit 2; }
done
cd "$RIG_ROOT" || exit 1
pass=0
for lib in "$@"; do
    pass=$((pass + 1))
    echo "=== pass $pass: $lib"
    if [[ $lib == tree ]]; then
        RIG_SUITE=bench-nd2-ab$pass bash tests/bench/nd2.sh
    else
        LD_LIBRARY_PATH=$lib RIG_SUITE=bench-nd2-ab$pass bash tests/bench/nd2.sh
    fi
    if [[ -d $RIG_OUT/bench-nd2 ]]; then
        rm -rf "$RIG_OUT/bench-nd2-pass$pass"
        cp -r "$RIG_OUT/bench-nd2" "$RIG_OUT/bench-nd2-pass$pass"
    fi
done
