//! NDK_CONNECTOR: NdkConnect, NdkConnectWithSharedEndpoint, NdkAccept, NdkReject,
//! NdkGetConnectionData, NdkGetLocalAddress, NdkGetPeerAddress, NdkCompleteConnect,
//! NdkDisconnect (NDK_CONNECTOR_DISPATCH's order), and the shim's NdkCancelConnector.
//!
//! The face only translates: each entry turns its C arguments into one call of [`Connector`],
//! whose state machine decides every code (NdkConnect is [`Connector::bind_and_connect`]:
//! ND2's Bind from `pSrcAddress` and Connect in one step). Calls that the Rust API returns as a
//! [`Pending`] return its final code inline when it completed before the call returns, else
//! STATUS_PENDING and the code through `RequestCompletion`.

use std::ffi::c_void;
use std::sync::{Arc, Weak};

use super::boundary::{
    bytes, code, handle, read_sockaddr, status_boundary, take_handle, write_address, Context, DisconnectEvent, Handle,
    NtStatus, RequestCompletion, STATUS_INVALID_PARAMETER, STATUS_PENDING, STATUS_SUCCESS,
};
use super::ndk_shared_endpoint::NdkSharedEndpoint;
use super::ndk_verbs::{AdapterShared, NdkQp};
use crate::status::NdStatus;
use crate::{Connector, Pending};

#[repr(C)]
pub struct NdkConnector {
    dispatch: *const NdkConnectorDispatch,
    shared: Arc<ConnectorShared>,
}

struct ConnectorShared {
    connector: Connector,
    _adapter: Arc<AdapterShared>,
}

#[repr(C)]
pub struct NdkConnectorDispatch {
    pub close: unsafe extern "C" fn(*mut NdkConnector) -> NtStatus,
    pub connect: unsafe extern "C" fn(
        *mut NdkConnector,
        *mut NdkQp,
        *const libc::sockaddr,
        u32,
        *const libc::sockaddr,
        u32,
        u32,
        u32,
        *const c_void,
        u32,
        RequestCompletion,
        *mut c_void,
    ) -> NtStatus,
    pub connect_with_shared_endpoint: unsafe extern "C" fn(
        *mut NdkConnector,
        *mut NdkQp,
        *mut NdkSharedEndpoint,
        *const libc::sockaddr,
        u32,
        u32,
        u32,
        *const c_void,
        u32,
        RequestCompletion,
        *mut c_void,
    ) -> NtStatus,
    pub accept: unsafe extern "C" fn(
        *mut NdkConnector,
        *mut NdkQp,
        u32,
        u32,
        *const c_void,
        u32,
        DisconnectEvent,
        *mut c_void,
        RequestCompletion,
        *mut c_void,
    ) -> NtStatus,
    pub reject: unsafe extern "C" fn(*mut NdkConnector, *const c_void, u32) -> NtStatus,
    pub get_connection_data:
        unsafe extern "C" fn(*mut NdkConnector, *mut u32, *mut u32, *mut c_void, *mut u32) -> NtStatus,
    pub get_local_address: unsafe extern "C" fn(*mut NdkConnector, *mut libc::sockaddr, *mut u32) -> NtStatus,
    pub get_peer_address: unsafe extern "C" fn(*mut NdkConnector, *mut libc::sockaddr, *mut u32) -> NtStatus,
    pub complete_connect: unsafe extern "C" fn(
        *mut NdkConnector,
        DisconnectEvent,
        *mut c_void,
        RequestCompletion,
        *mut c_void,
    ) -> NtStatus,
    pub disconnect: unsafe extern "C" fn(*mut NdkConnector, RequestCompletion, *mut c_void) -> NtStatus,
    pub cancel: unsafe extern "C" fn(*mut NdkConnector) -> NtStatus,
}

static CONNECTOR_DISPATCH: NdkConnectorDispatch = NdkConnectorDispatch {
    close,
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
};

impl Handle for NdkConnector {
    type Dispatch = NdkConnectorDispatch;
    const DISPATCH: &'static NdkConnectorDispatch = &CONNECTOR_DISPATCH;
}

impl NdkConnector {
    pub(super) fn new(adapter: &Arc<AdapterShared>) -> NdkConnector {
        NdkConnector::wrap(adapter, Connector::new(&adapter.adapter))
    }

    /// A connector a listener filled with an incoming request.
    pub(super) fn wrap(adapter: &Arc<AdapterShared>, connector: Connector) -> NdkConnector {
        NdkConnector {
            dispatch: &CONNECTOR_DISPATCH,
            shared: Arc::new(ConnectorShared {
                connector,
                _adapter: Arc::clone(adapter),
            }),
        }
    }
}

/// The RequestCompletion rule: the final code inline if `pending` already completed (the
/// callback is then never called), else STATUS_PENDING and the code through the callback.
/// `then` runs first on success, before the caller hears of it.
fn complete_later(
    pending: Pending,
    completion: unsafe extern "C" fn(*mut c_void, NtStatus),
    context: Context,
    then: impl FnOnce() + Send + 'static,
) -> NtStatus {
    if let Some(status) = pending.poll() {
        if status == NdStatus::ND_SUCCESS {
            then();
        }
        return status.0;
    }
    pending.on_complete(move |status| {
        if status == NdStatus::ND_SUCCESS {
            then();
        }
        // Moves the Send wrapper itself into the closure, not just its raw-pointer field.
        let context = context;
        // SAFETY: the caller's callback, with its own context, as NDKPI specifies.
        unsafe { completion(context.0, status.0) };
    });
    STATUS_PENDING
}

/// Arms the DisconnectEvent callback of NdkAccept / NdkCompleteConnect: the state machine
/// calls it once when the peer disconnects (not after this side's NdkDisconnect, nor on close).
fn arm_disconnect_event(shared: &Weak<ConnectorShared>, event: DisconnectEvent, context: Context) {
    let Some(event) = event else { return };
    let Some(me) = shared.upgrade() else { return };
    me.connector.on_peer_disconnect(move || {
        // As in complete_later: the Send wrapper, not its field.
        let context = context;
        // SAFETY: the caller's callback, with its own context.
        unsafe { event(context.0) };
    });
}

fn required(completion: RequestCompletion) -> Result<unsafe extern "C" fn(*mut c_void, NtStatus), NtStatus> {
    completion.ok_or(STATUS_INVALID_PARAMETER)
}

unsafe extern "C" fn close(connector: *mut NdkConnector) -> NtStatus {
    status_boundary("NdkCloseConnector", || {
        // SAFETY: the caller gives up its handle. Dropping it releases the connector: pending
        // requests complete STATUS_CANCELLED and the DisconnectEvent is never called.
        drop(unsafe { take_handle(connector)? });
        Ok(STATUS_SUCCESS)
    })
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
        // SAFETY: the caller's handles and buffers, each checked once here.
        let (c, qp, source, destination, private_data) = unsafe {
            (
                handle(connector)?,
                handle(qp)?,
                read_sockaddr(source, source_length)?,
                read_sockaddr(destination, destination_length)?,
                bytes(private_data, private_data_length)?,
            )
        };
        let completion = required(completion)?;
        let pending = c
            .shared
            .connector
            .bind_and_connect(
                &qp.qp,
                source,
                destination,
                inbound_read_limit,
                outbound_read_limit,
                private_data,
            )
            .map_err(code)?;
        Ok(complete_later(pending, completion, Context(context), || {}))
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
        // SAFETY: the caller's handles and buffers, each checked once here.
        let (c, qp, endpoint, destination, private_data) = unsafe {
            (
                handle(connector)?,
                handle(qp)?,
                handle(endpoint)?,
                read_sockaddr(destination, destination_length)?,
                bytes(private_data, private_data_length)?,
            )
        };
        let completion = required(completion)?;
        let pending = c
            .shared
            .connector
            .connect_with_shared_endpoint(
                &qp.qp,
                &endpoint.endpoint,
                destination,
                inbound_read_limit,
                outbound_read_limit,
                private_data,
            )
            .map_err(code)?;
        Ok(complete_later(pending, completion, Context(context), || {}))
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
        // SAFETY: the caller's handles and buffers, each checked once here.
        let (c, qp, private_data) = unsafe {
            (
                handle(connector)?,
                handle(qp)?,
                bytes(private_data, private_data_length)?,
            )
        };
        let completion = required(completion)?;
        let pending = c
            .shared
            .connector
            .accept(&qp.qp, inbound_read_limit, outbound_read_limit, private_data)
            .map_err(code)?;
        let weak = Arc::downgrade(&c.shared);
        let disconnect_context = Context(disconnect_context);
        Ok(complete_later(pending, completion, Context(context), move || {
            arm_disconnect_event(&weak, disconnect_event, disconnect_context)
        }))
    })
}

unsafe extern "C" fn reject(
    connector: *mut NdkConnector,
    private_data: *const c_void,
    private_data_length: u32,
) -> NtStatus {
    status_boundary("NdkReject", || {
        // SAFETY: the caller's handle and buffer.
        let (c, private_data) = unsafe { (handle(connector)?, bytes(private_data, private_data_length)?) };
        c.shared.connector.reject(private_data).map_err(code)?;
        Ok(STATUS_SUCCESS)
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
        // SAFETY: the caller's handle.
        let c = unsafe { handle(connector)? };
        if private_data_length.is_null() {
            return Err(STATUS_INVALID_PARAMETER);
        }
        // SAFETY: non-NULL; readable by the caller's promise.
        let have = unsafe { private_data_length.read() };
        if private_data.is_null() && have != 0 {
            return Err(STATUS_INVALID_PARAMETER);
        }
        let connector = &c.shared.connector;
        let need = connector.get_private_data(&mut []).map_err(code)?.required;
        let mut data = vec![0u8; need];
        connector.get_private_data(&mut data).map_err(code)?;
        // After a REJ there are private data but no read limits: asking for them is
        // STATUS_CONNECTION_INVALID then.
        if !inbound_read_limit.is_null() || !outbound_read_limit.is_null() {
            let limits = connector.get_read_limits().map_err(code)?;
            // SAFETY: each out-pointer is NULL or writable (the caller's promise).
            unsafe {
                if !inbound_read_limit.is_null() {
                    inbound_read_limit.write(limits.inbound);
                }
                if !outbound_read_limit.is_null() {
                    outbound_read_limit.write(limits.outbound);
                }
            }
        }
        // SAFETY: non-NULL; writable by the caller's promise.
        unsafe { private_data_length.write(need as u32) };
        if private_data.is_null() {
            return Ok(STATUS_SUCCESS);
        }
        if (have as usize) < need {
            return Ok(code(NdStatus::STATUS_BUFFER_TOO_SMALL));
        }
        // SAFETY: non-NULL and writable for `have` >= `need` bytes (the caller's promise).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), private_data.cast::<u8>(), need) };
        Ok(STATUS_SUCCESS)
    })
}

unsafe extern "C" fn get_local_address(
    connector: *mut NdkConnector,
    address: *mut libc::sockaddr,
    length: *mut u32,
) -> NtStatus {
    status_boundary("NdkGetLocalAddress", || {
        // SAFETY: the caller's handle, buffer and length.
        unsafe {
            let c = handle(connector)?;
            write_address(address, length, |b| c.shared.connector.get_local_address(b))
        }
    })
}

unsafe extern "C" fn get_peer_address(
    connector: *mut NdkConnector,
    address: *mut libc::sockaddr,
    length: *mut u32,
) -> NtStatus {
    status_boundary("NdkGetPeerAddress", || {
        // SAFETY: the caller's handle, buffer and length.
        unsafe {
            let c = handle(connector)?;
            write_address(address, length, |b| c.shared.connector.get_peer_address(b))
        }
    })
}

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
        // SAFETY: the caller's handle.
        let c = unsafe { handle(connector)? };
        required(completion)?;
        c.shared.connector.complete_connect().map_err(code)?;
        arm_disconnect_event(
            &Arc::downgrade(&c.shared),
            disconnect_event,
            Context(disconnect_context),
        );
        Ok(STATUS_SUCCESS)
    })
}

unsafe extern "C" fn disconnect(
    connector: *mut NdkConnector,
    completion: RequestCompletion,
    context: *mut c_void,
) -> NtStatus {
    status_boundary("NdkDisconnect", || {
        // SAFETY: the caller's handle.
        let c = unsafe { handle(connector)? };
        let completion = required(completion)?;
        let pending = c.shared.connector.disconnect().map_err(code)?;
        Ok(complete_later(pending, completion, Context(context), || {}))
    })
}

/// The shim's cancel (IND2Overlapped::CancelOverlappedRequests): a pending NdkConnect or
/// NdkAccept completes with STATUS_CANCELLED.
unsafe extern "C" fn cancel(connector: *mut NdkConnector) -> NtStatus {
    status_boundary("NdkCancelConnector", || {
        // SAFETY: the caller's handle.
        let c = unsafe { handle(connector)? };
        c.shared.connector.cancel();
        Ok(STATUS_SUCCESS)
    })
}
