#!/usr/bin/env bash
# Builds the .deb and the .rpm of the provider from the release build into target/packages/.
#   packaging/build.sh            (after cargo build --release)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$root/target/packages
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n 1)
library=$root/target/release/librxe_rs.so
[[ -n $version ]] || { echo "packaging: no workspace version in Cargo.toml" >&2; exit 1; }
[[ -f $library ]] || { echo "packaging: $library is missing; run cargo build --release" >&2; exit 1; }
command -v dpkg-deb > /dev/null || { echo "packaging: dpkg-deb is missing" >&2; exit 1; }
command -v rpmbuild > /dev/null || { echo "packaging: rpmbuild is missing (Debian package rpm)" >&2; exit 1; }

rm -rf "$out"
mkdir -p "$out"

# stage DIR LIBDIR: the installed tree, with LIBDIR the distribution's library directory.
stage() {
    local dir=$1 libdir=$2
    install -D -m 0644 "$library" "$dir$libdir/libibverbs/librxe_rs-rdmav34.so"
    strip --strip-unneeded "$dir$libdir/libibverbs/librxe_rs-rdmav34.so"
    install -D -m 0644 "$root/packaging/rxe_rs.driver" "$dir/etc/libibverbs.d/rxe_rs.driver"
    install -D -m 0644 "$root/README.md" "$dir/usr/share/doc/rxe-rs/README.md"
}

# Debian: the multiarch library directory, the driver file as a conffile.
deb=$out/deb-root
stage "$deb" /usr/lib/x86_64-linux-gnu
mkdir -p "$deb/DEBIAN"
echo /etc/libibverbs.d/rxe_rs.driver > "$deb/DEBIAN/conffiles"
cat > "$deb/DEBIAN/control" <<CONTROL
Package: rxe-rs
Version: $version-1
Architecture: amd64
Maintainer: rxe_rs developers <rxe-rs@invalid>
Depends: libc6 (>= 2.34), libibverbs1 (>= 36), libibverbs1 (<< 57)
Section: net
Priority: optional
Installed-Size: $(du -sk "$deb" | cut -f1)
Description: libibverbs provider for Soft-RoCE (rdma_rxe), written in Rust
 rxe_rs speaks the kernel uverbs ABI itself to drive the kernel's Soft-RoCE
 device. It registers with libibverbs as "rxe_rs" through
 /etc/libibverbs.d/rxe_rs.driver, beside rdma-core's own rxe provider.
CONTROL
dpkg-deb --root-owner-group --build "$deb" "$out/rxe-rs_${version}-1_amd64.deb" > /dev/null

# RPM: /usr/lib64, a binary repackaging of the staged tree.
rpm_root=$out/rpm-root
stage "$rpm_root" /usr/lib64
rpmbuild -bb --quiet \
    --define "_topdir $out/rpmbuild" --define "rxe_rs_version $version" \
    --define "staged_root $rpm_root" --define "_rpmdir $out" \
    --define "_build_id_links none" \
    "$root/packaging/rxe-rs.spec"
mv "$out"/x86_64/*.rpm "$out/"
rm -rf "$out/x86_64" "$out/rpmbuild" "$deb" "$rpm_root"
ls "$out"
