//! The NDK adapter and the verbs objects it makes: CQ, QP, MR. Enough to connect a QP and move
//! data; the entries are NDKPI-shaped (`NdkCreateCq`, `NdkReceive`, `NdkSend`, ...), with an MR
//! that owns its buffer (the shim's Rust [`MemoryRegion`]) instead of NDK's MDL registration.

use std::collections::HashMap;
use std::ffi::c_void;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, Weak};

use super::ndk_connector::NdkConnector;
use super::ndk_listener::{NdkListener, NdkSharedEndpoint};
use super::{
    boundary, code, give_handle, handle, init_logging, read_sockaddr, status_boundary, take_handle, ConnectEvent,
    CreateCompletion, Handle, NtStatus, STATUS_INVALID_PARAMETER, STATUS_SUCCESS,
};
use crate::status::NdStatus;
use crate::{Adapter, CompletionQueue, MemoryRegion, QueuePair, Sge};

/// What every object made from one adapter shares.
pub(super) struct AdapterShared {
    pub(super) adapter: Adapter,
    polled: bool,
    /// Live MRs by local token, to check the SGEs of posted requests.
    regions: Mutex<HashMap<u32, Weak<MemoryRegion>>>,
}

impl AdapterShared {
    fn sges(&self, list: &[NdkSge]) -> Result<Vec<Sge>, NtStatus> {
        let regions = crate::sync::lock(&self.regions);
        list.iter()
            .map(|sge| {
                let region = regions
                    .get(&sge.memory_region_token)
                    .and_then(Weak::upgrade)
                    .ok_or(STATUS_INVALID_PARAMETER)?;
                let offset = (sge.address as u64)
                    .checked_sub(region.address())
                    .and_then(|o| usize::try_from(o).ok())
                    .ok_or(STATUS_INVALID_PARAMETER)?;
                region.sge(offset, sge.length).map_err(code)
            })
            .collect()
    }
}

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
        init_logging();
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
        let shared = Arc::new(AdapterShared {
            adapter: opened.map_err(code)?,
            polled,
            regions: Mutex::new(HashMap::new()),
        });
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

#[repr(C)]
pub struct NdkCq {
    dispatch: *const NdkCqDispatch,
    cq: Arc<CompletionQueue>,
}

/// NDK_RESULT, with the request context the caller passed to the posting call.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdkResult {
    pub status: NtStatus,
    pub bytes_transferred: u32,
    pub request_context: *mut c_void,
    pub opcode: u32,
}

#[repr(C)]
pub struct NdkCqDispatch {
    pub close: unsafe extern "C" fn(*mut NdkCq) -> NtStatus,
    pub get_results: unsafe extern "C" fn(*mut NdkCq, *mut NdkResult, u32) -> u32,
}

static CQ_DISPATCH: NdkCqDispatch = NdkCqDispatch {
    close: close_cq,
    get_results,
};

impl Handle for NdkCq {
    type Dispatch = NdkCqDispatch;
    const DISPATCH: &'static NdkCqDispatch = &CQ_DISPATCH;
}

unsafe extern "C" fn create_cq(adapter: *mut NdkAdapter, depth: u32, cq: *mut *mut NdkCq) -> NtStatus {
    status_boundary("NdkCreateCq", || {
        // SAFETY: the caller's handle.
        let adapter = unsafe { handle(adapter)? };
        if cq.is_null() {
            return Err(STATUS_INVALID_PARAMETER);
        }
        let created = CompletionQueue::new(&adapter.shared.adapter, depth).map_err(code)?;
        let object = NdkCq {
            dispatch: &CQ_DISPATCH,
            cq: Arc::new(created),
        };
        // SAFETY: checked non-NULL.
        Ok(unsafe { give_handle(cq, object) })
    })
}

unsafe extern "C" fn close_cq(cq: *mut NdkCq) -> NtStatus {
    status_boundary("NdkCloseCq", || {
        // SAFETY: the caller gives up its handle.
        drop(unsafe { take_handle(cq)? });
        Ok(STATUS_SUCCESS)
    })
}

/// Up to `count` completions into `results`; returns how many (0 on a bad argument).
unsafe extern "C" fn get_results(cq: *mut NdkCq, results: *mut NdkResult, count: u32) -> u32 {
    boundary("NdkGetCqResults", 0, || {
        // SAFETY: the caller's handle.
        let Ok(cq) = (unsafe { handle(cq) }) else {
            return 0;
        };
        if results.is_null() || count == 0 {
            return 0;
        }
        let got = cq.cq.get_results(count as usize);
        for (i, c) in got.iter().enumerate() {
            let result = NdkResult {
                status: c.status.0,
                bytes_transferred: c.bytes_transferred,
                request_context: c.request_context as usize as *mut c_void,
                opcode: c.opcode,
            };
            // SAFETY: i < got.len() <= count, and `results` holds `count` entries (the
            // caller's promise).
            unsafe { results.add(i).write_unaligned(result) };
        }
        got.len() as u32
    })
}

#[repr(C)]
pub struct NdkQp {
    dispatch: *const NdkQpDispatch,
    adapter: Arc<AdapterShared>,
    pub(super) qp: QueuePair,
}

/// NDK_SGE: an address inside a region of the shim's, its length, and the region's local token.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdkSge {
    pub address: *mut c_void,
    pub length: u32,
    pub memory_region_token: u32,
}

#[repr(C)]
pub struct NdkQpDispatch {
    pub close: unsafe extern "C" fn(*mut NdkQp) -> NtStatus,
    pub receive: unsafe extern "C" fn(*mut NdkQp, *mut c_void, *const NdkSge, u32) -> NtStatus,
    pub send: unsafe extern "C" fn(*mut NdkQp, *mut c_void, *const NdkSge, u32, u32) -> NtStatus,
    pub write: unsafe extern "C" fn(*mut NdkQp, *mut c_void, *const NdkSge, u32, u64, u32, u32) -> NtStatus,
    pub read: unsafe extern "C" fn(*mut NdkQp, *mut c_void, *const NdkSge, u32, u64, u32, u32) -> NtStatus,
}

static QP_DISPATCH: NdkQpDispatch = NdkQpDispatch {
    close: close_qp,
    receive,
    send,
    write,
    read,
};

impl Handle for NdkQp {
    type Dispatch = NdkQpDispatch;
    const DISPATCH: &'static NdkQpDispatch = &QP_DISPATCH;
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
        let object = NdkQp {
            dispatch: &QP_DISPATCH,
            adapter: Arc::clone(&adapter.shared),
            qp: created,
        };
        // SAFETY: checked non-NULL.
        Ok(unsafe { give_handle(qp, object) })
    })
}

unsafe extern "C" fn close_qp(qp: *mut NdkQp) -> NtStatus {
    status_boundary("NdkCloseQp", || {
        // SAFETY: the caller gives up its handle.
        drop(unsafe { take_handle(qp)? });
        Ok(STATUS_SUCCESS)
    })
}

/// The QP and checked SGEs of a posting call.
///
/// # Safety
/// `qp` is the caller's handle; `sge` is NULL or readable for `count` entries.
unsafe fn posting<'a>(qp: *mut NdkQp, sge: *const NdkSge, count: u32) -> Result<(&'a NdkQp, Vec<Sge>), NtStatus> {
    // SAFETY: the caller's handle.
    let qp = unsafe { handle(qp)? };
    let list = match (sge.is_null(), count) {
        (_, 0) => &[][..],
        (true, _) => return Err(STATUS_INVALID_PARAMETER),
        // SAFETY: non-NULL and `count` entries readable (the caller's promise).
        (false, n) => unsafe { std::slice::from_raw_parts(sge, n as usize) },
    };
    let sges = qp.adapter.sges(list)?;
    Ok((qp, sges))
}

unsafe extern "C" fn receive(qp: *mut NdkQp, context: *mut c_void, sge: *const NdkSge, count: u32) -> NtStatus {
    status_boundary("NdkReceive", || {
        // SAFETY: forwarded caller promises.
        let (qp, sges) = unsafe { posting(qp, sge, count)? };
        qp.qp.receive(context as u64, &sges).map_err(code)?;
        Ok(STATUS_SUCCESS)
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
        // SAFETY: forwarded caller promises.
        let (qp, sges) = unsafe { posting(qp, sge, count)? };
        qp.qp.send(context as u64, &sges, flags).map_err(code)?;
        Ok(STATUS_SUCCESS)
    })
}

unsafe extern "C" fn write(
    qp: *mut NdkQp,
    context: *mut c_void,
    sge: *const NdkSge,
    count: u32,
    remote_address: u64,
    remote_token: u32,
    flags: u32,
) -> NtStatus {
    status_boundary("NdkWrite", || {
        // SAFETY: forwarded caller promises.
        let (qp, sges) = unsafe { posting(qp, sge, count)? };
        qp.qp
            .write(context as u64, &sges, remote_address, remote_token, flags)
            .map_err(code)?;
        Ok(STATUS_SUCCESS)
    })
}

unsafe extern "C" fn read(
    qp: *mut NdkQp,
    context: *mut c_void,
    sge: *const NdkSge,
    count: u32,
    remote_address: u64,
    remote_token: u32,
    flags: u32,
) -> NtStatus {
    status_boundary("NdkRead", || {
        // SAFETY: forwarded caller promises.
        let (qp, sges) = unsafe { posting(qp, sge, count)? };
        qp.qp
            .read(context as u64, &sges, remote_address, remote_token, flags)
            .map_err(code)?;
        Ok(STATUS_SUCCESS)
    })
}

#[repr(C)]
pub struct NdkMr {
    dispatch: *const NdkMrDispatch,
    adapter: Arc<AdapterShared>,
    region: Arc<MemoryRegion>,
}

#[repr(C)]
pub struct NdkMrDispatch {
    pub close: unsafe extern "C" fn(*mut NdkMr) -> NtStatus,
    pub get_buffer: unsafe extern "C" fn(*mut NdkMr, *mut *mut c_void, *mut usize) -> NtStatus,
    pub get_local_token: unsafe extern "C" fn(*mut NdkMr) -> u32,
    pub get_remote_token: unsafe extern "C" fn(*mut NdkMr) -> u32,
}

static MR_DISPATCH: NdkMrDispatch = NdkMrDispatch {
    close: close_mr,
    get_buffer,
    get_local_token,
    get_remote_token,
};

impl Handle for NdkMr {
    type Dispatch = NdkMrDispatch;
    const DISPATCH: &'static NdkMrDispatch = &MR_DISPATCH;
}

unsafe extern "C" fn create_mr(adapter: *mut NdkAdapter, length: usize, mr: *mut *mut NdkMr) -> NtStatus {
    status_boundary("NdkCreateMr", || {
        // SAFETY: the caller's handle.
        let adapter = unsafe { handle(adapter)? };
        if mr.is_null() || length == 0 {
            return Err(STATUS_INVALID_PARAMETER);
        }
        let region = Arc::new(MemoryRegion::new(&adapter.shared.adapter, length).map_err(code)?);
        crate::sync::lock(&adapter.shared.regions).insert(region.local_token(), Arc::downgrade(&region));
        let object = NdkMr {
            dispatch: &MR_DISPATCH,
            adapter: Arc::clone(&adapter.shared),
            region,
        };
        // SAFETY: checked non-NULL.
        Ok(unsafe { give_handle(mr, object) })
    })
}

unsafe extern "C" fn close_mr(mr: *mut NdkMr) -> NtStatus {
    status_boundary("NdkCloseMr", || {
        // SAFETY: the caller gives up its handle.
        let mr = unsafe { take_handle(mr)? };
        crate::sync::lock(&mr.adapter.regions).remove(&mr.region.local_token());
        Ok(STATUS_SUCCESS)
    })
}

/// The region's buffer (the shim allocated it; it lives until NdkCloseMr) and its length.
unsafe extern "C" fn get_buffer(mr: *mut NdkMr, buffer: *mut *mut c_void, length: *mut usize) -> NtStatus {
    status_boundary("NdkGetMrBuffer", || {
        // SAFETY: the caller's handle.
        let mr = unsafe { handle(mr)? };
        if buffer.is_null() || length.is_null() {
            return Err(STATUS_INVALID_PARAMETER);
        }
        // SAFETY: both non-NULL; writable by the caller's promise.
        unsafe {
            buffer.write(mr.region.address() as usize as *mut c_void);
            length.write(mr.region.len());
        }
        Ok(STATUS_SUCCESS)
    })
}

unsafe extern "C" fn get_local_token(mr: *mut NdkMr) -> u32 {
    boundary("NdkGetLocalTokenFromMr", 0, || {
        // SAFETY: the caller's handle.
        unsafe { handle(mr) }.map_or(0, |mr| mr.region.local_token())
    })
}

unsafe extern "C" fn get_remote_token(mr: *mut NdkMr) -> u32 {
    boundary("NdkGetRemoteTokenFromMr", 0, || {
        // SAFETY: the caller's handle.
        unsafe { handle(mr) }.map_or(0, |mr| mr.region.remote_token())
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
