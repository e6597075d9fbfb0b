//! The C entries of the NDK face: its dispatch tables and exported functions.
//!
//! Each entry turns its C arguments into checked Rust values in one step (`boundary`'s
//! conversions, in the order the checks report) inside its panic boundary, then calls the
//! object's safe method in its own module, which decides every code.

use std::ffi::c_void;
use std::mem::size_of;

use super::boundary::{
    address_out, boundary, data_out, handle, read_sockaddr, slice, status_boundary, take_handle, ConnectCallback,
    CreateCompletion, DisconnectCallback, DisconnectEvent, Handle, NtStatus, RequestCallback, RequestCompletion,
    UnalignedOut, STATUS_SUCCESS,
};
use super::ndk_adapter::{NdkAdapter, NdkAdapterDispatch, NdkAdapterInfo};
use super::ndk_connector::{NdkConnector, NdkConnectorDispatch};
use super::ndk_listener::{ConnectEvent, NdkListener, NdkListenerDispatch};
use super::ndk_shared_endpoint::{NdkSharedEndpoint, NdkSharedEndpointDispatch};
use super::ndk_verbs::{NdkCq, NdkCqDispatch, NdkMr, NdkMrDispatch, NdkQp, NdkQpDispatch, NdkResult, NdkSge};
use crate::QueuePair;

/// Every object's Close entry: the caller gives up its handle, and dropping the object releases
/// it (a connector's pending requests complete STATUS_CANCELLED and its DisconnectEvent is
/// never called; an MR leaves its adapter's table).
unsafe extern "C" fn close<T: Handle>(object: *mut T) -> NtStatus {
    status_boundary(T::CLOSE, || {
        // SAFETY: the caller's handle, given up (NDKPI: an adapter after every child).
        drop(unsafe { take_handle(object)? });
        Ok(STATUS_SUCCESS)
    })
}

/// An object's dispatch table (its Close, then the other entries) and its `Handle` impl, with
/// the name its Close reports under.
macro_rules! dispatch {
    ($(#[$doc:meta])* $object:ty, $table:ident: $dispatch:ident, $close:literal; $($field:ident $(: $entry:ident)?,)*) => {
        static $table: $dispatch = $dispatch {
            close: close::<$object>,
            $($field $(: $entry)?,)*
        };

        $(#[$doc])*
        impl Handle for $object {
            type Dispatch = $dispatch;
            const DISPATCH: &'static $dispatch = &$table;
            const CLOSE: &'static str = $close;
        }
    };
}

dispatch! {
    NdkAdapter, ADAPTER_DISPATCH: NdkAdapterDispatch, "NdkCloseAdapter";
    query: query_adapter,
    get_event_fd,
    process_events,
    create_cq,
    create_qp,
    create_mr,
    create_connector,
    create_listener,
    create_shared_endpoint,
}

/// Opens the adapter that owns the IP address `address` (its port is ignored). `flags`: 0 for
/// the shim's event thread (callbacks run on it), NDK_SHIM_ADAPTER_POLLED to drive events
/// from the caller.
///
/// # Safety
/// `address` is NULL or readable for `length` bytes; `adapter` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn NdkOpenAdapter(
    address: *const libc::sockaddr,
    length: u32,
    flags: u32,
    adapter: *mut *mut NdkAdapter,
) -> NtStatus {
    status_boundary("NdkOpenAdapter", || {
        // SAFETY: the caller's promises on address/length and adapter.
        let (address, out) = unsafe { (read_sockaddr(address, length), adapter.as_mut()) };
        NdkAdapter::open(address, flags, out)
    })
}

unsafe extern "C" fn query_adapter(adapter: *mut NdkAdapter, info: *mut NdkAdapterInfo, length: *mut u32) -> NtStatus {
    status_boundary("NdkQueryAdapterInfo", || {
        // SAFETY: the caller's handle; `length` is NULL or a u32 to read and write; `info` is
        // NULL or writable for `*length` bytes: as many whole infos as fit.
        let (adapter, length, info) = unsafe {
            let adapter = handle(adapter)?;
            let fit = length
                .as_ref()
                .map_or(0, |&have| have as usize / size_of::<NdkAdapterInfo>());
            (adapter, length.as_mut(), UnalignedOut::new(info, fit))
        };
        adapter.query(length, info)
    })
}

unsafe extern "C" fn get_event_fd(adapter: *mut NdkAdapter, fd: *mut i32) -> NtStatus {
    status_boundary("NdkGetEventFd", || {
        // SAFETY: the caller's handle; `fd` NULL or writable.
        let (adapter, fd) = unsafe { (handle(adapter)?, fd.as_mut()) };
        adapter.event_fd(fd)
    })
}

unsafe extern "C" fn process_events(adapter: *mut NdkAdapter, count: *mut u32) -> NtStatus {
    status_boundary("NdkProcessEvents", || {
        // SAFETY: the caller's handle; `count` NULL or writable.
        let (adapter, count) = unsafe { (handle(adapter)?, count.as_mut()) };
        adapter.process_events(count)
    })
}

unsafe extern "C" fn create_cq(adapter: *mut NdkAdapter, depth: u32, cq: *mut *mut NdkCq) -> NtStatus {
    status_boundary("NdkCreateCq", || {
        // SAFETY: the caller's handle; `cq` NULL or writable.
        let (adapter, out) = unsafe { (handle(adapter)?, cq.as_mut()) };
        adapter.create_cq(depth, out)
    })
}

unsafe extern "C" fn create_qp(
    adapter: *mut NdkAdapter,
    receive_cq: *mut NdkCq,
    initiator_cq: *mut NdkCq,
    receive_queue_depth: u32,
    initiator_queue_depth: u32,
    max_sge: u32,
    qp: *mut *mut NdkQp,
) -> NtStatus {
    status_boundary("NdkCreateQp", || {
        // SAFETY: the caller's handles; `qp` NULL or writable.
        let (adapter, rcq, icq, out) = unsafe {
            (
                handle(adapter)?,
                handle(receive_cq)?,
                handle(initiator_cq)?,
                qp.as_mut(),
            )
        };
        adapter.create_qp(rcq, icq, receive_queue_depth, initiator_queue_depth, max_sge, out)
    })
}

unsafe extern "C" fn create_mr(adapter: *mut NdkAdapter, length: usize, mr: *mut *mut NdkMr) -> NtStatus {
    status_boundary("NdkCreateMr", || {
        // SAFETY: the caller's handle; `mr` NULL or writable.
        let (adapter, out) = unsafe { (handle(adapter)?, mr.as_mut()) };
        adapter.create_mr(length, out)
    })
}

unsafe extern "C" fn create_connector(
    adapter: *mut NdkAdapter,
    _completion: CreateCompletion,
    _context: *mut c_void,
    connector: *mut *mut NdkConnector,
) -> NtStatus {
    status_boundary("NdkCreateConnector", || {
        // SAFETY: the caller's handle; `connector` NULL or writable.
        let (adapter, out) = unsafe { (handle(adapter)?, connector.as_mut()) };
        adapter.create_connector(out)
    })
}

unsafe extern "C" fn create_listener(
    adapter: *mut NdkAdapter,
    connect_event: ConnectEvent,
    connect_event_context: *mut c_void,
    _completion: CreateCompletion,
    _context: *mut c_void,
    listener: *mut *mut NdkListener,
) -> NtStatus {
    status_boundary("NdkCreateListener", || {
        // SAFETY: the caller's handle; its connect-event callback, to call with its context as
        // NDKPI specifies; `listener` NULL or writable.
        let (adapter, event, out) = unsafe {
            (
                handle(adapter)?,
                ConnectCallback::new(connect_event, connect_event_context),
                listener.as_mut(),
            )
        };
        adapter.create_listener(event, out)
    })
}

unsafe extern "C" fn create_shared_endpoint(
    adapter: *mut NdkAdapter,
    address: *const libc::sockaddr,
    length: u32,
    _completion: CreateCompletion,
    _context: *mut c_void,
    endpoint: *mut *mut NdkSharedEndpoint,
) -> NtStatus {
    status_boundary("NdkCreateSharedEndpoint", || {
        // SAFETY: the caller's handle; address/length and `endpoint` per the caller's promise.
        let (adapter, address, out) = unsafe { (handle(adapter)?, read_sockaddr(address, length), endpoint.as_mut()) };
        adapter.create_shared_endpoint(address, out)
    })
}

dispatch! {
    NdkCq, CQ_DISPATCH: NdkCqDispatch, "NdkCloseCq";
    get_results,
}

/// Up to `count` completions into `results`; returns how many (0 on a bad argument).
unsafe extern "C" fn get_results(cq: *mut NdkCq, results: *mut NdkResult, count: u32) -> u32 {
    boundary("NdkGetCqResults", 0, || {
        // SAFETY: the caller's handle; `results` NULL or `count` entries, written unaligned.
        let (Ok(cq), results) = (unsafe { (handle(cq), UnalignedOut::new(results, count as usize)) }) else {
            return 0;
        };
        cq.get_results(results)
    })
}

dispatch! {
    NdkQp, QP_DISPATCH: NdkQpDispatch, "NdkCloseQp";
    receive,
    send,
    write,
    read,
}

unsafe extern "C" fn receive(qp: *mut NdkQp, context: *mut c_void, sge: *const NdkSge, count: u32) -> NtStatus {
    status_boundary("NdkReceive", || {
        // SAFETY: the caller's handle; `sge` NULL or `count` entries.
        let (qp, list) = unsafe { (handle(qp)?, slice(sge, count)?) };
        qp.receive(context as u64, list)
    })
}

unsafe extern "C" fn send(
    qp: *mut NdkQp,
    context: *mut c_void,
    sge: *const NdkSge,
    count: u32,
    flags: u32,
) -> NtStatus {
    status_boundary("NdkSend", || {
        // SAFETY: as in receive.
        let (qp, list) = unsafe { (handle(qp)?, slice(sge, count)?) };
        qp.send(context as u64, list, flags)
    })
}

/// An RDMA entry (`NdkWrite`, `NdkRead`): the QP's `$method` (of [`QueuePair`]) with the
/// caller's SGEs, the remote address and its token.
macro_rules! rdma_entry {
    ($name:ident, $what:literal, $method:ident) => {
        unsafe extern "C" fn $name(
            qp: *mut NdkQp,
            context: *mut c_void,
            sge: *const NdkSge,
            count: u32,
            remote_address: u64,
            remote_token: u32,
            flags: u32,
        ) -> NtStatus {
            status_boundary($what, || {
                // SAFETY: as in receive.
                let (qp, list) = unsafe { (handle(qp)?, slice(sge, count)?) };
                qp.rdma(
                    QueuePair::$method,
                    context as u64,
                    list,
                    remote_address,
                    remote_token,
                    flags,
                )
            })
        }
    };
}
rdma_entry!(write, "NdkWrite", write);
rdma_entry!(read, "NdkRead", read);

dispatch! {
    NdkMr, MR_DISPATCH: NdkMrDispatch, "NdkCloseMr";
    get_buffer,
    get_local_token,
    get_remote_token,
}

/// The region's buffer (the shim allocated it; it lives until NdkCloseMr) and its length.
unsafe extern "C" fn get_buffer(mr: *mut NdkMr, buffer: *mut *mut c_void, length: *mut usize) -> NtStatus {
    status_boundary("NdkGetMrBuffer", || {
        // SAFETY: the caller's handle; each out-pointer NULL or writable.
        let (mr, buffer, length) = unsafe { (handle(mr)?, buffer.as_mut(), length.as_mut()) };
        mr.get_buffer(buffer, length)
    })
}

unsafe extern "C" fn get_local_token(mr: *mut NdkMr) -> u32 {
    boundary("NdkGetLocalTokenFromMr", 0, || {
        // SAFETY: the caller's handle.
        unsafe { handle(mr) }.map_or(0, NdkMr::local_token)
    })
}

unsafe extern "C" fn get_remote_token(mr: *mut NdkMr) -> u32 {
    boundary("NdkGetRemoteTokenFromMr", 0, || {
        // SAFETY: the caller's handle.
        unsafe { handle(mr) }.map_or(0, NdkMr::remote_token)
    })
}

dispatch! {
    NdkConnector, CONNECTOR_DISPATCH: NdkConnectorDispatch, "NdkCloseConnector";
    connect,
    connect_with_shared_endpoint,
    accept,
    reject,
    get_connection_data,
    get_local_address,
    get_peer_address,
    complete_connect,
    disconnect,
    cancel,
}

unsafe extern "C" fn connect(
    connector: *mut NdkConnector,
    qp: *mut NdkQp,
    source: *const libc::sockaddr,
    source_length: u32,
    destination: *const libc::sockaddr,
    destination_length: u32,
    inbound_read_limit: u32,
    outbound_read_limit: u32,
    private_data: *const c_void,
    private_data_length: u32,
    completion: RequestCompletion,
    context: *mut c_void,
) -> NtStatus {
    status_boundary("NdkConnect", || {
        // SAFETY: the caller's handles, buffers and completion, each checked once here.
        let (c, qp, source, destination, private_data, completion) = unsafe {
            (
                handle(connector)?,
                handle(qp)?,
                read_sockaddr(source, source_length)?,
                read_sockaddr(destination, destination_length)?,
                slice(private_data.cast::<u8>(), private_data_length)?,
                RequestCallback::new(completion, context),
            )
        };
        c.connect(
            qp,
            source,
            destination,
            (inbound_read_limit, outbound_read_limit),
            private_data,
            completion,
        )
    })
}

unsafe extern "C" fn connect_with_shared_endpoint(
    connector: *mut NdkConnector,
    qp: *mut NdkQp,
    endpoint: *mut NdkSharedEndpoint,
    destination: *const libc::sockaddr,
    destination_length: u32,
    inbound_read_limit: u32,
    outbound_read_limit: u32,
    private_data: *const c_void,
    private_data_length: u32,
    completion: RequestCompletion,
    context: *mut c_void,
) -> NtStatus {
    status_boundary("NdkConnectWithSharedEndpoint", || {
        // SAFETY: the caller's handles, buffers and completion, each checked once here.
        let (c, qp, endpoint, destination, private_data, completion) = unsafe {
            (
                handle(connector)?,
                handle(qp)?,
                handle(endpoint)?,
                read_sockaddr(destination, destination_length)?,
                slice(private_data.cast::<u8>(), private_data_length)?,
                RequestCallback::new(completion, context),
            )
        };
        c.connect_with_shared_endpoint(
            qp,
            endpoint,
            destination,
            (inbound_read_limit, outbound_read_limit),
            private_data,
            completion,
        )
    })
}

unsafe extern "C" fn accept(
    connector: *mut NdkConnector,
    qp: *mut NdkQp,
    inbound_read_limit: u32,
    outbound_read_limit: u32,
    private_data: *const c_void,
    private_data_length: u32,
    disconnect_event: DisconnectEvent,
    disconnect_context: *mut c_void,
    completion: RequestCompletion,
    context: *mut c_void,
) -> NtStatus {
    status_boundary("NdkAccept", || {
        // SAFETY: the caller's handles, buffer and callbacks, each checked once here.
        let (c, qp, private_data, disconnect_event, completion) = unsafe {
            (
                handle(connector)?,
                handle(qp)?,
                slice(private_data.cast::<u8>(), private_data_length)?,
                DisconnectCallback::new(disconnect_event, disconnect_context),
                RequestCallback::new(completion, context),
            )
        };
        c.accept(
            qp,
            (inbound_read_limit, outbound_read_limit),
            private_data,
            disconnect_event,
            completion,
        )
    })
}

unsafe extern "C" fn reject(
    connector: *mut NdkConnector,
    private_data: *const c_void,
    private_data_length: u32,
) -> NtStatus {
    status_boundary("NdkReject", || {
        // SAFETY: the caller's handle and buffer.
        let (c, private_data) = unsafe {
            (
                handle(connector)?,
                slice(private_data.cast::<u8>(), private_data_length)?,
            )
        };
        c.reject(private_data)
    })
}

/// NdkGetConnectionData: the effective read limits (each out-pointer optional) and the peer's
/// private data. `pPrivateData` NULL with `*pPrivateDataLength` 0 asks for the size (RDS):
/// STATUS_SUCCESS. A short buffer is untouched: STATUS_BUFFER_TOO_SMALL, the size set.
unsafe extern "C" fn get_connection_data(
    connector: *mut NdkConnector,
    inbound_read_limit: *mut u32,
    outbound_read_limit: *mut u32,
    private_data: *mut c_void,
    private_data_length: *mut u32,
) -> NtStatus {
    status_boundary("NdkGetConnectionData", || {
        // SAFETY: the caller's handle; each out-pointer NULL or writable; the buffer and its
        // length per the caller's promise.
        let (c, (private_data, length), inbound, outbound) = unsafe {
            (
                handle(connector)?,
                data_out(private_data, private_data_length)?,
                inbound_read_limit.as_mut(),
                outbound_read_limit.as_mut(),
            )
        };
        c.get_connection_data(inbound, outbound, private_data, length)
    })
}

/// An address entry (a connector's local and peer address, a listener's and a shared
/// endpoint's local address): the object's `$method` into the caller's buffer, `*length` its
/// size in and the address's out.
macro_rules! address_entry {
    ($name:ident, $object:ty, $what:literal, $method:ident) => {
        unsafe extern "C" fn $name(object: *mut $object, address: *mut libc::sockaddr, length: *mut u32) -> NtStatus {
            status_boundary($what, || {
                // SAFETY: the caller's handle, buffer and length.
                let (object, out) = unsafe { (handle(object)?, address_out(address, length)?) };
                object.$method(out)
            })
        }
    };
}
address_entry!(get_local_address, NdkConnector, "NdkGetLocalAddress", get_local_address);
address_entry!(get_peer_address, NdkConnector, "NdkGetPeerAddress", get_peer_address);

/// NdkCompleteConnect: the RTU. It finishes inline (rdma_establish is synchronous), so
/// `RequestCompletion` is never called; it is still required, as NDKPI requires it.
unsafe extern "C" fn complete_connect(
    connector: *mut NdkConnector,
    disconnect_event: DisconnectEvent,
    disconnect_context: *mut c_void,
    completion: RequestCompletion,
    _context: *mut c_void,
) -> NtStatus {
    status_boundary("NdkCompleteConnect", || {
        // SAFETY: the caller's handle and DisconnectEvent.
        let (c, disconnect_event) = unsafe {
            (
                handle(connector)?,
                DisconnectCallback::new(disconnect_event, disconnect_context),
            )
        };
        c.complete_connect(completion.is_some(), disconnect_event)
    })
}

unsafe extern "C" fn disconnect(
    connector: *mut NdkConnector,
    completion: RequestCompletion,
    context: *mut c_void,
) -> NtStatus {
    status_boundary("NdkDisconnect", || {
        // SAFETY: the caller's handle and completion.
        let (c, completion) = unsafe { (handle(connector)?, RequestCallback::new(completion, context)) };
        c.disconnect(completion)
    })
}

/// The shim's cancel (IND2Overlapped::CancelOverlappedRequests): a pending NdkConnect or
/// NdkAccept completes with STATUS_CANCELLED.
unsafe extern "C" fn cancel(connector: *mut NdkConnector) -> NtStatus {
    status_boundary("NdkCancelConnector", || {
        // SAFETY: the caller's handle.
        let c = unsafe { handle(connector)? };
        c.cancel();
        Ok(STATUS_SUCCESS)
    })
}

dispatch! {
    NdkListener, LISTENER_DISPATCH: NdkListenerDispatch, "NdkCloseListener";
    listen,
    get_local_address: listener_local_address,
    control_connect_events,
}

/// NdkListen: binds to `address` (port 0: one of the ND range) and listens. It finishes inline,
/// so `RequestCompletion` is never called.
unsafe extern "C" fn listen(
    listener: *mut NdkListener,
    address: *const libc::sockaddr,
    length: u32,
    _completion: RequestCompletion,
    _context: *mut c_void,
) -> NtStatus {
    status_boundary("NdkListen", || {
        // SAFETY: the caller's handle and address.
        let (l, address) = unsafe { (handle(listener)?, read_sockaddr(address, length)?) };
        l.listen(address)
    })
}

address_entry!(
    listener_local_address,
    NdkListener,
    "NdkGetListenerLocalAddress",
    get_local_address
);

/// NdkControlConnectEvents: `pause` non-zero holds new connectors back; zero delivers the held
/// ones and resumes.
unsafe extern "C" fn control_connect_events(listener: *mut NdkListener, pause: u8) -> NtStatus {
    status_boundary("NdkControlConnectEvents", || {
        // SAFETY: the caller's handle.
        let l = unsafe { handle(listener)? };
        l.control_connect_events(pause != 0);
        Ok(STATUS_SUCCESS)
    })
}

dispatch! {
    /// NdkCloseSharedEndpoint leaves the address busy until every connector connected through the
    /// endpoint is closed too.
    NdkSharedEndpoint, SHARED_ENDPOINT_DISPATCH: NdkSharedEndpointDispatch, "NdkCloseSharedEndpoint";
    get_local_address: shared_endpoint_local_address,
}

address_entry!(
    shared_endpoint_local_address,
    NdkSharedEndpoint,
    "NdkGetSharedEndpointLocalAddress",
    get_local_address
);

// The exports above, at the version node ND_SHIM_0 (crate::exports).
crate::exports::version_node!("NdkOpenAdapter",);
