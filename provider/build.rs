//! Hands the crate the private ABIs the provider is named for.
//!
//! libibverbs loads a provider as `lib<name>-rdmav<PABI>.so` (with
//! `RDMAV_DRIVERS=/path/librxe_rs` it appends `-rdmav<PABI>.so` to the path).
//! Cargo cannot put a hyphen in a library's file name: `tests/link-libs.sh`
//! makes the links `librxe_rs-rdmav<PABI>.so -> librxe_rs.so` beside the
//! cdylib, and packaging/build.sh installs it under those names, one per
//! private ABI in `pabis.txt`. One library serves every PABI: it reads the
//! running libibverbs' layout when it is loaded (`libibverbs::layout`).
//!
//! The list (rdma-core v36..v56: 34, v57..v58: 57, v59..v63: 59, v64: 64,
//! v65: 65) reaches the crate as `RXE_RS_PABIS`, and a test holds it equal to
//! `layout::KNOWN_PABIS`. It also asks the linker for packed relative relocations
//! (below). This script writes nothing.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=pabis.txt");
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let list = std::fs::read_to_string(manifest_dir.join("pabis.txt")).expect("provider/pabis.txt");
    let pabis: Vec<u32> = list
        .split_whitespace()
        .map(|pabi| pabi.parse().expect("pabis.txt holds private ABI numbers"))
        .collect();
    assert!(!pabis.is_empty(), "pabis.txt names no private ABI");
    let list: Vec<String> = pabis.iter().map(u32::to_string).collect();
    println!("cargo:rustc-env=RXE_RS_PABIS={}", list.join(","));
    // The loader's relative relocations packed (DT_RELR, glibc 2.36 and later: Debian 12's):
    // `.rela.dyn` shrinks from 30 KiB to under 2 KiB, pages every process reads at load
    // (docs/provider-performance.md, "Memory"). lld (the x86_64 build) packs them; the
    // aarch64 build's GNU ld 2.40 accepts the option and packs nothing on that target.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,pack-relative-relocs");
}
