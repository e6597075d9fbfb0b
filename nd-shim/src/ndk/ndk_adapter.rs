//! NDK_ADAPTER: NdkOpenAdapter, the adapter's own entries, and the entries that create every
//! other object of the face (CQ, QP, MR in `ndk_verbs.rs`; connector, listener, shared endpoint
//! in their files): the top of the face, which nothing else in it imports.

use std::ffi::c_void;
use std::net::IpAddr;
use std::sync::Arc;

use super::boundary::{
    code, give_handle, handle, read_sockaddr, status_boundary, take_handle, CreateCompletion, Handle, NtStatus,
    STATUS_INVALID_PARAMETER, STATUS_SUCCESS,
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

static ADAPTER_DISPATCH: NdkAdapterDispatch = NdkAdapterDispatch {
    close: close_adapter,
    query: query_adapter,
    get_event_fd,
    process_events,
    create_cq,
    create_qp,
    create_mr,
    create_connector,
    create_listener,
    create_shared_endpoint,
};

impl Handle for NdkAdapter {
    type Dispatch = NdkAdapterDispatch;
    const DISPATCH: &'static NdkAdapterDispatch = &ADAPTER_DISPATCH;
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
        crate::stderr_log::init_from_env();
        if adapter.is_null() || flags & !NDK_SHIM_ADAPTER_POLLED != 0 {
            return Err(STATUS_INVALID_PARAMETER);
        }
        // SAFETY: the caller's promise on address/length.
        let ip: IpAddr = unsafe { read_sockaddr(address, length)? }.ip();
        let polled = flags & NDK_SHIM_ADAPTER_POLLED != 0;
        let opened = if polled {
            Adapter::open_polled(ip)
        } else {
            Adapter::open(ip)
        };
        let shared = Arc::new(AdapterShared::new(opened.map_err(code)?, polled));
        let object = NdkAdapter {
            dispatch: &ADAPTER_DISPATCH,
            shared,
        };
        // SAFETY: checked non-NULL; writable by the caller's promise.
        Ok(unsafe { give_handle(adapter, object) })
    })
}

unsafe extern "C" fn close_adapter(adapter: *mut NdkAdapter) -> NtStatus {
    status_boundary("NdkCloseAdapter", || {
        // SAFETY: the caller gives up its handle (NDKPI: after closing every child).
        drop(unsafe { take_handle(adapter)? });
        Ok(STATUS_SUCCESS)
    })
}

unsafe extern "C" fn query_adapter(adapter: *mut NdkAdapter, info: *mut NdkAdapterInfo, length: *mut u32) -> NtStatus {
    status_boundary("NdkQueryAdapterInfo", || {
        // SAFETY: the caller's handle.
        let adapter = unsafe { handle(adapter)? };
        if length.is_null() {
            return Err(STATUS_INVALID_PARAMETER);
        }
        let need = std::mem::size_of::<NdkAdapterInfo>() as u32;
        // SAFETY: non-NULL; the caller's promise.
        let have = unsafe { length.read() };
        // SAFETY: as above.
        unsafe { length.write(need) };
        if have < need || info.is_null() {
            return Ok(code(NdStatus::STATUS_BUFFER_TOO_SMALL));
        }
        let i = adapter.shared.adapter.query();
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
        // SAFETY: non-NULL and at least `need` bytes (the caller's *length); unaligned-safe.
        unsafe { info.write_unaligned(filled) };
        Ok(STATUS_SUCCESS)
    })
}

unsafe extern "C" fn get_event_fd(adapter: *mut NdkAdapter, fd: *mut i32) -> NtStatus {
    status_boundary("NdkGetEventFd", || {
        // SAFETY: the caller's handle.
        let adapter = unsafe { handle(adapter)? };
        if fd.is_null() {
            return Err(STATUS_INVALID_PARAMETER);
        }
        if !adapter.shared.polled {
            return Err(code(NdStatus::ND_INVALID_DEVICE_REQUEST));
        }
        // SAFETY: non-NULL; writable by the caller's promise.
        unsafe { fd.write(adapter.shared.adapter.event_fd()) };
        Ok(STATUS_SUCCESS)
    })
}

unsafe extern "C" fn process_events(adapter: *mut NdkAdapter, count: *mut u32) -> NtStatus {
    status_boundary("NdkProcessEvents", || {
        // SAFETY: the caller's handle.
        let adapter = unsafe { handle(adapter)? };
        if !adapter.shared.polled {
            return Err(code(NdStatus::ND_INVALID_DEVICE_REQUEST));
        }
        let n = adapter.shared.adapter.process_events();
        if !count.is_null() {
            // SAFETY: non-NULL; writable by the caller's promise.
            unsafe { count.write(u32::try_from(n).unwrap_or(u32::MAX)) };
        }
        Ok(STATUS_SUCCESS)
    })
}

unsafe extern "C" fn create_cq(adapter: *mut NdkAdapter, depth: u32, cq: *mut *mut NdkCq) -> NtStatus {
    status_boundary("NdkCreateCq", || {
        // SAFETY: the caller's handle.
        let adapter = unsafe { handle(adapter)? };
        if cq.is_null() {
            return Err(STATUS_INVALID_PARAMETER);
        }
        let created = CompletionQueue::new(&adapter.shared.adapter, depth).map_err(code)?;
        let object = NdkCq::new(created);
        // SAFETY: checked non-NULL.
        Ok(unsafe { give_handle(cq, object) })
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
        // SAFETY: the caller's handles.
        let (adapter, rcq, icq) = unsafe { (handle(adapter)?, handle(receive_cq)?, handle(initiator_cq)?) };
        if qp.is_null() {
            return Err(STATUS_INVALID_PARAMETER);
        }
        let created = QueuePair::new(
            &adapter.shared.adapter,
            &rcq.cq,
            &icq.cq,
            receive_queue_depth,
            initiator_queue_depth,
            max_sge,
        )
        .map_err(code)?;
        let object = NdkQp::new(&adapter.shared, created);
        // SAFETY: checked non-NULL.
        Ok(unsafe { give_handle(qp, object) })
    })
}

unsafe extern "C" fn create_mr(adapter: *mut NdkAdapter, length: usize, mr: *mut *mut NdkMr) -> NtStatus {
    status_boundary("NdkCreateMr", || {
        // SAFETY: the caller's handle.
        let adapter = unsafe { handle(adapter)? };
        if mr.is_null() || length == 0 {
            return Err(STATUS_INVALID_PARAMETER);
        }
        let region = MemoryRegion::new(&adapter.shared.adapter, length).map_err(code)?;
        let object = NdkMr::new(&adapter.shared, region);
        // SAFETY: checked non-NULL.
        Ok(unsafe { give_handle(mr, object) })
    })
}

unsafe extern "C" fn create_connector(
    adapter: *mut NdkAdapter,
    _completion: CreateCompletion,
    _context: *mut c_void,
    connector: *mut *mut NdkConnector,
) -> NtStatus {
    status_boundary("NdkCreateConnector", || {
        // SAFETY: the caller's handle.
        let adapter = unsafe { handle(adapter)? };
        if connector.is_null() {
            return Err(STATUS_INVALID_PARAMETER);
        }
        let object = NdkConnector::new(&adapter.shared);
        // SAFETY: checked non-NULL.
        Ok(unsafe { give_handle(connector, object) })
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
        // SAFETY: the caller's handle.
        let adapter = unsafe { handle(adapter)? };
        let Some(connect_event) = connect_event else {
            return Err(STATUS_INVALID_PARAMETER);
        };
        if listener.is_null() {
            return Err(STATUS_INVALID_PARAMETER);
        }
        let object = NdkListener::new(&adapter.shared, connect_event, connect_event_context);
        // SAFETY: checked non-NULL.
        Ok(unsafe { give_handle(listener, object) })
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
        // SAFETY: the caller's handle.
        let adapter = unsafe { handle(adapter)? };
        if endpoint.is_null() {
            return Err(STATUS_INVALID_PARAMETER);
        }
        // SAFETY: the caller's promise on address/length.
        let addr = unsafe { read_sockaddr(address, length)? };
        let object = NdkSharedEndpoint::new(&adapter.shared, addr)?;
        // SAFETY: checked non-NULL.
        Ok(unsafe { give_handle(endpoint, object) })
    })
}

// The exports above, at the version node ND_SHIM_0 (crate::exports).
crate::exports::version_node!("NdkOpenAdapter",);
