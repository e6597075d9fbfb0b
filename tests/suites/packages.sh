# The packages packaging/build.sh made: the .deb installs into the guest (its root is an overlay,
# so nothing reaches the host), libibverbs then finds rxe_rs through /etc/libibverbs.d without
# RDMAV_DRIVERS, and removal takes everything away again. The .rpm holds the same files.
source "$RIG_ROOT/tests/rig/guest/lib.sh"

PACKAGES=$RIG_ROOT/target/packages
INSTALLED_LIBRARY=/usr/lib/x86_64-linux-gnu/libibverbs/librxe_rs-rdmav34.so
STOCK_DRIVER_FILE=/etc/libibverbs.d/rxe.driver

deb_installs() {
    dpkg -i "$PACKAGES"/rxe-rs_*_amd64.deb &&
        dpkg -L rxe-rs &&
        [[ -f $INSTALLED_LIBRARY ]] && grep -qx 'driver rxe_rs' /etc/libibverbs.d/rxe_rs.driver
}

# With both rxe.driver and rxe_rs.driver, libibverbs' order between them is not defined; set the
# stock one aside for this test (and put it back) so the installed rxe_rs must serve.
installed_provider_serves() {
    local served=$RIG_OUT/packages.served status=0
    mv "$STOCK_DRIVER_FILE" "$STOCK_DRIVER_FILE.aside" || return 1
    env -u RDMAV_DRIVERS LD_PRELOAD="$RIG_PROBE" RIG_PROVIDER_LOG="$served" \
        timeout "$RIG_TIMEOUT" ibv_devinfo -d rxe0 || status=1
    mv "$STOCK_DRIVER_FILE.aside" "$STOCK_DRIVER_FILE"
    served_by "$served"
    ((status == 0)) && grep -q " opened rxe0 rxe_rs $INSTALLED_LIBRARY\$" "$served"
}

deb_purges() {
    dpkg -P rxe-rs && [[ ! -e $INSTALLED_LIBRARY && ! -e /etc/libibverbs.d/rxe_rs.driver ]]
}

rpm_holds_the_same_files() {
    local listing
    listing=$(rpm -qlp "$PACKAGES"/rxe-rs-*.x86_64.rpm) || return 1
    echo "$listing"
    [[ $listing == *"/usr/lib64/libibverbs/librxe_rs-rdmav34.so"* &&
        $listing == *"/etc/libibverbs.d/rxe_rs.driver"* ]]
}

run_test deb-installs deb_installs
run_test installed-rxe_rs-serves-without-RDMAV_DRIVERS installed_provider_serves
run_test deb-purges deb_purges
run_test rpm-contents rpm_holds_the_same_files
