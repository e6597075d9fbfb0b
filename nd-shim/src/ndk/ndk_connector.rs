//! NDK_CONNECTOR: NdkConnect, NdkConnectWithSharedEndpoint, NdkAccept, NdkReject,
//! NdkGetConnectionData, NdkGetLocalAddress, NdkGetPeerAddress, NdkCompleteConnect,
//! NdkDisconnect (NDK_CONNECTOR_DISPATCH's order), and the shim's NdkCancelConnector.
//!
//! The face only translates: each entry turns its C arguments into one call of [`Connector`],
//! whose state machine decides every code (NdkConnect is [`Connector::bind_and_connect`]:
//! ND2's Bind from `pSrcAddress` and Connect in one step). Calls that the Rust API returns as a
//! [`Pending`] return its final code inline when it completed before the call returns, else
//! STATUS_PENDING and the code through `RequestCompletion`. The C entries are in `entry.rs`.

#![forbid(unsafe_code)]

use std::ffi::c_void;
use std::net::SocketAddr;
use std::sync::{Arc, Weak};

use super::boundary::{
    code, BufferOut, DisconnectCallback, DisconnectEvent, Handle, NtStatus, RequestCallback, RequestCompletion,
    STATUS_INVALID_PARAMETER, STATUS_PENDING, STATUS_SUCCESS,
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

impl NdkConnector {
    pub(super) fn new(adapter: &Arc<AdapterShared>) -> NdkConnector {
        NdkConnector::wrap(adapter, Connector::new(&adapter.adapter))
    }

    /// A connector a listener filled with an incoming request.
    pub(super) fn wrap(adapter: &Arc<AdapterShared>, connector: Connector) -> NdkConnector {
        NdkConnector {
            dispatch: <NdkConnector as Handle>::DISPATCH,
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
fn complete_later(pending: Pending, completion: RequestCallback, then: impl FnOnce() + Send + 'static) -> NtStatus {
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
        completion.complete(status.0);
    });
    STATUS_PENDING
}

/// Arms the DisconnectEvent callback of NdkAccept / NdkCompleteConnect: the state machine
/// calls it once when the peer disconnects (not after this side's NdkDisconnect, nor on close).
fn arm_disconnect_event(shared: &Weak<ConnectorShared>, event: Option<DisconnectCallback>) {
    let Some(event) = event else { return };
    let Some(me) = shared.upgrade() else { return };
    me.connector.on_peer_disconnect(move || event.disconnected());
}

fn required(completion: Option<RequestCallback>) -> Result<RequestCallback, NtStatus> {
    completion.ok_or(STATUS_INVALID_PARAMETER)
}

impl NdkConnector {
    /// A request that may finish later (connect, accept): the caller's completion is required;
    /// `start` begins the request, and `then` runs when it succeeds, before the completion.
    fn request(
        &self,
        completion: Option<RequestCallback>,
        start: impl FnOnce(&Connector) -> Result<Pending, NdStatus>,
        then: impl FnOnce() + Send + 'static,
    ) -> Result<NtStatus, NtStatus> {
        let completion = required(completion)?;
        let pending = start(&self.shared.connector).map_err(code)?;
        Ok(complete_later(pending, completion, then))
    }

    /// NdkConnect: ND2's Bind from `source` and Connect in one step.
    pub(super) fn connect(
        &self,
        qp: &NdkQp,
        source: SocketAddr,
        destination: SocketAddr,
        (inbound_read_limit, outbound_read_limit): (u32, u32),
        private_data: &[u8],
        completion: Option<RequestCallback>,
    ) -> Result<NtStatus, NtStatus> {
        self.request(
            completion,
            |connector| {
                connector.bind_and_connect(
                    &qp.qp,
                    source,
                    destination,
                    inbound_read_limit,
                    outbound_read_limit,
                    private_data,
                )
            },
            || {},
        )
    }

    pub(super) fn connect_with_shared_endpoint(
        &self,
        qp: &NdkQp,
        endpoint: &NdkSharedEndpoint,
        destination: SocketAddr,
        (inbound_read_limit, outbound_read_limit): (u32, u32),
        private_data: &[u8],
        completion: Option<RequestCallback>,
    ) -> Result<NtStatus, NtStatus> {
        self.request(
            completion,
            |connector| {
                connector.connect_with_shared_endpoint(
                    &qp.qp,
                    &endpoint.endpoint,
                    destination,
                    inbound_read_limit,
                    outbound_read_limit,
                    private_data,
                )
            },
            || {},
        )
    }

    /// NdkAccept: the DisconnectEvent is armed once the accept succeeds.
    pub(super) fn accept(
        &self,
        qp: &NdkQp,
        (inbound_read_limit, outbound_read_limit): (u32, u32),
        private_data: &[u8],
        disconnect_event: Option<DisconnectCallback>,
        completion: Option<RequestCallback>,
    ) -> Result<NtStatus, NtStatus> {
        let weak = Arc::downgrade(&self.shared);
        self.request(
            completion,
            |connector| connector.accept(&qp.qp, inbound_read_limit, outbound_read_limit, private_data),
            move || arm_disconnect_event(&weak, disconnect_event),
        )
    }

    pub(super) fn reject(&self, private_data: &[u8]) -> Result<NtStatus, NtStatus> {
        self.shared.connector.reject(private_data).map_err(code)?;
        Ok(STATUS_SUCCESS)
    }

    /// NdkGetConnectionData, after its checks of the buffer and its length (`boundary::data_out`).
    pub(super) fn get_connection_data(
        &self,
        inbound_read_limit: Option<&mut u32>,
        outbound_read_limit: Option<&mut u32>,
        private_data: Option<&mut [u8]>,
        private_data_length: &mut u32,
    ) -> Result<NtStatus, NtStatus> {
        let have = *private_data_length;
        let connector = &self.shared.connector;
        let need = connector.get_private_data(&mut []).map_err(code)?.required;
        let mut data = vec![0u8; need];
        connector.get_private_data(&mut data).map_err(code)?;
        // After a REJ there are private data but no read limits: asking for them is
        // STATUS_CONNECTION_INVALID then.
        if inbound_read_limit.is_some() || outbound_read_limit.is_some() {
            let limits = connector.get_read_limits().map_err(code)?;
            if let Some(inbound) = inbound_read_limit {
                *inbound = limits.inbound;
            }
            if let Some(outbound) = outbound_read_limit {
                *outbound = limits.outbound;
            }
        }
        *private_data_length = need as u32;
        let Some(private_data) = private_data else {
            return Ok(STATUS_SUCCESS);
        };
        if (have as usize) < need {
            return Ok(code(NdStatus::STATUS_BUFFER_TOO_SMALL));
        }
        private_data[..need].copy_from_slice(&data);
        Ok(STATUS_SUCCESS)
    }

    pub(super) fn get_local_address(&self, out: BufferOut<'_>) -> Result<NtStatus, NtStatus> {
        out.fill(|b| self.shared.connector.get_local_address(b))
    }

    pub(super) fn get_peer_address(&self, out: BufferOut<'_>) -> Result<NtStatus, NtStatus> {
        out.fill(|b| self.shared.connector.get_peer_address(b))
    }

    /// NdkCompleteConnect: the RTU. It finishes inline (rdma_establish is synchronous), so
    /// `RequestCompletion` is never called; it is still required (`has_completion`), as NDKPI
    /// requires it.
    pub(super) fn complete_connect(
        &self,
        has_completion: bool,
        disconnect_event: Option<DisconnectCallback>,
    ) -> Result<NtStatus, NtStatus> {
        if !has_completion {
            return Err(STATUS_INVALID_PARAMETER);
        }
        self.shared.connector.complete_connect().map_err(code)?;
        arm_disconnect_event(&Arc::downgrade(&self.shared), disconnect_event);
        Ok(STATUS_SUCCESS)
    }

    pub(super) fn disconnect(&self, completion: Option<RequestCallback>) -> Result<NtStatus, NtStatus> {
        let completion = required(completion)?;
        let pending = self.shared.connector.disconnect().map_err(code)?;
        Ok(complete_later(pending, completion, || {}))
    }

    /// The shim's cancel (IND2Overlapped::CancelOverlappedRequests): a pending NdkConnect or
    /// NdkAccept completes with STATUS_CANCELLED.
    pub(super) fn cancel(&self) {
        self.shared.connector.cancel();
    }
}
