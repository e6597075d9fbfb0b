//! Names the provider the way libibverbs looks for it.
//!
//! libibverbs loads a provider as `lib<name>-rdmav<PABI>.so` (with
//! `RDMAV_DRIVERS=/path/librxe_rs` it appends `-rdmav<PABI>.so` to the path).
//! Cargo cannot put a hyphen in a library's file name, so we leave the
//! symlinks `librxe_rs-rdmav<PABI>.so -> librxe_rs.so`, one per private ABI,
//! beside the cdylib in the profile's output directory (`target/<profile>/`, three levels above
//! OUT_DIR, `target/<profile>/build/<pkg>-<hash>/out`). The link target is
//! relative, so it is dangling only until cargo links the cdylib right after.
//! One library serves every PABI: it reads the running libibverbs' layout
//! when it is loaded (`libibverbs::layout`).

use std::path::PathBuf;

/// The private ABI versions we build a name for: rdma-core v36..v56 (34),
/// v57..v58, v59..v63, v64 and v65. The crate sees the list as
/// `RXE_RS_PABIS`, and a test holds it equal to `layout::KNOWN_PABIS`.
const PABIS: &[u32] = &[34, 57, 59, 64, 65];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let list: Vec<String> = PABIS.iter().map(u32::to_string).collect();
    println!("cargo:rustc-env=RXE_RS_PABIS={}", list.join(","));
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    // OUT_DIR is target/[<triple>/]<profile>/build/<pkg>-<hash>/out (stable cargo) or
    // .../build/<pkg>/<hash>/out (newer cargo's build-dir layout): the profile directory is the
    // parent of the nearest `build`.
    let profile_dir = out_dir
        .ancestors()
        .find(|dir| dir.file_name().is_some_and(|name| name == "build"))
        .and_then(|build| build.parent())
        .expect("OUT_DIR is under target/<profile>/build")
        .to_path_buf();
    for pabi in PABIS {
        let link = profile_dir.join(format!("librxe_rs-rdmav{pabi}.so"));
        // Replace whatever is there (an older link, or a stale copy).
        if std::fs::symlink_metadata(&link).is_ok() {
            std::fs::remove_file(&link).expect("remove the old provider link");
        }
        std::os::unix::fs::symlink("librxe_rs.so", &link).expect("create the provider link");
    }
}
