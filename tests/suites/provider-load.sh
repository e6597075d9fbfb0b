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
