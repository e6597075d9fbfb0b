//! The C entries of the connection objects: the provider's exports (DllGetClassObject,
//! DllCanUnloadNow) and the vtables of the class factory, the provider, the adapter, the
//! connector and the listener. Each entry reads its C arguments once (the object by kind, IIDs,
//! addresses, buffers, out pointers, the OVERLAPPED) inside its panic boundary, and calls the safe
//! logic of the object's own module.

use std::ffi::c_void;

use rdma_mummy_sys as ffi;

use super::adapter::{AdapterBody, AdapterInfo2};
use super::cq::CqBody;
use super::ind2_adapter::NewQp;
use super::ind2_connector::{issue, ConnectorBody};
use super::ind2_listener::ListenerBody;
use super::mr::MrBody;
use super::overlapped::Request;
use super::provider::{self, FactoryBody, ProviderBody, S_FALSE};
use super::qp::QpBody;
use super::srq::SrqBody;
use super::win32::Handle;
use super::{
    arg, boundary, bytes, code, com_class, fill_out, guid, hr_boundary, object, read_sockaddr, sized_buffer, this,
    Guid, HResult, Overlapped, OverlappedVtbl, UnknownVtbl, ND_INVALID_PARAMETER, ND_SUCCESS,
};

// The provider: its class factory and IND2Provider.

#[repr(C)]
pub(crate) struct FactoryVtbl {
    unknown: UnknownVtbl,
    create_instance: unsafe extern "C" fn(*mut c_void, *mut c_void, *const Guid, *mut *mut c_void) -> HResult,
    lock_server: unsafe extern "C" fn(*mut c_void, i32) -> HResult,
}

com_class! {
    FactoryBody, FACTORY_VTBL: FactoryVtbl, [IID_IClassFactory] {
        create_instance,
        lock_server,
    }
}

#[repr(C)]
pub(crate) struct ProviderVtbl {
    unknown: UnknownVtbl,
    query_address_list: unsafe extern "C" fn(*mut c_void, *mut c_void, *mut u32) -> HResult,
    resolve_address: unsafe extern "C" fn(*mut c_void, *const libc::sockaddr, u32, *mut u64) -> HResult,
    open_adapter: unsafe extern "C" fn(*mut c_void, *const Guid, u64, *mut *mut c_void) -> HResult,
}

com_class! {
    ProviderBody, PROVIDER_VTBL: ProviderVtbl, [IID_IND2Provider] {
        query_address_list: provider_query_address_list,
        resolve_address: provider_resolve_address,
        open_adapter: provider_open_adapter,
    }
}

/// # Safety
/// `clsid` and `iid` are NULL or GUIDs; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn DllGetClassObject(clsid: *const Guid, iid: *const Guid, out: *mut *mut c_void) -> HResult {
    hr_boundary("DllGetClassObject", || {
        crate::stderr_log::init_from_env();
        // SAFETY: the caller's GUIDs and out pointer (NULL, or a GUID and writable).
        let (clsid, iid, out) = unsafe { (guid(clsid), guid(iid), out.as_mut()) };
        provider::get_class_object(clsid, iid, out)
    })
}

#[no_mangle]
pub extern "C" fn DllCanUnloadNow() -> HResult {
    boundary("DllCanUnloadNow", S_FALSE, || {
        if provider::can_unload() {
            ND_SUCCESS
        } else {
            S_FALSE
        }
    })
}

// The exports above, at the version node ND_SHIM_0 (crate::exports).
crate::exports::version_node!("DllGetClassObject", "DllCanUnloadNow",);

unsafe extern "C" fn create_instance(
    this: *mut c_void,
    outer: *mut c_void,
    iid: *const Guid,
    out: *mut *mut c_void,
) -> HResult {
    hr_boundary("IClassFactory::CreateInstance", || {
        // SAFETY: the caller's object, IID and out pointer (NULL, or a GUID and writable).
        let (_factory, iid, out) = unsafe { (self::this::<FactoryBody>(this)?, guid(iid), out.as_mut()) };
        provider::create_instance(!outer.is_null(), iid, out)
    })
}

unsafe extern "C" fn lock_server(this: *mut c_void, lock: i32) -> HResult {
    hr_boundary("IClassFactory::LockServer", || {
        // SAFETY: the caller's object.
        unsafe { self::this::<FactoryBody>(this)? };
        Ok(provider::lock_server(lock != 0))
    })
}

unsafe extern "C" fn provider_query_address_list(this: *mut c_void, list: *mut c_void, len: *mut u32) -> HResult {
    hr_boundary("IND2Provider::QueryAddressList", || {
        // SAFETY: the caller's object, and its buffer of *len bytes.
        let (_provider, sized) = unsafe { (self::this::<ProviderBody>(this)?, sized_buffer(list, len)) };
        let (len, list) = sized.ok_or(ND_INVALID_PARAMETER)?;
        Ok(provider::query_address_list(len, list))
    })
}

unsafe extern "C" fn provider_resolve_address(
    this: *mut c_void,
    addr: *const libc::sockaddr,
    len: u32,
    id: *mut u64,
) -> HResult {
    hr_boundary("IND2Provider::ResolveAddress", || {
        // SAFETY: the caller's object, address and out pointer (NULL or writable).
        let (_provider, addr, id) = unsafe {
            (
                self::this::<ProviderBody>(this)?,
                read_sockaddr(addr, len as usize),
                id.as_mut(),
            )
        };
        provider::resolve_address(addr, id)
    })
}

unsafe extern "C" fn provider_open_adapter(
    this: *mut c_void,
    iid: *const Guid,
    id: u64,
    out: *mut *mut c_void,
) -> HResult {
    hr_boundary("IND2Provider::OpenAdapter", || {
        // SAFETY: the caller's object, IID and out pointer (NULL, or a GUID and writable).
        let (_provider, iid, out) = unsafe { (self::this::<ProviderBody>(this)?, guid(iid), out.as_mut()) };
        provider::open_adapter(iid, id, out)
    })
}

// IND2Adapter.

/// IND2Adapter's entries that create an object on an overlapped file: CreateMemoryRegion,
/// CreateConnector, CreateListener.
type CreateOnFile = unsafe extern "C" fn(*mut c_void, *const Guid, Handle, *mut *mut c_void) -> HResult;

#[repr(C)]
pub(crate) struct AdapterVtbl {
    unknown: UnknownVtbl,
    create_overlapped_file: unsafe extern "C" fn(*mut c_void, *mut Handle) -> HResult,
    query: unsafe extern "C" fn(*mut c_void, *mut AdapterInfo2, *mut u32) -> HResult,
    query_address_list: unsafe extern "C" fn(*mut c_void, *mut c_void, *mut u32) -> HResult,
    create_completion_queue:
        unsafe extern "C" fn(*mut c_void, *const Guid, Handle, u32, u16, usize, *mut *mut c_void) -> HResult,
    create_memory_region: CreateOnFile,
    create_memory_window: unsafe extern "C" fn(*mut c_void, *const Guid, *mut *mut c_void) -> HResult,
    create_shared_receive_queue:
        unsafe extern "C" fn(*mut c_void, *const Guid, Handle, u32, u32, u32, u16, usize, *mut *mut c_void) -> HResult,
    create_queue_pair: unsafe extern "C" fn(
        *mut c_void,
        *const Guid,
        *mut c_void,
        *mut c_void,
        *mut c_void,
        u32,
        u32,
        u32,
        u32,
        u32,
        *mut *mut c_void,
    ) -> HResult,
    create_queue_pair_with_srq: unsafe extern "C" fn(
        *mut c_void,
        *const Guid,
        *mut c_void,
        *mut c_void,
        *mut c_void,
        *mut c_void,
        u32,
        u32,
        u32,
        *mut *mut c_void,
    ) -> HResult,
    create_connector: CreateOnFile,
    create_listener: CreateOnFile,
}

com_class! {
    AdapterBody, ADAPTER_VTBL: AdapterVtbl, [IID_IND2Adapter] {
        create_overlapped_file: adapter_create_overlapped_file,
        query: adapter_query,
        query_address_list: adapter_query_address_list,
        create_completion_queue: adapter_create_completion_queue,
        create_memory_region: adapter_create_memory_region,
        create_memory_window: adapter_create_memory_window,
        create_shared_receive_queue: adapter_create_shared_receive_queue,
        create_queue_pair: adapter_create_queue_pair,
        create_queue_pair_with_srq: adapter_create_queue_pair_with_srq,
        create_connector: adapter_create_connector,
        create_listener: adapter_create_listener,
    }
}

unsafe extern "C" fn adapter_create_overlapped_file(this: *mut c_void, out: *mut Handle) -> HResult {
    hr_boundary("IND2Adapter::CreateOverlappedFile", || {
        // SAFETY: the caller's object and out pointer (NULL or writable).
        let (adapter, out) = unsafe { (self::this::<AdapterBody>(this)?, out.as_mut()) };
        adapter.create_overlapped_file(out)
    })
}

unsafe extern "C" fn adapter_query(this: *mut c_void, info: *mut AdapterInfo2, len: *mut u32) -> HResult {
    hr_boundary("IND2Adapter::Query", || {
        // SAFETY: the caller's object, and its buffer of *len bytes (any alignment).
        let (adapter, sized) = unsafe { (self::this::<AdapterBody>(this)?, sized_buffer(info.cast(), len)) };
        let (len, info) = sized.ok_or(ND_INVALID_PARAMETER)?;
        Ok(adapter.query(len, info))
    })
}

unsafe extern "C" fn adapter_query_address_list(this: *mut c_void, list: *mut c_void, len: *mut u32) -> HResult {
    hr_boundary("IND2Adapter::QueryAddressList", || {
        // SAFETY: the caller's object, and its buffer of *len bytes.
        let (adapter, sized) = unsafe { (self::this::<AdapterBody>(this)?, sized_buffer(list, len)) };
        let (len, list) = sized.ok_or(ND_INVALID_PARAMETER)?;
        Ok(adapter.query_address_list(len, list))
    })
}

/// A `GetLocalAddress` or `GetPeerAddress` entry: the caller's object of the class, and the
/// address it gives (`|object, buffer| getter`) written to the caller's buffer of *len bytes.
macro_rules! address_entry {
    ($entry:ident, $name:literal, $class:ty, |$obj:ident, $buf:ident| $get:expr) => {
        unsafe extern "C" fn $entry(this: *mut c_void, addr: *mut libc::sockaddr, len: *mut u32) -> HResult {
            hr_boundary($name, || {
                // SAFETY: the caller's object, and its buffer of *len bytes.
                unsafe {
                    let $obj = self::this::<$class>(this)?;
                    fill_out(addr.cast(), len, |$buf| $get)
                }
            })
        }
    };
}

/// An `IND2Connector` entry that takes only an OVERLAPPED and issues the connector's method.
macro_rules! connector_request {
    ($entry:ident, $name:literal, $method:ident) => {
        unsafe extern "C" fn $entry(this: *mut c_void, ov: *mut c_void) -> HResult {
            hr_boundary($name, || {
                // SAFETY: the caller's object and OVERLAPPED (live until the request completes).
                let (c, request) = unsafe {
                    let c = self::this::<ConnectorBody>(this)?;
                    let request = Request::start(ov, &c.file)?;
                    (c, request)
                };
                issue(request, || c.endpoint.$method())
            })
        }
    };
}

/// An `IND2Adapter::Create*` entry: the caller's adapter, IID and out pointer, then the
/// adapter's method (given the entry's other arguments as they are).
macro_rules! adapter_create {
    ($(#[$attr:meta])* $entry:ident, $name:literal, ($($arg:ident: $ty:ty),*)
        => |$adapter:ident, $iid:ident, $out:ident| $body:expr) => {
        $(#[$attr])*
        unsafe extern "C" fn $entry(
            this: *mut c_void,
            iid: *const Guid,
            $($arg: $ty,)*
            out: *mut *mut c_void,
        ) -> HResult {
            hr_boundary($name, || {
                let ($adapter, $iid, $out) =
                    // SAFETY: the caller's object, IID and out pointer (NULL, or a GUID and
                    // writable).
                    unsafe { (object::<AdapterBody>(this)?, guid(iid), out.as_mut()) };
                $body
            })
        }
    };
}

adapter_create! {
    adapter_create_completion_queue, "IND2Adapter::CreateCompletionQueue",
    (file: Handle, depth: u32, _group: u16, _affinity: usize)
        => |adapter, iid, out| adapter.arc()?.create_completion_queue(iid, file, depth, out)
}

adapter_create! {
    adapter_create_memory_region, "IND2Adapter::CreateMemoryRegion",
    (file: Handle)
        => |adapter, iid, out| adapter.arc()?.create_on_file(iid, file, out, MrBody::new)
}

adapter_create! {
    adapter_create_memory_window, "IND2Adapter::CreateMemoryWindow",
    ()
        => |adapter, iid, out| adapter.arc()?.create_memory_window(iid, out)
}

adapter_create! {
    #[allow(clippy::too_many_arguments)] // the interface's
    adapter_create_shared_receive_queue, "IND2Adapter::CreateSharedReceiveQueue",
    (file: Handle, depth: u32, max_sge: u32, threshold: u32, _group: u16, _affinity: usize)
        => |adapter, iid, out| {
            let sizes = (depth, max_sge, threshold);
            adapter.arc()?.create_shared_receive_queue(iid, file, sizes, out)
        }
}

#[allow(clippy::too_many_arguments)] // the interface's
unsafe extern "C" fn adapter_create_queue_pair(
    this: *mut c_void,
    iid: *const Guid,
    receive_cq: *mut c_void,
    initiator_cq: *mut c_void,
    context: *mut c_void,
    receive_depth: u32,
    initiator_depth: u32,
    max_receive_sge: u32,
    max_initiator_sge: u32,
    inline_size: u32,
    out: *mut *mut c_void,
) -> HResult {
    hr_boundary("IND2Adapter::CreateQueuePair", || {
        // SAFETY: the caller's object, CQs (checked by kind), IID and out pointer (NULL, or a
        // GUID and writable).
        let (adapter, iid, receive_cq, initiator_cq, out) = unsafe {
            (
                object::<AdapterBody>(this)?,
                guid(iid),
                arg::<CqBody>(receive_cq),
                arg::<CqBody>(initiator_cq),
                out.as_mut(),
            )
        };
        let cap = ffi::ibv_qp_cap {
            max_send_wr: initiator_depth,
            max_recv_wr: receive_depth,
            max_send_sge: max_initiator_sge,
            max_recv_sge: max_receive_sge,
            max_inline_data: inline_size,
        };
        adapter.arc()?.create_queue_pair(NewQp {
            iid,
            receive_cq,
            initiator_cq,
            srq: None,
            context: context as usize,
            cap,
            out,
        })
    })
}

#[allow(clippy::too_many_arguments)] // the interface's
unsafe extern "C" fn adapter_create_queue_pair_with_srq(
    this: *mut c_void,
    iid: *const Guid,
    receive_cq: *mut c_void,
    initiator_cq: *mut c_void,
    srq: *mut c_void,
    context: *mut c_void,
    initiator_depth: u32,
    max_initiator_sge: u32,
    inline_size: u32,
    out: *mut *mut c_void,
) -> HResult {
    hr_boundary("IND2Adapter::CreateQueuePairWithSrq", || {
        // SAFETY: the caller's object, CQs and SRQ (checked by kind), IID and out pointer (NULL,
        // or a GUID and writable).
        let (adapter, iid, receive_cq, initiator_cq, srq, out) = unsafe {
            (
                object::<AdapterBody>(this)?,
                guid(iid),
                arg::<CqBody>(receive_cq),
                arg::<CqBody>(initiator_cq),
                arg::<SrqBody>(srq),
                out.as_mut(),
            )
        };
        let cap = ffi::ibv_qp_cap {
            max_send_wr: initiator_depth,
            max_recv_wr: 0,
            max_send_sge: max_initiator_sge,
            max_recv_sge: 0,
            max_inline_data: inline_size,
        };
        adapter.arc()?.create_queue_pair(NewQp {
            iid,
            receive_cq,
            initiator_cq,
            srq: Some(srq),
            context: context as usize,
            cap,
            out,
        })
    })
}

adapter_create! {
    adapter_create_connector, "IND2Adapter::CreateConnector",
    (file: Handle)
        => |adapter, iid, out| adapter.arc()?.create_on_file(iid, file, out, ConnectorBody::new)
}

adapter_create! {
    adapter_create_listener, "IND2Adapter::CreateListener",
    (file: Handle)
        => |adapter, iid, out| adapter.arc()?.create_on_file(iid, file, out, ListenerBody::new)
}

// IND2Connector.

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

com_class! {
    ConnectorBody, CONNECTOR_VTBL: ConnectorVtbl, [IID_IND2Overlapped, IID_IND2Connector] {
        bind: connector_bind,
        connect: connector_connect,
        complete_connect: connector_complete_connect,
        accept: connector_accept,
        reject: connector_reject,
        get_read_limits: connector_get_read_limits,
        get_private_data: connector_get_private_data,
        get_local_address: connector_get_local_address,
        get_peer_address: connector_get_peer_address,
        notify_disconnect: connector_notify_disconnect,
        disconnect: connector_disconnect,
    }
    /// Pending requests complete (ND_CANCELED), a pending Disconnect among them, before the
    /// last reference goes: the caller's OVERLAPPEDs are never written after Release returns,
    /// even when another call still holds the object (the body is dropped after that call).
    fn on_release(&self) {
        self.endpoint.release();
    }
}

unsafe extern "C" fn connector_bind(this: *mut c_void, addr: *const libc::sockaddr, len: u32) -> HResult {
    hr_boundary("IND2Connector::Bind", || {
        // SAFETY: the caller's object and address.
        let (c, addr) = unsafe { (self::this::<ConnectorBody>(this)?, read_sockaddr(addr, len as usize)?) };
        c.endpoint.bind(addr).map_err(code)?;
        Ok(ND_SUCCESS)
    })
}

unsafe extern "C" fn connector_connect(
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
        // SAFETY: the caller's object, QP (checked by kind), address, private data and
        // OVERLAPPED (live until the request completes).
        let (c, qp, remote, data, request) = unsafe {
            let c = self::this::<ConnectorBody>(this)?;
            let qp = arg::<QpBody>(qp)?;
            let remote = read_sockaddr(dest, dest_len as usize)?;
            let data = bytes(private_data, private_data_len as usize)?;
            let request = Request::start(ov, &c.file)?;
            (c, qp, remote, data, request)
        };
        issue(request, || {
            c.endpoint
                .connect(&qp.qp, remote, inbound_read_limit, outbound_read_limit, data)
        })
    })
}

unsafe extern "C" fn connector_complete_connect(this: *mut c_void, ov: *mut c_void) -> HResult {
    hr_boundary("IND2Connector::CompleteConnect", || {
        // SAFETY: the caller's object and OVERLAPPED (live until the request completes).
        let (c, request) = unsafe {
            let c = self::this::<ConnectorBody>(this)?;
            let request = Request::start(ov, &c.file)?;
            (c, request)
        };
        c.complete_connect(request)
    })
}

unsafe extern "C" fn connector_accept(
    this: *mut c_void,
    qp: *mut c_void,
    inbound_read_limit: u32,
    outbound_read_limit: u32,
    private_data: *const c_void,
    private_data_len: u32,
    ov: *mut c_void,
) -> HResult {
    hr_boundary("IND2Connector::Accept", || {
        // SAFETY: the caller's object, QP (checked by kind), private data and OVERLAPPED (live
        // until the request completes).
        let (c, qp, data, request) = unsafe {
            let c = self::this::<ConnectorBody>(this)?;
            let qp = arg::<QpBody>(qp)?;
            let data = bytes(private_data, private_data_len as usize)?;
            let request = Request::start(ov, &c.file)?;
            (c, qp, data, request)
        };
        issue(request, || {
            c.endpoint.accept(&qp.qp, inbound_read_limit, outbound_read_limit, data)
        })
    })
}

unsafe extern "C" fn connector_reject(this: *mut c_void, private_data: *const c_void, len: u32) -> HResult {
    hr_boundary("IND2Connector::Reject", || {
        // SAFETY: the caller's object and private data.
        let (c, data) = unsafe { (self::this::<ConnectorBody>(this)?, bytes(private_data, len as usize)?) };
        c.endpoint.reject(data).map_err(code)?;
        Ok(ND_SUCCESS)
    })
}

unsafe extern "C" fn connector_get_read_limits(this: *mut c_void, inbound: *mut u32, outbound: *mut u32) -> HResult {
    hr_boundary("IND2Connector::GetReadLimits", || {
        // SAFETY: the caller's object; each out pointer NULL (not wanted) or writable.
        let (c, inbound, outbound) =
            unsafe { (self::this::<ConnectorBody>(this)?, inbound.as_mut(), outbound.as_mut()) };
        c.get_read_limits(inbound, outbound)
    })
}

unsafe extern "C" fn connector_get_private_data(this: *mut c_void, data: *mut c_void, len: *mut u32) -> HResult {
    hr_boundary("IND2Connector::GetPrivateData", || {
        // SAFETY: the caller's object, and its buffer of *len bytes.
        unsafe {
            let c = self::this::<ConnectorBody>(this)?;
            fill_out(data, len, |b| c.endpoint.get_private_data(b))
        }
    })
}

address_entry!(
    connector_get_local_address,
    "IND2Connector::GetLocalAddress",
    ConnectorBody,
    |c, b| c.endpoint.get_local_address(b)
);

address_entry!(
    connector_get_peer_address,
    "IND2Connector::GetPeerAddress",
    ConnectorBody,
    |c, b| c.endpoint.get_peer_address(b)
);

connector_request!(
    connector_notify_disconnect,
    "IND2Connector::NotifyDisconnect",
    notify_disconnect
);

connector_request!(connector_disconnect, "IND2Connector::Disconnect", disconnect);

// IND2Listener.

#[repr(C)]
pub(crate) struct ListenerVtbl {
    unknown: UnknownVtbl,
    overlapped: OverlappedVtbl,
    bind: unsafe extern "C" fn(*mut c_void, *const libc::sockaddr, u32) -> HResult,
    listen: unsafe extern "C" fn(*mut c_void, u32) -> HResult,
    get_local_address: unsafe extern "C" fn(*mut c_void, *mut libc::sockaddr, *mut u32) -> HResult,
    get_connection_request: unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void) -> HResult,
}

com_class! {
    ListenerBody, LISTENER_VTBL: ListenerVtbl, [IID_IND2Overlapped, IID_IND2Listener] {
        bind: listener_bind,
        listen: listener_listen,
        get_local_address: listener_get_local_address,
        get_connection_request: listener_get_connection_request,
    }
    fn on_release(&self) {
        self.cancel();
    }
}

unsafe extern "C" fn listener_bind(this: *mut c_void, addr: *const libc::sockaddr, len: u32) -> HResult {
    hr_boundary("IND2Listener::Bind", || {
        // SAFETY: the caller's object and address.
        let (l, addr) = unsafe { (self::this::<ListenerBody>(this)?, read_sockaddr(addr, len as usize)?) };
        l.endpoint.bind(addr).map_err(code)?;
        Ok(ND_SUCCESS)
    })
}

unsafe extern "C" fn listener_listen(this: *mut c_void, backlog: u32) -> HResult {
    hr_boundary("IND2Listener::Listen", || {
        // SAFETY: the caller's object.
        let l = unsafe { self::this::<ListenerBody>(this)? };
        l.endpoint.listen(backlog).map_err(code)?;
        Ok(ND_SUCCESS)
    })
}

address_entry!(
    listener_get_local_address,
    "IND2Listener::GetLocalAddress",
    ListenerBody,
    |l, b| l.endpoint.get_local_address(b)
);

unsafe extern "C" fn listener_get_connection_request(
    this: *mut c_void,
    connector: *mut c_void,
    ov: *mut c_void,
) -> HResult {
    hr_boundary("IND2Listener::GetConnectionRequest", || {
        // SAFETY: the caller's object, connector (checked by kind) and OVERLAPPED (live until the
        // request completes).
        let (l, c, request) = unsafe {
            let l = self::this::<ListenerBody>(this)?;
            let c = arg::<ConnectorBody>(connector)?;
            let request = Request::start(ov, &l.file)?;
            (l, c, request)
        };
        issue(request, || l.endpoint.get_connection_request(&c.endpoint))
    })
}

#[cfg(test)]
mod tests {
    use super::super::provider::{CLASS_E_CLASSNOTAVAILABLE, CLASS_E_NOAGGREGATION, LOCKS};
    use super::super::{add_ref, iids, Class, Com, E_NOINTERFACE};
    use super::*;
    use crate::liveness::serial_for_test;
    use std::sync::atomic::Ordering;

    fn release(object: *mut c_void) {
        // SAFETY: an object of ours; its vtable starts with IUnknown's.
        unsafe {
            let vtbl = *object.cast::<*const UnknownVtbl>();
            ((*vtbl).release)(object);
        }
    }

    /// An object of the shim's, of no class in particular (as an adapter, CQ or QP).
    struct Thing;

    static THING_VTBL: UnknownVtbl = UnknownVtbl::of::<Thing>();

    impl Class for Thing {
        type Vtbl = UnknownVtbl;
        const VTBL: &'static UnknownVtbl = &THING_VTBL;
        const IIDS: &'static [&'static Guid] = &[&iids::IID_IUnknown];
    }

    #[test]
    fn any_object_holds_the_library_until_its_last_release() {
        let _serial = serial_for_test();
        assert_eq!(DllCanUnloadNow(), ND_SUCCESS);
        let object = Com::create(std::sync::Arc::new(Thing)).cast::<c_void>();
        assert_eq!(DllCanUnloadNow(), S_FALSE);
        // SAFETY: a live object of ours.
        unsafe { add_ref::<Thing>(object) };
        release(object);
        assert_eq!(DllCanUnloadNow(), S_FALSE, "one reference is left");
        release(object);
        assert_eq!(DllCanUnloadNow(), ND_SUCCESS);
    }

    #[test]
    fn factory_gives_providers_and_counts_them() {
        let _serial = serial_for_test();
        let mut factory: *mut c_void = std::ptr::null_mut();
        // SAFETY: live locals and statics.
        let hr = unsafe { DllGetClassObject(&iids::IID_IND2Adapter, &iids::IID_IClassFactory, &mut factory) };
        assert_eq!((hr, factory.is_null()), (CLASS_E_CLASSNOTAVAILABLE, true));
        // SAFETY: as above.
        let hr = unsafe { DllGetClassObject(&iids::CLSID_NdShimProvider, &iids::IID_IClassFactory, &mut factory) };
        assert_eq!(hr, ND_SUCCESS);
        assert_eq!(DllCanUnloadNow(), S_FALSE);
        let mut provider: *mut c_void = std::ptr::null_mut();
        // SAFETY: a factory of ours, live locals.
        unsafe {
            assert_eq!(
                create_instance(factory, factory, &iids::IID_IND2Provider, &mut provider),
                CLASS_E_NOAGGREGATION
            );
            assert_eq!(
                create_instance(factory, std::ptr::null_mut(), &iids::IID_INDProvider, &mut provider),
                E_NOINTERFACE
            );
            assert!(provider.is_null());
            assert_eq!(lock_server(factory, 1), ND_SUCCESS);
            assert_eq!(
                create_instance(factory, std::ptr::null_mut(), &iids::IID_IND2Provider, &mut provider),
                ND_SUCCESS
            );
        }
        release(factory);
        assert_eq!(DllCanUnloadNow(), S_FALSE);
        // SAFETY: a provider of ours, live locals.
        unsafe {
            let mut id = 0u64;
            assert_eq!(
                provider_resolve_address(provider, std::ptr::null(), 16, &mut id),
                ND_INVALID_PARAMETER
            );
            let mut out: *mut c_void = std::ptr::null_mut();
            assert_eq!(
                provider_open_adapter(provider, &iids::IID_INDAdapter, 0, &mut out),
                E_NOINTERFACE
            );
            assert_eq!(
                provider_open_adapter(provider, &iids::IID_IND2Adapter, 0xdead, &mut out),
                ND_INVALID_PARAMETER
            );
        }
        release(provider);
        // A lock still holds, and then none.
        assert_eq!(DllCanUnloadNow(), S_FALSE);
        LOCKS.fetch_sub(1, Ordering::AcqRel);
        assert_eq!(DllCanUnloadNow(), ND_SUCCESS);
    }
}
