# sanitized-tsan: rxe_rs built with ThreadSanitizer (nightly -Zsanitizer=thread -Zbuild-std, into
# target/tsan by `tests/sanitize-build.sh tsan`, which tests/check.sh runs beside the Debian 12 boot
# and which also builds the C programs below on the host) under the threaded verbs programs, over
# rxe_rs:
# - verbs-race (tests/verbs/race.c): posters, pollers, a QP churner, a thread resetting the churned
#   QPs while they are posted on, and one creating and destroying objects, on one context and one
#   shared CQ;
# - verbs-stress: six threads posting on four QPs (three on one), two pollers, QPs moved to error
#   and one destroyed under them;
# - verbs-split-pairs: verbs pairs opened on one thread and closed on another (also on a thread
#   domain), and the RESET purge "abba" (two threads, each inside a poll, resetting a QP of the
#   other's CQ).
# Fewer rounds than the plain suites: TSan slows the provider's code several times, and the check's
# Debian 12 boot is its longest path (the suite prints its time).
#
# The runtime: GCC's libtsan (Debian 12: libtsan2, which gcc pulls in), preloaded. rustc links its
# own TSan runtime (LLVM's compiler-rt) into executables only and ships no shared one: a cdylib's
# __tsan_* calls are left to the process's runtime. rustc's instrumentation calls the runtime's
# long-stable entry points (__tsan_read*/write*, __tsan_func_entry/exit, __tsan_atomic*,
# __tsan_init), which GCC 12's runtime has, and three that newer LLVM emits for the copies and fills
# the compiler makes (__tsan_memcpy/memmove/memset), which it has not: tests/tsan-rig-mem.c gives
# them, forwarding to the libc functions libtsan intercepts (the checks LLVM's runtime makes there).
# The C programs and libibverbs are not instrumented (no report can name their accesses), but the
# runtime's interceptors see their threads, mutexes, semaphores and barriers, malloc and free: the
# happens-before edges between the provider's accesses on different threads. The kernel's writes
# to the rings it shares with the provider are invisible to TSan (docs/safety.md).
# A case passes when its program does and TSan wrote no report for it (TSAN_OPTIONS log_path: a
# file per process that had one). Suppressions: tests/tsan-rig.supp (none so far).
source "$RIG_ROOT/tests/rig/guest/lib.sh"

# RIG_TSAN_DIR: another TSan build of librxe_rs (a planted race, to see the suite fail).
tsan_dir=${RIG_TSAN_DIR:-$RIG_ROOT/target/tsan/x86_64-unknown-linux-gnu/release}
# Built on the host by tests/sanitize-build.sh (the Debian 12 guest runs on the host's root).
verbs_dir=$RIG_ROOT/target/tsan/rig-verbs
mem_shim=$verbs_dir/libtsan-rig-mem.so
# tests/check.sh builds them beside this boot: wait for that build to end (it takes minutes; this
# suite comes half an hour into the boot).
pending=$RIG_ROOT/target/tsan/rig-build-pending
waited=0
while [[ -e $pending ]] && ((waited < ${RIG_TSAN_BUILD_WAIT:-1800})); do
    sleep 10
    waited=$((waited + 10))
done
((waited == 0)) || echo "  waited $waited s for the host's TSan build"
for f in "$tsan_dir/librxe_rs.so" "$verbs_dir/verbs-race" "$verbs_dir/verbs-stress" "$verbs_dir/verbs-split-pairs" "$mem_shim"; do
    [[ -e $f ]] || { record fail tsan-build "no $f: run tests/sanitize-build.sh tsan on the host"; exit 0; }
done
libtsan=$(ls /usr/lib/x86_64-linux-gnu/libtsan.so.[0-9]* 2> /dev/null | head -n 1)
[[ -n $libtsan ]] || { record fail libtsan "no libtsan.so in the guest (Debian: libtsan2)"; exit 0; }

reports=$RIG_OUT/tsan
rm -rf "$reports"
mkdir -p "$reports"

tsan_run() { # tsan_run CASE PROGRAM ARGS...: over rxe_rs, served by the TSan build
    local case=$1 program=$2 served=$RIG_OUT/sanitized-tsan.$1.served RIG_TIMEOUT=300
    local RIG_OURS_PREFIX=$tsan_dir/librxe_rs
    shift 2
    rm -f "$served"
    # halt_on_error=0: every report of the run is written, not only the first; the process then
    # exits 66, so a report fails the program as well as the check below.
    LD_PRELOAD=$libtsan:$mem_shim TSAN_OPTIONS="log_path=$reports/$case:halt_on_error=0:suppressions=$RIG_ROOT/tests/tsan-rig.supp" \
        with_provider rxe_rs "$served" "$verbs_dir/$program" "$@"
    local code=$?
    served_by "$served"
    local found
    found=$(find "$reports" -type f -name "$case.*" | sort)
    for f in $found; do
        echo "== ThreadSanitizer report $f"
        head -n 80 "$f"
    done
    ((code == 0)) || { echo "exit $code"; return 1; }
    [[ -z $found ]] || return 1
    echo "no ThreadSanitizer report"
    expect_provider "$served" rxe_rs &&
        grep -q "$tsan_dir/librxe_rs" "$served" || { echo "not served by the TSan build"; return 1; }
}

tsan_started=$SECONDS
run_test race.rxe_rs tsan_run race verbs-race "${RIG_TSAN_RACE_ROUNDS:-200}"
run_test stress.rxe_rs tsan_run stress verbs-stress "${RIG_TSAN_STRESS_SENDS:-10000}"
run_test split-pairs.rxe_rs tsan_run split-pairs verbs-split-pairs 100
run_test split-pairs-td.rxe_rs tsan_run split-pairs-td verbs-split-pairs 100 td
run_test purge-abba.rxe_rs tsan_run purge-abba verbs-split-pairs 10 abba
echo "  ThreadSanitizer cases: $((SECONDS - tsan_started)) s"
