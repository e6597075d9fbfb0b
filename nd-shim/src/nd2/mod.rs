//! The ND2 face: NetworkDirect's COM interfaces (`include/nd2/ndspi.h`) and helper functions
//! (`ndsupport.h`) over the Rust API, so that ND2 programs written for Windows compile with g++
//! against the shim's headers, link with `-lnd_shim`, and run.
//!
//! Objects. Every object the caller sees is a `Com`: its first word points to a static vtable
//! of `extern "C"` functions in the interface's declaration order (IUnknown's three first), which
//! is also how g++ lays out an abstract C++ class without a virtual destructor, so `p->Send(...)`
//! from C++ and `p->lpVtbl->Send(p, ...)` from C both land here. The reference count is atomic;
//! QueryInterface answers the IIDs of the object's interface chain with the same pointer. An
//! argument passed as `IUnknown*` is accepted only if its vtable is the expected kind's
//! (ND_INVALID_PARAMETER otherwise, never a cast of a foreign object).
//!
//! Lifetime. The last Release releases the object: its body's share goes (the body itself goes
//! when no other object still holds it: a QP holds its CQs, every object its adapter, and a call
//! in progress the objects it was passed) and its shell (vtable pointer, counts, body pointer)
//! returns to its class's pool, reused by a later object of the class: memory is bounded by the
//! peak of live objects (flat over 10^5 objects created and released). Calls and the last
//! Release on several threads are safe: every entry holds a count on its object for the call
//! (`Held`), so a Release on another thread meanwhile leaves the object whole until the call
//! returns (its end is then the last release); a call, AddRef or Release through the pointer of
//! a released object finds its shell (never freed) with no reference and returns
//! ND_INVALID_HANDLE (AddRef and Release 0), until the shell is reused, which a pool does only
//! after `QUARANTINE` more objects of the class were released (as Windows reuses handle
//! values): a pointer that old then reaches the newer object, which COM's rule (no call without
//! a reference) leaves to the caller. The count costs each call two atomic operations.
//! What else is checked: NULL, and a pointer whose first word is not the expected kind's vtable
//! (another kind of object, or one of a foreign library), are ND_INVALID_HANDLE for `this` and
//! ND_INVALID_PARAMETER for an argument.
//!
//! Every entry runs inside `boundary`: no unwinding crosses `extern "C"`; a panic is logged and
//! becomes ND_INTERNAL_ERROR (or the entry's neutral value). The exceptions are the hot paths
//! whose code cannot panic (pointer checks, atomics, a provider call): GetLocalToken and
//! GetRemoteToken, GetResults up to the first completion that is not a direct request of a live
//! QP, and Send and Receive with a direct context (`requests`; `qp`).
//!
//! Overlapped requests complete through `overlapped`; the Win32 handles they drive (events,
//! completion ports, the adapter's overlapped files) are [`win32`]; who reads the adapters'
//! completion channels (the waiting thread itself, or a relay thread) is `pump`.

use std::collections::VecDeque;
use std::ffi::c_void;
use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::Arc;

use crate::status::NdStatus;
use crate::sys;

mod adapter;
mod cq;
mod doorbell;
mod entry_connection;
mod entry_data;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod iids;
mod ind2_adapter;
mod ind2_connector;
mod ind2_listener;
mod int_map;
mod mr;
mod mw;
mod notify;
mod overlapped;
pub(crate) mod provider;
mod pump;
mod qp;
mod registration;
mod requests;
mod sge;
mod srq;
mod support;
mod thread_pool;
pub mod win32;

pub use iids::Guid;

/// HRESULT.
pub type HResult = i32;

const ND_SUCCESS: HResult = NdStatus::ND_SUCCESS.0;
const ND_PENDING: HResult = NdStatus::ND_PENDING.0;
const ND_INVALID_HANDLE: HResult = NdStatus::ND_INVALID_HANDLE.0;
const ND_INVALID_PARAMETER: HResult = NdStatus::ND_INVALID_PARAMETER.0;
const ND_INVALID_ADDRESS: HResult = NdStatus::ND_INVALID_ADDRESS.0;
const ND_INTERNAL_ERROR: HResult = NdStatus::ND_INTERNAL_ERROR.0;
const ND_BUFFER_OVERFLOW: HResult = NdStatus::ND_BUFFER_OVERFLOW.0;
/// E_NOINTERFACE: QueryInterface or a Create* for an IID the object does not have.
const E_NOINTERFACE: HResult = 0x8000_4002_u32 as i32;
/// E_POINTER: QueryInterface's out pointer is NULL.
const E_POINTER: HResult = 0x8000_4003_u32 as i32;

/// The panic boundary: runs `body`; a panic is logged and returns `on_panic`.
fn boundary<T>(entry: &str, on_panic: T, body: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(value) => value,
        Err(_) => {
            log::error!("nd2: {entry} panicked; returning an error to the caller");
            on_panic
        }
    }
}

/// The usual boundary for entries that return an HRESULT: `Err(code)` is returned as is.
fn hr_boundary(entry: &str, body: impl FnOnce() -> Result<HResult, HResult>) -> HResult {
    boundary(entry, ND_INTERNAL_ERROR, || match body() {
        Ok(hr) | Err(hr) => hr,
    })
}

fn code(status: NdStatus) -> HResult {
    status.0
}

/// A class of COM object: its vtable and the IIDs it answers, most derived last.
pub(crate) trait Class: Send + Sync + Sized + 'static {
    type Vtbl: 'static;
    const VTBL: &'static Self::Vtbl;
    const IIDS: &'static [&'static Guid];
    /// Called when the object is released (its last Release, or the end of a call that was in
    /// progress then), before the body's share is dropped (ND2: cancel what is pending).
    fn on_release(&self) {}
}

/// A COM object as the caller holds it: vtable pointer first. Its memory, the *shell*, is never
/// given back to the allocator: the last Release returns it to its class's pool, and a later
/// object of the same class reuses it (FIFO, after [`QUARANTINE`] other shells of the class were
/// released), so a pointer to it always reaches a `Com<T>` of the class its vtable names.
#[repr(C)]
pub(crate) struct Com<T: Class> {
    /// `T::VTBL`, written once when the shell is made.
    vtbl: *const T::Vtbl,
    /// The caller's references (bits 0-31), the calls in progress ([`Held`], bits 32-62) and
    /// [`RELEASED`]: the object is released when the references reach 0 (new calls are refused),
    /// whole until the calls have too, and then marked RELEASED (pooled) by exactly one thread.
    refs: AtomicU64,
    /// `Arc::into_raw` of the body while `refs` is not 0; NULL while pooled.
    body: AtomicPtr<T>,
}

/// How many shells of a class wait in its pool before the oldest is reused: a call through a
/// released object's pointer finds it released (ND_INVALID_HANDLE) until that many more
/// objects of the class have been released (Windows reuses handle values after a while too).
const QUARANTINE: usize = 1024;

/// `Com::refs`: one caller reference, the mask of them, one call in progress, and the mark of a
/// pooled shell (a call's count added to it is taken back at once: the shell stays pooled).
const ONE_REFERENCE: u64 = 1;
const REFERENCES: u64 = 0xffff_ffff;
const ONE_CALL: u64 = 1 << 32;
const RELEASED: u64 = 1 << 63;

/// The caller's references in a `Com::refs` value, as AddRef and Release return them.
fn references(refs: u64) -> u32 {
    (refs & REFERENCES) as u32
}

/// The pooled shells of each class, keyed by the class's vtable address, oldest first.
static POOLED_SHELLS: parking_lot::Mutex<Vec<(usize, VecDeque<usize>)>> = parking_lot::Mutex::new(Vec::new());

#[cfg(test)]
static LIVE_SHELLS: std::sync::atomic::AtomicIsize = std::sync::atomic::AtomicIsize::new(0);

impl<T: Class> Com<T> {
    fn class_key() -> usize {
        std::ptr::from_ref(T::VTBL) as usize
    }

    /// A new object with one reference, as a raw pointer for the caller.
    fn create(body: Arc<T>) -> *mut Com<T> {
        crate::liveness::object_created();
        #[cfg(test)]
        LIVE_SHELLS.fetch_add(1, Ordering::Relaxed);
        let body = Arc::into_raw(body).cast_mut();
        let reused = {
            let mut pools = POOLED_SHELLS.lock();
            pools
                .iter_mut()
                .find(|(key, _)| *key == Self::class_key())
                .and_then(|(_, pool)| {
                    if pool.len() > QUARANTINE {
                        pool.pop_front()
                    } else {
                        None
                    }
                })
        };
        match reused {
            Some(shell) => {
                let shell = shell as *mut Com<T>;
                // SAFETY: a pooled shell of this class (never freed), RELEASED: no reference and
                // no call on it but the passing counts of calls through stale pointers, which
                // are taken back at once: the mark is swapped for the reference when none is
                // there. The body is stored before the reference that publishes it (Release;
                // `hold` acquires).
                unsafe {
                    (*shell).body.store(body, Ordering::Relaxed);
                    while (*shell)
                        .refs
                        .compare_exchange_weak(RELEASED, ONE_REFERENCE, Ordering::Release, Ordering::Relaxed)
                        .is_err()
                    {
                        std::hint::spin_loop();
                    }
                }
                shell
            }
            None => Box::into_raw(Box::new(Com {
                vtbl: T::VTBL,
                refs: AtomicU64::new(ONE_REFERENCE),
                body: AtomicPtr::new(body),
            })),
        }
    }

    /// A count for the duration of a call: the object stays whole until the returned guard
    /// drops, even if another thread makes the last Release meanwhile (the guard's drop is
    /// then the last). A released object is ND_INVALID_HANDLE.
    #[inline]
    fn hold(&self) -> Result<Held<'_, T>, HResult> {
        // One atomic add (the common case: a live object); on a released one the count is
        // taken back (which may finish the release a racing call began).
        if self.refs.fetch_add(ONE_CALL, Ordering::Acquire) & REFERENCES == 0 {
            self.give_back();
            return Err(ND_INVALID_HANDLE);
        }
        let body = self.body.load(Ordering::Acquire).cast_const();
        Ok(Held { shell: self, body })
    }

    /// A call's end: the last count of all releases the object.
    #[inline]
    fn give_back(&self) {
        if self.refs.fetch_sub(ONE_CALL, Ordering::Release) == ONE_CALL {
            self.finish_release();
        }
    }

    /// No reference and no call left (the count just reached 0): the one thread that marks
    /// the shell RELEASED releases the object. Another may have added a call's count meanwhile
    /// (through a stale pointer): its taking back finds 0 again and comes here.
    #[cold]
    fn finish_release(&self) {
        if self
            .refs
            .compare_exchange(0, RELEASED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            // Every other use of the object happened before its count was given back (the
            // acquire pairs with their Release).
            self.last_release();
        }
    }

    /// Marked RELEASED: the body's share is dropped, the shell pooled.
    fn last_release(&self) {
        boundary("Release", (), || {
            let body = self.body.swap(std::ptr::null_mut(), Ordering::Relaxed);
            #[cfg(test)]
            LIVE_SHELLS.fetch_sub(1, Ordering::Relaxed);
            {
                let mut pools = POOLED_SHELLS.lock();
                let shell = std::ptr::from_ref(self) as usize;
                match pools.iter_mut().find(|(key, _)| *key == Self::class_key()) {
                    Some((_, pool)) => pool.push_back(shell),
                    None => pools.push((Self::class_key(), VecDeque::from([shell]))),
                }
            }
            // `self` is not touched from here: the shell may be reused.
            // SAFETY: the object's own count from Arc::into_raw, given back once (the swap).
            let body = unsafe { Arc::from_raw(body) };
            body.on_release();
            drop(body);
        });
        crate::liveness::object_released();
    }

    /// A strong reference to the body, for objects (and calls) that must keep this one alive.
    fn arc(&self) -> Result<Arc<T>, HResult> {
        let held = self.hold()?;
        let body = held.body;
        // SAFETY: the pointer came from Arc::into_raw and the object holds that count while held.
        unsafe { Arc::increment_strong_count(body) };
        // SAFETY: the count just taken is handed to the new Arc.
        Ok(unsafe { Arc::from_raw(body) })
    }
}

/// A call's count on an object ([`Com::hold`]): derefs to the body. The body is kept as the
/// pointer from Arc::into_raw, not a `&T`: the last release may free it while the guard itself
/// is being dropped (a reference held then would outlive its memory), and [`Com::arc`] reaches
/// Arc's count before the body, outside what a `&T` may reach.
pub(crate) struct Held<'a, T: Class> {
    shell: &'a Com<T>,
    body: *const T,
}

impl<T: Class> std::ops::Deref for Held<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: not NULL while the count is not 0 (stored before it was published, taken
        // only after it reached 0); from Arc::into_raw, and the object's own count keeps it
        // alive until the last count, this guard's at the earliest, is given back.
        unsafe { &*self.body }
    }
}

impl<T: Class> Drop for Held<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.shell.give_back();
    }
}

/// The object behind a `this` pointer, checked by kind: NULL or another kind's vtable is
/// ND_INVALID_HANDLE (for `this`) or ND_INVALID_PARAMETER (for an argument, see [`arg`]).
///
/// # Safety
/// `ptr` is NULL or points to at least a pointer's worth of readable memory; if its first word
/// is `T`'s vtable, it is a `Com<T>` made by this module (live or released: shells are never
/// freed).
unsafe fn object<'a, T: Class>(ptr: *mut c_void) -> Result<&'a Com<T>, HResult> {
    if ptr.is_null() {
        return Err(ND_INVALID_HANDLE);
    }
    // SAFETY: non-NULL and readable for one pointer (the caller's promise).
    let vtbl = unsafe { ptr.cast::<*const T::Vtbl>().read() };
    if !std::ptr::eq(vtbl, T::VTBL) {
        return Err(ND_INVALID_HANDLE);
    }
    // SAFETY: the vtable says it is a Com<T> of ours, and its memory is never freed.
    Ok(unsafe { &*ptr.cast::<Com<T>>() })
}

/// The body behind a `this` pointer, held for the call: ND_INVALID_HANDLE if the object was
/// released.
///
/// # Safety
/// As [`object`].
unsafe fn this<'a, T: Class>(ptr: *mut c_void) -> Result<Held<'a, T>, HResult> {
    // SAFETY: forwarded.
    unsafe { object::<T>(ptr)? }.hold()
}

/// An `IUnknown*` argument that must be a `T` (a QP for Connect, a connector for
/// GetConnectionRequest, ...): a strong reference to its body, or ND_INVALID_PARAMETER.
///
/// # Safety
/// As [`object`].
unsafe fn arg<T: Class>(ptr: *mut c_void) -> Result<Arc<T>, HResult> {
    // SAFETY: forwarded.
    let object = unsafe { object::<T>(ptr) }.map_err(|_| ND_INVALID_PARAMETER)?;
    object.arc().map_err(|_| ND_INVALID_PARAMETER)
}

/// IUnknown::QueryInterface for `T`.
unsafe extern "C" fn query_interface<T: Class>(this: *mut c_void, iid: *const Guid, out: *mut *mut c_void) -> HResult {
    hr_boundary("QueryInterface", || {
        if out.is_null() {
            return Err(E_POINTER);
        }
        // SAFETY: out is non-NULL and writable (the caller's promise); NULL on every failure.
        unsafe { out.write(std::ptr::null_mut()) };
        // SAFETY: the caller's object.
        let object = unsafe { object::<T>(this)? };
        if iid.is_null() {
            return Err(E_POINTER);
        }
        // SAFETY: non-NULL, a GUID (the caller's promise).
        let iid = unsafe { iid.read_unaligned() };
        if !T::IIDS.iter().any(|known| **known == iid) {
            return Err(E_NOINTERFACE);
        }
        let held = object.hold()?;
        // A reference only while one is left (a racing last Release wins).
        let mut refs = held.shell.refs.load(Ordering::Relaxed);
        loop {
            if refs & REFERENCES == 0 {
                return Err(ND_INVALID_HANDLE);
            }
            match held.shell.refs.compare_exchange_weak(
                refs,
                refs + ONE_REFERENCE,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => refs = now,
            }
        }
        // SAFETY: as above.
        unsafe { out.write(this) };
        Ok(ND_SUCCESS)
    })
}

unsafe extern "C" fn add_ref<T: Class>(this: *mut c_void) -> u32 {
    boundary("AddRef", 0, || {
        // SAFETY: the caller's object.
        let Ok(object) = (unsafe { object::<T>(this) }) else {
            return 0;
        };
        // A released object stays released (0): a count is taken only on a live one.
        let mut refs = object.refs.load(Ordering::Relaxed);
        while refs & REFERENCES != 0 {
            match object
                .refs
                .compare_exchange_weak(refs, refs + ONE_REFERENCE, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return references(refs) + 1,
                Err(now) => refs = now,
            }
        }
        0
    })
}

unsafe extern "C" fn release<T: Class>(this: *mut c_void) -> u32 {
    boundary("Release", 0, || {
        // SAFETY: the caller's object.
        let Ok(object) = (unsafe { object::<T>(this) }) else {
            return 0;
        };
        // A released object is left alone (0): a count is given back only by its holder.
        let mut refs = object.refs.load(Ordering::Relaxed);
        loop {
            if refs & REFERENCES == 0 {
                return 0;
            }
            match object
                .refs
                .compare_exchange_weak(refs, refs - ONE_REFERENCE, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(now) => refs = now,
            }
        }
        if refs == ONE_REFERENCE {
            // The last reference and no call in progress (a call's end releases it otherwise).
            object.finish_release();
        }
        references(refs) - 1
    })
}

/// Writes a new object to a `VOID**` out-parameter after checking the IID the caller asked for.
///
/// # Safety
/// `iid` is NULL or a GUID; `out` is NULL or writable for one pointer.
unsafe fn give<T: Class>(
    iid: *const Guid,
    out: *mut *mut c_void,
    body: impl FnOnce() -> Result<T, HResult>,
) -> Result<HResult, HResult> {
    if out.is_null() || iid.is_null() {
        return Err(ND_INVALID_PARAMETER);
    }
    // SAFETY: non-NULL, a GUID (the caller's promise).
    let iid = unsafe { iid.read_unaligned() };
    if !T::IIDS.iter().any(|known| **known == iid) {
        return Err(E_NOINTERFACE);
    }
    let object = Com::create(Arc::new(body()?));
    // SAFETY: non-NULL, writable (the caller's promise).
    unsafe { out.write(object.cast()) };
    Ok(ND_SUCCESS)
}

/// A socket address from C: NULL is ND_INVALID_PARAMETER; a length too short for its family, or
/// a family other than AF_INET / AF_INET6, is ND_INVALID_ADDRESS.
///
/// # Safety
/// `addr` is NULL or readable for `len` bytes.
unsafe fn read_sockaddr(addr: *const libc::sockaddr, len: usize) -> Result<SocketAddr, HResult> {
    if addr.is_null() {
        return Err(ND_INVALID_PARAMETER);
    }
    if len < std::mem::size_of::<libc::sa_family_t>() {
        return Err(ND_INVALID_ADDRESS);
    }
    // SAFETY: at least the family is readable (checked length); unaligned, as C may pass bytes.
    let family = unsafe { std::ptr::addr_of!((*addr).sa_family).read_unaligned() };
    let need = match i32::from(family) {
        libc::AF_INET => std::mem::size_of::<libc::sockaddr_in>(),
        libc::AF_INET6 => std::mem::size_of::<libc::sockaddr_in6>(),
        _ => return Err(ND_INVALID_ADDRESS),
    };
    if len < need {
        return Err(ND_INVALID_ADDRESS);
    }
    // SAFETY: all zeroes is a valid sockaddr_storage.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    // SAFETY: `need` bytes are readable (checked) and fit in the storage.
    unsafe { std::ptr::copy_nonoverlapping(addr.cast::<u8>(), std::ptr::addr_of_mut!(storage).cast::<u8>(), need) };
    sys::from_sockaddr(&storage).ok_or(ND_INVALID_ADDRESS)
}

/// A byte slice from a C pointer and length: NULL is allowed only with length 0.
///
/// # Safety
/// `data` is NULL or readable for `len` bytes for the returned lifetime.
unsafe fn bytes<'a>(data: *const c_void, len: usize) -> Result<&'a [u8], HResult> {
    match (data.is_null(), len) {
        (_, 0) => Ok(&[]),
        (true, _) => Err(ND_INVALID_PARAMETER),
        // SAFETY: non-NULL and readable for len bytes (the caller's promise).
        (false, len) => Ok(unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) }),
    }
}

/// ND2's "fill a caller's buffer" rule for addresses and private data: `*len` in, the required
/// size out; the filler decides what a short buffer gets.
///
/// # Safety
/// `len` is NULL or valid for a u32; `buffer` is NULL or writable for `*len` bytes.
unsafe fn fill_out(
    buffer: *mut c_void,
    len: *mut u32,
    fill: impl FnOnce(&mut [u8]) -> Result<crate::BufferFill, NdStatus>,
) -> Result<HResult, HResult> {
    if len.is_null() {
        return Err(ND_INVALID_PARAMETER);
    }
    // SAFETY: non-NULL, readable (the caller's promise).
    let have = unsafe { len.read() } as usize;
    let buffer: &mut [u8] = match (buffer.is_null(), have) {
        (true, _) | (_, 0) => &mut [],
        // SAFETY: non-NULL and writable for `have` bytes (the caller's promise).
        (false, have) => unsafe { std::slice::from_raw_parts_mut(buffer.cast::<u8>(), have) },
    };
    let filled = fill(buffer).map_err(code)?;
    // SAFETY: as above.
    unsafe { len.write(u32::try_from(filled.required).unwrap_or(u32::MAX)) };
    Ok(code(filled.status))
}

/// An object with overlapped requests (IND2Overlapped).
pub(crate) trait Overlapped: Class {
    /// CancelOverlappedRequests: every pending request of the object completes with
    /// ND_CANCELED, in issue order, before this returns.
    fn cancel(&self);
}

unsafe extern "C" fn cancel_overlapped_requests<T: Overlapped>(this: *mut c_void) -> HResult {
    hr_boundary("CancelOverlappedRequests", || {
        // SAFETY: the caller's object.
        unsafe { self::this::<T>(this)? }.cancel();
        Ok(ND_SUCCESS)
    })
}

unsafe extern "C" fn get_overlapped_result<T: Overlapped>(this: *mut c_void, ov: *mut c_void, wait: i32) -> HResult {
    hr_boundary("GetOverlappedResult", || {
        // SAFETY: the caller's object.
        unsafe { self::this::<T>(this)? };
        // SAFETY: the caller's OVERLAPPED, live while its request is (the Win32 rule).
        Ok(unsafe { overlapped::result(ov, wait != 0) })
    })
}

/// The IUnknown part of a vtable.
#[repr(C)]
pub(crate) struct UnknownVtbl {
    query_interface: unsafe extern "C" fn(*mut c_void, *const Guid, *mut *mut c_void) -> HResult,
    add_ref: unsafe extern "C" fn(*mut c_void) -> u32,
    release: unsafe extern "C" fn(*mut c_void) -> u32,
}

impl UnknownVtbl {
    const fn of<T: Class>() -> UnknownVtbl {
        UnknownVtbl {
            query_interface: query_interface::<T>,
            add_ref: add_ref::<T>,
            release: release::<T>,
        }
    }
}

/// The IND2Overlapped part of a vtable, after IUnknown's.
#[repr(C)]
pub(crate) struct OverlappedVtbl {
    cancel_overlapped_requests: unsafe extern "C" fn(*mut c_void) -> HResult,
    get_overlapped_result: unsafe extern "C" fn(*mut c_void, *mut c_void, i32) -> HResult,
}

impl OverlappedVtbl {
    const fn of<T: Overlapped>() -> OverlappedVtbl {
        OverlappedVtbl {
            cancel_overlapped_requests: cancel_overlapped_requests::<T>,
            get_overlapped_result: get_overlapped_result::<T>,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    struct Probe {
        dropped: Arc<AtomicUsize>,
        released: Arc<AtomicUsize>,
    }

    impl Drop for Probe {
        fn drop(&mut self) {
            self.dropped.fetch_add(1, Ordering::SeqCst);
        }
    }

    static PROBE_VTBL: UnknownVtbl = UnknownVtbl::of::<Probe>();

    impl Class for Probe {
        type Vtbl = UnknownVtbl;
        const VTBL: &'static UnknownVtbl = &PROBE_VTBL;
        const IIDS: &'static [&'static Guid] = &[&iids::IID_IUnknown];
        fn on_release(&self) {
            self.released.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn probe() -> (*mut c_void, Arc<AtomicUsize>, Arc<AtomicUsize>) {
        let dropped = Arc::new(AtomicUsize::new(0));
        let released = Arc::new(AtomicUsize::new(0));
        let body = Probe {
            dropped: Arc::clone(&dropped),
            released: Arc::clone(&released),
        };
        (Com::create(Arc::new(body)).cast(), dropped, released)
    }

    fn live_shells() -> isize {
        LIVE_SHELLS.load(Ordering::SeqCst)
    }

    #[test]
    fn the_last_release_frees_the_shell_and_the_body() {
        let _serial = crate::liveness::serial_for_test();
        let before = live_shells();
        for _ in 0..1000 {
            let (object, dropped, released) = probe();
            assert_eq!(live_shells(), before + 1);
            // SAFETY: a live object of ours, one reference per AddRef or QueryInterface.
            unsafe {
                assert_eq!(add_ref::<Probe>(object), 2);
                let mut out = std::ptr::null_mut();
                assert_eq!(
                    query_interface::<Probe>(object, &iids::IID_IUnknown, &mut out),
                    ND_SUCCESS
                );
                assert_eq!(out, object);
                assert_eq!(release::<Probe>(object), 2);
                assert_eq!(release::<Probe>(object), 1);
                assert_eq!(dropped.load(Ordering::SeqCst), 0);
                assert_eq!(release::<Probe>(object), 0);
            }
            assert_eq!(
                (released.load(Ordering::SeqCst), dropped.load(Ordering::SeqCst)),
                (1, 1)
            );
            assert_eq!(live_shells(), before, "the shell is freed at the last Release");
        }
    }

    #[test]
    fn a_body_another_object_holds_outlives_the_shell() {
        let _serial = crate::liveness::serial_for_test();
        let before = live_shells();
        let (object, dropped, released) = probe();
        // SAFETY: a live object of ours; its body is held by `held` (as a QP holds its CQ).
        let held = unsafe { arg::<Probe>(object) }.unwrap();
        // SAFETY: the caller's only reference.
        assert_eq!(unsafe { release::<Probe>(object) }, 0);
        assert_eq!(live_shells(), before);
        assert_eq!(
            (released.load(Ordering::SeqCst), dropped.load(Ordering::SeqCst)),
            (1, 0)
        );
        drop(held);
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn references_taken_and_given_back_on_many_threads_free_the_object_once() {
        let _serial = crate::liveness::serial_for_test();
        let before = live_shells();
        for _ in 0..50 {
            let (object, dropped, released) = probe();
            let shared = object as usize;
            let threads: Vec<_> = (0..4)
                .map(|_| {
                    // Each thread gets a reference of its own before it starts (COM's rule).
                    // SAFETY: live: the creator's reference is still held.
                    unsafe { add_ref::<Probe>(shared as *mut c_void) };
                    std::thread::spawn(move || {
                        let object = shared as *mut c_void;
                        for _ in 0..1000 {
                            // SAFETY: this thread holds a reference while it calls.
                            unsafe {
                                add_ref::<Probe>(object);
                                release::<Probe>(object);
                            }
                        }
                        // SAFETY: gives back this thread's own reference.
                        unsafe { release::<Probe>(object) };
                    })
                })
                .collect();
            // SAFETY: the creator's reference, given back while the threads run.
            unsafe { release::<Probe>(object) };
            for thread in threads {
                thread.join().unwrap();
            }
            assert_eq!(
                (released.load(Ordering::SeqCst), dropped.load(Ordering::SeqCst)),
                (1, 1)
            );
        }
        assert_eq!(live_shells(), before);
    }

    fn pooled(key: usize) -> usize {
        POOLED_SHELLS
            .lock()
            .iter()
            .find(|(k, _)| *k == key)
            .map_or(0, |(_, pool)| pool.len())
    }

    #[test]
    fn a_released_object_is_refused_until_its_shell_is_reused() {
        let _serial = crate::liveness::serial_for_test();
        let (object, _, released) = probe();
        // SAFETY: the caller's only reference; afterwards the pointer is stale, which the
        // module answers (shells are never freed).
        unsafe {
            assert_eq!(release::<Probe>(object), 0);
            assert_eq!(released.load(Ordering::SeqCst), 1);
            assert_eq!(this::<Probe>(object).err(), Some(ND_INVALID_HANDLE));
            assert_eq!(add_ref::<Probe>(object), 0);
            assert_eq!(release::<Probe>(object), 0);
            let mut out = std::ptr::null_mut();
            assert_eq!(
                query_interface::<Probe>(object, &iids::IID_IUnknown, &mut out),
                ND_INVALID_HANDLE
            );
            assert_eq!(released.load(Ordering::SeqCst), 1, "released once");
        }
        // QUARANTINE more objects created and released one at a time reuse no shell: each
        // takes a new one, so the released object stays refused all along.
        for _ in 0..QUARANTINE {
            let (other, _, _) = probe();
            assert_ne!(other, object);
            // SAFETY: its only reference.
            unsafe { release::<Probe>(other) };
            // SAFETY: stale, answered (above).
            assert_eq!(unsafe { this::<Probe>(object) }.err(), Some(ND_INVALID_HANDLE));
        }
    }

    #[test]
    fn the_memory_of_released_objects_is_bounded_by_the_pool() {
        let _serial = crate::liveness::serial_for_test();
        let key = Com::<Probe>::class_key();
        for _ in 0..(4 * QUARANTINE) {
            let (object, _, _) = probe();
            // SAFETY: its only reference.
            unsafe { release::<Probe>(object) };
        }
        // One at a time: the pool holds the quarantine and the one just released.
        assert!(pooled(key) <= QUARANTINE + 1, "{} shells pooled", pooled(key));
    }

    #[test]
    fn a_call_in_progress_keeps_the_object_through_the_last_release() {
        let _serial = crate::liveness::serial_for_test();
        let (object, dropped, released) = probe();
        // SAFETY: live: the caller's reference.
        let call = unsafe { this::<Probe>(object) }.unwrap();
        // Another thread's last Release, while the call runs.
        let shared = object as usize;
        // SAFETY: the caller's only reference, given back on another thread.
        std::thread::spawn(move || unsafe { release::<Probe>(shared as *mut c_void) })
            .join()
            .unwrap();
        assert_eq!(
            (released.load(Ordering::SeqCst), dropped.load(Ordering::SeqCst)),
            (0, 0),
            "the body is whole while the call holds it"
        );
        // SAFETY: released by the caller: refused to new calls.
        assert_eq!(unsafe { this::<Probe>(object) }.err(), Some(ND_INVALID_HANDLE));
        drop(call);
        assert_eq!(
            (released.load(Ordering::SeqCst), dropped.load(Ordering::SeqCst)),
            (1, 1),
            "the call's end is the last release"
        );
    }

    #[test]
    fn calls_racing_the_last_release_are_whole_or_refused() {
        let _serial = crate::liveness::serial_for_test();
        let before = live_shells();
        for _ in 0..200 {
            let (object, dropped, released) = probe();
            let shared = object as usize;
            let start = Arc::new(std::sync::Barrier::new(4));
            let callers: Vec<_> = (0..3)
                .map(|_| {
                    let start = Arc::clone(&start);
                    std::thread::spawn(move || {
                        start.wait();
                        let mut refused = 0;
                        for _ in 0..200 {
                            // SAFETY: the object may be released meanwhile: answered.
                            match unsafe { this::<Probe>(shared as *mut c_void) } {
                                // The body is whole while held.
                                Ok(body) => assert_eq!(body.released.load(Ordering::SeqCst), 0),
                                Err(e) => {
                                    assert_eq!(e, ND_INVALID_HANDLE);
                                    refused += 1;
                                }
                            }
                        }
                        refused
                    })
                })
                .collect();
            start.wait();
            // SAFETY: the only reference, given back while the calls run.
            unsafe { release::<Probe>(object) };
            for caller in callers {
                caller.join().unwrap();
            }
            assert_eq!(
                (released.load(Ordering::SeqCst), dropped.load(Ordering::SeqCst)),
                (1, 1),
                "released exactly once"
            );
        }
        assert_eq!(live_shells(), before);
    }

    #[test]
    fn null_and_foreign_pointers_are_refused_by_kind() {
        let foreign: [usize; 3] = [0x1234, 1, 0];
        let foreign = foreign.as_ptr().cast_mut().cast::<c_void>();
        // SAFETY: NULL, or readable for three words.
        unsafe {
            assert_eq!(this::<Probe>(std::ptr::null_mut()).err(), Some(ND_INVALID_HANDLE));
            assert_eq!(this::<Probe>(foreign).err(), Some(ND_INVALID_HANDLE));
            assert_eq!(arg::<Probe>(foreign).err(), Some(ND_INVALID_PARAMETER));
            assert_eq!(add_ref::<Probe>(foreign), 0);
            assert_eq!(release::<Probe>(foreign), 0);
        }
    }
}
