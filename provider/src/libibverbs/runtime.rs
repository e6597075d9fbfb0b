//! Finds the libibverbs already loaded in this process and resolves, by
//! symbol version, the four private entry points a provider needs and the
//! `RDMAV_ALLOW_DISASSOC_DESTROY` switch libibverbs read from the environment,
//! and decides the library's layout from its exports
//! ([`super::layout`]). Nothing here is bound at link time: the cdylib has no
//! `IBVERBS_PRIVATE_*` import, so it loads into any libibverbs and refuses
//! (does not register) when the layout is unknown.
//!
//! A boundary module (docs/provider-architecture.md): it also holds the raw
//! side of what the provider shares with libibverbs at run time, below every
//! verbs module: the objects handed to C (`HandedBox`, with `try_box` and
//! `destroy`, which `lifecycle` re-exports), the holds a parent domain and
//! its users keep (`Hold`), the waits on an object's event acks, the bytes
//! of an `ibv_gid`, a send request's remote address, the ops table as slots (`v36_slots`) and libibverbs'
//! `ibv_resolve_eth_l2_from_gid`.

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

/// The handle of the libibverbs already mapped into the process, if any.
fn loaded_libibverbs() -> Option<*mut c_void> {
    // SAFETY: RTLD_NOLOAD never loads anything (no constructor runs); it only
    // returns a handle (with a reference we keep forever) if the library is
    // already mapped.
    let handle = unsafe { libc::dlopen(c"libibverbs.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    (!handle.is_null()).then_some(handle)
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
    // SAFETY: dladdr only writes into `info`, a valid Dl_info (zeroed is
    // one, and dladdr filled it when it found the object); dli_fname is then
    // a NUL-terminated string owned by the dynamic loader, valid while the
    // object stays loaded (we hold a reference).
    let loaded_as = unsafe {
        let found = libc::dladdr(addr, info.as_mut_ptr());
        let info = info.assume_init();
        if found == 0 || info.dli_fname.is_null() {
            return None;
        }
        CStr::from_ptr(info.dli_fname as *const c_char)
    };
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
    Ok(QpExLayout::ALL.map(|candidate| {
        let mut qp = Probe([0; size_of::<VerbsQp>()]);
        let at = candidate.comp_mask_offset();
        qp.0[at..at + 4].copy_from_slice(&VERBS_QP_EX.to_ne_bytes());
        let p = qp.0.as_mut_ptr().cast::<c_void>();
        // SAFETY: f is libibverbs' `struct ibv_qp_ex *ibv_qp_to_qp_ex(struct
        // ibv_qp *)` under IBVERBS_1.6 (since rdma-core v24), the type
        // transmuted to; p is a live, 8-aligned buffer as large as any
        // release's verbs_qp; the function reads its comp_mask (inside the
        // buffer) and returns p or NULL, writing nothing.
        unsafe { core::mem::transmute::<*mut c_void, QpToQpExFn>(f)(p) == p }
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
        let handle = loaded_libibverbs().ok_or(Refusal::NotLoaded)?;
        let (pabi, register, path, layout) = probe(handle)?;

        let version = CString::new(format!("IBVERBS_PRIVATE_{pabi}")).expect("no NUL in a version name");
        let init = symbol(handle, "_verbs_init_and_alloc_context", &version)?;
        let set_ops = symbol(handle, "verbs_set_ops", &version)?;
        let uninit = symbol(handle, "verbs_uninit_context", &version)?;
        // A data symbol of every PABI since rdma-core v20; absent, the switch is off.
        let allow_disassociate = symbol(handle, "verbs_allow_disassociate_destroy", &version).ok();

        // SAFETY: each function pointer is the address of the libibverbs
        // function of that name under IBVERBS_PRIVATE_<pabi>, whose C
        // prototype (driver.h of every release `Layout::select` accepts) is
        // the type transmuted to; `allow_disassociate` is libibverbs' `bool
        // verbs_allow_disassociate_destroy`, written once in its
        // initialisation (done: it is loading us), a C bool of one byte, 0 or 1.
        unsafe {
            let allow_disassociate_destroy = allow_disassociate.is_some_and(|p| p.cast::<u8>().read() != 0);
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

/// A heap object whose address libibverbs, the application or the kernel
/// holds (the `ibv_*` struct at its start, a `user_handle`): owned here, and
/// reached only through the raw pointer it was made from, so every address
/// handed out stays valid while it lives (moving or reborrowing a `Box` would
/// assert unique access and invalidate them: Stacked Borrows). Dropping it
/// frees the object; [`HandedBox::into_raw`] keeps it allocated.
pub(crate) struct HandedBox<T>(core::ptr::NonNull<T>);

impl<T> HandedBox<T> {
    /// Takes the object out of `b`.
    pub(crate) fn new(b: Box<T>) -> HandedBox<T> {
        HandedBox(core::ptr::NonNull::from(Box::leak(b)))
    }

    /// Takes back an object [`HandedBox::into_raw`] gave out.
    ///
    /// # Safety
    /// `obj` came from `into_raw` and nothing else owns it now: the caller
    /// takes it back once.
    pub(crate) unsafe fn from_raw(obj: core::ptr::NonNull<T>) -> HandedBox<T> {
        HandedBox(obj)
    }

    /// The object's address, for C.
    pub(crate) fn as_ptr(&self) -> *mut T {
        self.0.as_ptr()
    }

    pub(crate) fn get(&self) -> &T {
        // SAFETY: a live allocation this value owns; whoever holds a copy of
        // the address dereferences it only under its own (unsafe) contract.
        unsafe { self.0.as_ref() }
    }

    pub(crate) fn get_mut(&mut self) -> &mut T {
        // SAFETY: a live allocation this value owns; `&mut self` makes this
        // the only access through it, and whoever holds a copy of the address
        // dereferences it only under its own (unsafe) contract.
        unsafe { self.0.as_mut() }
    }

    /// Gives the object up without freeing it: to C, or leaked.
    pub(crate) fn into_raw(self) -> core::ptr::NonNull<T> {
        core::mem::ManuallyDrop::new(self).0
    }
}

impl<T> Drop for HandedBox<T> {
    fn drop(&mut self) {
        // SAFETY: from Box::leak (new) or given back by from_raw's caller;
        // owned by this value, freed once.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

/// `Box::new(value)` that fails with `ENOMEM` when the allocator has no
/// memory, where `Box::new` aborts the process. Every create path boxes
/// through here (the stable stand-in for `Box::try_new`).
pub(crate) fn try_box<T>(value: T) -> Result<Box<T>, crate::errno::Errno> {
    // SAFETY: the global allocator's alloc, with the layout it is given.
    unsafe { try_box_with(value, |layout| std::alloc::alloc(layout)) }
}

/// [`try_box`] with the allocation made by `alloc`.
///
/// # Safety
/// `alloc` returns null or memory of the global allocator for the layout it
/// is given (what `Box` frees).
unsafe fn try_box_with<T>(
    value: T,
    alloc: impl FnOnce(std::alloc::Layout) -> *mut u8,
) -> Result<Box<T>, crate::errno::Errno> {
    let layout = std::alloc::Layout::new::<T>();
    if layout.size() == 0 {
        // Nothing to allocate.
        return Ok(Box::new(value));
    }
    let ptr = alloc(layout).cast::<T>();
    if ptr.is_null() {
        return Err(crate::errno::Errno::ENOMEM);
    }
    // SAFETY: ptr is a fresh allocation of T's layout (non-null, aligned, of
    // the global allocator, by the caller's word): written once, then owned
    // by the Box, which frees it with that layout.
    unsafe {
        ptr.write(value);
        Ok(Box::from_raw(ptr))
    }
}

/// Destroys a live object: `destroy` (the kernel command) first, then `wait`
/// with its answer, then the free. On a failed destroy the object stays. A
/// removed device answers every destroy with EIO; with libibverbs'
/// `RDMAV_ALLOW_DISASSOC_DESTROY` set that is a success without the wait, as
/// libibverbs' `ibv_cmd_destroy_*` take it (`verbs_is_destroy_err`).
///
/// # Safety
/// `obj` came from `Creating::finish` (`lifecycle`) and is not used after a
/// successful return (libibverbs forgets it when the destroy verb succeeds).
pub(crate) unsafe fn destroy<T, R>(
    obj: core::ptr::NonNull<T>,
    destroy: impl FnOnce() -> Result<R, crate::errno::Errno>,
    wait: impl FnOnce(&R),
) -> Result<(), crate::errno::Errno> {
    // SAFETY: Creating::finish handed it out by HandedBox::into_raw; the
    // caller gives it back once.
    destroy_owned(unsafe { HandedBox::from_raw(obj) }, destroy, wait).map_err(|(e, obj)| {
        // Still C's: alive and usable.
        obj.into_raw();
        e
    })
}

/// [`destroy`] of an object taken back from C; a failed destroy hands it
/// back with the errno, alive, for C.
pub(crate) fn destroy_owned<T, R>(
    obj: HandedBox<T>,
    destroy: impl FnOnce() -> Result<R, crate::errno::Errno>,
    wait: impl FnOnce(&R),
) -> Result<(), Kept<T>> {
    let gone_device_frees = get().is_some_and(|l| l.allow_disassociate_destroy);
    destroy_with(obj, destroy, wait, gone_device_frees)
}

/// A verb refused to free an object: the errno, and the object, still C's.
pub(crate) type Kept<T> = (crate::errno::Errno, HandedBox<T>);

/// [`destroy`] of an owned object, with libibverbs' switch given:
/// `gone_device_frees` makes an EIO from the kernel a success without `wait`.
fn destroy_with<T, R>(
    obj: HandedBox<T>,
    destroy: impl FnOnce() -> Result<R, crate::errno::Errno>,
    wait: impl FnOnce(&R),
    gone_device_frees: bool,
) -> Result<(), Kept<T>> {
    match destroy() {
        Ok(gone) => wait(&gone),
        Err(crate::errno::Errno::EIO) if gone_device_frees => {
            log::debug!("destroy: the device is gone (EIO); freed, as RDMAV_ALLOW_DISASSOC_DESTROY asks");
        }
        Err(e) => return Err((e, obj)),
    }
    // Freed after the kernel let the object go (or the device went) and
    // every event naming it was acked.
    drop(obj);
    Ok(())
}

/// An object that counts its holders ([`Hold`]) and is freed only when it
/// has none (its dealloc verb answers `EBUSY` until then).
pub(crate) trait CountsHolders {
    fn holders(&self) -> &core::sync::atomic::AtomicU32;
}

/// A hold on an object that counts its holders: the object outlives the
/// hold, which reads it through [`Hold::get`] (a parent domain's PD and TD,
/// an object's parent domain). Dropping it releases the hold.
pub(crate) struct Hold<T: CountsHolders>(core::ptr::NonNull<T>);

// SAFETY: a hold is a shared reference to T that outlives its borrow: it
// may go to and be used from any thread when &T may (T: Sync).
unsafe impl<T: CountsHolders + Sync> Send for Hold<T> {}
// SAFETY: as for Send.
unsafe impl<T: CountsHolders + Sync> Sync for Hold<T> {}

impl<T: CountsHolders> Hold<T> {
    pub(crate) fn new(obj: &T) -> Hold<T> {
        obj.holders().fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        Hold(core::ptr::NonNull::from(obj))
    }

    pub(crate) fn get(&self) -> &T {
        // SAFETY: the object is freed only when it counts no holders (every
        // free of a `CountsHolders` object checks it first), and this is one.
        unsafe { self.0.as_ref() }
    }
}

impl<T: CountsHolders> Drop for Hold<T> {
    fn drop(&mut self) {
        self.get().holders().fetch_sub(1, core::sync::atomic::Ordering::Release);
    }
}

/// Blocks until `acked()` holds, re-checking it under `mutex` each time
/// `cond` is signalled: libibverbs counts acknowledged events
/// (`ibv_ack_async_event`, `ibv_ack_cq_events`) under the object's mutex and
/// broadcasts its cond, as `ibv_cmd_destroy_*` expect. Called after the
/// kernel's destroy, whose answer says how many events it reported.
///
/// # Safety
/// `mutex` and `cond` are the initialised pthread objects of a live
/// libibverbs object; `acked` reads its counters (under the mutex).
pub(crate) unsafe fn wait_for_acks(
    mutex: *mut libc::pthread_mutex_t,
    cond: *mut libc::pthread_cond_t,
    acked: impl Fn() -> bool,
) {
    // SAFETY: per the contract.
    unsafe {
        libc::pthread_mutex_lock(mutex);
        while !acked() {
            libc::pthread_cond_wait(cond, mutex);
        }
        libc::pthread_mutex_unlock(mutex);
    }
}

/// [`wait_for_acks`] for an object with libibverbs' one async-event count
/// (`ibv_qp`, `ibv_srq`): waits until `events_completed` reaches `reported`.
///
/// # Safety
/// `mutex`, `cond` and `completed` are fields of one live libibverbs object
/// whose pthread objects are initialised.
pub(crate) unsafe fn wait_for_async_acks(
    mutex: *mut libc::pthread_mutex_t,
    cond: *mut libc::pthread_cond_t,
    completed: *mut u32,
    reported: u32,
) {
    // SAFETY: per the contract; the count is read under the mutex, volatile
    // because libibverbs writes it from another thread between our reads.
    unsafe { wait_for_acks(mutex, cond, || core::ptr::read_volatile(completed) == reported) }
}

impl super::control_objects::ibv_gid {
    /// The GID's 16 bytes.
    pub fn bytes(&self) -> [u8; 16] {
        // SAFETY: both arms are plain bytes of the union's whole size: every
        // bit pattern is valid, and a GID is always fully written.
        unsafe { self.raw }
    }
}

impl super::qp::ibv_send_wr {
    /// The remote address of the request's `wr` union read as the atomic arm's: every arm of it
    /// (rdma, atomic, ud) begins with 8 bytes (an address, or the AH pointer), so those are
    /// written whichever arm the application filled.
    #[inline(always)]
    pub(crate) fn atomic_remote_addr(&self) -> u64 {
        // SAFETY: the first 8 bytes of the union, initialised by every arm (above); an integer
        // read of pointer bytes is defined.
        unsafe { self.wr.atomic.remote_addr }
    }
}

/// libibverbs' public `ibv_resolve_eth_l2_from_gid` (rtnetlink neighbour
/// resolution; no uverbs command): the destination MAC for `attr`.
///
/// # Safety
/// `ctx` is a live context of the libibverbs loaded in this process.
pub(crate) unsafe fn resolve_eth_l2_from_gid(
    ctx: *mut super::device_context::ibv_context,
    attr: &super::control_objects::ibv_ah_attr,
) -> Result<[u8; 6], crate::errno::Errno> {
    use crate::errno::Errno;
    type ResolveL2Fn = unsafe extern "C" fn(
        *mut super::device_context::ibv_context,
        *mut super::control_objects::ibv_ah_attr,
        *mut u8,
        *mut u16,
    ) -> c_int;
    let handle = loaded_libibverbs().ok_or(Errno::ENOSYS)?;
    let sym = symbol(handle, "ibv_resolve_eth_l2_from_gid", c"IBVERBS_1.1").map_err(|_| Errno::ENOSYS)?;
    let mut attr = *attr;
    let mut mac = [0u8; 6];
    // SAFETY: the symbol is the public function of that name and version,
    // whose C prototype is ResolveL2Fn; ctx is a live context (the caller's
    // word), attr and mac are valid for the call, and a null vid is accepted
    // (the stock provider passes NULL too).
    let rc = unsafe {
        let resolve = core::mem::transmute::<*mut c_void, ResolveL2Fn>(sym);
        resolve(ctx, &mut attr, mac.as_mut_ptr(), core::ptr::null_mut())
    };
    match rc {
        0 => Ok(mac),
        rc if rc > 0 => Err(Errno::from_raw(rc)),
        rc if rc < 0 && rc != -1 => Err(Errno::from_raw(-rc)),
        _ => Err(Errno::EINVAL),
    }
}

/// `ours` as its 76 slots.
pub(crate) fn v36_slots(ours: &super::private_context::verbs_context_ops) -> &[super::device_context::opaque_fn; 76] {
    // SAFETY: verbs_context_ops is #[repr(C)] with 76 fields, each an
    // `Option` of an `extern "C" fn` (asserted 76 * 8 bytes): every field has
    // the size, alignment and null niche of `opaque_fn`, and reading a
    // function pointer under another signature is only storage, no call.
    unsafe { &*core::ptr::from_ref(ours).cast::<[super::device_context::opaque_fn; 76]>() }
}

/// C structs of plain data (integers, raw pointers, pthread objects, unions of those), for
/// which all-zero bytes are a valid value: calloc's state, and memset's.
///
/// # Safety
/// Every field of the type, at every depth, is valid as all-zero bytes.
pub(crate) unsafe trait PlainC: Sized {}

/// The all-zero value of a plain C struct.
pub(crate) fn zeroed<T: PlainC>() -> T {
    // SAFETY: PlainC: all-zero bytes are a valid T.
    unsafe { core::mem::zeroed() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errno::Errno;
    use crate::lifecycle::{fault, Creating};
    use core::sync::atomic::{AtomicUsize, Ordering};

    /// Counts its drops in the counter it holds.
    struct Dropped<'a>(&'a AtomicUsize);
    impl Drop for Dropped<'_> {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_failed_allocation_is_enomem_not_an_abort() {
        let dropped = AtomicUsize::new(0);
        // SAFETY: an allocator that has no memory (null), then the global one.
        let (r, b) = unsafe {
            (
                try_box_with(Dropped(&dropped), |_| core::ptr::null_mut()),
                try_box_with([7u64; 64], |l| std::alloc::alloc(l)).unwrap(),
            )
        };
        assert_eq!(r.err(), Some(Errno::ENOMEM));
        // The value was dropped, not leaked.
        assert_eq!(dropped.load(Ordering::Relaxed), 1);
        assert_eq!(b[63], 7);
        assert_eq!(*try_box(()).unwrap(), ());
        assert_eq!(*try_box(5u8).unwrap(), 5);
    }

    #[test]
    fn a_removed_device_s_eio_frees_only_when_libibverbs_allows_it() {
        let freed = AtomicUsize::new(0);
        let obj = HandedBox::new(Box::new(Dropped(&freed)));
        let waited = core::cell::Cell::new(false);
        let (e, obj) = destroy_with(obj, || Err::<(), _>(Errno::EIO), |()| waited.set(true), false).unwrap_err();
        assert_eq!(e, Errno::EIO, "without RDMAV_ALLOW_DISASSOC_DESTROY the object stays");
        assert_eq!(freed.load(Ordering::Relaxed), 0);
        let r = destroy_with(obj, || Err::<(), _>(Errno::EIO), |()| waited.set(true), true);
        assert!(r.is_ok(), "with it, EIO is the device gone: success");
        assert_eq!(freed.load(Ordering::Relaxed), 1);
        assert!(!waited.get(), "no wait for event acks from a gone device");
        // Another error is never taken for a gone device.
        let obj = HandedBox::new(Box::new(Dropped(&freed)));
        let (e, obj) = destroy_with(obj, || Err::<(), _>(Errno::EBUSY), |()| (), true).unwrap_err();
        assert_eq!(e, Errno::EBUSY);
        drop(obj);
        assert_eq!(freed.load(Ordering::Relaxed), 2);
    }

    fn destroy_fails(_fd: std::os::fd::RawFd, _handle: u32) -> Result<(), Errno> {
        Err(Errno::EBUSY)
    }

    #[test]
    fn a_failed_undo_leaks_and_the_memory_stays_readable() {
        let mut c = Creating::new(0x5eed_u64, "test", -1, destroy_fails).unwrap();
        let addr = c.as_ptr();
        c.created(3);
        drop(c);
        assert_eq!(fault::take_leaked(), vec![addr as usize]);
        // SAFETY: leaked, not freed: what an async event would read.
        assert_eq!(unsafe { addr.read() }, 0x5eed);
    }

    #[test]
    fn finish_hands_the_object_out_and_destroy_frees_it_after_the_wait() {
        let mut c = Creating::new(5u32, "test", -1, destroy_fails).unwrap();
        c.created(2);
        // SAFETY: handed out by finish, taken back once.
        let obj = unsafe { HandedBox::from_raw(c.finish()) };
        assert!(fault::take_leaked().is_empty());
        let mut waited = None;
        let (e, obj) = destroy_owned(obj, || Err::<u32, _>(Errno::EBUSY), |_| unreachable!()).unwrap_err();
        assert_eq!(e, Errno::EBUSY);
        // Still alive after the failed destroy.
        assert_eq!(*obj.get(), 5);
        let r = destroy_owned(obj, || Ok(9u32), |n| waited = Some(*n));
        assert_eq!((r.is_ok(), waited), (true, Some(9)));
    }
}
