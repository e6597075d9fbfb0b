//! Finds the libibverbs already loaded in this process and resolves, by
//! symbol version, the four private entry points a provider needs and the
//! `RDMAV_ALLOW_DISASSOC_DESTROY` switch libibverbs read from the environment,
//! and decides the library's layout from its exports
//! ([`super::layout`]). Nothing here is bound at link time: the cdylib has no
//! `IBVERBS_PRIVATE_*` import, so it loads into any libibverbs and refuses
//! (does not register) when the layout is unknown.

use core::ffi::{c_char, c_int, c_void, CStr};
use std::ffi::CString;
use std::sync::OnceLock;

use super::device_abi::verbs_device_ops;
use super::device_context::ibv_device;
use super::layout::{named_release, qp_ex_from_answers, Exports, Layout, Refusal, KNOWN_PABIS};
use super::qp::{QpExLayout, VerbsQp, VERBS_QP_EX};

type RegisterDriverFn = unsafe extern "C" fn(*const verbs_device_ops);
type InitAndAllocContextFn = unsafe extern "C" fn(*mut ibv_device, c_int, usize, *mut c_void, u32) -> *mut c_void;
type SetOpsFn = unsafe extern "C" fn(*mut c_void, *const c_void);
type UninitContextFn = unsafe extern "C" fn(*mut c_void);

/// The running libibverbs: its layout and its provider glue.
pub struct Libibverbs {
    pub layout: Layout,
    /// The library's real path, for logs.
    pub path: String,
    register_driver: RegisterDriverFn,
    init_and_alloc_context: InitAndAllocContextFn,
    set_ops: SetOpsFn,
    uninit_context: UninitContextFn,
    /// libibverbs' `verbs_allow_disassociate_destroy`: with
    /// `RDMAV_ALLOW_DISASSOC_DESTROY` set, a destroy whose kernel command
    /// fails with EIO (the device was removed) succeeds and frees the object
    /// (`verbs_is_destroy_err`). Read at load time: libibverbs sets it in its
    /// own initialisation, before it loads providers.
    pub allow_disassociate_destroy: bool,
}

static LIBIBVERBS: OnceLock<Libibverbs> = OnceLock::new();

/// The library found at load time, once registration succeeded.
pub fn get() -> Option<&'static Libibverbs> {
    LIBIBVERBS.get()
}

/// Keeps `lib` for the life of the process and returns it.
pub fn install(lib: Libibverbs) -> &'static Libibverbs {
    LIBIBVERBS.get_or_init(|| lib)
}

fn symbol(handle: *mut c_void, name: &str, version: &CStr) -> Result<*mut c_void, Refusal> {
    let missing = || Refusal::MissingSymbol(format!("{name}@{}", version.to_string_lossy()));
    let cname = CString::new(name).map_err(|_| missing())?;
    // SAFETY: handle came from dlopen and is never closed; both strings are
    // NUL-terminated and outlive the call.
    let p = unsafe { libc::dlvsym(handle, cname.as_ptr(), version.as_ptr()) };
    if p.is_null() {
        Err(missing())
    } else {
        Ok(p)
    }
}

/// The name the dynamic loader opened this provider by (symbolic links not followed: the name
/// libibverbs built from a `.driver` file, or that `RDMAV_DRIVERS` gave).
pub fn provider_loaded_name() -> Option<std::path::PathBuf> {
    loaded_name(provider_loaded_name as fn() -> Option<std::path::PathBuf> as *const c_void)
}

/// The name the dynamic loader opened the object that contains `addr` by.
fn loaded_name(addr: *const c_void) -> Option<std::path::PathBuf> {
    let mut info = core::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: dladdr only writes into `info`, a valid Dl_info.
    let found = unsafe { libc::dladdr(addr, info.as_mut_ptr()) };
    // SAFETY: zeroed is a valid Dl_info, and dladdr filled it when found != 0.
    let info = unsafe { info.assume_init() };
    if found == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated string owned by the dynamic
    // loader, valid while the object stays loaded (we hold a reference).
    let loaded_as = unsafe { CStr::from_ptr(info.dli_fname as *const c_char) };
    Some(loaded_as.to_string_lossy().into_owned().into())
}

/// The real file behind the object that contains `addr`.
fn object_path(addr: *const c_void) -> Option<String> {
    let loaded_as = loaded_name(addr)?;
    let real = std::fs::canonicalize(&loaded_as).unwrap_or(loaded_as);
    Some(real.to_string_lossy().into_owned())
}

/// What the library's `ibv_qp_to_qp_ex` (`IBVERBS_1.6`, every release we
/// serve) answers for a zeroed `verbs_qp` whose `comp_mask` is `VERBS_QP_EX`
/// at the offset of each of [`QpExLayout::ALL`] in turn: whether it returned
/// the QP (it read `comp_mask` there). Reads nothing else of the library.
fn probe_qp_ex(handle: *mut c_void) -> Result<[bool; 3], Refusal> {
    type QpToQpExFn = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
    /// Room for any release's `verbs_qp`, aligned as it is.
    #[repr(C, align(8))]
    struct Probe([u8; size_of::<VerbsQp>()]);
    let f = symbol(handle, "ibv_qp_to_qp_ex", c"IBVERBS_1.6")?;
    // SAFETY: libibverbs' `struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *)`
    // under IBVERBS_1.6 (since rdma-core v24), the type transmuted to.
    let f = unsafe { core::mem::transmute::<*mut c_void, QpToQpExFn>(f) };
    Ok(QpExLayout::ALL.map(|candidate| {
        let mut qp = Probe([0; size_of::<VerbsQp>()]);
        let at = candidate.comp_mask_offset();
        qp.0[at..at + 4].copy_from_slice(&VERBS_QP_EX.to_ne_bytes());
        let p = qp.0.as_mut_ptr().cast::<c_void>();
        // SAFETY: p is a live, 8-aligned buffer as large as any release's
        // verbs_qp; the function reads its comp_mask (inside the buffer) and
        // returns p or NULL, writing nothing.
        unsafe { f(p) == p }
    }))
}

/// The PABI, registration symbol, path and layout of the libibverbs behind `handle`.
fn probe(handle: *mut c_void) -> Result<(u32, *mut c_void, String, Layout), Refusal> {
    let Some((pabi, register)) = KNOWN_PABIS.iter().find_map(|&pabi| {
        let version = CString::new(format!("IBVERBS_PRIVATE_{pabi}")).ok()?;
        let name = format!("verbs_register_driver_{pabi}");
        symbol(handle, &name, &version).ok().map(|p| (pabi, p))
    }) else {
        // Name the library (its file name may carry the release) we cannot serve.
        // SAFETY: as for `symbol`; ibv_get_device_list is public API of every release.
        let public = unsafe { libc::dlsym(handle, c"ibv_get_device_list".as_ptr()) };
        let library = object_path(public).unwrap_or_else(|| "libibverbs.so.1".into());
        return Err(Refusal::UnknownPabi { library });
    };
    let path = object_path(register).unwrap_or_else(|| "libibverbs.so.1".into());
    // The layouts are told by what the library exports and what its
    // ibv_qp_to_qp_ex answers, never by its file name.
    let exports = Exports::probe(pabi, |name, version| {
        CString::new(version).is_ok_and(|version| symbol(handle, name, &version).is_ok())
    });
    let qp_ex = qp_ex_from_answers(probe_qp_ex(handle)?)?;
    let layout = Layout::from_exports(pabi, exports, qp_ex)?;
    // The release in the file name, if any: a release after the newest known is refused (it
    // may have grown the tables under a PABI it kept); a known one only cross-checks.
    match named_release(&path, pabi)? {
        Some(release) if Layout::select(pabi, release) != Ok(layout) => log::info!(
            "{path}: rdma-core v{release} by its file name, with the exports of {layout:?} ({}): \
             taking the exports' layout",
            exports.describe()
        ),
        Some(_) => {}
        None => log::info!("{path}: no release in the file name; the layout its exports say: {layout:?}"),
    }
    Ok((pabi, register, path, layout))
}

/// [`probe`] on the library `name` the dynamic loader finds, loaded for the
/// purpose (the host tests probe the host's libibverbs) in a namespace of its
/// own, so that the process's default one still has no libibverbs (as
/// `registration`'s tests expect): `None` when there is none.
#[cfg(test)]
pub(crate) fn probe_layout_of(name: &str) -> Option<Result<(String, Layout), Refusal>> {
    let cname = CString::new(name).ok()?;
    // SAFETY: loads a library by name into a new link-map namespace; its
    // constructors are libibverbs' own.
    let handle = unsafe { libc::dlmopen(libc::LM_ID_NEWLM, cname.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return None;
    }
    Some(probe(handle).map(|(_, _, path, layout)| (path, layout)))
}

impl Libibverbs {
    /// Looks for libibverbs in the process and decides its layout.
    pub fn find() -> Result<Libibverbs, Refusal> {
        // SAFETY: RTLD_NOLOAD never loads anything; it only returns a handle
        // (with a reference we keep forever) if the library is already mapped.
        let handle = unsafe { libc::dlopen(c"libibverbs.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        if handle.is_null() {
            return Err(Refusal::NotLoaded);
        }
        let (pabi, register, path, layout) = probe(handle)?;

        let version = CString::new(format!("IBVERBS_PRIVATE_{pabi}")).expect("no NUL in a version name");
        let init = symbol(handle, "_verbs_init_and_alloc_context", &version)?;
        let set_ops = symbol(handle, "verbs_set_ops", &version)?;
        let uninit = symbol(handle, "verbs_uninit_context", &version)?;
        // A data symbol of every PABI since rdma-core v20; absent, the switch is off.
        let allow_disassociate_destroy = symbol(handle, "verbs_allow_disassociate_destroy", &version)
            // SAFETY: libibverbs' `bool verbs_allow_disassociate_destroy`, written
            // once in its initialisation (done: it is loading us); a C bool is
            // one byte, 0 or 1.
            .is_ok_and(|p| unsafe { p.cast::<u8>().read() } != 0);

        // SAFETY: each pointer is the address of the libibverbs function of
        // that name under IBVERBS_PRIVATE_<pabi>, whose C prototype (driver.h
        // of every release `Layout::select` accepts) is the type transmuted to.
        unsafe {
            Ok(Libibverbs {
                layout,
                path,
                register_driver: core::mem::transmute::<*mut c_void, RegisterDriverFn>(register),
                init_and_alloc_context: core::mem::transmute::<*mut c_void, InitAndAllocContextFn>(init),
                set_ops: core::mem::transmute::<*mut c_void, SetOpsFn>(set_ops),
                uninit_context: core::mem::transmute::<*mut c_void, UninitContextFn>(uninit),
                allow_disassociate_destroy,
            })
        }
    }

    /// `verbs_register_driver_<PABI>(ops)`: libibverbs keeps the pointer.
    pub fn register_driver(&self, ops: &'static verbs_device_ops) {
        // SAFETY: ops is 'static and laid out as this library's
        // verbs_device_ops (identical v35..v65).
        unsafe { (self.register_driver)(ops) }
    }

    /// `_verbs_init_and_alloc_context(device, cmd_fd, alloc_size, 0, driver_id)`:
    /// callocs `alloc_size` bytes with the `verbs_context` at offset 0 and
    /// initialises it. Takes ownership of `cmd_fd` (closed on failure).
    ///
    /// # Safety
    /// `device` is the `ibv_device` libibverbs passed to `alloc_context`, and
    /// `alloc_size` is at least this layout's `sizeof(struct verbs_context)`.
    pub unsafe fn init_and_alloc_context(
        &self,
        device: *mut ibv_device,
        cmd_fd: c_int,
        alloc_size: usize,
        driver_id: u32,
    ) -> *mut c_void {
        // SAFETY: forwarded from the caller's contract; offset 0 is a valid
        // `context_offset` (the macro form computes it as a null-based pointer).
        unsafe { (self.init_and_alloc_context)(device, cmd_fd, alloc_size, core::ptr::null_mut(), driver_id) }
    }

    /// `verbs_set_ops(vctx, ops)`.
    ///
    /// # Safety
    /// `vctx` is a live `verbs_context` of this library; `ops` points to a
    /// `verbs_context_ops` laid out for `self.layout`.
    pub unsafe fn set_ops(&self, vctx: *mut c_void, ops: *const c_void) {
        // SAFETY: the caller's contract.
        unsafe { (self.set_ops)(vctx, ops) }
    }

    /// `verbs_uninit_context(vctx)`: frees libibverbs' private part and closes
    /// `cmd_fd` and `async_fd`. The allocation itself stays for us to free.
    ///
    /// # Safety
    /// `vctx` came from [`Self::init_and_alloc_context`] and is not used by
    /// libibverbs any more.
    pub unsafe fn uninit_context(&self, vctx: *mut c_void) {
        // SAFETY: the caller's contract.
        unsafe { (self.uninit_context)(vctx) }
    }
}
