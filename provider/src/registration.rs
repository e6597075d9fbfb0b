//! Load-time registration: the `.init_array` constructor, our
//! `verbs_device_ops` and the match table.

use core::ptr;

use kernel_abi::RDMA_DRIVER_RXE;
use log::{debug, info, warn};

use crate::libibverbs::device_abi::{
    verbs_device_ops, verbs_match_ent, verbs_match_ent_u, VERBS_MATCH_DRIVER_ID, VERBS_MATCH_MODALIAS,
    VERBS_MATCH_SENTINEL,
};
use crate::libibverbs::layout::Refusal;
use crate::libibverbs::runtime::{self, Libibverbs};
use crate::{boundary, entry, logger};

/// Statics holding raw pointers are not `Sync` by themselves; these point only
/// at other immutable statics, so sharing them between threads is sound.
#[repr(transparent)]
struct Shared<T>(T);
// SAFETY: the wrapped values are never mutated and point only to 'static
// immutable data (string literals, the match table).
unsafe impl<T> Sync for Shared<T> {}

/// The same table as the stock rxe provider: the kernel's driver id first
/// (libibverbs prefers driver-id matches), then the device name for kernels
/// that do not report one (`VERBS_NAME_MATCH("rxe", NULL)`).
static MATCH_TABLE: Shared<[verbs_match_ent; 3]> = Shared([
    verbs_match_ent {
        driver_data: ptr::null_mut(),
        u: verbs_match_ent_u {
            driver_id: RDMA_DRIVER_RXE as u64,
        },
        vendor: 0,
        device: 0,
        kind: VERBS_MATCH_DRIVER_ID,
    },
    verbs_match_ent {
        driver_data: ptr::null_mut(),
        u: verbs_match_ent_u {
            modalias: c"rdma_device:*Nrxe*".as_ptr(),
        },
        vendor: 0,
        device: 0,
        kind: VERBS_MATCH_MODALIAS,
    },
    verbs_match_ent {
        driver_data: ptr::null_mut(),
        u: verbs_match_ent_u { driver_id: 0 },
        vendor: 0,
        device: 0,
        kind: VERBS_MATCH_SENTINEL,
    },
]);

/// The uverbs ABI versions we accept, as the stock provider: on 64-bit, 1
/// and 2 are the same; 32-bit needs 2, where user and kernel layouts agree.
const MATCH_MIN_ABI_VERSION: u32 = if cfg!(target_pointer_width = "64") { 1 } else { 2 };
const MATCH_MAX_ABI_VERSION: u32 = 2;

static DEVICE_OPS: Shared<verbs_device_ops> = Shared(verbs_device_ops {
    name: c"rxe_rs".as_ptr(),
    match_min_abi_version: MATCH_MIN_ABI_VERSION,
    match_max_abi_version: MATCH_MAX_ABI_VERSION,
    match_table: &MATCH_TABLE.0 as *const verbs_match_ent,
    static_providers: ptr::null(),
    match_device: None,
    alloc_context: Some(entry::context::alloc_context),
    import_context: None,
    alloc_device: Some(entry::context::alloc_device),
    uninit_device: Some(entry::context::uninit_device),
});

/// Runs when the dynamic loader maps us (libibverbs' dlopen), like C's
/// `__attribute__((constructor))` in rdma-core's `PROVIDER_DRIVER`. Not
/// under Miri, which would run it before the unit tests: its `dlopen` is FFI
/// Miri cannot model, and no unit test needs the registration.
#[cfg(not(miri))]
#[used]
#[link_section = ".init_array"]
static CONSTRUCTOR: extern "C" fn() = on_load;

#[cfg_attr(miri, allow(dead_code))]
extern "C" fn on_load() {
    boundary::guard("constructor", (), || {
        logger::init();
        register();
    })
}

fn register() {
    match Libibverbs::find() {
        Ok(lib) => {
            let lib = runtime::install(lib);
            lib.register_driver(&DEVICE_OPS.0);
            info!(
                "loaded; registered with {} (private ABI {}, layout {:?}, ibv_qp_ex of {} bytes)",
                lib.path, lib.layout.pabi, lib.layout.context, lib.layout.qp_ex.qp_ex_size
            );
        }
        Err(Refusal::NotLoaded) => debug!("not registering: {}", Refusal::NotLoaded),
        Err(why) => {
            let handed = hand_to_stock();
            say_refusal(&format!("not registering: {why}{handed}"));
        }
    }
}

/// A refused libibverbs (an rdma-core upgrade this rxe_rs does not know) must not leave rxe
/// devices with no provider: when we were loaded under the stock provider's name, whose
/// library the package diverted, that library is loaded in our place; its constructor
/// registers it with libibverbs as it would have without us. Says what happened, for the
/// refusal's message.
fn hand_to_stock() -> String {
    let Some(stock) = runtime::provider_loaded_name().and_then(|name| diverted_stock_name(&name)) else {
        return String::new();
    };
    if !stock.exists() {
        return String::new();
    }
    let Ok(path) = std::ffi::CString::new(stock.as_os_str().as_encoded_bytes()) else {
        return String::new();
    };
    // SAFETY: `path` is NUL-terminated; the library is rdma-core's own rxe provider, whose
    // constructor only registers its driver with the libibverbs loading us (loading from a
    // constructor is allowed: the loader's lock is recursive). The handle is kept for the
    // life of the process, as libibverbs keeps its providers'.
    let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW) };
    if handle.is_null() {
        return format!("; loading the stock provider {} failed too", stock.display());
    }
    format!("; rxe devices are served by the stock provider {}", stock.display())
}

/// The stock provider's library the package diverted, from the name libibverbs opened us
/// by: `<dir>/librxe-rdmav<PABI>.so` -> `<dir>/librxe-stock-rdmav<PABI>.so` (the names of
/// packaging/debian/rxe-rs.preinst). None when we were loaded by another name (a build
/// tree, `RDMAV_DRIVERS`, our own `.driver` file): then nothing of stock's was moved aside.
fn diverted_stock_name(loaded_as: &std::path::Path) -> Option<std::path::PathBuf> {
    let name = loaded_as.file_name()?.to_str()?;
    let pabi = name.strip_prefix("librxe-rdmav")?.strip_suffix(".so")?;
    if pabi.is_empty() || !pabi.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(loaded_as.with_file_name(format!("librxe-stock-rdmav{pabi}.so")))
}

/// A libibverbs we cannot serve is said at any log level: otherwise the
/// user gets the stock provider (or none) without a word. Like libibverbs'
/// own load warnings, it goes to stderr when our log is off.
fn say_refusal(line: &str) {
    if log::log_enabled!(log::Level::Warn) {
        warn!("{line}");
    } else {
        use std::io::Write as _;
        let line = format!("{}: {line}\n", crate::PROVIDER_NAME);
        // Nothing to do if stderr is gone.
        let _ = std::io::stderr().write_all(line.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::ffi::CStr;

    /// The match table up to (not including) the sentinel.
    fn match_entries() -> &'static [verbs_match_ent] {
        let table = &MATCH_TABLE.0;
        let end = table
            .iter()
            .position(|e| e.kind == VERBS_MATCH_SENTINEL)
            .unwrap_or(table.len());
        &table[..end]
    }

    #[test]
    fn match_table_is_driver_id_then_name_then_sentinel() {
        let e = match_entries();
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].kind, VERBS_MATCH_DRIVER_ID);
        // SAFETY: the entry's kind says which union member is set.
        assert_eq!(unsafe { e[0].u.driver_id }, 14);
        assert_eq!(e[1].kind, VERBS_MATCH_MODALIAS);
        // SAFETY: as above; the modalias is a 'static C string literal.
        let pat = unsafe { CStr::from_ptr(e[1].u.modalias) };
        assert_eq!(pat.to_str().unwrap(), "rdma_device:*Nrxe*");
        assert_eq!(MATCH_TABLE.0[2].kind, VERBS_MATCH_SENTINEL);
    }

    /// The name pattern must match exactly what libibverbs builds for a
    /// device named rxe0 (`"rdma_device:N%s"`), and not other names.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "calls the C library's fnmatch, foreign code Miri cannot run; the host run covers it"
    )]
    fn name_pattern_matches_like_libibverbs_fnmatch() {
        let pat = c"rdma_device:*Nrxe*";
        let hit = |name: &CStr| {
            // SAFETY: both arguments are NUL-terminated strings.
            unsafe { libc::fnmatch(pat.as_ptr(), name.as_ptr(), 0) == 0 }
        };
        assert!(hit(c"rdma_device:Nrxe0"));
        assert!(hit(c"rdma_device:Nrxe1"));
        assert!(!hit(c"rdma_device:Nmlx5_0"));
        assert!(!hit(c"rdma_device:Nsiw0"));
    }

    #[test]
    fn device_ops_name_abi_range_and_entries() {
        let ops = &DEVICE_OPS.0;
        // SAFETY: name is a 'static C string literal.
        let name = unsafe { CStr::from_ptr(ops.name) };
        assert_eq!(name.to_str().unwrap(), crate::PROVIDER_NAME);
        assert_eq!((ops.match_min_abi_version, ops.match_max_abi_version), (1, 2));
        assert!(ops.alloc_device.is_some() && ops.uninit_device.is_some());
        assert!(ops.alloc_context.is_some());
        assert!(ops.import_context.is_none() && ops.match_device.is_none());
    }

    #[test]
    fn the_diverted_stock_provider_is_named_after_the_name_we_were_loaded_by() {
        use std::path::{Path, PathBuf};
        let dir = "/usr/lib/x86_64-linux-gnu/libibverbs";
        assert_eq!(
            diverted_stock_name(Path::new(&format!("{dir}/librxe-rdmav34.so"))),
            Some(PathBuf::from(format!("{dir}/librxe-stock-rdmav34.so")))
        );
        for other in [
            "librxe_rs-rdmav34.so",
            "librxe-rdmav.so",
            "librxe-rdmav3x.so",
            "librxe-rdmav34.so.1",
        ] {
            assert_eq!(
                diverted_stock_name(Path::new(&format!("{dir}/{other}"))),
                None,
                "{other}"
            );
        }
    }

    /// A test binary has no libibverbs loaded: the constructor must refuse.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "dlopen of libibverbs, foreign code Miri cannot run; the host run covers it"
    )]
    fn registration_refuses_without_libibverbs() {
        assert_eq!(Libibverbs::find().err(), Some(Refusal::NotLoaded));
    }
}
