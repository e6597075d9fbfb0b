//! Gives `libnd_shim.so` its SONAME, `libnd_shim.so.0`: C programs of the NDK face link against
//! it by that name, and the packages install it as a versioned shared library. The 0 is the C
//! ABI's major version (include/ndk_shim.h): raise it when that ABI breaks.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libnd_shim.so.0");
}
