//! What every entry of the NDK face shares: the C types of `include/ndk_shim.h` that are not
//! objects, the panic boundary, the handle check, and the turning of C pointers into checked
//! Rust values (once, at the top of each entry, in `entry.rs`): references, slices, out-parameter
//! writers, and the caller's callbacks as values that are safe to call.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;

use crate::status::NdStatus;
use crate::sys;
use crate::BufferFill;

/// NTSTATUS.
pub type NtStatus = i32;

/// `NDK_FN_REQUEST_COMPLETION`.
pub type RequestCompletion = Option<unsafe extern "C" fn(context: *mut c_void, status: NtStatus)>;
/// `NDK_FN_DISCONNECT_EVENT_CALLBACK`.
pub type DisconnectEvent = Option<unsafe extern "C" fn(context: *mut c_void)>;
/// `NDK_FN_CREATE_COMPLETION`. Creation always finishes inline here, so it is never called.
pub type CreateCompletion = Option<unsafe extern "C" fn(context: *mut c_void, status: NtStatus, object: *mut c_void)>;

pub(super) const STATUS_SUCCESS: NtStatus = NdStatus::ND_SUCCESS.0;
pub(super) const STATUS_PENDING: NtStatus = NdStatus::ND_PENDING.0;
pub(super) const STATUS_INVALID_HANDLE: NtStatus = NdStatus::ND_INVALID_HANDLE.0;
pub(super) const STATUS_INVALID_PARAMETER: NtStatus = NdStatus::ND_INVALID_PARAMETER.0;
pub(super) const STATUS_INVALID_ADDRESS: NtStatus = NdStatus::ND_INVALID_ADDRESS.0;
pub(super) const STATUS_INTERNAL_ERROR: NtStatus = NdStatus::ND_INTERNAL_ERROR.0;

/// The panic boundary: runs `body`; a panic is logged and returns `on_panic`.
pub(super) fn boundary<T>(entry: &str, on_panic: T, body: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(value) => value,
        Err(_) => {
            log::error!("ndk: {entry} panicked; returning an error to the caller");
            on_panic
        }
    }
}

/// The usual boundary for entries that return NTSTATUS: `Err(code)` is returned as is.
pub(super) fn status_boundary(entry: &str, body: impl FnOnce() -> Result<NtStatus, NtStatus>) -> NtStatus {
    boundary(entry, STATUS_INTERNAL_ERROR, || match body() {
        Ok(status) | Err(status) => status,
    })
}

pub(super) fn code(status: NdStatus) -> NtStatus {
    status.0
}

/// A C pointer the caller passes back to its callbacks; the shim never dereferences it.
#[derive(Clone, Copy)]
struct Context(*mut c_void);

// SAFETY: the shim only hands the pointer back to the caller's own callbacks, which NDKPI allows
// on any thread; it never reads or writes through it.
unsafe impl Send for Context {}
// SAFETY: as above.
unsafe impl Sync for Context {}

/// A shim object the C side holds: its first field is its dispatch table.
pub(super) trait Handle: Sized {
    type Dispatch: 'static;
    const DISPATCH: &'static Self::Dispatch;
    /// The name of its Close entry, for the panic log.
    const CLOSE: &'static str;
}

/// The caller's `RequestCompletion` and its context: called once, with the request's code.
pub(super) struct RequestCallback {
    call: unsafe extern "C" fn(*mut c_void, NtStatus),
    context: Context,
}

impl RequestCallback {
    /// `None` for a NULL function.
    ///
    /// # Safety
    /// `call` is NULL or a function that may be called once, on any thread, with `context`
    /// (NDKPI's promise for a request's completion).
    pub(super) unsafe fn new(call: RequestCompletion, context: *mut c_void) -> Option<RequestCallback> {
        Some(RequestCallback {
            call: call?,
            context: Context(context),
        })
    }

    pub(super) fn complete(self, status: NtStatus) {
        // SAFETY: the promise `new` was given.
        unsafe { (self.call)(self.context.0, status) }
    }
}

/// The caller's `DisconnectEvent` and its context: called once, when the peer disconnects.
pub(super) struct DisconnectCallback {
    call: unsafe extern "C" fn(*mut c_void),
    context: Context,
}

impl DisconnectCallback {
    /// `None` for a NULL function.
    ///
    /// # Safety
    /// `call` is NULL or a function that may be called once, on any thread, with `context`.
    pub(super) unsafe fn new(call: DisconnectEvent, context: *mut c_void) -> Option<DisconnectCallback> {
        Some(DisconnectCallback {
            call: call?,
            context: Context(context),
        })
    }

    pub(super) fn disconnected(self) {
        // SAFETY: the promise `new` was given.
        unsafe { (self.call)(self.context.0) }
    }
}

/// A listener's `NDK_FN_CONNECT_EVENT_CALLBACK` and its context: called with each new object
/// `T` (a connector), which is the callee's from then on.
pub(super) struct ConnectCallback<T> {
    call: unsafe extern "C" fn(*mut c_void, *mut T),
    context: Context,
}

impl<T> ConnectCallback<T> {
    /// `None` for a NULL function.
    ///
    /// # Safety
    /// `call` is NULL or a function that may be called, on any thread, with `context` and a
    /// connector, as often as requests arrive, until the listener is closed.
    pub(super) unsafe fn new(
        call: Option<unsafe extern "C" fn(*mut c_void, *mut T)>,
        context: *mut c_void,
    ) -> Option<ConnectCallback<T>> {
        Some(ConnectCallback {
            call: call?,
            context: Context(context),
        })
    }

    /// Hands `connector` over to the callee.
    pub(super) fn deliver(&self, connector: T) {
        let object = Box::into_raw(Box::new(connector));
        // SAFETY: the promise `new` was given; the connector is now the callee's, to close with
        // NdkCloseConnector.
        unsafe { (self.call)(self.context.0, object) }
    }
}

/// An out-parameter array of `T` that C may not have aligned: written element by element.
pub(super) struct UnalignedOut<'a, T> {
    ptr: NonNull<T>,
    len: usize,
    _borrow: PhantomData<&'a mut [T]>,
}

impl<T: Copy> UnalignedOut<'_, T> {
    /// `None` for NULL.
    ///
    /// # Safety
    /// `ptr` is NULL or writable (at any alignment) for `len` elements, not otherwise accessed
    /// while the value lives.
    pub(super) unsafe fn new(ptr: *mut T, len: usize) -> Option<Self> {
        Some(UnalignedOut {
            ptr: NonNull::new(ptr)?,
            len,
            _borrow: PhantomData,
        })
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Writes element `index`; an index out of range writes nothing.
    pub(super) fn write(&mut self, index: usize, value: T) {
        if index < self.len {
            // SAFETY: in range, and writable at any alignment (the promise `new` was given).
            unsafe { self.ptr.as_ptr().add(index).write_unaligned(value) }
        }
    }
}

/// The new handle into the caller's out-parameter.
pub(super) fn give_handle<T>(out: &mut *mut T, object: T) -> NtStatus {
    *out = Box::into_raw(Box::new(object));
    STATUS_SUCCESS
}

/// Turns a handle from C into a reference: NULL or a handle of another kind is
/// STATUS_INVALID_HANDLE.
///
/// # Safety
/// `ptr` is NULL or points to at least a pointer's worth of readable memory; if its first field
/// is `T`'s dispatch table, it is a live `T` created by this module and not yet closed.
pub(super) unsafe fn handle<'a, T: Handle>(ptr: *const T) -> Result<&'a T, NtStatus> {
    if ptr.is_null() {
        return Err(STATUS_INVALID_HANDLE);
    }
    // SAFETY: non-NULL, and every shim object starts with its dispatch pointer (the caller's
    // promise covers reading that first field).
    let dispatch = unsafe { *ptr.cast::<*const T::Dispatch>() };
    if !std::ptr::eq(dispatch, T::DISPATCH) {
        return Err(STATUS_INVALID_HANDLE);
    }
    // SAFETY: the dispatch pointer says this is a live T of ours (the caller's promise).
    Ok(unsafe { &*ptr })
}

/// Takes back ownership of a handle for its Close entry.
///
/// # Safety
/// As [`handle`]; besides, the caller gives up the handle: it was made by `Box::into_raw`.
pub(super) unsafe fn take_handle<T: Handle>(ptr: *mut T) -> Result<Box<T>, NtStatus> {
    // SAFETY: the caller's promise, forwarded.
    unsafe { handle(ptr.cast_const())? };
    // SAFETY: checked above to be one of ours, made by Box::into_raw, and given up by the caller.
    Ok(unsafe { Box::from_raw(ptr) })
}

/// A slice from a C pointer and length: NULL is allowed only with length 0.
///
/// # Safety
/// `data` is NULL or readable for `len` elements for the returned lifetime.
pub(super) unsafe fn slice<'a, T>(data: *const T, len: u32) -> Result<&'a [T], NtStatus> {
    match (data.is_null(), len) {
        (_, 0) => Ok(&[]),
        (true, _) => Err(STATUS_INVALID_PARAMETER),
        // SAFETY: non-NULL and readable for len elements (the caller's promise).
        (false, len) => Ok(unsafe { std::slice::from_raw_parts(data, len as usize) }),
    }
}

/// A mutable byte slice from a C pointer and length: NULL is allowed only with length 0.
///
/// # Safety
/// `data` is NULL or writable for `len` bytes for the returned lifetime, and not aliased.
pub(super) unsafe fn bytes_mut<'a>(data: *mut c_void, len: u32) -> Result<&'a mut [u8], NtStatus> {
    match (data.is_null(), len) {
        (_, 0) => Ok(&mut []),
        (true, _) => Err(STATUS_INVALID_PARAMETER),
        (false, len) => {
            // SAFETY: non-NULL and writable for len bytes (the caller's promise).
            Ok(unsafe { std::slice::from_raw_parts_mut(data.cast::<u8>(), len as usize) })
        }
    }
}

/// A socket address from C: NULL is STATUS_INVALID_PARAMETER; a length too short for its
/// family, or a family other than AF_INET / AF_INET6, is STATUS_INVALID_ADDRESS.
///
/// # Safety
/// `addr` is NULL or readable for `len` bytes.
pub(super) unsafe fn read_sockaddr(addr: *const libc::sockaddr, len: u32) -> Result<SocketAddr, NtStatus> {
    if addr.is_null() {
        return Err(STATUS_INVALID_PARAMETER);
    }
    let len = len as usize;
    if len < std::mem::size_of::<libc::sa_family_t>() {
        return Err(STATUS_INVALID_ADDRESS);
    }
    // SAFETY: at least the family is readable (checked length); read unaligned, as C may
    // pass any byte buffer.
    let family = unsafe { std::ptr::addr_of!((*addr).sa_family).read_unaligned() };
    let need = match i32::from(family) {
        libc::AF_INET => std::mem::size_of::<libc::sockaddr_in>(),
        libc::AF_INET6 => std::mem::size_of::<libc::sockaddr_in6>(),
        _ => return Err(STATUS_INVALID_ADDRESS),
    };
    if len < need {
        return Err(STATUS_INVALID_ADDRESS);
    }
    let mut storage: libc::sockaddr_storage = sys::zeroed();
    // SAFETY: `need` bytes are readable (checked) and fit in the storage.
    unsafe { std::ptr::copy_nonoverlapping(addr.cast::<u8>(), std::ptr::addr_of_mut!(storage).cast::<u8>(), need) };
    sys::from_sockaddr(&storage).ok_or(STATUS_INVALID_ADDRESS)
}

/// A getter's output buffer and its length, in (the buffer's size) and out (the size the
/// answer needs).
pub(super) struct BufferOut<'a> {
    pub(super) buffer: &'a mut [u8],
    pub(super) len: &'a mut u32,
}

impl BufferOut<'_> {
    /// The address getters' rule (NdkGetLocalAddress, NdkGetPeerAddress, the listener's and
    /// the shared endpoint's): `fill` decides; the required size goes out; a short buffer is
    /// untouched and STATUS_BUFFER_TOO_SMALL.
    pub(super) fn fill(
        self,
        fill: impl FnOnce(&mut [u8]) -> Result<BufferFill, NdStatus>,
    ) -> Result<NtStatus, NtStatus> {
        let filled = fill(self.buffer).map_err(code)?;
        *self.len = filled.required as u32;
        Ok(code(filled.ndk()))
    }
}

/// An address getter's `addr` and `*len`: a NULL `len` is STATUS_INVALID_PARAMETER, and so is
/// a NULL `addr` with a non-zero `*len`.
///
/// # Safety
/// `len` is NULL or valid for reading and writing a u32; `addr` is NULL or writable for `*len`
/// bytes; neither is otherwise accessed while the value lives.
pub(super) unsafe fn address_out<'a>(addr: *mut libc::sockaddr, len: *mut u32) -> Result<BufferOut<'a>, NtStatus> {
    // SAFETY: the caller's promise, forwarded.
    let (buffer, len) = unsafe { data_out(addr.cast(), len)? };
    Ok(BufferOut {
        buffer: buffer.unwrap_or_default(),
        len,
    })
}

/// NdkGetConnectionData's `pPrivateData` and `*pPrivateDataLength`: a NULL length is
/// STATUS_INVALID_PARAMETER, and so is a NULL buffer with a non-zero `*len`; a NULL buffer
/// (asking for the size) is `None`.
///
/// # Safety
/// As [`address_out`], for `data`.
pub(super) unsafe fn data_out<'a>(
    data: *mut c_void,
    len: *mut u32,
) -> Result<(Option<&'a mut [u8]>, &'a mut u32), NtStatus> {
    // SAFETY: the caller's promise on len.
    let len = unsafe { len.as_mut() }.ok_or(STATUS_INVALID_PARAMETER)?;
    if data.is_null() {
        return if *len == 0 {
            Ok((None, len))
        } else {
            Err(STATUS_INVALID_PARAMETER)
        };
    }
    // SAFETY: non-NULL; the caller's promise on data and *len.
    let buffer = unsafe { bytes_mut(data, *len)? };
    Ok((Some(buffer), len))
}

/// [`address_out`] and [`BufferOut::fill`] in one (the fuzz targets' way in).
///
/// # Safety
/// As [`address_out`].
#[cfg(any(test, feature = "fuzzing"))]
pub(super) unsafe fn write_address(
    addr: *mut libc::sockaddr,
    len: *mut u32,
    fill: impl FnOnce(&mut [u8]) -> Result<BufferFill, NdStatus>,
) -> Result<NtStatus, NtStatus> {
    // SAFETY: the caller's promise, forwarded.
    unsafe { address_out(addr, len) }?.fill(fill)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `read_sockaddr` over the first `len` bytes of `bytes`.
    fn read(bytes: &[u8], len: u32) -> Result<SocketAddr, NtStatus> {
        assert!(len as usize <= bytes.len());
        // SAFETY: `bytes` is live and at least `len` bytes long; any alignment will do.
        unsafe { read_sockaddr(bytes.as_ptr().cast(), len) }
    }

    #[test]
    fn sockaddr_checks() {
        // SAFETY: NULL is allowed.
        let null = unsafe { read_sockaddr(std::ptr::null(), 16) };
        assert_eq!(null, Err(STATUS_INVALID_PARAMETER));
        let encoded = sys::sockaddr_bytes("198.18.0.1:4791".parse().unwrap());
        let len = encoded.len() as u32;
        assert_eq!(read(&encoded, len), Ok("198.18.0.1:4791".parse().unwrap()));
        assert_eq!(read(&encoded, len - 1), Err(STATUS_INVALID_ADDRESS));
        // All zeroes: AF_UNSPEC.
        assert_eq!(read(&[0; 128], 128), Err(STATUS_INVALID_ADDRESS));
    }

    #[test]
    fn short_address_buffer_is_untouched() {
        let addr: SocketAddr = "198.18.0.2:50000".parse().unwrap();
        let mut buffer = [0xAAu8; 8];
        let mut len = buffer.len() as u32;
        // SAFETY: live locals of the stated sizes.
        let status = unsafe {
            write_address(buffer.as_mut_ptr().cast(), &mut len, |b| {
                Ok(crate::connection_data::fill_address(&sys::sockaddr_bytes(addr), b))
            })
        };
        assert_eq!(status, Ok(NdStatus::STATUS_BUFFER_TOO_SMALL.0));
        assert_eq!(len as usize, std::mem::size_of::<libc::sockaddr_in>());
        assert_eq!(buffer, [0xAA; 8]);
    }

    static PROBE_DISPATCH: u8 = 0;
    static OTHER_DISPATCH: u8 = 0;
    static COMPLETED: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

    #[repr(C)]
    struct Probe {
        dispatch: *const u8,
        value: u32,
    }

    impl Handle for Probe {
        type Dispatch = u8;
        const DISPATCH: &'static u8 = &PROBE_DISPATCH;
        const CLOSE: &'static str = "probe";
    }

    extern "C" fn record(_: *mut c_void, status: NtStatus) {
        COMPLETED.store(status, std::sync::atomic::Ordering::Relaxed);
    }

    /// What the entries make of C arguments: handles checked by their dispatch pointer, a
    /// length in and out with an optional buffer, an out-array at any alignment, a callback.
    #[test]
    fn c_arguments_become_checked_values() {
        let probe = Box::into_raw(Box::new(Probe {
            dispatch: &PROBE_DISPATCH,
            value: 7,
        }));
        let foreign = Probe {
            dispatch: &OTHER_DISPATCH,
            value: 0,
        };
        let mut zero = 0u32;
        let mut four = 4u32;
        let mut data = [0u8; 4];
        let mut bytes = [0u8; 9];
        // SAFETY: live locals and a boxed probe of this module; each pointer is valid for what
        // it is converted to and used only through the converted value; `bytes` holds two u32
        // from offset 1; `record` is a function that may be called with any context.
        let (found, wrong, none, taken, no_buffer, null_with_length, buffer, ints, callback) = unsafe {
            (
                handle(probe).map(|p| p.value),
                handle(&foreign).err(),
                handle::<Probe>(std::ptr::null()).err(),
                take_handle(probe).map(|p| p.value),
                data_out(std::ptr::null_mut(), &mut zero).map(|(b, len)| (b.is_none(), *len)),
                data_out(std::ptr::null_mut(), &mut four).err(),
                data_out(data.as_mut_ptr().cast(), &mut four).map(|(b, _)| b.map(|b| b.len())),
                UnalignedOut::new(bytes.as_mut_ptr().add(1).cast::<u32>(), 2),
                RequestCallback::new(Some(record), std::ptr::null_mut()),
            )
        };
        assert_eq!(found, Ok(7));
        assert_eq!(wrong, Some(STATUS_INVALID_HANDLE));
        assert_eq!(none, Some(STATUS_INVALID_HANDLE));
        assert_eq!(taken, Ok(7));
        assert_eq!(no_buffer, Ok((true, 0)));
        assert_eq!(null_with_length, Some(STATUS_INVALID_PARAMETER));
        assert_eq!(buffer, Ok(Some(4)));
        let mut ints = ints.expect("non-NULL");
        ints.write(0, u32::from_ne_bytes([1, 2, 3, 4]));
        ints.write(1, u32::from_ne_bytes([5, 6, 7, 8]));
        ints.write(2, u32::MAX);
        assert_eq!(bytes, [0, 1, 2, 3, 4, 5, 6, 7, 8]);
        callback.expect("non-NULL").complete(STATUS_PENDING);
        assert_eq!(COMPLETED.load(std::sync::atomic::Ordering::Relaxed), STATUS_PENDING);
    }

    #[test]
    fn panics_stop_at_the_boundary() {
        let status = status_boundary("test", || panic!("boom"));
        assert_eq!(status, STATUS_INTERNAL_ERROR);
    }
}
