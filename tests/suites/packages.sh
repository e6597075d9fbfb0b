# The packages packaging/build.sh made, as a distribution and a user meet them: lintian and
# rpmlint clean; the .debs install into the guest (its root is an overlay, nothing reaches the
# host); while rxe-rs is installed it serves every rxe device in every process, whatever order
# libibverbs reads /etc/libibverbs.d in, also after ibverbs-providers is reinstalled under it;
# update-alternatives hands rxe back to the stock provider; remove and purge give stock rxe back
# with no warning from libibverbs. The shim's -dev package builds a C NDK program and a C++ ND2
# program with pkg-config; man finds the pages both install.
# The .rpms install with rpm --root into a scratch root, scriptlets included.
source "$RIG_ROOT/tests/rig/guest/lib.sh"

PACKAGES=$RIG_ROOT/target/packages
# The packages carry man pages, so every dpkg run would trigger man-db's index update, which
# reads the whole of /usr/share/man over 9p under emulation (Debian 12's root is the host's: a
# dpkg -i then outlasted the boot's limit). man-db skips it without this file (its
# man-db/auto-update setting); the guest's /var is an overlay, so the host keeps its own.
rm -f /var/lib/man-db/auto-update
PROVIDER_DIR=/usr/lib/x86_64-linux-gnu/libibverbs
# The guest's line decides the private ABI: rdma-core's own provider file is named after it (34 on
# Debian 12 and 13, 65 on sid).
PABI=$(ls "$PROVIDER_DIR"/librxe-rdmav*.so 2> /dev/null | sed -n 's/.*librxe-rdmav\([0-9]*\)\.so$/\1/p' | head -n 1)
PABI=${PABI:-34}
OURS=$PROVIDER_DIR/librxe_rs-rdmav$PABI.so
RXE_LINK=$PROVIDER_DIR/librxe-rdmav$PABI.so          # what rdma-core's rxe.driver loads
STOCK_DIVERTED=$PROVIDER_DIR/librxe-stock-rdmav$PABI.so
ALTERNATIVE=librxe-rdmav$PABI.so
CONFIG_DIR=/etc/libibverbs.d
# ibverbs-providers' own .deb of the guest's version, which tests/rig/vm copies into RIG_OUT (the
# guest sees neither the host's /var/cache nor its root's): on Debian 12 the one
# tests/rig/setup-host.sh downloads, on another line the one debootstrap left in the root's apt
# cache.
PROVIDERS_VERSION=$(dpkg-query -W -f='${Version}' ibverbs-providers)
PROVIDERS_DEB=$(ls "$RIG_OUT"/debs/ibverbs-providers_"${PROVIDERS_VERSION#*:}"_amd64.deb 2> /dev/null)
PROCESSES=20
echo "  libibverbs $(dpkg-query -W -f='${Version}' libibverbs1), private ABI $PABI"

debs_install() {
    dpkg -i "$PACKAGES"/rxe-rs_*_amd64.deb "$PACKAGES"/libnd-shim0_*_amd64.deb \
        "$PACKAGES"/libnd-shim-dev_*_amd64.deb || return 1
    dpkg -L rxe-rs libnd-shim0 libnd-shim-dev
    dpkg-divert --list 'rxe-rs'
    update-alternatives --query "$ALTERNATIVE"
    # The package holds one file and links to it for the other private ABIs: compare where the
    # names lead.
    [[ -f $OURS && -f $STOCK_DIVERTED && $(readlink -f "$RXE_LINK") == "$(readlink -f "$OURS")" ]] &&
        [[ ! -e $CONFIG_DIR/rxe_rs.driver ]] &&
        dpkg-divert --truename "$RXE_LINK" | grep -qx "$STOCK_DIVERTED"
}

# serves PROVIDER LIBRARY TAG: one fresh ibv_devinfo (every device listed and opened), with
# nothing from RDMAV_DRIVERS; every rxe device it touched was served by PROVIDER from LIBRARY,
# rxe0 and rxe1 both, and it wrote nothing to stderr (libibverbs' "couldn't load driver").
serves() {
    local provider=$1 library=$2 tag=$3 warning=${4:-}
    local served=$RIG_OUT/packages.$tag.served err=$RIG_OUT/packages.$tag.stderr
    rm -f "$served"
    env -u RDMAV_DRIVERS -u IBV_DRIVERS LD_PRELOAD="$RIG_PROBE" RIG_PROVIDER_LOG="$served" \
        timeout "$RIG_TIMEOUT" ibv_devinfo > /dev/null 2> "$err" || { echo "ibv_devinfo failed"; cat "$err"; return 1; }
    if [[ -n $warning ]]; then
        # serves ... WARNING: stderr is exactly one line, matching the extended regex WARNING.
        [[ $(wc -l < "$err") == 1 ]] && grep -qE "$warning" "$err" ||
            { echo "stderr, where one line like '$warning' was expected:"; cat "$err"; return 1; }
        cat "$err"
    elif [[ -s $err ]]; then
        echo "stderr:"
        cat "$err"
        return 1
    fi
    awk -v want="$provider" '$3 == "opened" && $4 ~ /^rxe/ { print $4, $5, $6; if ($5 != want) bad = 1 }
        END { exit bad }' "$served" | sort -u > "$served.devices" || { cat "$served.devices"; return 1; }
    local dev lib
    for dev in rxe0 rxe1; do
        lib=$(awk -v d="$dev" '$1 == d { print $3 }' "$served.devices")
        [[ -n $lib && $(readlink -f "$lib") == "$(readlink -f "$library")" ]] ||
            { echo "$dev: not served by $provider from $library"; cat "$served.devices"; return 1; }
    done
}

# Config file names in the orders that matter: rdma-core's rxe.driver before and after others,
# and a stray "driver rxe_rs" file (what 0.1.0-1 shipped, or a user's) sorting first or last.
# libibverbs reads the directory in readdir order, which the names and the creation order decide.
PERMUTATIONS=(
    "rxe.driver"
    "00-rxe.driver"
    "zz-rxe.driver"
    "rxe.driver 00-rxe_rs.driver"
    "rxe.driver zz-rxe_rs.driver"
    "zz-rxe.driver 00-rxe_rs.driver"
    "00-rxe.driver zz-rxe_rs.driver"
)

# arrange_config I NAMES: rdma-core's rxe.driver under the first name; a "driver rxe_rs" file
# under the second, if given, created before the first for odd I, after it for even I.
arrange_config() {
    local i=$1 rxe_name=$2 ours_name=${3:-}
    rm -f "$CONFIG_DIR"/*rxe*.driver
    if [[ -n $ours_name ]] && ((i % 2)); then echo "driver rxe_rs" > "$CONFIG_DIR/$ours_name"; fi
    echo "driver rxe" > "$CONFIG_DIR/$rxe_name"
    if [[ -n $ours_name ]] && ! ((i % 2)); then echo "driver rxe_rs" > "$CONFIG_DIR/$ours_name"; fi
}

restore_config() {
    rm -f "$CONFIG_DIR"/*rxe*.driver
    echo "driver rxe" > "$CONFIG_DIR/rxe.driver"
}

installed_rxe_rs_serves_every_process() {
    local i p status=0
    for ((i = 0; i < PROCESSES; i++)); do
        p=${PERMUTATIONS[i % ${#PERMUTATIONS[@]}]}
        # shellcheck disable=SC2086 # the permutation is one or two names
        arrange_config "$i" $p
        echo "process $((i + 1)): $(grep -l rxe "$CONFIG_DIR"/* | xargs -n1 basename | tr '\n' ' ')(in readdir order: $(ls -U "$CONFIG_DIR" | grep rxe | tr '\n' ' '))"
        serves rxe_rs "$OURS" "process$i" || { status=1; break; }
    done
    restore_config
    ((status == 0)) && echo "$PROCESSES of $PROCESSES processes: rxe0 and rxe1 served by rxe_rs"
}

# An rdma-core upgrade in the small: ibverbs-providers reinstalled while rxe-rs is installed.
# dpkg puts its librxe-rdmav<PABI>.so at the diverted name; rxe_rs keeps serving.
providers_reinstall_keeps_rxe_rs() {
    [[ -n $PROVIDERS_DEB ]] || { echo "no ibverbs-providers .deb under $RIG_OUT/debs"; return 1; }
    dpkg -i "$PROVIDERS_DEB" || return 1
    dpkg -V ibverbs-providers || return 1
    [[ -f $STOCK_DIVERTED && $(readlink -f "$RXE_LINK") == "$(readlink -f "$OURS")" ]] || return 1
    local i
    for ((i = 0; i < PROCESSES; i++)); do serves rxe_rs "$OURS" "reinstalled$i" || return 1; done
    echo "$PROCESSES of $PROCESSES processes after the reinstall: served by rxe_rs"
}

# An rdma-core upgrade rxe_rs does not know: the guest's libibverbs, copied under the name
# release 99 would have (libibverbs.so.1.14.99.0), same private ABI, found first through
# LD_LIBRARY_PATH. The layouts come from the exports, which are v44's here; but a file name that
# names a release after the newest known is refused (such a release may have grown the tables
# under the private ABI it kept, which no export tells), and rxe_rs loads the stock provider the
# package diverted in its place: rxe0 and rxe1 are still served, by stock, and the user is told
# once. A name with no release is served from the exports (provider-load suite).
unknown_rdma_core_hands_rxe_to_stock() {
    local real dir newer
    real=$(readlink -f /usr/lib/x86_64-linux-gnu/libibverbs.so.1)
    newer=$(basename "$real" | sed -E 's/^(libibverbs\.so\.[0-9]+\.[0-9]+\.)[0-9]+/\199/')
    [[ $newer == libibverbs.so.1.*.99.* ]] || { echo "cannot name a newer release after $real"; return 1; }
    dir=$(mktemp -d)
    cp "$real" "$dir/$newer" && ln -s "$newer" "$dir/libibverbs.so.1" || return 1
    echo "libibverbs as a newer release: $dir/$newer"
    LD_LIBRARY_PATH=$dir serves rxe "$STOCK_DIVERTED" upgraded \
        "^rxe_rs: not registering: no struct layout for rdma-core v99 \(private ABI $PABI\).*; rxe devices are served by the stock provider $STOCK_DIVERTED\$" ||
        return 1
    # The known release is still served by rxe_rs.
    serves rxe_rs "$OURS" after-upgraded
}

# The documented switch: the alternative set to rdma-core's provider, then back to automatic.
switch_hands_rxe_back() {
    update-alternatives --set "$ALTERNATIVE" "$STOCK_DIVERTED" || return 1
    serves rxe "$STOCK_DIVERTED" switched || return 1
    update-alternatives --auto "$ALTERNATIVE" || return 1
    serves rxe_rs "$OURS" auto
}

# VERBS_LOG_LEVEL / VERBS_LOG_FILE as for rdma-core's providers: silent by default, silent at
# level 4 without a file (a release libibverbs drops the lines then), and at level 4 with a file
# the load and each claimed device, named, in that file.
logging_like_rdma_core() {
    local log=$RIG_OUT/packages.verbs.log out
    out=$(env -u VERBS_LOG_LEVEL -u VERBS_LOG_FILE ibv_devinfo 2>&1 > /dev/null)
    [[ -z $out ]] || { echo "default: $out"; return 1; }
    out=$(VERBS_LOG_LEVEL=4 ibv_devinfo 2>&1 > /dev/null)
    [[ -z $out ]] || { echo "level 4, no file: $out"; return 1; }
    rm -f "$log"
    out=$(VERBS_LOG_LEVEL=4 VERBS_LOG_FILE=$log ibv_devinfo 2>&1 > /dev/null)
    [[ -z $out ]] || { echo "level 4 with a file wrote to stderr: $out"; return 1; }
    cat "$log"
    grep -q '^rxe_rs: loaded; registered with /usr/lib/x86_64-linux-gnu/libibverbs.so.1' "$log" &&
        grep -q '^rxe0: rxe_rs: claimed the device (driver id 14,' "$log" &&
        grep -q '^rxe1: rxe_rs: claimed the device (driver id 14,' "$log" &&
        grep -q '^rxe0: rxe_rs: opened context: ' "$log"
}

# run_built_with_pkg_config PROGRAM COMPILER [FLAG...]: PROGRAM built from PROGRAM.c or PROGRAM.cpp
# (the one there is) with COMPILER, the FLAGs and pkg-config's nd-shim flags only, linked to the
# installed libnd_shim.so.0 (ldd), then run.
run_built_with_pkg_config() {
    local program=$1 source loaded
    shift
    source=$program.c
    [[ -f $source ]] || source=$program.cpp
    # shellcheck disable=SC2046 # pkg-config's output is several arguments
    "$@" -o "$program" "$source" $(pkg-config --cflags --libs nd-shim) || return 1
    loaded=$(ldd "$program" | awk '$1 == "libnd_shim.so.0" { print $3 }')
    echo "libnd_shim.so.0 => $loaded"
    [[ -n $loaded && $(readlink -f "$loaded") == /usr/lib/x86_64-linux-gnu/libnd_shim.so.0 ]] &&
        timeout "$RIG_TIMEOUT" "$program"
}

# A C program of the NDK face, built against the installed -dev package with pkg-config only.
nd_shim_builds_with_pkg_config() {
    local dir
    dir=$(mktemp -d)
    cat > "$dir/open_adapter.c" << 'C'
#include <arpa/inet.h>
#include <stdio.h>
#include <ndk_shim.h>

int main(void)
{
    struct sockaddr_in address = { .sin_family = AF_INET };
    NDK_ADAPTER *adapter = NULL;
    NTSTATUS status;

    inet_pton(AF_INET, "198.18.0.1", &address.sin_addr);
    status = NdkOpenAdapter((PSOCKADDR)&address, sizeof(address), 0, &adapter);
    printf("NdkOpenAdapter(198.18.0.1): 0x%08x\n", (unsigned)status);
    if (status != STATUS_SUCCESS)
        return 1;
    status = adapter->Dispatch->NdkCloseAdapter(adapter);
    printf("NdkCloseAdapter: 0x%08x\n", (unsigned)status);
    return status == STATUS_SUCCESS ? 0 : 1;
}
C
    echo "pkg-config: $(pkg-config --cflags --libs nd-shim)"
    run_built_with_pkg_config "$dir/open_adapter" gcc -Wall -Werror
}

# A C++ ND2 program (ndspi.h, ndsupport.h: COM interfaces through vtable calls), built against
# the installed -dev package with g++ and pkg-config only, and run on rxe0: address list with
# its size probe, adapter query, a memory region registered and deregistered through an
# OVERLAPPED and its event.
nd2_cpp_builds_with_pkg_config() {
    local dir
    dir=$(mktemp -d)
    cat > "$dir/nd2_adapter.cpp" << 'CPP'
#include <ndsupport.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <vector>

#define CHECK(what, call, want)                                                                   \
    do {                                                                                          \
        HRESULT hr_ = (call);                                                                     \
        printf("%s: 0x%08x\n", what, (unsigned)hr_);                                               \
        if (hr_ != (want))                                                                        \
            return 1;                                                                             \
    } while (0)

int main()
{
    CHECK("NdStartup", NdStartup(), ND_SUCCESS);
    SIZE_T size = 0;
    CHECK("NdQueryAddressList (size probe)", NdQueryAddressList(0, NULL, &size), ND_BUFFER_OVERFLOW);
    std::vector<char> list(size);
    CHECK("NdQueryAddressList", NdQueryAddressList(0, reinterpret_cast<SOCKET_ADDRESS_LIST *>(&list[0]), &size),
          ND_SUCCESS);
    sockaddr_in address = sockaddr_in();
    address.sin_family = AF_INET;
    inet_pton(AF_INET, "198.18.0.1", &address.sin_addr);
    IND2Adapter *adapter = NULL;
    CHECK("NdOpenAdapter(198.18.0.1)",
          NdOpenAdapter(IID_IND2Adapter, reinterpret_cast<sockaddr *>(&address), sizeof address,
                        reinterpret_cast<void **>(&adapter)),
          ND_SUCCESS);
    ND2_ADAPTER_INFO info = ND2_ADAPTER_INFO();
    info.InfoVersion = ND_VERSION_2;
    ULONG infoSize = sizeof info;
    CHECK("IND2Adapter::Query", adapter->Query(&info, &infoSize), ND_SUCCESS);
    printf("MaxCallerData %u, MaxCalleeData %u\n", (unsigned)info.MaxCallerData, (unsigned)info.MaxCalleeData);
    if (info.MaxCallerData != 56 || info.MaxCalleeData != 196)
        return 1;
    HANDLE file = NULL;
    CHECK("IND2Adapter::CreateOverlappedFile", adapter->CreateOverlappedFile(&file), ND_SUCCESS);
    IND2MemoryRegion *mr = NULL;
    CHECK("IND2Adapter::CreateMemoryRegion",
          adapter->CreateMemoryRegion(IID_IND2MemoryRegion, file, reinterpret_cast<void **>(&mr)), ND_SUCCESS);
    static char buffer[4096];
    OVERLAPPED ov = OVERLAPPED();
    ov.hEvent = CreateEventA(NULL, FALSE, FALSE, NULL);
    CHECK("IND2MemoryRegion::Register", mr->Register(buffer, sizeof buffer, ND_MR_FLAG_ALLOW_LOCAL_WRITE, &ov),
          ND_PENDING);
    if (WaitForSingleObject(ov.hEvent, 5000) != WAIT_OBJECT_0)
        return 1;
    CHECK("GetOverlappedResult", mr->GetOverlappedResult(&ov, FALSE), ND_SUCCESS);
    CHECK("IND2MemoryRegion::Deregister", mr->Deregister(&ov), ND_PENDING);
    CHECK("GetOverlappedResult (wait)", mr->GetOverlappedResult(&ov, TRUE), ND_SUCCESS);
    CloseHandle(ov.hEvent);
    ULONG left = mr->Release();
    left += adapter->Release();
    CloseHandle(file);
    CHECK("NdCleanup", NdCleanup(), ND_SUCCESS);
    return left == 0 ? 0 : 1;
}
CPP
    echo "pkg-config: $(pkg-config --cflags --libs nd-shim)"
    run_built_with_pkg_config "$dir/nd2_adapter" g++ -Wall -Wextra -Werror
}

# After PACKAGE_ACTION (remove or purge): rdma-core's file is back, no trace of ours, and stock
# rxe serves every process without a word on stderr.
stock_serves_after() {
    local action=$1
    case $action in
        remove) dpkg -r rxe-rs ;;
        purge) dpkg -i "$PACKAGES"/rxe-rs_*_amd64.deb && dpkg -P rxe-rs ;;
    esac || return 1
    dpkg -V ibverbs-providers || return 1
    local leftover
    leftover=$(ls "$PROVIDER_DIR"/librxe_rs* "$STOCK_DIVERTED" "$CONFIG_DIR"/rxe_rs.driver \
        /etc/alternatives/librxe-rdmav* /var/lib/dpkg/alternatives/librxe-rdmav* 2> /dev/null)
    [[ -z $leftover ]] || { echo "left behind: $leftover"; return 1; }
    dpkg-divert --list rxe-rs | grep . && { echo "a diversion is left"; return 1; }
    [[ -f $RXE_LINK && ! -L $RXE_LINK ]] || return 1
    local i
    for ((i = 0; i < PROCESSES; i++)); do serves rxe "$RXE_LINK" "$action$i" || return 1; done
    echo "$PROCESSES of $PROCESSES processes after $action: served by stock rxe, stderr empty"
}

# rpm --root into a scratch root: busybox's sh and tools for the scriptlets, a stand-in for
# rdma-core's librxe-rdmav34.so, rpmdb without libibverbs (hence --nodeps). Install, check the
# files and that %post set the stand-in aside; erase, check it is back.
rpm_installs_into_a_scratch_root() {
    local root
    root=$(mktemp -d)
    mkdir -p "$root/bin" "$root/sbin" "$root/usr/lib64/libibverbs" "$root/tmp"
    cp /bin/busybox "$root/bin/busybox"
    local tool
    for tool in sh mv ln rm [ test; do ln -s busybox "$root/bin/$tool"; done
    cp /sbin/ldconfig "$root/sbin/ldconfig"
    echo "stand-in for rdma-core's rxe provider" > "$root/usr/lib64/libibverbs/librxe-rdmav34.so"
    rpm --root "$root" --initdb || return 1
    rpm --root "$root" -i --nodeps "$PACKAGES"/*.rpm || return 1
    rpm --root "$root" -qa | sort
    rpm --root "$root" -V --nodeps rxe-rs nd-shim nd-shim-devel || return 1
    rpm -qp --requires "$PACKAGES"/rxe-rs-*.rpm "$PACKAGES"/nd-shim-[0-9]*.rpm
    local f
    for f in /usr/lib64/libibverbs/librxe_rs-rdmav34.so /usr/lib64/libnd_shim.so.0 /usr/lib64/libnd_shim.so \
        /usr/include/nd-shim/ndk_shim.h /usr/lib64/pkgconfig/nd-shim.pc \
        /usr/share/licenses/rxe-rs/LICENSE-MIT /usr/share/licenses/rxe-rs/LICENSE-APACHE; do
        [[ -e $root$f ]] || { echo "missing: $f"; return 1; }
    done
    [[ $(readlink "$root/usr/lib64/libibverbs/librxe-rdmav34.so") == librxe_rs-rdmav34.so ]] &&
        grep -q stand-in "$root/usr/lib64/libibverbs/librxe-stock-rdmav34.so" || return 1
    rpm -qp --requires "$PACKAGES"/rxe-rs-*.rpm | grep -qx 'libc.so.6()(64bit)' &&
        rpm -qp --requires "$PACKAGES"/rxe-rs-*.rpm | grep -qx 'libibverbs < 66' || return 1
    rpm --root "$root" -e rxe-rs || return 1
    [[ ! -L $root/usr/lib64/libibverbs/librxe-rdmav34.so ]] &&
        grep -q stand-in "$root/usr/lib64/libibverbs/librxe-rdmav34.so" &&
        [[ ! -e $root/usr/lib64/libibverbs/librxe-stock-rdmav34.so ]] &&
        echo "rpm: installed, files checked, rdma-core's file set aside and given back"
}

# Whatever failed, the suites after this one find the guest as it was: none of our packages,
# rdma-core's provider file and rxe.driver in place.
leave_as_found() {
    restore_config
    dpkg -P rxe-rs libnd-shim-dev libnd-shim0 > /dev/null 2>&1
    update-alternatives --remove-all "$ALTERNATIVE" > /dev/null 2>&1
    if [[ -f $STOCK_DIVERTED && ! -e $RXE_LINK ]]; then mv "$STOCK_DIVERTED" "$RXE_LINK"; fi
}
trap leave_as_found EXIT

# The man pages the packages install: man(1) finds each by name, the .so pages' links included,
# and renders rxe_rs(7) and a section-3 page.
man_pages_installed() {
    local page
    for page in "7 rxe_rs" "7 nd-shim" "3 NdkOpenAdapter" "3 NdStartup" "3 NdCleanup" "3 NdOpenV1Adapter" \
        "3 DllCanUnloadNow"; do
        # shellcheck disable=SC2086 # section and name
        man -w $page || { echo "man -w $page: not found"; return 1; }
    done
    local text
    text=$(MANWIDTH=80 man 7 rxe_rs 2> /dev/null)
    [[ $text == *"HOW IT IS CHOSEN"* ]] || { echo "man 7 rxe_rs: not rendered"; return 1; }
    text=$(MANWIDTH=80 man 3 NdCleanup 2> /dev/null)
    [[ $text == *NdFlushProviders* ]] || { echo "man 3 NdCleanup: not NdStartup(3)"; return 1; }
}

# The checks that need the host's tools (lintian, rpmlint, rpm, gcc, pkg-config) run where the
# root has them: Debian 12's, the host's own. Another line's root has only what its packages
# pulled in; there the checks of installing and serving run.
with_tool() { # with_tool TOOL NAME FUNCTION ARGS...
    local tool=$1 name=$2
    shift 2
    if command -v "$tool" > /dev/null; then
        run_test "$name" "$@"
    else
        echo "  not run: $name (no $tool in this root)"
    fi
}

# tests/check.sh lints on the host, where the same tools run at native speed, and says so.
if [[ ${RIG_PACKAGES_LINTED:-} == host ]]; then
    echo "  lintian and rpmlint: run on the host by tests/check.sh (packaging/lint.sh)"
else
    with_tool lintian lintian-clean "$RIG_ROOT/packaging/lint.sh" deb
    with_tool rpmlint rpmlint-clean "$RIG_ROOT/packaging/lint.sh" rpm
fi
run_test debs-install debs_install
run_test "installed-rxe_rs-serves-$PROCESSES-processes-config-permuted" installed_rxe_rs_serves_every_process
run_test logging-silent-by-default-level-4-names-devices logging_like_rdma_core
run_test ibverbs-providers-reinstall-keeps-rxe_rs providers_reinstall_keeps_rxe_rs
run_test update-alternatives-hands-rxe-back switch_hands_rxe_back
run_test unknown-rdma-core-hands-rxe-to-stock unknown_rdma_core_hands_rxe_to_stock
with_tool man man-pages-installed man_pages_installed
with_tool pkg-config nd-shim-dev-builds-with-pkg-config nd_shim_builds_with_pkg_config
with_tool g++ nd-shim-dev-builds-nd2-cpp-with-pkg-config nd2_cpp_builds_with_pkg_config
# The README's quick starts (a machine with rxe, an ND porter), run as written where the rig can.
with_tool g++ readme-quick-starts-run-as-written bash "$RIG_ROOT/tests/rig/guest/readme-quick-starts.sh"
run_test remove-stock-serves-no-warning stock_serves_after remove
run_test purge-stock-serves-no-warning stock_serves_after purge
with_tool rpm rpm-root-install rpm_installs_into_a_scratch_root
