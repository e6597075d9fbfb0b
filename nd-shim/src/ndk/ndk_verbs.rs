//! The verbs objects an NDK adapter makes: CQ, QP, MR, and what they share with it. Enough to
//! connect a QP and move data; the entries are NDKPI-shaped (`NdkGetCqResults`, `NdkReceive`,
//! `NdkSend`, ...), with an MR that owns its buffer (the shim's Rust [`MemoryRegion`]) instead
//! of NDK's MDL registration. The adapter's entries create them (`ndk_adapter.rs`); their own
//! C entries are in `entry.rs`.

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, Weak};

use super::boundary::{code, Handle, NtStatus, UnalignedOut, STATUS_INVALID_PARAMETER, STATUS_SUCCESS};
use crate::status::NdStatus;
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
            dispatch: <NdkCq as Handle>::DISPATCH,
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

impl NdkCq {
    /// NdkGetCqResults: up to `results.len()` completions; how many (0 without a buffer).
    pub(super) fn get_results(&self, results: Option<UnalignedOut<'_, NdkResult>>) -> u32 {
        let Some(mut results) = results.filter(|r| r.len() != 0) else {
            return 0;
        };
        let got = self.cq.get_results(results.len());
        for (i, c) in got.iter().enumerate() {
            let result = NdkResult {
                status: c.status.0,
                bytes_transferred: c.bytes_transferred,
                request_context: c.request_context as usize as *mut c_void,
                opcode: c.opcode,
            };
            results.write(i, result);
        }
        got.len() as u32
    }
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
            dispatch: <NdkQp as Handle>::DISPATCH,
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

impl NdkQp {
    /// Checks the caller's SGEs against the adapter's regions, then posts them with `post`.
    fn post(
        &self,
        list: &[NdkSge],
        post: impl FnOnce(&QueuePair, &[Sge]) -> Result<(), NdStatus>,
    ) -> Result<NtStatus, NtStatus> {
        let sges = self.adapter.sges(list)?;
        post(&self.qp, &sges).map_err(code)?;
        Ok(STATUS_SUCCESS)
    }

    /// NdkReceive, with the caller's SGEs (each checked against the adapter's regions).
    pub(super) fn receive(&self, context: u64, list: &[NdkSge]) -> Result<NtStatus, NtStatus> {
        self.post(list, |qp, sges| qp.receive(context, sges))
    }

    pub(super) fn send(&self, context: u64, list: &[NdkSge], flags: u32) -> Result<NtStatus, NtStatus> {
        self.post(list, |qp, sges| qp.send(context, sges, flags))
    }

    /// NdkWrite (`op` [`QueuePair::write`]) and NdkRead ([`QueuePair::read`]): to or from the
    /// peer's `remote_address` under its `remote_token`.
    pub(super) fn rdma(
        &self,
        op: RdmaOp,
        context: u64,
        list: &[NdkSge],
        remote_address: u64,
        remote_token: u32,
        flags: u32,
    ) -> Result<NtStatus, NtStatus> {
        self.post(list, |qp, sges| {
            op(qp, context, sges, remote_address, remote_token, flags)
        })
    }
}

/// [`QueuePair::write`] or [`QueuePair::read`].
pub(super) type RdmaOp = fn(&QueuePair, u64, &[Sge], u64, u32, u32) -> Result<(), NdStatus>;

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
            dispatch: <NdkMr as Handle>::DISPATCH,
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

impl NdkMr {
    /// NdkGetMrBuffer: the region's buffer (the shim allocated it; it lives until NdkCloseMr)
    /// and its length.
    pub(super) fn get_buffer(
        &self,
        buffer: Option<&mut *mut c_void>,
        length: Option<&mut usize>,
    ) -> Result<NtStatus, NtStatus> {
        let (Some(buffer), Some(length)) = (buffer, length) else {
            return Err(STATUS_INVALID_PARAMETER);
        };
        *buffer = self.region.address() as usize as *mut c_void;
        *length = self.region.len();
        Ok(STATUS_SUCCESS)
    }

    pub(super) fn local_token(&self) -> u32 {
        self.region.local_token()
    }

    pub(super) fn remote_token(&self) -> u32 {
        self.region.remote_token()
    }
}

/// NdkCloseMr: posted SGEs can no longer name the region.
impl Drop for NdkMr {
    fn drop(&mut self) {
        crate::sync::lock(&self.adapter.regions).remove(&self.region.local_token());
    }
}
