//! Gives `libnd_shim.so` its SONAME, `libnd_shim.so.0`: C programs of the NDK face link against
//! it by that name, and the packages install it as a versioned shared library. The 0 is the C
//! ABI's major version (include/ndk_shim.h): raise it when that ABI breaks.
//!
//! A program linked with `-L target/<profile> -lnd_shim` then asks for `libnd_shim.so.0` at run
//! time: `tests/link-libs.sh` makes the link `libnd_shim.so.0 -> libnd_shim.so` beside the cdylib
//! (this script writes nothing).
//!
//! The exports carry the version node ND_SHIM_0: `nd_shim.map`, the version script that lists
//! them, goes to the linker, and `src/exports.rs` says why each defining module also binds its
//! names to the node (`cfg(nd_shim_symver)`, set here). The cdylib is linked by the toolchain's
//! rust-lld (`-B <sysroot>/lib/rustlib/<host>/bin/gcc-ld -fuse-ld=lld`, what rustc itself passes
//! for x86_64 Linux since 1.90) on every target: GNU ld refuses a named version script beside the
//! anonymous one rustc writes ("anonymous version tag cannot be combined with other version
//! tags"), lld takes both. A toolchain without rust-lld gets an unversioned library and a
//! warning (and `nd-shim/tests/exports.rs` fails).

use std::path::PathBuf;

const SONAME: &str = "libnd_shim.so.0";

/// The toolchain's `gcc-ld` directory, whose `ld.lld` runs rust-lld for `cc -fuse-ld=lld`.
fn rust_lld_dir() -> Option<PathBuf> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = std::process::Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()?;
    let sysroot = String::from_utf8(out.stdout).ok()?;
    let host = std::env::var("HOST").ok()?;
    let dir = PathBuf::from(sysroot.trim())
        .join("lib/rustlib")
        .join(host)
        .join("bin/gcc-ld");
    dir.join("ld.lld").exists().then_some(dir)
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=nd_shim.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{SONAME}");
    println!("cargo::rustc-check-cfg=cfg(nd_shim_symver)");
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    match rust_lld_dir() {
        Some(gcc_ld) => {
            println!("cargo:rustc-cdylib-link-arg=-B{}", gcc_ld.display());
            println!("cargo:rustc-cdylib-link-arg=-fuse-ld=lld");
            println!(
                "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
                manifest_dir.join("nd_shim.map").display()
            );
            println!("cargo:rustc-cfg=nd_shim_symver");
        }
        None => println!("cargo:warning=no rust-lld in the toolchain: libnd_shim.so's exports are left unversioned"),
    }
}
