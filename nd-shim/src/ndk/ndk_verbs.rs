//! The verbs objects an NDK adapter makes: CQ, QP, MR, and what they share with it. Enough to
//! connect a QP and move data; the entries are NDKPI-shaped (`NdkGetCqResults`, `NdkReceive`,
//! `NdkSend`, ...), with an MR that owns its buffer (the shim's Rust [`MemoryRegion`]) instead
//! of NDK's MDL registration. The adapter's entries create them (`ndk_adapter.rs`).

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, Weak};

use super::boundary::{
    boundary, code, handle, status_boundary, take_handle, Handle, NtStatus, STATUS_INVALID_PARAMETER, STATUS_SUCCESS,
};
use crate::{Adapter, CompletionQueue, MemoryRegion, QueuePair, Sge};

/// What every object made from one adapter shares.
pub(super) struct AdapterShared {
    pub(super) adapter: Adapter,
    pub(super) polled: bool,
    /// Live MRs by local token, to check the SGEs of posted requests.
    regions: Mutex<HashMap<u32, Weak<MemoryRegion>>>,
}

impl AdapterShared {
    pub(super) fn new(adapter: Adapter, polled: bool) -> AdapterShared {
        AdapterShared {
            adapter,
            polled,
            regions: Mutex::new(HashMap::new()),
        }
    }

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

#[repr(C)]
pub struct NdkCq {
    dispatch: *const NdkCqDispatch,
    pub(super) cq: Arc<CompletionQueue>,
}

impl NdkCq {
    pub(super) fn new(cq: CompletionQueue) -> NdkCq {
        NdkCq {
            dispatch: &CQ_DISPATCH,
            cq: Arc::new(cq),
        }
    }
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

impl NdkQp {
    pub(super) fn new(adapter: &Arc<AdapterShared>, qp: QueuePair) -> NdkQp {
        NdkQp {
            dispatch: &QP_DISPATCH,
            adapter: Arc::clone(adapter),
            qp,
        }
    }
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

/// An RDMA entry (`NdkWrite`, `NdkRead`): the QP's `$method` with the caller's SGEs, the
/// remote address and its token.
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
                // SAFETY: forwarded caller promises.
                let (qp, sges) = unsafe { posting(qp, sge, count)? };
                qp.qp
                    .$method(context as u64, &sges, remote_address, remote_token, flags)
                    .map_err(code)?;
                Ok(STATUS_SUCCESS)
            })
        }
    };
}
rdma_entry!(write, "NdkWrite", write);
rdma_entry!(read, "NdkRead", read);

#[repr(C)]
pub struct NdkMr {
    dispatch: *const NdkMrDispatch,
    adapter: Arc<AdapterShared>,
    region: Arc<MemoryRegion>,
}

impl NdkMr {
    /// Registers `region` with the adapter, so that posted SGEs can name it.
    pub(super) fn new(adapter: &Arc<AdapterShared>, region: MemoryRegion) -> NdkMr {
        let region = Arc::new(region);
        crate::sync::lock(&adapter.regions).insert(region.local_token(), Arc::downgrade(&region));
        NdkMr {
            dispatch: &MR_DISPATCH,
            adapter: Arc::clone(adapter),
            region,
        }
    }
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
