//! Gives `libnd_shim.so` its SONAME, `libnd_shim.so.0`: C programs of the NDK face link against
//! it by that name, and the packages install it as a versioned shared library. The 0 is the C
//! ABI's major version (include/ndk_shim.h): raise it when that ABI breaks.
//!
//! A program linked with `-L target/<profile> -lnd_shim` then asks for `libnd_shim.so.0` at run
//! time, so the link `libnd_shim.so.0 -> libnd_shim.so` is left beside the cdylib in the
//! profile's output directory (three levels above OUT_DIR, `target/<profile>/build/<pkg>-<hash>/out`),
//! as the provider's build script does for its names.
//!
//! The exports carry the version node ND_SHIM_0: `nd_shim.map`, the version script that lists
//! them, goes to the linker, and `src/exports.rs` says why each defining module also binds its
//! names to the node.

use std::path::PathBuf;

const SONAME: &str = "libnd_shim.so.0";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=nd_shim.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{SONAME}");
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        manifest_dir.join("nd_shim.map").display()
    );
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let profile_dir = out_dir
        .ancestors()
        .nth(3)
        .expect("OUT_DIR is target/<profile>/build/<pkg>-<hash>/out");
    let link = profile_dir.join(SONAME);
    if std::fs::symlink_metadata(&link).is_ok() {
        std::fs::remove_file(&link).expect("remove the old SONAME link");
    }
    std::os::unix::fs::symlink("libnd_shim.so", &link).expect("create the SONAME link");
}
