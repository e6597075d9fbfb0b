# Our provider's loading path: libibverbs loads librxe_rs through RDMAV_DRIVERS, it registers and
# claims rxe0 and rxe1, and what it does not implement fails cleanly instead of claiming success.
source "$RIG_ROOT/tests/rig/guest/lib.sh"

devices_listed_by_ours() {
    local served=$RIG_OUT/provider-load.devices.served
    local listing
    listing=$(with_provider rxe_rs "$served" ibv_devices) || return 1
    echo "$listing"
    served_by "$served"
    grep -qw rxe0 <<< "$listing" || return 1
    # libibverbs loads the library named after its private ABI (34 on Debian 12 and 13, 65 on sid).
    local pabi
    pabi=$(rig_pabi) || return 1
    grep -q " listed rxe0 rxe_rs $RIG_OURS_PREFIX-rdmav$pabi.so\$" "$served" &&
        grep -q " listed rxe1 rxe_rs $RIG_OURS_PREFIX-rdmav$pabi.so\$" "$served"
}
run_test ibv_devices-served-by-rxe_rs devices_listed_by_ours

# ibv_devinfo -v opens the device and queries device and port through our own kernel commands; it
# must print what the stock provider prints.
devinfo_matches_stock() {
    local served=$RIG_OUT/provider-load.devinfo.served
    with_provider stock /dev/null ibv_devinfo -v -d rxe0 > "$RIG_OUT/devinfo.stock" || return 1
    with_provider rxe_rs "$served" ibv_devinfo -v -d rxe0 > "$RIG_OUT/devinfo.rxe_rs" || return 1
    served_by "$served"
    expect_provider "$served" rxe_rs &&
        diff -u "$RIG_OUT/devinfo.stock" "$RIG_OUT/devinfo.rxe_rs" &&
        echo "identical: $(wc -l < "$RIG_OUT/devinfo.rxe_rs") lines"
}
run_test ibv_devinfo-same-as-stock devinfo_matches_stock

# A libibverbs whose file name carries no release (a developer's build, a distribution's renamed
# copy): the guest's own, copied as $dir/libibverbs.so.1 and found first through LD_LIBRARY_PATH.
# rxe_rs takes every layout from its exports and what its ibv_qp_to_qp_ex answers, never from the
# name: it registers with that copy (VERBS_LOG_FILE names it) and the ibv_wr_* path of an
# ibv_qp_ex works (verbs-split-pairs: ibv_create_qp_ex, ibv_wr_start/ibv_wr_send/ibv_wr_complete,
# ibv_start_poll, 200 rounds).
nameless_libibverbs_served_by_exports() {
    local real dir log=$RIG_OUT/provider-load.nameless.verbs.log served=$RIG_OUT/provider-load.nameless.served
    real=$(readlink -f /usr/lib/x86_64-linux-gnu/libibverbs.so.1)
    dir=$(mktemp -d)
    cp "$real" "$dir/libibverbs.so.1" || return 1
    echo "$real copied as $dir/libibverbs.so.1"
    TMPDIR=$RIG_OUT "$RIG_ROOT/tests/verbs/build.sh" "$RIG_OUT/provider-load" split-pairs || return 1
    rm -f "$log" "$served"
    LD_LIBRARY_PATH=$dir VERBS_LOG_LEVEL=4 VERBS_LOG_FILE=$log \
        with_provider rxe_rs "$served" "$RIG_OUT/provider-load/verbs-split-pairs" 200 || return 1
    served_by "$served"
    grep '^rxe_rs: ' "$log" | grep -v 'claimed\|opened' | head -n 5
    expect_provider "$served" rxe_rs &&
        grep -q "^rxe_rs: loaded; registered with $dir/libibverbs.so.1 (private ABI " "$log"
}
# The program is built here, with gcc: the Debian 12 boot's root (the host's) has it, the other
# lines' debootstrapped roots do not.
if command -v gcc > /dev/null; then
    run_test libibverbs-without-release-in-its-name-served-by-exports nameless_libibverbs_served_by_exports
else
    echo "  not run: libibverbs-without-release-in-its-name-served-by-exports (no gcc in this root)"
fi
