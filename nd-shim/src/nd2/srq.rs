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

use crate::sync::lock;
use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use rdma_mummy_sys as ffi;

use super::adapter::AdapterBody;
use super::notify::Notified;
use super::overlapped::Request;
use super::requests::SrqRequests;
use super::sge::{post_result, sg_list_ptr, sge_list, Nd2Sge};
use super::win32::OverlappedFile;
use super::{
    code, hr_boundary, iids, this, Class, Guid, HResult, Overlapped, OverlappedVtbl, UnknownVtbl, ND_INVALID_PARAMETER,
    ND_PENDING, ND_SUCCESS,
};
use crate::status::NdStatus;
use crate::sys::last_error;

pub(crate) struct RawSrq(pub(crate) *mut ffi::ibv_srq);
// SAFETY: an SRQ handle may be used from any thread; libibverbs locks internally.
unsafe impl Send for RawSrq {}
// SAFETY: as above.
unsafe impl Sync for RawSrq {}

impl Drop for RawSrq {
    fn drop(&mut self) {
        // SAFETY: every QP on the SRQ holds this (verbs' keep-alive), so none is left.
        if unsafe { ffi::ibv_destroy_srq(self.0) } != 0 {
            log::error!("ibv_destroy_srq: {}", last_error());
        }
    }
}

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
        let mut init = ffi::ibv_srq_init_attr {
            srq_context: std::ptr::null_mut(),
            attr: ffi::ibv_srq_attr {
                max_wr: depth,
                max_sge,
                srq_limit: threshold,
            },
        };
        // SAFETY: the PD is live; init is a valid attribute block.
        let srq = unsafe { ffi::ibv_create_srq(adapter.adapter.inner.pd.0, &mut init) };
        if srq.is_null() {
            return Err(code(last_error()));
        }
        Ok(SrqBody {
            adapter,
            srq: Arc::new(RawSrq(srq)),
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

#[repr(C)]
pub(crate) struct SrqVtbl {
    unknown: UnknownVtbl,
    overlapped: OverlappedVtbl,
    get_notify_affinity: unsafe extern "C" fn(*mut c_void, *mut u16, *mut usize) -> HResult,
    modify: unsafe extern "C" fn(*mut c_void, u32, u32) -> HResult,
    notify: unsafe extern "C" fn(*mut c_void, *mut c_void) -> HResult,
    receive: unsafe extern "C" fn(*mut c_void, *mut c_void, *const Nd2Sge, u32) -> HResult,
}

static VTBL: SrqVtbl = SrqVtbl {
    unknown: UnknownVtbl::of::<SrqBody>(),
    overlapped: OverlappedVtbl::of::<SrqBody>(),
    get_notify_affinity,
    modify,
    notify,
    receive,
};

impl Class for SrqBody {
    type Vtbl = SrqVtbl;
    const VTBL: &'static SrqVtbl = &VTBL;
    const IIDS: &'static [&'static Guid] = &[
        &iids::IID_IUnknown,
        &iids::IID_IND2Overlapped,
        &iids::IID_IND2SharedReceiveQueue,
    ];

    fn on_release(&self) {
        self.cancel();
    }
}

unsafe extern "C" fn get_notify_affinity(this: *mut c_void, group: *mut u16, affinity: *mut usize) -> HResult {
    hr_boundary("IND2SharedReceiveQueue::GetNotifyAffinity", || {
        // SAFETY: the caller's object.
        unsafe { self::this::<SrqBody>(this)? };
        if group.is_null() || affinity.is_null() {
            return Err(ND_INVALID_PARAMETER);
        }
        // SAFETY: non-NULL, writable (the caller's promise).
        unsafe {
            group.write(0);
            affinity.write(0);
        }
        Ok(ND_SUCCESS)
    })
}

unsafe extern "C" fn modify(this: *mut c_void, depth: u32, threshold: u32) -> HResult {
    hr_boundary("IND2SharedReceiveQueue::Modify", || {
        // SAFETY: the caller's object.
        let srq = unsafe { self::this::<SrqBody>(this)? };
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
        // SAFETY: the SRQ is live; attr is valid for mask.
        match unsafe { ffi::ibv_modify_srq(srq.srq.0, &mut attr, mask as i32) } {
            0 => {
                if threshold != 0 {
                    srq.threshold.store(threshold, Ordering::Release);
                }
                Ok(ND_SUCCESS)
            }
            e => Err(code(crate::status::from_errno(e.abs()))),
        }
    })
}

unsafe extern "C" fn notify(this: *mut c_void, ov: *mut c_void) -> HResult {
    hr_boundary("IND2SharedReceiveQueue::Notify", || {
        // SAFETY: the caller's object.
        let srq = unsafe { self::this::<SrqBody>(this)? };
        if !srq.routed.load(Ordering::Acquire) {
            srq.adapter.notify.register_srq(srq.srq.0, weak_self(this));
            srq.routed.store(true, Ordering::Release);
        }
        // After the route: a removal that came before it reached no route.
        if srq.adapter.adapter.inner.is_removed() {
            return Err(code(NdStatus::ND_DEVICE_REMOVED));
        }
        // SAFETY: the caller's OVERLAPPED, live until the request completes.
        let request = unsafe { Request::start(ov, &srq.file)? };
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
            // SAFETY: the SRQ is live; attr is valid for the mask.
            let armed = unsafe { ffi::ibv_modify_srq(srq.srq.0, &mut attr, mask) };
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
    })
}

/// A weak reference to the body of a live SRQ object.
fn weak_self(this: *mut c_void) -> Weak<SrqBody> {
    // SAFETY: checked live by the caller (Notify's `this`).
    match unsafe { super::object::<SrqBody>(this) }.and_then(|o| o.arc()) {
        Ok(body) => Arc::downgrade(&body),
        Err(_) => Weak::new(),
    }
}

unsafe extern "C" fn receive(this: *mut c_void, context: *mut c_void, sge: *const Nd2Sge, n: u32) -> HResult {
    hr_boundary("IND2SharedReceiveQueue::Receive", || {
        // SAFETY: the caller's object.
        let srq = unsafe { self::this::<SrqBody>(this)? };
        // SAFETY: the caller's SGE array of `n` entries.
        let list = unsafe { sge_list(sge, n)? };
        let wr_id = srq.requests.post(context as u64);
        let mut wr = ffi::ibv_recv_wr {
            wr_id,
            next: std::ptr::null_mut(),
            sg_list: sg_list_ptr(list),
            num_sge: list.len() as i32,
        };
        let mut bad = std::ptr::null_mut();
        // SAFETY: the SRQ is live; wr and its list are valid for the call.
        let ret = unsafe { ffi::ibv_post_srq_recv(srq.srq.0, &mut wr, &mut bad) };
        let posted = post_result(ret);
        if posted.is_err() {
            srq.requests.withdraw(wr_id);
        }
        posted
    })
}
