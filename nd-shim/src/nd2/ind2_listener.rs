//! IND2Listener over the Rust API's [`Listener`]; GetConnectionRequest hands the next request to
//! an IND2Connector (checked by kind) and completes through the OVERLAPPED.

use std::ffi::c_void;
use std::sync::Arc;

use super::adapter::AdapterBody;
use super::ind2_connector::{overlapped_call, ConnectorBody};
use super::win32::OverlappedFile;
use super::{
    arg, code, fill_out, hr_boundary, iids, read_sockaddr, this, Class, Guid, HResult, Overlapped, OverlappedVtbl,
    UnknownVtbl, ND_SUCCESS,
};
use crate::Listener;

pub(crate) struct ListenerBody {
    _adapter: Arc<AdapterBody>,
    file: Arc<OverlappedFile>,
    listener: Listener,
}

impl ListenerBody {
    pub(super) fn new(adapter: Arc<AdapterBody>, file: Arc<OverlappedFile>) -> ListenerBody {
        let listener = Listener::new(&adapter.adapter);
        ListenerBody {
            _adapter: adapter,
            file,
            listener,
        }
    }
}

impl Overlapped for ListenerBody {
    fn cancel(&self) {
        self.listener.cancel();
    }
}

#[repr(C)]
pub(crate) struct ListenerVtbl {
    unknown: UnknownVtbl,
    overlapped: OverlappedVtbl,
    bind: unsafe extern "C" fn(*mut c_void, *const libc::sockaddr, u32) -> HResult,
    listen: unsafe extern "C" fn(*mut c_void, u32) -> HResult,
    get_local_address: unsafe extern "C" fn(*mut c_void, *mut libc::sockaddr, *mut u32) -> HResult,
    get_connection_request: unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void) -> HResult,
}

static VTBL: ListenerVtbl = ListenerVtbl {
    unknown: UnknownVtbl::of::<ListenerBody>(),
    overlapped: OverlappedVtbl::of::<ListenerBody>(),
    bind,
    listen,
    get_local_address,
    get_connection_request,
};

impl Class for ListenerBody {
    type Vtbl = ListenerVtbl;
    const VTBL: &'static ListenerVtbl = &VTBL;
    const IIDS: &'static [&'static Guid] = &[&iids::IID_IUnknown, &iids::IID_IND2Overlapped, &iids::IID_IND2Listener];

    fn on_release(&self) {
        self.cancel();
    }
}

unsafe extern "C" fn bind(this: *mut c_void, addr: *const libc::sockaddr, len: u32) -> HResult {
    hr_boundary("IND2Listener::Bind", || {
        // SAFETY: the caller's object and address.
        let (l, addr) = unsafe { (self::this::<ListenerBody>(this)?, read_sockaddr(addr, len as usize)?) };
        l.listener.bind(addr).map_err(code)?;
        Ok(ND_SUCCESS)
    })
}

unsafe extern "C" fn listen(this: *mut c_void, backlog: u32) -> HResult {
    hr_boundary("IND2Listener::Listen", || {
        // SAFETY: the caller's object.
        let l = unsafe { self::this::<ListenerBody>(this)? };
        l.listener.listen(backlog).map_err(code)?;
        Ok(ND_SUCCESS)
    })
}

unsafe extern "C" fn get_local_address(this: *mut c_void, addr: *mut libc::sockaddr, len: *mut u32) -> HResult {
    hr_boundary("IND2Listener::GetLocalAddress", || {
        // SAFETY: the caller's object.
        let l = unsafe { self::this::<ListenerBody>(this)? };
        // SAFETY: the caller's buffer of *len bytes.
        unsafe { fill_out(addr.cast(), len, |b| l.listener.get_local_address(b)) }
    })
}

unsafe extern "C" fn get_connection_request(this: *mut c_void, connector: *mut c_void, ov: *mut c_void) -> HResult {
    hr_boundary("IND2Listener::GetConnectionRequest", || {
        // SAFETY: the caller's object and connector (checked by kind).
        let (l, c) = unsafe { (self::this::<ListenerBody>(this)?, arg::<ConnectorBody>(connector)?) };
        // SAFETY: the caller's OVERLAPPED.
        unsafe { overlapped_call(ov, &l.file, || l.listener.get_connection_request(&c.connector)) }
    })
}
