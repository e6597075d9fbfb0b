# sanitized: rxe_rs and nd-shim built with AddressSanitizer (nightly -Zsanitizer=address, into
# target/asan by tests/sanitize-build.sh, which tests/check.sh runs) under the multi-threaded
# verbs programs (verbs-stress, split start/end pairs, the RESET purge against two pollers) and
# the whole nd2 suite, over rxe_rs. Every process runs with GCC's libasan preloaded (the C
# programs and libibverbs are not instrumented; the Rust libraries are, and ASan's allocator
# checks every heap access they make). A case passes when its program does; the suite passes
# only when ASan wrote no report (ASAN_OPTIONS log_path: one file per process that had one).
# Leak checking is off here: the C test programs and perftest do not free everything at exit.
source "$RIG_ROOT/tests/rig/guest/lib.sh"

asan_dir=$RIG_ROOT/target/asan/x86_64-unknown-linux-gnu/release
if [[ ! -e $asan_dir/librxe_rs.so || ! -e $asan_dir/libnd_shim.so ]]; then
    record fail asan-build "no ASan build in $asan_dir: run tests/sanitize-build.sh on the host"
    exit 0
fi
libasan=$(ls /usr/lib/x86_64-linux-gnu/libasan.so.[0-9]* 2> /dev/null | head -n 1)
[[ -n $libasan ]] || { record fail libasan "no libasan.so in the guest (Debian: libasan8)"; exit 0; }

reports=$RIG_OUT/asan
verbs_dir=$RIG_OUT/sanitized-verbs
mkdir -p "$reports" "$verbs_dir"
if ! TMPDIR=$verbs_dir "$RIG_ROOT/tests/verbs/build.sh" "$verbs_dir" stress split-pairs > "$RIG_OUT/logs/$RIG_SUITE.build.log" 2>&1; then
    record fail build "gcc against libibverbs, log: logs/$RIG_SUITE.build.log"
    exit 0
fi

# From here on every process: the instrumented libraries first, libasan preloaded (after the
# rig's probe, which with_provider puts first: hence verify_asan_link_order=0).
export RIG_OURS_PREFIX=$asan_dir/librxe_rs
export LD_LIBRARY_PATH=$asan_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_PRELOAD=$libasan
export ASAN_OPTIONS=log_path=$reports/asan:verify_asan_link_order=0:detect_leaks=0:halt_on_error=0

verbs_run() { # verbs_run PROGRAM ARGS...: over rxe_rs, served by the ASan build
    local program=$1 served=$RIG_OUT/sanitized.${*// /_}.served RIG_TIMEOUT=300
    shift
    rm -f "$served"
    with_provider rxe_rs "$served" "$verbs_dir/$program" "$@" || return 1
    served_by "$served"
    expect_provider "$served" rxe_rs &&
        grep -q "$asan_dir/librxe_rs" "$served" || { echo "not served by the ASan build"; return 1; }
}
run_test stress.rxe_rs verbs_run verbs-stress "${RIG_STRESS_SENDS:-20000}"
run_test split-pairs.rxe_rs verbs_run verbs-split-pairs 100
run_test split-pairs-td.rxe_rs verbs_run verbs-split-pairs 100 td
run_test purge-abba.rxe_rs verbs_run verbs-split-pairs 10 abba

# The nd2 suite as it is, over rxe_rs, its programs finding the ASan libnd_shim first; but for
# memory-lifetime-rss, whose flat-RSS bound ASan's quarantine of freed blocks breaks (17 MB over
# 10^5 MRs, held by ASan, not by nd-shim: the plain nd2 suite runs it).
RIG_SUITE=sanitized-nd2 RIG_ND_PROVIDERS=rxe_rs RIG_SKIP=memory-lifetime-rss.rxe_rs bash "$RIG_ROOT/tests/suites/nd2.sh"

unset LD_PRELOAD
asan_reports() {
    local found
    found=$(find "$reports" -type f -name 'asan.*' | sort)
    [[ -z $found ]] && { echo "no ASan report"; return 0; }
    echo "ASan reports:"
    for f in $found; do
        echo "== $f"
        head -n 60 "$f"
    done
    return 1
}
run_test asan-reports-none asan_reports
