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
//!
//! Unsafe code. This file is the COM base's boundary: the shells and counts, IUnknown's and
//! IND2Overlapped's entries, the reading of C arguments (`this`, `arg`, `guid`,
//! `read_sockaddr`, `bytes`, `out_bytes`, `sized_buffer`, `fill_out`), the IIDs'
//! exports, and the connection objects' two raw verbs calls. The other C entries are
//! `entry_connection` (provider, adapter, connector, listener) and `entry_data` (CQ, QP, SRQ, MR,
//! MW); `support` (ndsupport.h), `thread_pool` (it calls the program's callbacks), `overlapped`,
//! `doorbell`, `win32::calls` and `fuzzing` are the rest of the face's boundary. Every other child
//! carries `#![forbid(unsafe_code)]` and is given its arguments read.

use std::collections::VecDeque;
use std::ffi::c_void;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::Arc;

use rdma_mummy_sys as ffi;

use crate::status::NdStatus;
use crate::Adapter;

mod adapter;
mod cq;
mod data_verbs;
mod doorbell;
mod entry_connection;
mod entry_data;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
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

/// GUIDs, and the IIDs of `ndspi.h` defined once here: the headers declare them `extern`, so
/// every program that links `-lnd_shim` shares these (as it would link uuid.lib on Windows).
/// Exported statics are unsafe code to the compiler (`#[no_mangle]`): they live in this
/// boundary file.
#[allow(non_upper_case_globals)] // the C names of the headers
mod iids {
    /// GUID / IID, in the layout of `ndwinbase.h`.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Guid {
        pub data1: u32,
        pub data2: u16,
        pub data3: u16,
        pub data4: [u8; 8],
    }

    impl Guid {
        pub const fn new(data1: u32, data2: u16, data3: u16, data4: [u8; 8]) -> Guid {
            Guid {
                data1,
                data2,
                data3,
                data4,
            }
        }
    }

    #[no_mangle]
    pub static IID_IUnknown: Guid = Guid::new(0x0000_0000, 0x0000, 0x0000, [0xc0, 0, 0, 0, 0, 0, 0, 0x46]);
    #[no_mangle]
    pub static IID_IND2Overlapped: Guid = Guid::new(
        0xabf72719,
        0xb016,
        0x4a40,
        [0xa6, 0xf7, 0x62, 0x27, 0x91, 0xa7, 0x04, 0x4c],
    );
    #[no_mangle]
    pub static IID_IND2CompletionQueue: Guid = Guid::new(
        0x20cc445e,
        0x64a0,
        0x4cbb,
        [0xaa, 0x75, 0xf6, 0xa7, 0x25, 0x1f, 0xda, 0x9e],
    );
    #[no_mangle]
    pub static IID_IND2SharedReceiveQueue: Guid = Guid::new(
        0xaabd67dc,
        0x459a,
        0x4db1,
        [0x82, 0x6b, 0x56, 0xcf, 0xcc, 0x27, 0x88, 0x83],
    );
    #[no_mangle]
    pub static IID_IND2MemoryWindow: Guid = Guid::new(
        0x070fe1f5,
        0x0ab5,
        0x4361,
        [0x88, 0xdb, 0x97, 0x4b, 0xa7, 0x04, 0xd4, 0xb9],
    );
    #[no_mangle]
    pub static IID_IND2MemoryRegion: Guid = Guid::new(
        0x55dfea2f,
        0xbc56,
        0x4982,
        [0x8a, 0x45, 0x03, 0x01, 0xbe, 0x46, 0xc4, 0x13],
    );
    #[no_mangle]
    pub static IID_IND2QueuePair: Guid = Guid::new(
        0xeef2f332,
        0xb75d,
        0x4063,
        [0xbc, 0xe3, 0x3a, 0x0b, 0xad, 0x2d, 0x02, 0xce],
    );
    #[no_mangle]
    pub static IID_IND2Connector: Guid = Guid::new(
        0x7dd615c4,
        0x6b4c,
        0x4866,
        [0x95, 0x0c, 0xf3, 0xb1, 0xd2, 0x5a, 0x53, 0x02],
    );
    #[no_mangle]
    pub static IID_IND2Listener: Guid = Guid::new(
        0x65d23d83,
        0x3a57,
        0x4e02,
        [0x86, 0xa4, 0x35, 0x01, 0x65, 0xc2, 0xd1, 0x30],
    );
    #[no_mangle]
    pub static IID_IND2Adapter: Guid = Guid::new(
        0xd89c798c,
        0x4823,
        0x4d69,
        [0x84, 0x6c, 0xdf, 0xdc, 0xcf, 0xf9, 0xe5, 0xf3],
    );
    #[no_mangle]
    pub static IID_IND2Provider: Guid = Guid::new(
        0x49eae6c1,
        0x76c4,
        0x46d0,
        [0x80, 0x03, 0x5c, 0x2e, 0xaa, 0x2c, 0x9a, 0x8e],
    );

    // COM's class factory, what DllGetClassObject gives.
    #[no_mangle]
    pub static IID_IClassFactory: Guid = Guid::new(
        0x00000001,
        0x0000,
        0x0000,
        [0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x46],
    );
    /// nd-shim's provider class (ndsupport.h): the CLSID DllGetClassObject answers.
    #[no_mangle]
    pub static CLSID_NdShimProvider: Guid = Guid::new(
        0x1369fba5,
        0x7c7a,
        0x41c8,
        [0xa9, 0xe1, 0xe9, 0xa7, 0xa4, 0x62, 0x72, 0x41],
    );

    // ND1's IIDs (ndspi.h's ND1 half): declared so that ND1 fallbacks link; no object has them,
    // but the memory window's, which is IID_IND2MemoryWindow's value.
    #[no_mangle]
    pub static IID_INDOverlapped: Guid = Guid::new(
        0xc859e15e,
        0x75e2,
        0x4fe3,
        [0x8d, 0x6d, 0x0d, 0xff, 0x36, 0xf0, 0x24, 0x42],
    );
    #[no_mangle]
    pub static IID_INDCompletionQueue: Guid = Guid::new(
        0x1245a633,
        0x2a32,
        0x473a,
        [0x83, 0x0c, 0xe0, 0x5d, 0x1f, 0x86, 0x9d, 0x02],
    );
    #[no_mangle]
    pub static IID_INDMemoryWindow: Guid = Guid::new(
        0x070fe1f5,
        0x0ab5,
        0x4361,
        [0x88, 0xdb, 0x97, 0x4b, 0xa7, 0x04, 0xd4, 0xb9],
    );
    #[no_mangle]
    pub static IID_INDEndpoint: Guid = Guid::new(
        0xdbd00eab,
        0xb679,
        0x44a9,
        [0xbd, 0x65, 0xe8, 0x2f, 0x3d, 0xe1, 0x2d, 0x1a],
    );
    #[no_mangle]
    pub static IID_INDConnector: Guid = Guid::new(
        0x1bcaf2d1,
        0xe274,
        0x4aeb,
        [0xac, 0x57, 0xcd, 0x5d, 0x43, 0x76, 0xe0, 0xb7],
    );
    #[no_mangle]
    pub static IID_INDListen: Guid = Guid::new(
        0xbb902588,
        0xba3f,
        0x4441,
        [0x9f, 0xe1, 0x3b, 0x67, 0x95, 0xe4, 0xe6, 0x68],
    );
    #[no_mangle]
    pub static IID_INDAdapter: Guid = Guid::new(
        0xa023c5a0,
        0x5b73,
        0x43bc,
        [0x8d, 0x20, 0x33, 0xaa, 0x07, 0xe9, 0x51, 0x0f],
    );
    #[no_mangle]
    pub static IID_INDProvider: Guid = Guid::new(
        0x0c5dd316,
        0x5fdf,
        0x47e6,
        [0xb2, 0xd0, 0x2a, 0x6e, 0xda, 0x8d, 0x39, 0xdd],
    );

    // The exports above, at the version node ND_SHIM_0 (crate::exports).
    crate::exports::version_node!(
        "IID_IUnknown",
        "IID_IND2Overlapped",
        "IID_IND2CompletionQueue",
        "IID_IND2SharedReceiveQueue",
        "IID_IND2MemoryWindow",
        "IID_IND2MemoryRegion",
        "IID_IND2QueuePair",
        "IID_IND2Connector",
        "IID_IND2Listener",
        "IID_IND2Adapter",
        "IID_IND2Provider",
        "IID_IClassFactory",
        "CLSID_NdShimProvider",
        "IID_INDOverlapped",
        "IID_INDCompletionQueue",
        "IID_INDMemoryWindow",
        "IID_INDEndpoint",
        "IID_INDConnector",
        "IID_INDListen",
        "IID_INDAdapter",
        "IID_INDProvider",
    );
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
    pub(crate) fn create(body: Arc<T>) -> *mut Com<T> {
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
    pub(crate) fn hold(&self) -> Result<Held<'_, T>, HResult> {
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
    pub(crate) fn arc(&self) -> Result<Arc<T>, HResult> {
        let held = self.hold()?;
        let body = held.body;
        // SAFETY: the pointer came from Arc::into_raw and the object holds that count while held;
        // the count taken is handed to the new Arc.
        Ok(unsafe {
            Arc::increment_strong_count(body);
            Arc::from_raw(body)
        })
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
pub(crate) unsafe fn object<'a, T: Class>(ptr: *mut c_void) -> Result<&'a Com<T>, HResult> {
    if ptr.is_null() {
        return Err(ND_INVALID_HANDLE);
    }
    // SAFETY: non-NULL and readable for one pointer (the caller's promise); when that word is
    // T's vtable, it is a Com<T> of ours, whose memory is never freed.
    unsafe {
        if !std::ptr::eq(ptr.cast::<*const T::Vtbl>().read(), T::VTBL) {
            return Err(ND_INVALID_HANDLE);
        }
        Ok(&*ptr.cast::<Com<T>>())
    }
}

/// The body behind a `this` pointer, held for the call: ND_INVALID_HANDLE if the object was
/// released.
///
/// # Safety
/// As [`object`].
pub(crate) unsafe fn this<'a, T: Class>(ptr: *mut c_void) -> Result<Held<'a, T>, HResult> {
    // SAFETY: forwarded.
    unsafe { object::<T>(ptr)? }.hold()
}

/// An `IUnknown*` argument that must be a `T` (a QP for Connect, a connector for
/// GetConnectionRequest, ...): a strong reference to its body, or ND_INVALID_PARAMETER.
///
/// # Safety
/// As [`object`].
pub(crate) unsafe fn arg<T: Class>(ptr: *mut c_void) -> Result<Arc<T>, HResult> {
    // SAFETY: forwarded.
    let object = unsafe { object::<T>(ptr) }.map_err(|_| ND_INVALID_PARAMETER)?;
    object.arc().map_err(|_| ND_INVALID_PARAMETER)
}

/// IUnknown::QueryInterface for `T`.
pub(crate) unsafe extern "C" fn query_interface<T: Class>(
    this: *mut c_void,
    iid: *const Guid,
    out: *mut *mut c_void,
) -> HResult {
    hr_boundary("QueryInterface", || {
        // SAFETY: `out` is NULL or writable, `iid` NULL or a GUID, `this` the caller's object
        // (the caller's promises).
        let (out, object, iid) = unsafe { (out.as_mut(), object::<T>(this), guid(iid)) };
        // NULL on every failure.
        let out = out.ok_or(E_POINTER)?;
        *out = std::ptr::null_mut();
        let object = object?;
        let iid = iid.ok_or(E_POINTER)?;
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
        *out = this;
        Ok(ND_SUCCESS)
    })
}

pub(crate) unsafe extern "C" fn add_ref<T: Class>(this: *mut c_void) -> u32 {
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

pub(crate) unsafe extern "C" fn release<T: Class>(this: *mut c_void) -> u32 {
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

/// Writes a new object to a `VOID**` out-parameter after checking the IID the caller asked for
/// (a NULL IID or out pointer is ND_INVALID_PARAMETER).
pub(crate) fn give<T: Class>(
    iid: Option<Guid>,
    out: Option<&mut *mut c_void>,
    body: impl FnOnce() -> Result<T, HResult>,
) -> Result<HResult, HResult> {
    let (Some(out), Some(iid)) = (out, iid) else {
        return Err(ND_INVALID_PARAMETER);
    };
    if !T::IIDS.iter().any(|known| **known == iid) {
        return Err(E_NOINTERFACE);
    }
    *out = Com::create(Arc::new(body()?)).cast();
    Ok(ND_SUCCESS)
}

/// A GUID argument: NULL is `None`.
///
/// # Safety
/// `guid` is NULL or readable for a GUID (any alignment).
pub(crate) unsafe fn guid(guid: *const Guid) -> Option<Guid> {
    // SAFETY: non-NULL, readable (the caller's promise); unaligned, as C may pass bytes.
    (!guid.is_null()).then(|| unsafe { guid.read_unaligned() })
}

/// A socket address from C: NULL is ND_INVALID_PARAMETER; a length too short for its family, or
/// a family other than AF_INET / AF_INET6, is ND_INVALID_ADDRESS.
///
/// # Safety
/// `addr` is NULL or readable for `len` bytes.
pub(crate) unsafe fn read_sockaddr(addr: *const libc::sockaddr, len: usize) -> Result<SocketAddr, HResult> {
    if addr.is_null() {
        return Err(ND_INVALID_PARAMETER);
    }
    // SAFETY: non-NULL and readable for `len` bytes (the caller's promise).
    parse_sockaddr(unsafe { std::slice::from_raw_parts(addr.cast::<u8>(), len) })
}

/// The socket address a C `struct sockaddr` of `bytes.len()` bytes holds (any alignment):
/// [`read_sockaddr`]'s rules after the NULL check.
pub(crate) fn parse_sockaddr(bytes: &[u8]) -> Result<SocketAddr, HResult> {
    let word = |at: usize| u32::from_ne_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    let Some(&family) = bytes.first_chunk::<2>() else {
        return Err(ND_INVALID_ADDRESS);
    };
    let family = i32::from(libc::sa_family_t::from_ne_bytes(family));
    let need = match family {
        libc::AF_INET => std::mem::size_of::<libc::sockaddr_in>(),
        libc::AF_INET6 => std::mem::size_of::<libc::sockaddr_in6>(),
        _ => return Err(ND_INVALID_ADDRESS),
    };
    if bytes.len() < need {
        return Err(ND_INVALID_ADDRESS);
    }
    // sin_port / sin6_port in network order; sin6_flowinfo and sin6_scope_id as stored.
    let port = u16::from_be_bytes([bytes[2], bytes[3]]);
    Ok(if family == libc::AF_INET {
        SocketAddr::V4(SocketAddrV4::new(
            Ipv4Addr::new(bytes[4], bytes[5], bytes[6], bytes[7]),
            port,
        ))
    } else {
        let mut ip = [0u8; 16];
        ip.copy_from_slice(&bytes[8..24]);
        SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::from(ip), port, word(4), word(24)))
    })
}

/// A byte slice from a C pointer and length: NULL is allowed only with length 0.
///
/// # Safety
/// `data` is NULL or readable for `len` bytes for the returned lifetime.
pub(crate) unsafe fn bytes<'a>(data: *const c_void, len: usize) -> Result<&'a [u8], HResult> {
    match (data.is_null(), len) {
        (_, 0) => Ok(&[]),
        (true, _) => Err(ND_INVALID_PARAMETER),
        // SAFETY: non-NULL and readable for len bytes (the caller's promise).
        (false, len) => Ok(unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) }),
    }
}

/// A caller's buffer to fill: NULL (or a length of 0) is an empty slice.
///
/// # Safety
/// `buffer` is NULL or writable for `len` bytes for the returned lifetime, which nothing else
/// reaches meanwhile.
pub(crate) unsafe fn out_bytes<'a>(buffer: *mut c_void, len: usize) -> &'a mut [u8] {
    match (buffer.is_null(), len) {
        (true, _) | (_, 0) => &mut [],
        // SAFETY: non-NULL and writable for `len` bytes (the caller's promise).
        (false, len) => unsafe { std::slice::from_raw_parts_mut(buffer.cast::<u8>(), len) },
    }
}

/// ND2's buffer and size pair (`*len` bytes in, the size needed out): the size, and the buffer
/// as [`out_bytes`] gives it; `None` when `len` is NULL.
///
/// # Safety
/// `len` is NULL or valid for a u32; `buffer` is NULL or writable for `*len` bytes; neither is
/// reached otherwise for the returned lifetime.
pub(crate) unsafe fn sized_buffer<'a>(buffer: *mut c_void, len: *mut u32) -> Option<(&'a mut u32, &'a mut [u8])> {
    // SAFETY: the caller's promises.
    unsafe {
        let len = len.as_mut()?;
        let buffer = out_bytes(buffer, *len as usize);
        Some((len, buffer))
    }
}

/// ND2's "fill a caller's buffer" rule for addresses and private data: `*len` in, the required
/// size out; the filler decides what a short buffer gets.
///
/// # Safety
/// As [`sized_buffer`].
pub(crate) unsafe fn fill_out(
    buffer: *mut c_void,
    len: *mut u32,
    fill: impl FnOnce(&mut [u8]) -> Result<crate::BufferFill, NdStatus>,
) -> Result<HResult, HResult> {
    // SAFETY: forwarded.
    let (len, buffer) = unsafe { sized_buffer(buffer, len) }.ok_or(ND_INVALID_PARAMETER)?;
    fill_sized(len, buffer, fill)
}

/// [`fill_out`] over a size and buffer already read.
pub(crate) fn fill_sized(
    len: &mut u32,
    buffer: &mut [u8],
    fill: impl FnOnce(&mut [u8]) -> Result<crate::BufferFill, NdStatus>,
) -> Result<HResult, HResult> {
    let filled = fill(buffer).map_err(code)?;
    *len = u32::try_from(filled.required).unwrap_or(u32::MAX);
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
        // SAFETY: the caller's object, and its OVERLAPPED, live while its request is (the Win32
        // rule).
        unsafe {
            self::this::<T>(this)?;
            Ok(overlapped::result(ov, wait != 0))
        }
    })
}

/// The IUnknown part of a vtable.
#[repr(C)]
pub(crate) struct UnknownVtbl {
    pub(crate) query_interface: unsafe extern "C" fn(*mut c_void, *const Guid, *mut *mut c_void) -> HResult,
    pub(crate) add_ref: unsafe extern "C" fn(*mut c_void) -> u32,
    pub(crate) release: unsafe extern "C" fn(*mut c_void) -> u32,
}

impl UnknownVtbl {
    pub(crate) const fn of<T: Class>() -> UnknownVtbl {
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
    pub(crate) const fn of<T: Overlapped>() -> OverlappedVtbl {
        OverlappedVtbl {
            cancel_overlapped_requests: cancel_overlapped_requests::<T>,
            get_overlapped_result: get_overlapped_result::<T>,
        }
    }
}

/// A class's static vtable and its [`Class`] impl: IUnknown's entries first (then IND2Overlapped's
/// when its IID is given first), then the interface's own in its declaration order.
/// QueryInterface answers IUnknown's IID and the ones given; what follows the entries (an
/// `on_release`) goes into the impl.
macro_rules! com_class {
    ($body:ty, $vtbl:ident: $Vtbl:ident, [IID_IND2Overlapped, $iid:ident] { $($entries:tt)* } $($class:tt)*) => {
        $crate::nd2::com_class! {
            $body, $vtbl: $Vtbl, [IID_IND2Overlapped, $iid] @ {
                overlapped: $crate::nd2::OverlappedVtbl::of::<$body>(),
                $($entries)*
            }
            $($class)*
        }
    };
    // `@`: IND2Overlapped's entries are in already.
    ($body:ty, $vtbl:ident: $Vtbl:ident, [$($iid:ident),*] $(@)? { $($entry:ident $(: $f:expr)?,)* } $($class:tt)*) => {
        static $vtbl: $Vtbl = $Vtbl {
            unknown: $crate::nd2::UnknownVtbl::of::<$body>(),
            $($entry $(: $f)?,)*
        };

        impl $crate::nd2::Class for $body {
            type Vtbl = $Vtbl;
            const VTBL: &'static $Vtbl = &$vtbl;
            const IIDS: &'static [&'static $crate::nd2::Guid] =
                &[&$crate::nd2::iids::IID_IUnknown, $(&$crate::nd2::iids::$iid),*];
            $($class)*
        }
    };
}
pub(crate) use com_class;

// The connection objects' raw verbs calls (the data objects' are `entry_data.rs`).

/// The largest message of the adapter's port (rxe has one, number 1); `None` if the query fails.
pub(crate) fn max_message_size(adapter: &Adapter) -> Option<u32> {
    let mut port = std::mem::MaybeUninit::<ffi::ibv_port_attr>::zeroed();
    // SAFETY: the adapter's context is open; the call fills the attributes it was given, which
    // are plain old data, zeroed first, so initialised whatever it wrote.
    let (status, port) = unsafe {
        (
            ffi::ibv_query_port(adapter.inner.ctx, 1, port.as_mut_ptr()),
            port.assume_init(),
        )
    };
    (status == 0).then_some(port.max_msg_sz)
}

/// A verbs memory registration of an IND2MemoryRegion (`registration.rs`).
pub(crate) struct RawMr(pub(crate) *mut ffi::ibv_mr);
// SAFETY: an MR handle may be used from any thread.
unsafe impl Send for RawMr {}

impl RawMr {
    /// ibv_dereg_mr: 0, or the error. On success the caller forgets the registration (on
    /// failure the provider keeps it, as libibverbs' ibv_dereg_mr does).
    pub(crate) fn deregister(&self) -> i32 {
        // SAFETY: a registration made by IND2MemoryRegion::Register and not yet deregistered
        // (the caller forgets it once this succeeds).
        unsafe { ffi::ibv_dereg_mr(self.0) }
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

    /// A pointer to a Probe object as its caller holds it: made only by [`probe`], so always a
    /// `Com<Probe>` shell (never freed), through which every call is answered, live or released.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct ProbePtr(*mut c_void);

    // SAFETY: a COM object's pointer is shared across threads by design (its counts are atomic,
    // its body Send + Sync).
    unsafe impl Send for ProbePtr {}

    impl ProbePtr {
        fn raw(self) -> *mut c_void {
            self.0
        }

        fn add_ref(self) -> u32 {
            // SAFETY: a Com<Probe> shell (ProbePtr's rule).
            unsafe { add_ref::<Probe>(self.raw()) }
        }

        fn release(self) -> u32 {
            // SAFETY: as above.
            unsafe { release::<Probe>(self.raw()) }
        }

        /// QueryInterface for IUnknown: its code and out pointer.
        fn query_unknown(self) -> (HResult, *mut c_void) {
            let mut out = std::ptr::null_mut();
            // SAFETY: as above; a live local out pointer and a static IID.
            let hr = unsafe { query_interface::<Probe>(self.raw(), &iids::IID_IUnknown, &mut out) };
            (hr, out)
        }

        fn this(self) -> Result<Held<'static, Probe>, HResult> {
            // SAFETY: as above (shells live for the program).
            unsafe { this::<Probe>(self.raw()) }
        }

        fn arg(self) -> Result<Arc<Probe>, HResult> {
            // SAFETY: as above.
            unsafe { arg::<Probe>(self.raw()) }
        }
    }

    fn probe() -> (ProbePtr, Arc<AtomicUsize>, Arc<AtomicUsize>) {
        let dropped = Arc::new(AtomicUsize::new(0));
        let released = Arc::new(AtomicUsize::new(0));
        let body = Probe {
            dropped: Arc::clone(&dropped),
            released: Arc::clone(&released),
        };
        (ProbePtr(Com::create(Arc::new(body)).cast()), dropped, released)
    }

    /// A probe's (released, dropped) counts.
    fn counts(released: &AtomicUsize, dropped: &AtomicUsize) -> (usize, usize) {
        (released.load(Ordering::SeqCst), dropped.load(Ordering::SeqCst))
    }

    fn live_shells() -> isize {
        LIVE_SHELLS.load(Ordering::SeqCst)
    }

    /// The tests' turn (the shell count is process-wide), and the live shells then.
    fn serial_shells() -> (std::sync::MutexGuard<'static, ()>, isize) {
        let serial = crate::liveness::serial_for_test();
        (serial, live_shells())
    }

    #[test]
    fn the_last_release_frees_the_shell_and_the_body() {
        let (_serial, before) = serial_shells();
        for _ in 0..1000 {
            let (object, dropped, released) = probe();
            assert_eq!(live_shells(), before + 1);
            // One reference per AddRef or QueryInterface.
            assert_eq!(object.add_ref(), 2);
            assert_eq!(object.query_unknown(), (ND_SUCCESS, object.raw()));
            assert_eq!(object.release(), 2);
            assert_eq!(object.release(), 1);
            assert_eq!(dropped.load(Ordering::SeqCst), 0);
            assert_eq!(object.release(), 0);
            assert_eq!(counts(&released, &dropped), (1, 1));
            assert_eq!(live_shells(), before, "the shell is freed at the last Release");
        }
    }

    #[test]
    fn a_body_another_object_holds_outlives_the_shell() {
        let (_serial, before) = serial_shells();
        let (object, dropped, released) = probe();
        // Its body is held by `held` (as a QP holds its CQ).
        let held = object.arg().unwrap();
        // The caller's only reference.
        assert_eq!(object.release(), 0);
        assert_eq!(live_shells(), before);
        assert_eq!(counts(&released, &dropped), (1, 0));
        drop(held);
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn references_taken_and_given_back_on_many_threads_free_the_object_once() {
        let (_serial, before) = serial_shells();
        for _ in 0..50 {
            let (object, dropped, released) = probe();
            let threads: Vec<_> = (0..4)
                .map(|_| {
                    // Each thread gets a reference of its own before it starts (COM's rule):
                    // the creator's is still held.
                    object.add_ref();
                    std::thread::spawn(move || {
                        // This thread holds a reference while it calls.
                        for _ in 0..1000 {
                            object.add_ref();
                            object.release();
                        }
                        // Its own reference, given back.
                        object.release();
                    })
                })
                .collect();
            // The creator's reference, given back while the threads run.
            object.release();
            for thread in threads {
                thread.join().unwrap();
            }
            assert_eq!(counts(&released, &dropped), (1, 1));
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
        // The caller's only reference; afterwards the pointer is stale, which the module
        // answers (shells are never freed).
        assert_eq!(object.release(), 0);
        assert_eq!(released.load(Ordering::SeqCst), 1);
        assert_eq!(object.this().err(), Some(ND_INVALID_HANDLE));
        assert_eq!(object.add_ref(), 0);
        assert_eq!(object.release(), 0);
        assert_eq!(object.query_unknown(), (ND_INVALID_HANDLE, std::ptr::null_mut()));
        assert_eq!(released.load(Ordering::SeqCst), 1, "released once");
        // QUARANTINE more objects created and released one at a time reuse no shell: each
        // takes a new one, so the released object stays refused all along.
        for _ in 0..QUARANTINE {
            let (other, _, _) = probe();
            assert_ne!(other, object);
            other.release();
            // Stale, answered (above).
            assert_eq!(object.this().err(), Some(ND_INVALID_HANDLE));
        }
    }

    #[test]
    fn the_memory_of_released_objects_is_bounded_by_the_pool() {
        let _serial = crate::liveness::serial_for_test();
        let key = Com::<Probe>::class_key();
        for _ in 0..(4 * QUARANTINE) {
            let (object, _, _) = probe();
            object.release();
        }
        // One at a time: the pool holds the quarantine and the one just released.
        assert!(pooled(key) <= QUARANTINE + 1, "{} shells pooled", pooled(key));
    }

    #[test]
    fn a_call_in_progress_keeps_the_object_through_the_last_release() {
        let _serial = crate::liveness::serial_for_test();
        let (object, dropped, released) = probe();
        // Live: the caller's reference.
        let call = object.this().unwrap();
        // Another thread's last Release (the caller's only reference), while the call runs.
        std::thread::spawn(move || object.release()).join().unwrap();
        assert_eq!(
            counts(&released, &dropped),
            (0, 0),
            "the body is whole while the call holds it"
        );
        // Released by the caller: refused to new calls.
        assert_eq!(object.this().err(), Some(ND_INVALID_HANDLE));
        drop(call);
        assert_eq!(
            counts(&released, &dropped),
            (1, 1),
            "the call's end is the last release"
        );
    }

    #[test]
    fn calls_racing_the_last_release_are_whole_or_refused() {
        let (_serial, before) = serial_shells();
        for _ in 0..200 {
            let (object, dropped, released) = probe();
            let start = Arc::new(std::sync::Barrier::new(4));
            let callers: Vec<_> = (0..3)
                .map(|_| {
                    let start = Arc::clone(&start);
                    std::thread::spawn(move || {
                        start.wait();
                        let mut refused = 0;
                        for _ in 0..200 {
                            // The object may be released meanwhile: answered.
                            match object.this() {
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
            // The only reference, given back while the calls run.
            object.release();
            for caller in callers {
                caller.join().unwrap();
            }
            assert_eq!(counts(&released, &dropped), (1, 1), "released exactly once");
        }
        assert_eq!(live_shells(), before);
    }

    #[test]
    fn socket_addresses_read_back_as_written_and_short_ones_are_refused() {
        let v6 = SocketAddr::V6(SocketAddrV6::new("fd00::1".parse().unwrap(), 4791, 7, 3));
        for addr in ["198.18.0.1:4791".parse().unwrap(), v6] {
            let bytes = crate::sys::sockaddr_bytes(addr);
            assert_eq!(parse_sockaddr(&bytes), Ok(addr));
            // Any alignment.
            let shifted = [&[0u8][..], &bytes].concat();
            assert_eq!(parse_sockaddr(&shifted[1..]), Ok(addr));
            for short in 0..bytes.len() {
                assert_eq!(parse_sockaddr(&bytes[..short]), Err(ND_INVALID_ADDRESS));
            }
        }
        let unix = (libc::AF_UNIX as libc::sa_family_t).to_ne_bytes();
        assert_eq!(parse_sockaddr(&[unix[0], unix[1], 0, 0]), Err(ND_INVALID_ADDRESS));
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
