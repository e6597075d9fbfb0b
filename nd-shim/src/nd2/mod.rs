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
//! Lifetime. The last Release frees the whole object: its shell (vtable pointer, count, body
//! pointer) and its body's share (the body itself goes when no other object still holds it: a QP
//! holds its CQs, every object its adapter, and a call in progress the objects it was passed).
//! As on Windows, calling a method through a pointer one holds no reference on is the caller's
//! bug: COM's contract, which Microsoft's providers and programs follow. Why the shim does not
//! try to catch it: keeping every shell for ever, so that such a call found an emptied body and
//! returned ND_INVALID_HANDLE, makes a program that creates a memory region per transfer grow
//! without bound; a freelist of shells bounds the memory by the peak of live objects, but a stale
//! pointer then reaches whichever object of the same kind reuses its shell and acts on it
//! silently (not ND_INVALID_HANDLE); and a call racing the final Release on another thread would
//! still need every entry, hot paths included (Send, Receive, GetResults, the token getters), to
//! take and drop a count on the object to be safe: costs paid by correct programs for a guarantee
//! that still does not hold. So the shim keeps COM's rule. What stays
//! checked: NULL, and a pointer whose first word is not the expected kind's vtable (another kind
//! of object, or one of a foreign library), are ND_INVALID_HANDLE for `this` and
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

use std::ffi::c_void;
use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::status::NdStatus;
use crate::sys;

mod adapter;
mod cq;
mod doorbell;
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
mod provider;
mod pump;
mod qp;
mod registration;
mod requests;
mod sge;
mod srq;
mod support;
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
    /// Called at the last Release, before the body is dropped (ND2: cancel what is pending).
    fn on_release(&self) {}
}

/// A COM object as the caller holds it: vtable pointer first. Allocated by [`Com::create`], freed
/// by the last Release.
#[repr(C)]
pub(crate) struct Com<T: Class> {
    vtbl: *const T::Vtbl,
    refs: AtomicU32,
    /// `Arc::into_raw` of the body, given back at the last Release.
    body: *const T,
}

#[cfg(test)]
static LIVE_SHELLS: std::sync::atomic::AtomicIsize = std::sync::atomic::AtomicIsize::new(0);

impl<T: Class> Com<T> {
    /// A new object with one reference, as a raw pointer for the caller.
    fn create(body: Arc<T>) -> *mut Com<T> {
        #[cfg(test)]
        LIVE_SHELLS.fetch_add(1, Ordering::Relaxed);
        Box::into_raw(Box::new(Com {
            vtbl: T::VTBL,
            refs: AtomicU32::new(1),
            body: Arc::into_raw(body),
        }))
    }

    /// The body, shared: the object keeps it alive while the caller holds a reference.
    fn body(&self) -> &T {
        // SAFETY: from Arc::into_raw; the object's count is given back only by the last Release,
        // which frees `self` too (a caller holds a reference while it calls: COM's rule).
        unsafe { &*self.body }
    }

    /// A strong reference to the body, for objects (and calls) that must keep this one alive.
    fn arc(&self) -> Result<Arc<T>, HResult> {
        // SAFETY: the pointer came from Arc::into_raw and the object still holds that count.
        unsafe { Arc::increment_strong_count(self.body) };
        // SAFETY: the count just taken is handed to the new Arc.
        Ok(unsafe { Arc::from_raw(self.body) })
    }
}

/// The object behind a `this` pointer, checked by kind: NULL or another kind's vtable is
/// ND_INVALID_HANDLE (for `this`) or ND_INVALID_PARAMETER (for an argument, see [`arg`]).
///
/// # Safety
/// `ptr` is NULL or points to at least a pointer's worth of readable memory; if its first word
/// is `T`'s vtable, it is a live `Com<T>` made by this module, on which the caller holds a
/// reference for the returned lifetime (COM's rule; see the module's documentation).
unsafe fn object<'a, T: Class>(ptr: *mut c_void) -> Result<&'a Com<T>, HResult> {
    if ptr.is_null() {
        return Err(ND_INVALID_HANDLE);
    }
    // SAFETY: non-NULL and readable for one pointer (the caller's promise).
    let vtbl = unsafe { ptr.cast::<*const T::Vtbl>().read() };
    if !std::ptr::eq(vtbl, T::VTBL) {
        return Err(ND_INVALID_HANDLE);
    }
    // SAFETY: the vtable says it is a Com<T> of ours, live while the caller holds its reference.
    Ok(unsafe { &*ptr.cast::<Com<T>>() })
}

/// The body behind a `this` pointer.
///
/// # Safety
/// As [`object`].
unsafe fn this<'a, T: Class>(ptr: *mut c_void) -> Result<&'a T, HResult> {
    // SAFETY: forwarded.
    Ok(unsafe { object::<T>(ptr)? }.body())
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
        object.refs.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { out.write(this) };
        Ok(ND_SUCCESS)
    })
}

unsafe extern "C" fn add_ref<T: Class>(this: *mut c_void) -> u32 {
    boundary("AddRef", 0, || {
        // SAFETY: the caller's object.
        match unsafe { object::<T>(this) } {
            Ok(object) => object.refs.fetch_add(1, Ordering::Relaxed) + 1,
            Err(_) => 0,
        }
    })
}

unsafe extern "C" fn release<T: Class>(this: *mut c_void) -> u32 {
    boundary("Release", 0, || {
        // SAFETY: the caller's object.
        let Ok(object) = (unsafe { object::<T>(this) }) else {
            return 0;
        };
        let before = object.refs.fetch_sub(1, Ordering::Release);
        if before != 1 {
            return before.wrapping_sub(1);
        }
        // The last reference: every other thread's use of the object happened before its own
        // Release (COM's rule), which this acquire pairs with.
        std::sync::atomic::fence(Ordering::Acquire);
        // SAFETY: made by Com::create (Box::into_raw) and freed once: the count reached 0 here
        // and no reference is left to reach the object again.
        let shell = unsafe { Box::from_raw(this.cast::<Com<T>>()) };
        #[cfg(test)]
        LIVE_SHELLS.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: the object's own count from Arc::into_raw, given back once (the shell goes).
        let body = unsafe { Arc::from_raw(shell.body) };
        drop(shell);
        body.on_release();
        0
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
    use std::sync::Mutex;

    /// The unit tests that count live shells run one at a time (the count is process-wide).
    static SERIAL: Mutex<()> = Mutex::new(());

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
        let _serial = SERIAL.lock().unwrap();
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
        let _serial = SERIAL.lock().unwrap();
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
        let _serial = SERIAL.lock().unwrap();
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
