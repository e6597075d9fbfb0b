//! NDK_ADAPTER: NdkOpenAdapter, the adapter's own entries, and the entries that create every
//! other object of the face (CQ, QP, MR in `ndk_verbs.rs`; connector, listener, shared endpoint
//! in their files): the top of the face, which nothing else in it imports. The C entries are in
//! `entry.rs`.

#![forbid(unsafe_code)]

use std::ffi::c_void;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use super::boundary::{
    code, give_handle, ConnectCallback, CreateCompletion, Handle, NtStatus, UnalignedOut, STATUS_INVALID_PARAMETER,
    STATUS_SUCCESS,
};
use super::ndk_connector::NdkConnector;
use super::ndk_listener::{ConnectEvent, NdkListener};
use super::ndk_shared_endpoint::NdkSharedEndpoint;
use super::ndk_verbs::{AdapterShared, NdkCq, NdkMr, NdkQp};
use crate::status::NdStatus;
use crate::{Adapter, CompletionQueue, MemoryRegion, QueuePair};

/// `NdkOpenAdapter` flag: the caller drives events (`NdkGetEventFd`, `NdkProcessEvents`)
/// instead of the shim's event thread.
pub const NDK_SHIM_ADAPTER_POLLED: u32 = 0x1;

#[repr(C)]
pub struct NdkAdapter {
    dispatch: *const NdkAdapterDispatch,
    shared: Arc<AdapterShared>,
}

/// A subset of NDK_ADAPTER_INFO, filled from the device.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct NdkAdapterInfo {
    pub info_version: u32,
    pub vendor_id: u32,
    pub device_id: u32,
    pub max_registration_size: u64,
    pub max_initiator_request_sge: u32,
    pub max_receive_request_sge: u32,
    pub max_read_request_sge: u32,
    pub max_receive_queue_depth: u32,
    pub max_initiator_queue_depth: u32,
    pub max_cq_depth: u32,
    pub max_inbound_read_limit: u32,
    pub max_outbound_read_limit: u32,
    pub max_caller_data: u32,
    pub max_callee_data: u32,
}

#[repr(C)]
pub struct NdkAdapterDispatch {
    pub close: unsafe extern "C" fn(*mut NdkAdapter) -> NtStatus,
    pub query: unsafe extern "C" fn(*mut NdkAdapter, *mut NdkAdapterInfo, *mut u32) -> NtStatus,
    pub get_event_fd: unsafe extern "C" fn(*mut NdkAdapter, *mut i32) -> NtStatus,
    pub process_events: unsafe extern "C" fn(*mut NdkAdapter, *mut u32) -> NtStatus,
    pub create_cq: unsafe extern "C" fn(*mut NdkAdapter, u32, *mut *mut NdkCq) -> NtStatus,
    pub create_qp:
        unsafe extern "C" fn(*mut NdkAdapter, *mut NdkCq, *mut NdkCq, u32, u32, u32, *mut *mut NdkQp) -> NtStatus,
    pub create_mr: unsafe extern "C" fn(*mut NdkAdapter, usize, *mut *mut NdkMr) -> NtStatus,
    pub create_connector:
        unsafe extern "C" fn(*mut NdkAdapter, CreateCompletion, *mut c_void, *mut *mut NdkConnector) -> NtStatus,
    pub create_listener: unsafe extern "C" fn(
        *mut NdkAdapter,
        ConnectEvent,
        *mut c_void,
        CreateCompletion,
        *mut c_void,
        *mut *mut NdkListener,
    ) -> NtStatus,
    pub create_shared_endpoint: unsafe extern "C" fn(
        *mut NdkAdapter,
        *const libc::sockaddr,
        u32,
        CreateCompletion,
        *mut c_void,
        *mut *mut NdkSharedEndpoint,
    ) -> NtStatus,
}

impl NdkAdapter {
    /// NdkOpenAdapter, after the conversion of its arguments.
    pub(super) fn open(
        address: Result<SocketAddr, NtStatus>,
        flags: u32,
        out: Option<&mut *mut NdkAdapter>,
    ) -> Result<NtStatus, NtStatus> {
        crate::stderr_log::init_from_env();
        let Some(out) = out else {
            return Err(STATUS_INVALID_PARAMETER);
        };
        if flags & !NDK_SHIM_ADAPTER_POLLED != 0 {
            return Err(STATUS_INVALID_PARAMETER);
        }
        let ip: IpAddr = address?.ip();
        let polled = flags & NDK_SHIM_ADAPTER_POLLED != 0;
        let opened = if polled {
            Adapter::open_polled(ip)
        } else {
            Adapter::open(ip)
        };
        let shared = Arc::new(AdapterShared::new(opened.map_err(code)?, polled));
        let object = NdkAdapter {
            dispatch: <NdkAdapter as Handle>::DISPATCH,
            shared,
        };
        Ok(give_handle(out, object))
    }

    /// NdkQueryAdapterInfo: `*length` in, the info's size out; a short buffer is untouched.
    pub(super) fn query(
        &self,
        length: Option<&mut u32>,
        info: Option<UnalignedOut<'_, NdkAdapterInfo>>,
    ) -> Result<NtStatus, NtStatus> {
        let Some(length) = length else {
            return Err(STATUS_INVALID_PARAMETER);
        };
        let need = std::mem::size_of::<NdkAdapterInfo>() as u32;
        let have = std::mem::replace(length, need);
        let Some(mut info) = info.filter(|_| have >= need) else {
            return Ok(code(NdStatus::STATUS_BUFFER_TOO_SMALL));
        };
        let i = self.shared.adapter.query();
        let filled = NdkAdapterInfo {
            info_version: 1,
            vendor_id: i.vendor_id,
            device_id: i.device_id,
            max_registration_size: i.max_registration_size,
            max_initiator_request_sge: i.max_initiator_sge,
            max_receive_request_sge: i.max_receive_sge,
            max_read_request_sge: i.max_read_sge,
            max_receive_queue_depth: i.max_receive_queue_depth,
            max_initiator_queue_depth: i.max_initiator_queue_depth,
            max_cq_depth: i.max_completion_queue_depth,
            max_inbound_read_limit: i.max_inbound_read_limit,
            max_outbound_read_limit: i.max_outbound_read_limit,
            max_caller_data: i.max_caller_data,
            max_callee_data: i.max_callee_data,
        };
        info.write(0, filled);
        Ok(STATUS_SUCCESS)
    }

    /// NdkGetEventFd: only for an adapter opened NDK_SHIM_ADAPTER_POLLED.
    pub(super) fn event_fd(&self, fd: Option<&mut i32>) -> Result<NtStatus, NtStatus> {
        let Some(fd) = fd else {
            return Err(STATUS_INVALID_PARAMETER);
        };
        if !self.shared.polled {
            return Err(code(NdStatus::ND_INVALID_DEVICE_REQUEST));
        }
        *fd = self.shared.adapter.event_fd();
        Ok(STATUS_SUCCESS)
    }

    /// NdkProcessEvents: only for an adapter opened NDK_SHIM_ADAPTER_POLLED; `count` optional.
    pub(super) fn process_events(&self, count: Option<&mut u32>) -> Result<NtStatus, NtStatus> {
        if !self.shared.polled {
            return Err(code(NdStatus::ND_INVALID_DEVICE_REQUEST));
        }
        let n = self.shared.adapter.process_events();
        if let Some(count) = count {
            *count = u32::try_from(n).unwrap_or(u32::MAX);
        }
        Ok(STATUS_SUCCESS)
    }

    pub(super) fn create_cq(&self, depth: u32, out: Option<&mut *mut NdkCq>) -> Result<NtStatus, NtStatus> {
        let out = out.ok_or(STATUS_INVALID_PARAMETER)?;
        let created = CompletionQueue::new(&self.shared.adapter, depth).map_err(code)?;
        Ok(give_handle(out, NdkCq::new(created)))
    }

    pub(super) fn create_qp(
        &self,
        receive_cq: &NdkCq,
        initiator_cq: &NdkCq,
        receive_queue_depth: u32,
        initiator_queue_depth: u32,
        max_sge: u32,
        out: Option<&mut *mut NdkQp>,
    ) -> Result<NtStatus, NtStatus> {
        let out = out.ok_or(STATUS_INVALID_PARAMETER)?;
        let created = QueuePair::new(
            &self.shared.adapter,
            &receive_cq.cq,
            &initiator_cq.cq,
            receive_queue_depth,
            initiator_queue_depth,
            max_sge,
        )
        .map_err(code)?;
        Ok(give_handle(out, NdkQp::new(&self.shared, created)))
    }

    pub(super) fn create_mr(&self, length: usize, out: Option<&mut *mut NdkMr>) -> Result<NtStatus, NtStatus> {
        let out = out.filter(|_| length != 0).ok_or(STATUS_INVALID_PARAMETER)?;
        let region = MemoryRegion::new(&self.shared.adapter, length).map_err(code)?;
        Ok(give_handle(out, NdkMr::new(&self.shared, region)))
    }

    pub(super) fn create_connector(&self, out: Option<&mut *mut NdkConnector>) -> Result<NtStatus, NtStatus> {
        let out = out.ok_or(STATUS_INVALID_PARAMETER)?;
        Ok(give_handle(out, NdkConnector::new(&self.shared)))
    }

    /// NdkCreateListener: the connect-event callback is required.
    pub(super) fn create_listener(
        &self,
        event: Option<ConnectCallback<NdkConnector>>,
        out: Option<&mut *mut NdkListener>,
    ) -> Result<NtStatus, NtStatus> {
        let (Some(event), Some(out)) = (event, out) else {
            return Err(STATUS_INVALID_PARAMETER);
        };
        Ok(give_handle(out, NdkListener::new(&self.shared, event)))
    }

    pub(super) fn create_shared_endpoint(
        &self,
        address: Result<SocketAddr, NtStatus>,
        out: Option<&mut *mut NdkSharedEndpoint>,
    ) -> Result<NtStatus, NtStatus> {
        let out = out.ok_or(STATUS_INVALID_PARAMETER)?;
        let object = NdkSharedEndpoint::new(&self.shared, address?)?;
        Ok(give_handle(out, object))
    }
}
