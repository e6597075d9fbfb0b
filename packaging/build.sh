#!/usr/bin/env bash
# Builds the Debian and RPM packages from the release build into target/packages/:
#   rxe-rs          the provider, librxe_rs-rdmav<PABI>.so for each PABI in provider/pabis.txt
#   libnd-shim0     libnd_shim.so.0, the NDK face of nd-shim      (rpm: nd-shim)
#   libnd-shim-dev  its headers, the .so link, nd-shim.pc and the man pages nd-shim(7) and the
#                   section-3 pages of its C entry points       (rpm: nd-shim-devel)
# The provider's package holds rxe_rs(7). The pages' sources are man/man3 and man/man7.
#
#   packaging/build.sh             a snapshot: <workspace version>+git<date>.<commit>
#   packaging/build.sh --release   HEAD must carry the tag v<workspace version>: exactly that version
#
# The architecture: amd64 (x86_64) from target/release into target/packages/, or with
# PACKAGE_ARCH=arm64 the aarch64 cross build (cargo build --release --target
# aarch64-unknown-linux-gnu) from target/aarch64-unknown-linux-gnu/release into
# target/packages-arm64/ (Architecture: arm64, rpm aarch64).
#
# Environment: PACKAGE_REVISION (the Debian revision / RPM release, default 1), DEBFULLNAME and
# DEBEMAIL (the maintainer; default: the author of HEAD).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
die() { echo "packaging: $*" >&2; exit 1; }
# deb_arch: Debian's name; rpm_arch: rpm's; triplet: the multiarch directory; strip: one that
# reads the architecture's ELF (binutils-aarch64-linux-gnu's for arm64).
case ${PACKAGE_ARCH:-amd64} in
    amd64)
        deb_arch=amd64 rpm_arch=x86_64 triplet=x86_64-linux-gnu strip=strip rust_target=x86_64-unknown-linux-gnu
        out=$root/target/packages release_dir=$root/target/release
        ;;
    arm64)
        deb_arch=arm64 rpm_arch=aarch64 triplet=aarch64-linux-gnu strip=aarch64-linux-gnu-strip rust_target=aarch64-unknown-linux-gnu
        out=$root/target/packages-arm64 release_dir=$root/target/aarch64-unknown-linux-gnu/release
        ;;
    *) die "PACKAGE_ARCH is amd64 or arm64, not '$PACKAGE_ARCH'" ;;
esac

upstream=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$root/Cargo.toml")
[[ -n $upstream ]] || die "no [workspace.package] version in Cargo.toml"
commit_time=$(git -C "$root" log -1 --format=%ct)
export SOURCE_DATE_EPOCH=$commit_time
if [[ ${1:-} == --release ]]; then
    tag=$(git -C "$root" describe --tags --exact-match HEAD 2> /dev/null) || tag=
    [[ $tag == "v$upstream" ]] || die "--release needs HEAD tagged v$upstream (it is '${tag:-untagged}')"
    version=$upstream
    changes="Release $upstream (tag v$upstream)."
else
    short=$(git -C "$root" rev-parse --short=7 HEAD)
    version=$upstream+git$(date -u -d "@$commit_time" +%Y%m%d).$short
    changes="Snapshot of commit $short ($(git -C "$root" log -1 --format=%s))."
    [[ -z $(git -C "$root" status --porcelain --untracked-files=no) ]] || changes+=" Built from a modified tree."
fi
revision=${PACKAGE_REVISION:-1}
maintainer="${DEBFULLNAME:-$(git -C "$root" log -1 --format=%an)} <${DEBEMAIL:-$(git -C "$root" log -1 --format=%ae)}>"

# The provider libraries, one per private ABI, as links to one cdylib (tests/link-libs.sh makes
# them): the package holds that file once, under the first name, and links for the others.
[[ -f $release_dir/librxe_rs.so ]] || die "no $release_dir/librxe_rs.so; run cargo build --release (--target)"
"$root/tests/link-libs.sh" "$release_dir"
mapfile -t provider_links < <(find "$release_dir" -maxdepth 1 -name 'librxe_rs-rdmav*.so' -printf '%f\n' | sort -V)
((${#provider_links[@]})) || die "no $release_dir/librxe_rs-rdmav*.so"
pabis=()
for f in "${provider_links[@]}"; do
    p=${f#librxe_rs-rdmav}
    pabis+=("${p%.so}")
done
nd_library=$release_dir/libnd_shim.so
[[ -f $nd_library ]] || die "$nd_library is missing; run cargo build --release (--target)"
[[ $(readelf -d "$nd_library") == *"Library soname: [libnd_shim.so.0]"* ]] || die "$nd_library has no SONAME libnd_shim.so.0"

# The libibverbs releases whose layouts the shipped private ABIs cover (provider/src/libibverbs/
# layout.rs): from v36, up to the last release of the newest private ABI shipped.
libibverbs_upper() {
    case $1 in
        34) echo 57 ;; 57) echo 59 ;; 59) echo 64 ;; 64) echo 65 ;; 65) echo 66 ;;
        *) die "packaging does not know the libibverbs releases of private ABI $1" ;;
    esac
}
libibverbs_min=36
libibverbs_below=$(libibverbs_upper "${pabis[-1]}")

for tool in dpkg-deb dpkg-shlibdeps rpmbuild readelf python3 cargo "$strip"; do
    command -v "$tool" > /dev/null || die "$tool is missing (tests/rig/setup-host.sh installs it)"
done

rm -rf "$out"
mkdir -p "$out"
work=$out/work

# stage_provider DIR LIBDIR: the provider's files; LIBDIR is the distribution's library directory.
stage_provider() {
    local dir=$1 libdir=$2 first=${provider_links[0]} f
    install -D -m 0644 "$release_dir/$first" "$dir$libdir/libibverbs/$first"
    "$strip" --strip-unneeded --remove-section=.comment "$dir$libdir/libibverbs/$first"
    for f in "${provider_links[@]:1}"; do ln -s "$first" "$dir$libdir/libibverbs/$f"; done
}

stage_nd_runtime() {
    local dir=$1 libdir=$2
    install -D -m 0644 "$nd_library" "$dir$libdir/libnd_shim.so.0"
    "$strip" --strip-unneeded --remove-section=.comment "$dir$libdir/libnd_shim.so.0"
}

# stage_nd_dev DIR LIBDIR: headers under include/nd-shim/, the link-time .so and the pkg-config file.
stage_nd_dev() {
    local dir=$1 libdir=$2
    mkdir -p "$dir/usr/include/nd-shim" "$dir$libdir/pkgconfig"
    cp -R "$root/nd-shim/include/." "$dir/usr/include/nd-shim/"
    find "$dir/usr/include" -type d -exec chmod 0755 {} + -o -type f -exec chmod 0644 {} +
    ln -s libnd_shim.so.0 "$dir$libdir/libnd_shim.so"
    sed -e "s|@libdir@|$libdir|" -e "s|@version@|$upstream|" "$root/packaging/nd-shim.pc.in" \
        > "$dir$libdir/pkgconfig/nd-shim.pc"
    chmod 0644 "$dir$libdir/pkgconfig/nd-shim.pc"
}

# stage_man DIR PAGE...: man pages (man/manS/NAME.S) into DIR/usr/share/man, gzipped as both
# distributions ship them; a page that is only ".so manS/OTHER.S" (rdma-core's way of giving one
# page several names) becomes a link to OTHER's file, as dh_installman makes it.
stage_man() {
    local dir=$1 page section name target
    shift
    for page in "$@"; do
        section=${page##*.}
        name=$(basename "$page")
        install -d -m 0755 "$dir/usr/share/man/man$section"
        target=$(sed -n '1s|^\.so man[0-9]/\(.*\)$|\1|p' "$root/man/$page")
        if [[ -n $target ]]; then
            ln -s "$target.gz" "$dir/usr/share/man/man$section/$name.gz"
        else
            gzip -9n < "$root/man/$page" > "$dir/usr/share/man/man$section/$name.gz"
            chmod 0644 "$dir/usr/share/man/man$section/$name.gz"
        fi
    done
}
provider_pages=(man7/rxe_rs.7)
mapfile -t nd_pages < <(cd "$root/man" && ls man7/nd-shim.7 man3/*.3)

################################################################################ Debian
multiarch=/usr/lib/$triplet
deb_version=$version-$revision
changelog_date=$(date -u -R -d "@$commit_time")

# deb_docs DIR PACKAGE CARGO_PACKAGE [EXTRA]: copyright, changelog and README of one package.
deb_docs() {
    local dir=$1 package=$2 docdir=$1/usr/share/doc/$2
    install -d -m 0755 "$docdir"
    RUST_TARGET=$rust_target python3 "$root/packaging/copyright.py" "$3" ${4:+"$4"} > "$docdir/copyright"
    local bullet
    bullet=$(fold -s -w 74 <<< "$changes" | sed -e 's/ *$//' -e '1s/^/  * /' -e '1!s/^/    /')
    printf '%s (%s) unstable; urgency=medium\n\n%s\n\n -- %s  %s\n' \
        "$package" "$deb_version" "$bullet" "$maintainer" "$changelog_date" | gzip -9n > "$docdir/changelog.Debian.gz"
    gzip -9n < "$root/README.md" > "$docdir/README.md.gz"
    chmod 0644 "$docdir"/*
    install -D -m 0644 "$root/packaging/debian/lintian/$package" "$dir/usr/share/lintian/overrides/$package"
}

# control_fields PACKAGE [MULTI_ARCH]: the first fields of a binary package's DEBIAN/control
# (the package's own fields follow them).
control_fields() {
    printf 'Package: %s\nSource: rxe-rs\nVersion: %s\nArchitecture: %s\n' "$1" "$deb_version" "$deb_arch"
    [[ -z ${2:-} ]] || printf 'Multi-Arch: %s\n' "$2"
    printf 'Maintainer: %s\nInstalled-Size: @installed_size@\n' "$maintainer"
}

# deb_build DIR: fills in Installed-Size and the shared-library dependencies, then builds.
deb_build() {
    local dir=$1 package
    package=$(sed -n 's/^Package: //p' "$dir/DEBIAN/control")
    local shlibs
    # dpkg-shlibdeps wants a source tree around it: a debian/control that names the package.
    mkdir -p "$work/shlibdeps/debian"
    printf 'Source: rxe-rs\n\nPackage: %s\nArchitecture: any\n' "$package" > "$work/shlibdeps/debian/control"
    mapfile -t elves < <(find "$dir" -type f -name '*.so*')
    # For arm64, dpkg-shlibdeps cross-builds: it finds libc and libgcc_s in /usr/aarch64-linux-gnu/lib
    # (libc6-arm64-cross, libgcc-s1-arm64-cross), whose shlibs and symbols name the arm64 packages
    # "libc6:arm64" and "libgcc-s1-arm64-cross": inside an arm64 package they are libc6 and libgcc-s1.
    shlibs=$(cd "$work/shlibdeps" && DEB_HOST_ARCH=$deb_arch DEB_HOST_MULTIARCH=$triplet \
        DEB_HOST_GNU_TYPE=$triplet dpkg-shlibdeps -O -l"/usr/$triplet/lib" -e"${elves[@]}" \
        -L"$work/shlibs.local" 2> /dev/null |
        sed -n -e "s/:$deb_arch\b//g" -e "s/-$deb_arch-cross\b//g" -e 's/^shlibs:Depends=//p')
    ((${#elves[@]} == 0)) || [[ $shlibs == *libc6* ]] || die "dpkg-shlibdeps found no libc6 dependency for $package ($deb_arch)"
    # A library linked with packed relative relocations (provider/build.rs) needs the loader of glibc
    # 2.36 (the GLIBC_ABI_DT_RELR version, which names no symbol: dpkg-shlibdeps does not see it).
    local elf
    for elf in "${elves[@]}"; do
        if readelf -V "$elf" | grep -q 'Name: GLIBC_ABI_DT_RELR'; then
            shlibs=$(sed -E 's/libc6 \(>= 2\.([0-9]|[12][0-9]|3[0-5])(\.[^)]*)?\)/libc6 (>= 2.36)/' <<< "$shlibs")
        fi
    done
    sed -i -e "s|@shlibs@|$shlibs|" -e "s|@installed_size@|$(du -sk --exclude=DEBIAN "$dir" | cut -f1)|" \
        "$dir/DEBIAN/control"
    find "$dir" -path "$dir/DEBIAN" -prune -o -type d -exec chmod 0755 {} +
    find "$dir" -newermt "@$commit_time" -exec touch -h -d "@$commit_time" {} +
    dpkg-deb --root-owner-group -Zxz --build "$dir" "$out/${package}_${deb_version}_$deb_arch.deb" > /dev/null
}

# The shim's own library as dpkg-shlibdeps should see it (it is not installed on the build host).
mkdir -p "$work"
echo "libnd_shim 0 libnd-shim0 (>= $version)" > "$work/shlibs.local"

# rxe-rs: the provider. It takes rxe devices over from rdma-core's provider by diverting
# librxe-rdmav<PABI>.so (see packaging/debian/rxe-rs.preinst).
deb=$work/rxe-rs
stage_provider "$deb" "$multiarch"
stage_man "$deb" "${provider_pages[@]}"
deb_docs "$deb" rxe-rs rxe-rs-provider
install -d -m 0755 "$deb/DEBIAN"
for script in preinst postinst prerm postrm; do
    sed -e "s|@multiarch@|$multiarch|g" -e "s|@pabis@|${pabis[*]}|g" \
        "$root/packaging/debian/rxe-rs.$script" > "$deb/DEBIAN/$script"
    chmod 0755 "$deb/DEBIAN/$script"
done
echo "interest-noawait $multiarch/libibverbs" > "$deb/DEBIAN/triggers"
chmod 0644 "$deb/DEBIAN/triggers"
{
    control_fields rxe-rs
    cat << CONTROL
Depends: @shlibs@, libibverbs1 (>= $libibverbs_min), libibverbs1 (<< $libibverbs_below)
Section: net
Priority: optional
Homepage: https://github.com/linux-rdma/rdma-core
Description: libibverbs provider for Soft-RoCE (rdma_rxe), written in Rust
 rxe_rs is a user-space verbs provider for the kernel's Soft-RoCE device
 (rdma_rxe). It speaks the kernel's uverbs ABI itself and drives rxe's
 shared rings, as rdma-core's own rxe provider does.
 .
 While installed it serves every rxe device: the package diverts rdma-core's
 librxe-rdmav<N>.so and puts an alternative in its place that points at
 rxe_rs. "update-alternatives --config librxe-rdmav34.so" hands rxe devices
 back to rdma-core's provider.
CONTROL
} > "$deb/DEBIAN/control"
deb_build "$deb"

# libnd-shim0: the NDK face's shared library. The shim reaches libibverbs and librdmacm through
# dlopen (rdma-mummy-sys), which dpkg-shlibdeps cannot see: they are named here.
deb=$work/libnd-shim0
stage_nd_runtime "$deb" "$multiarch"
deb_docs "$deb" libnd-shim0 nd-shim "$root/packaging/debian/nd-shim-copyright.extra"
install -d -m 0755 "$deb/DEBIAN"
echo "libnd_shim 0 libnd-shim0 (>= $version)" > "$deb/DEBIAN/shlibs"
echo "activate-noawait ldconfig" > "$deb/DEBIAN/triggers"
chmod 0644 "$deb/DEBIAN/shlibs" "$deb/DEBIAN/triggers"
{
    control_fields libnd-shim0 same
    cat << CONTROL
Depends: @shlibs@, libibverbs1 (>= $libibverbs_min), librdmacm1 (>= $libibverbs_min)
Section: libs
Priority: optional
Homepage: https://github.com/linux-rdma/rdma-core
Description: NetworkDirect (NDK) connection semantics on rdma_cm - library
 nd-shim gives applications written for Microsoft NetworkDirect (NDK's
 NdkConnect, NdkConnectWithSharedEndpoint, NdkCompleteConnect and the
 listener) the same connection semantics and return codes on Linux, over
 librdmacm.
 .
 This package holds the shared library.
CONTROL
} > "$deb/DEBIAN/control"
deb_build "$deb"

deb=$work/libnd-shim-dev
stage_nd_dev "$deb" "$multiarch"
stage_man "$deb" "${nd_pages[@]}"
deb_docs "$deb" libnd-shim-dev nd-shim "$root/packaging/debian/nd-shim-copyright.extra"
install -d -m 0755 "$deb/DEBIAN"
{
    control_fields libnd-shim-dev same
    cat << CONTROL
Depends: libnd-shim0 (= $deb_version)
Section: libdevel
Priority: optional
Homepage: https://github.com/linux-rdma/rdma-core
Description: NetworkDirect (NDK) connection semantics on rdma_cm - development files
 nd-shim gives applications written for Microsoft NetworkDirect (NDK's
 NdkConnect, NdkConnectWithSharedEndpoint, NdkCompleteConnect and the
 listener) the same connection semantics and return codes on Linux, over
 librdmacm.
 .
 This package holds the headers (/usr/include/nd-shim), the link-time
 library and the pkg-config file nd-shim.pc.
CONTROL
} > "$deb/DEBIAN/control"
sed -i 's/^Depends: @shlibs@, /Depends: /' "$deb/DEBIAN/control"
deb_build "$deb"

################################################################################ RPM
rpm_root=$work/rpm-root
stage_provider "$rpm_root" /usr/lib64
# rpm's convention: shared libraries are executable (Debian's: 0644, as staged).
chmod 0755 "$rpm_root/usr/lib64/libibverbs/${provider_links[0]}"
stage_nd_runtime "$rpm_root" /usr/lib64
stage_nd_dev "$rpm_root" /usr/lib64
stage_man "$rpm_root" "${provider_pages[@]}" "${nd_pages[@]}"
for package in rxe-rs nd-shim nd-shim-devel; do
    install -D -m 0644 "$root/README.md" "$rpm_root/usr/share/doc/$package/README.md"
done
install -D -m 0644 "$root/LICENSE-MIT" "$rpm_root/usr/share/licenses/rxe-rs/LICENSE-MIT"
install -D -m 0644 "$root/LICENSE-APACHE" "$rpm_root/usr/share/licenses/rxe-rs/LICENSE-APACHE"
for f in LICENSE-MIT LICENSE-APACHE; do
    install -D -m 0644 "$root/$f" "$rpm_root/usr/share/licenses/nd-shim/$f"
done
rpmbuild -bb --quiet --target "$rpm_arch-linux" --define "__strip $strip" \
    --define "_topdir $work/rpmbuild" --define "_rpmdir $out" \
    --define "rxe_rs_version ${version//-/_}" --define "rxe_rs_release $revision" \
    --define "staged_root $rpm_root" --define "pabis ${pabis[*]}" \
    --define "provider_files ${provider_links[*]}" \
    --define "libibverbs_min $libibverbs_min" --define "libibverbs_below $libibverbs_below" \
    --define "packager $maintainer" --define "changelog_date $(date -u -d "@$commit_time" '+%a %b %d %Y')" \
    --define "changes $changes" \
    --define "_build_id_links none" --define "source_date_epoch_from_changelog 0" \
    --define "use_source_date_epoch_as_buildtime 1" --define "clamp_mtime_to_source_date_epoch 1" \
    "$root/packaging/rxe-rs.spec"
mv "$out/$rpm_arch"/*.rpm "$out/"
rm -rf "${out:?}/$rpm_arch" "$work"
ls "$out"
