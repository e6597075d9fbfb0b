//! IND2SharedReceiveQueue over a verbs SRQ. Notify is overlapped: it arms the SRQ's limit with
//! the threshold of creation or of the last Modify that set one (verbs ignores a limit given at
//! creation, and the device disarms the limit as it reports it), and completes when the limit
//! event (IBV_EVENT_SRQ_LIMIT_REACHED) comes on the device's async events, which the adapter's
//! event thread reads and its completion channel routes here; or by cancellation (ND_CANCELED).
//! The device looks at the limit only as it takes a receive (the event is edge-triggered), so a
//! Notify issued while the SRQ is already below the threshold would wait for the next receive
//! taken, on an empty SRQ for ever: after arming, Notify compares the receives outstanding as
//! nd-shim counts them (posted, less those whose completions GetResults returned) with the
//! threshold, and below it completes at once. A receive the device has taken but whose
//! completion GetResults has not returned yet still counts: then the device's event, at its next
//! receive taken, completes the Notify.
//!
//! The vtable and C entries are in `entry_data`; the verbs SRQ ([`RawSrq`]) is `data_verbs`'.
#![forbid(unsafe_code)]

use crate::sync::lock;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use rdma_mummy_sys as ffi;

use super::adapter::AdapterBody;
pub(crate) use super::data_verbs::RawSrq;
use super::notify::Notified;
use super::overlapped::{CallerOverlapped, Request};
use super::requests::SrqRequests;
use super::sge::post_result;
use super::win32::OverlappedFile;
use super::{code, HResult, Overlapped, ND_INVALID_PARAMETER, ND_PENDING, ND_SUCCESS};
use crate::status::NdStatus;

pub(crate) struct SrqBody {
    adapter: Arc<AdapterBody>,
    pub(super) srq: Arc<RawSrq>,
    /// The receives posted and not completed (ND2_RESULT's RequestContext).
    pub(super) requests: Arc<SrqRequests>,
    file: Arc<OverlappedFile>,
    /// The waiting requests, with their serial numbers (a Notify whose arming failed takes its
    /// own back by it, if nothing completed it meanwhile).
    notifies: Mutex<VecDeque<(Request, u64)>>,
    serial: AtomicU64,
    /// The SRQ's limit event is routed to this body (done at the first Notify).
    routed: AtomicBool,
    /// The notify threshold (0: none), armed as the SRQ's limit at every Notify.
    threshold: AtomicU32,
}

impl SrqBody {
    pub(super) fn new(
        adapter: Arc<AdapterBody>,
        file: Arc<OverlappedFile>,
        depth: u32,
        max_sge: u32,
        threshold: u32,
    ) -> Result<SrqBody, HResult> {
        if depth == 0 || max_sge == 0 {
            return Err(ND_INVALID_PARAMETER);
        }
        let init = ffi::ibv_srq_init_attr {
            srq_context: std::ptr::null_mut(),
            attr: ffi::ibv_srq_attr {
                max_wr: depth,
                max_sge,
                srq_limit: threshold,
            },
        };
        let srq = RawSrq::create(&adapter.adapter, init)?;
        Ok(SrqBody {
            adapter,
            srq: Arc::new(srq),
            requests: Arc::default(),
            file,
            notifies: Mutex::new(VecDeque::new()),
            serial: AtomicU64::new(0),
            routed: AtomicBool::new(false),
            threshold: AtomicU32::new(threshold),
        })
    }
}

impl Notified for SrqBody {
    /// The limit event: every waiting request completes.
    fn notified(&self) {
        let waiting: Vec<(Request, u64)> = lock(&self.notifies).drain(..).collect();
        for (request, _) in waiting {
            request.complete(NdStatus::ND_SUCCESS, 0);
        }
    }

    /// The device's removal: every waiting request completes with its code.
    fn failed(&self, status: NdStatus) {
        let waiting: Vec<(Request, u64)> = lock(&self.notifies).drain(..).collect();
        for (request, _) in waiting {
            request.complete(status, 0);
        }
    }
}

impl Drop for SrqBody {
    fn drop(&mut self) {
        if self.routed.load(Ordering::Acquire) {
            self.adapter.notify.unregister_srq(self.srq.0);
        }
    }
}

impl Overlapped for SrqBody {
    fn cancel(&self) {
        let waiting: Vec<(Request, u64)> = lock(&self.notifies).drain(..).collect();
        for (request, _) in waiting {
            request.complete(NdStatus::ND_CANCELED, 0);
        }
    }
}

impl SrqBody {
    /// IND2SharedReceiveQueue::Modify.
    pub(super) fn modify(&self, depth: u32, threshold: u32) -> Result<HResult, HResult> {
        let mut attr = ffi::ibv_srq_attr {
            max_wr: depth,
            max_sge: 0,
            srq_limit: threshold,
        };
        use ffi::ibv_srq_attr_mask as M;
        // A threshold of zero leaves the threshold as it is (IND2SharedReceiveQueue.md).
        let mut mask = 0;
        if threshold != 0 {
            mask |= M::IBV_SRQ_LIMIT.0;
        }
        if depth != 0 {
            mask |= M::IBV_SRQ_MAX_WR.0;
        }
        if mask == 0 {
            return Ok(ND_SUCCESS);
        }
        match self.srq.modify(&mut attr, mask as i32) {
            0 => {
                if threshold != 0 {
                    self.threshold.store(threshold, Ordering::Release);
                }
                Ok(ND_SUCCESS)
            }
            e => Err(code(crate::status::from_errno(e.abs()))),
        }
    }

    /// IND2SharedReceiveQueue::Notify: `weak_self` is this body's, for the channel's route.
    pub(super) fn notify(
        &self,
        ov: CallerOverlapped,
        weak_self: impl FnOnce() -> Weak<SrqBody>,
    ) -> Result<HResult, HResult> {
        let srq = self;
        if !srq.routed.load(Ordering::Acquire) {
            srq.adapter.notify.register_srq(srq.srq.0, weak_self());
            srq.routed.store(true, Ordering::Release);
        }
        // After the route: a removal that came before it reached no route.
        if srq.adapter.adapter.inner.is_removed() {
            return Err(code(NdStatus::ND_DEVICE_REMOVED));
        }
        let request = ov.start(&srq.file)?;
        let serial = srq.serial.fetch_add(1, Ordering::Relaxed);
        lock(&srq.notifies).push_back((request, serial));
        // A removal between the check and the push drained the queue before this request.
        if srq.adapter.adapter.inner.is_removed() {
            srq.failed(NdStatus::ND_DEVICE_REMOVED);
            return Ok(ND_PENDING);
        }
        let threshold = srq.threshold.load(Ordering::Acquire);
        if threshold != 0 {
            let mut attr = ffi::ibv_srq_attr {
                max_wr: 0,
                max_sge: 0,
                srq_limit: threshold,
            };
            let mask = ffi::ibv_srq_attr_mask::IBV_SRQ_LIMIT.0 as i32;
            let armed = srq.srq.modify(&mut attr, mask);
            if armed != 0 {
                let failed = code(crate::status::from_errno(armed.abs()));
                // Inline only if still waiting: one completed meanwhile has its completion.
                let mut notifies = lock(&srq.notifies);
                return match notifies.iter().position(|&(_, s)| s == serial) {
                    Some(at) => {
                        if let Some((request, _)) = notifies.remove(at) {
                            request.fail(failed);
                        }
                        Err(failed)
                    }
                    None => Ok(ND_PENDING),
                };
            }
            // Armed: already below the threshold (as far as the completions returned say), the
            // device's event would come only at the next receive it takes.
            if srq.requests.outstanding() < u64::from(threshold) {
                srq.notified();
            }
        }
        Ok(ND_PENDING)
    }

    /// IND2SharedReceiveQueue::Receive.
    pub(super) fn receive(&self, context: u64, sges: &[ffi::ibv_sge]) -> Result<HResult, HResult> {
        let wr_id = self.requests.post(context);
        let posted = post_result(self.srq.post_recv(wr_id, sges));
        if posted.is_err() {
            self.requests.withdraw(wr_id);
        }
        posted
    }
}
