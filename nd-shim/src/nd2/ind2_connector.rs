//! IND2Connector over the Rust API's [`Connector`]: its state machine decides every code; this
//! file only turns C arguments into Rust ones and a [`Pending`] into an overlapped completion.
//! CompleteConnect finishes inline in the Rust API; here it is overlapped as ND2 declares it
//! (ND_PENDING with the OVERLAPPED already completed, or the failure inline).

use std::ffi::c_void;
use std::sync::Arc;

use super::adapter::AdapterBody;
use super::overlapped::Request;
use super::qp::QpBody;
use super::win32::OverlappedFile;
use super::{
    arg, bytes, code, fill_out, hr_boundary, iids, read_sockaddr, this, Class, Guid, HResult, Overlapped,
    OverlappedVtbl, UnknownVtbl, ND_PENDING, ND_SUCCESS,
};
use crate::status::NdStatus;
use crate::{Connector, Pending};

pub(crate) struct ConnectorBody {
    _adapter: Arc<AdapterBody>,
    file: Arc<OverlappedFile>,
    pub(super) connector: Connector,
}

impl ConnectorBody {
    pub(super) fn new(adapter: Arc<AdapterBody>, file: Arc<OverlappedFile>) -> ConnectorBody {
        let connector = Connector::new(&adapter.adapter);
        ConnectorBody {
            _adapter: adapter,
            file,
            connector,
        }
    }
}

/// Issues an overlapped request: the OVERLAPPED is checked and marked pending first, then `call`
/// runs; its inline failure is returned as is (and left in Internal), its [`Pending`] completes
/// the OVERLAPPED.
///
/// # Safety
/// `ov` is NULL or the caller's OVERLAPPED, live until the request completes.
pub(super) unsafe fn overlapped_call(
    ov: *mut c_void,
    file: &Arc<OverlappedFile>,
    call: impl FnOnce() -> Result<Pending, NdStatus>,
) -> Result<HResult, HResult> {
    // SAFETY: forwarded.
    let request = unsafe { Request::start(ov, file)? };
    let pending = match call() {
        Ok(pending) => pending,
        Err(status) => {
            request.fail(code(status));
            return Err(code(status));
        }
    };
    pending.on_complete(move |status| request.complete(status, 0));
    Ok(ND_PENDING)
}

impl Overlapped for ConnectorBody {
    fn cancel(&self) {
        self.connector.cancel();
    }
}

#[repr(C)]
pub(crate) struct ConnectorVtbl {
    unknown: UnknownVtbl,
    overlapped: OverlappedVtbl,
    bind: unsafe extern "C" fn(*mut c_void, *const libc::sockaddr, u32) -> HResult,
    connect: unsafe extern "C" fn(
        *mut c_void,
        *mut c_void,
        *const libc::sockaddr,
        u32,
        u32,
        u32,
        *const c_void,
        u32,
        *mut c_void,
    ) -> HResult,
    complete_connect: unsafe extern "C" fn(*mut c_void, *mut c_void) -> HResult,
    accept: unsafe extern "C" fn(*mut c_void, *mut c_void, u32, u32, *const c_void, u32, *mut c_void) -> HResult,
    reject: unsafe extern "C" fn(*mut c_void, *const c_void, u32) -> HResult,
    get_read_limits: unsafe extern "C" fn(*mut c_void, *mut u32, *mut u32) -> HResult,
    get_private_data: unsafe extern "C" fn(*mut c_void, *mut c_void, *mut u32) -> HResult,
    get_local_address: unsafe extern "C" fn(*mut c_void, *mut libc::sockaddr, *mut u32) -> HResult,
    get_peer_address: unsafe extern "C" fn(*mut c_void, *mut libc::sockaddr, *mut u32) -> HResult,
    notify_disconnect: unsafe extern "C" fn(*mut c_void, *mut c_void) -> HResult,
    disconnect: unsafe extern "C" fn(*mut c_void, *mut c_void) -> HResult,
}

static VTBL: ConnectorVtbl = ConnectorVtbl {
    unknown: UnknownVtbl::of::<ConnectorBody>(),
    overlapped: OverlappedVtbl::of::<ConnectorBody>(),
    bind,
    connect,
    complete_connect,
    accept,
    reject,
    get_read_limits,
    get_private_data,
    get_local_address,
    get_peer_address,
    notify_disconnect,
    disconnect,
};

impl Class for ConnectorBody {
    type Vtbl = ConnectorVtbl;
    const VTBL: &'static ConnectorVtbl = &VTBL;
    const IIDS: &'static [&'static Guid] = &[&iids::IID_IUnknown, &iids::IID_IND2Overlapped, &iids::IID_IND2Connector];

    /// Pending requests complete (ND_CANCELED), a pending Disconnect among them, before the
    /// last reference goes: the caller's OVERLAPPEDs are never written after Release returns,
    /// even when another call still holds the object (the body is dropped after that call).
    fn on_release(&self) {
        self.connector.release();
    }
}

unsafe extern "C" fn bind(this: *mut c_void, addr: *const libc::sockaddr, len: u32) -> HResult {
    hr_boundary("IND2Connector::Bind", || {
        // SAFETY: the caller's object and address.
        let (c, addr) = unsafe { (self::this::<ConnectorBody>(this)?, read_sockaddr(addr, len as usize)?) };
        c.connector.bind(addr).map_err(code)?;
        Ok(ND_SUCCESS)
    })
}

#[allow(clippy::too_many_arguments)] // the interface's
unsafe extern "C" fn connect(
    this: *mut c_void,
    qp: *mut c_void,
    dest: *const libc::sockaddr,
    dest_len: u32,
    inbound_read_limit: u32,
    outbound_read_limit: u32,
    private_data: *const c_void,
    private_data_len: u32,
    ov: *mut c_void,
) -> HResult {
    hr_boundary("IND2Connector::Connect", || {
        // SAFETY: the caller's object, QP (checked by kind), address and private data.
        let (c, qp, remote, data) = unsafe {
            (
                self::this::<ConnectorBody>(this)?,
                arg::<QpBody>(qp)?,
                read_sockaddr(dest, dest_len as usize)?,
                bytes(private_data, private_data_len as usize)?,
            )
        };
        // SAFETY: the caller's OVERLAPPED.
        unsafe {
            overlapped_call(ov, &c.file, || {
                c.connector
                    .connect(&qp.qp, remote, inbound_read_limit, outbound_read_limit, data)
            })
        }
    })
}

unsafe extern "C" fn complete_connect(this: *mut c_void, ov: *mut c_void) -> HResult {
    hr_boundary("IND2Connector::CompleteConnect", || {
        // SAFETY: the caller's object.
        let c = unsafe { self::this::<ConnectorBody>(this)? };
        // SAFETY: the caller's OVERLAPPED.
        let request = unsafe { Request::start(ov, &c.file)? };
        if let Err(status) = c.connector.complete_connect() {
            request.fail(code(status));
            return Err(code(status));
        }
        request.complete(NdStatus::ND_SUCCESS, 0);
        Ok(ND_PENDING)
    })
}

unsafe extern "C" fn accept(
    this: *mut c_void,
    qp: *mut c_void,
    inbound_read_limit: u32,
    outbound_read_limit: u32,
    private_data: *const c_void,
    private_data_len: u32,
    ov: *mut c_void,
) -> HResult {
    hr_boundary("IND2Connector::Accept", || {
        // SAFETY: the caller's object, QP (checked by kind) and private data.
        let (c, qp, data) = unsafe {
            (
                self::this::<ConnectorBody>(this)?,
                arg::<QpBody>(qp)?,
                bytes(private_data, private_data_len as usize)?,
            )
        };
        // SAFETY: the caller's OVERLAPPED.
        unsafe {
            overlapped_call(ov, &c.file, || {
                c.connector
                    .accept(&qp.qp, inbound_read_limit, outbound_read_limit, data)
            })
        }
    })
}

unsafe extern "C" fn reject(this: *mut c_void, private_data: *const c_void, len: u32) -> HResult {
    hr_boundary("IND2Connector::Reject", || {
        // SAFETY: the caller's object and private data.
        let (c, data) = unsafe { (self::this::<ConnectorBody>(this)?, bytes(private_data, len as usize)?) };
        c.connector.reject(data).map_err(code)?;
        Ok(ND_SUCCESS)
    })
}

unsafe extern "C" fn get_read_limits(this: *mut c_void, inbound: *mut u32, outbound: *mut u32) -> HResult {
    hr_boundary("IND2Connector::GetReadLimits", || {
        // SAFETY: the caller's object.
        let c = unsafe { self::this::<ConnectorBody>(this)? };
        let limits = c.connector.get_read_limits().map_err(code)?;
        // SAFETY: each is NULL (not wanted) or writable (the caller's promise).
        unsafe {
            if !inbound.is_null() {
                inbound.write(limits.inbound);
            }
            if !outbound.is_null() {
                outbound.write(limits.outbound);
            }
        }
        Ok(ND_SUCCESS)
    })
}

unsafe extern "C" fn get_private_data(this: *mut c_void, data: *mut c_void, len: *mut u32) -> HResult {
    hr_boundary("IND2Connector::GetPrivateData", || {
        // SAFETY: the caller's object.
        let c = unsafe { self::this::<ConnectorBody>(this)? };
        // SAFETY: the caller's buffer of *len bytes.
        unsafe { fill_out(data, len, |b| c.connector.get_private_data(b)) }
    })
}

unsafe extern "C" fn get_local_address(this: *mut c_void, addr: *mut libc::sockaddr, len: *mut u32) -> HResult {
    hr_boundary("IND2Connector::GetLocalAddress", || {
        // SAFETY: the caller's object.
        let c = unsafe { self::this::<ConnectorBody>(this)? };
        // SAFETY: the caller's buffer of *len bytes.
        unsafe { fill_out(addr.cast(), len, |b| c.connector.get_local_address(b)) }
    })
}

unsafe extern "C" fn get_peer_address(this: *mut c_void, addr: *mut libc::sockaddr, len: *mut u32) -> HResult {
    hr_boundary("IND2Connector::GetPeerAddress", || {
        // SAFETY: the caller's object.
        let c = unsafe { self::this::<ConnectorBody>(this)? };
        // SAFETY: the caller's buffer of *len bytes.
        unsafe { fill_out(addr.cast(), len, |b| c.connector.get_peer_address(b)) }
    })
}

unsafe extern "C" fn notify_disconnect(this: *mut c_void, ov: *mut c_void) -> HResult {
    hr_boundary("IND2Connector::NotifyDisconnect", || {
        // SAFETY: the caller's object.
        let c = unsafe { self::this::<ConnectorBody>(this)? };
        // SAFETY: the caller's OVERLAPPED.
        unsafe { overlapped_call(ov, &c.file, || c.connector.notify_disconnect()) }
    })
}

unsafe extern "C" fn disconnect(this: *mut c_void, ov: *mut c_void) -> HResult {
    hr_boundary("IND2Connector::Disconnect", || {
        // SAFETY: the caller's object.
        let c = unsafe { self::this::<ConnectorBody>(this)? };
        // SAFETY: the caller's OVERLAPPED.
        unsafe { overlapped_call(ov, &c.file, || c.connector.disconnect()) }
    })
}
