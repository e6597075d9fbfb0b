//! IND2CompletionQueue over a verbs CQ on the adapter's completion channel
//! ([`NotifyChannel`](super::notify::NotifyChannel)).
//! Notify is overlapped: it arms the CQ (ibv_req_notify_cq) and completes when the channel
//! reports it.

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use rdma_mummy_sys as ffi;

use super::adapter::AdapterBody;
use super::notify::Notified;
use super::overlapped::Request;
use super::win32::OverlappedFile;
use super::{
    code, hr_boundary, iids, this, Class, Guid, HResult, Overlapped, OverlappedVtbl, UnknownVtbl, ND_INVALID_PARAMETER,
    ND_PENDING, ND_SUCCESS,
};
use crate::status::{from_wc_status_for, NdStatus, RequestKind};
use crate::CompletionQueue;

const ND_CQ_NOTIFY_ERRORS: u32 = 0;
const ND_CQ_NOTIFY_ANY: u32 = 1;
const ND_CQ_NOTIFY_SOLICITED: u32 = 2;

pub(crate) struct CqBody {
    adapter: Arc<AdapterBody>,
    pub(super) cq: Arc<CompletionQueue>,
    file: Arc<OverlappedFile>,
    /// The armed Notify requests (parking_lot's: taken on every CQ event and every Notify).
    notifies: Mutex<VecDeque<Request>>,
    /// The CQ's events are routed to this body (done at the first Notify, not at every one).
    routed: AtomicBool,
}

impl CqBody {
    pub(super) fn new(adapter: Arc<AdapterBody>, file: Arc<OverlappedFile>, depth: u32) -> Result<CqBody, HResult> {
        if depth == 0 {
            return Err(ND_INVALID_PARAMETER);
        }
        let channel = Arc::clone(&adapter.notify);
        let raw = channel.raw();
        let keep: Arc<dyn Send + Sync> = channel;
        let cq = CompletionQueue::with_channel(&adapter.adapter, depth, Some((raw, keep))).map_err(code)?;
        Ok(CqBody {
            adapter,
            cq: Arc::new(cq),
            file,
            notifies: Mutex::new(VecDeque::new()),
            routed: AtomicBool::new(false),
        })
    }
}

impl Notified for CqBody {
    fn notified(&self) {
        // The requests armed before this event, one at a time (no list to allocate per event);
        // one armed while they complete waits for the next event. The first and the count of
        // the others come under one lock.
        let (mut next, mut others) = {
            let mut notifies = self.notifies.lock();
            let first = notifies.pop_front();
            (first, notifies.len())
        };
        while let Some(request) = next {
            request.complete(NdStatus::ND_SUCCESS, 0);
            if others == 0 {
                break;
            }
            others -= 1;
            next = self.notifies.lock().pop_front();
        }
    }
}

impl Drop for CqBody {
    fn drop(&mut self) {
        self.adapter.notify.unregister(self.cq.as_raw());
    }
}

impl Overlapped for CqBody {
    fn cancel(&self) {
        let waiting: Vec<Request> = self.notifies.lock().drain(..).collect();
        for request in waiting {
            request.complete(NdStatus::ND_CANCELED, 0);
        }
    }
}

/// ND2_RESULT.
#[repr(C)]
pub struct Nd2Result {
    pub status: HResult,
    pub bytes_transferred: u32,
    pub queue_pair_context: *mut c_void,
    pub request_context: *mut c_void,
    pub request_type: u32,
}

const _: () = assert!(std::mem::size_of::<Nd2Result>() == 32);

#[repr(C)]
pub(crate) struct CqVtbl {
    unknown: UnknownVtbl,
    overlapped: OverlappedVtbl,
    get_notify_affinity: unsafe extern "C" fn(*mut c_void, *mut u16, *mut usize) -> HResult,
    resize: unsafe extern "C" fn(*mut c_void, u32) -> HResult,
    notify: unsafe extern "C" fn(*mut c_void, u32, *mut c_void) -> HResult,
    get_results: unsafe extern "C" fn(*mut c_void, *mut Nd2Result, u32) -> u32,
}

static VTBL: CqVtbl = CqVtbl {
    unknown: UnknownVtbl::of::<CqBody>(),
    overlapped: OverlappedVtbl::of::<CqBody>(),
    get_notify_affinity,
    resize,
    notify,
    get_results,
};

impl Class for CqBody {
    type Vtbl = CqVtbl;
    const VTBL: &'static CqVtbl = &VTBL;
    const IIDS: &'static [&'static Guid] = &[
        &iids::IID_IUnknown,
        &iids::IID_IND2Overlapped,
        &iids::IID_IND2CompletionQueue,
    ];

    fn on_release(&self) {
        self.cancel();
    }
}

unsafe extern "C" fn get_notify_affinity(this: *mut c_void, group: *mut u16, affinity: *mut usize) -> HResult {
    hr_boundary("IND2CompletionQueue::GetNotifyAffinity", || {
        // SAFETY: the caller's object.
        unsafe { self::this::<CqBody>(this)? };
        if group.is_null() || affinity.is_null() {
            return Err(ND_INVALID_PARAMETER);
        }
        // No affinity is set: group 0, every processor (as a CQ created with affinity 0).
        // SAFETY: non-NULL, writable (the caller's promise).
        unsafe {
            group.write(0);
            affinity.write(0);
        }
        Ok(ND_SUCCESS)
    })
}

unsafe extern "C" fn resize(this: *mut c_void, depth: u32) -> HResult {
    hr_boundary("IND2CompletionQueue::Resize", || {
        // SAFETY: the caller's object.
        let cq = unsafe { self::this::<CqBody>(this)? };
        let depth = i32::try_from(depth)
            .ok()
            .filter(|&d| d > 0)
            .ok_or(ND_INVALID_PARAMETER)?;
        // SAFETY: the CQ is live.
        match unsafe { ffi::ibv_resize_cq(cq.cq.as_raw(), depth) } {
            0 => Ok(ND_SUCCESS),
            e => Err(code(crate::status::from_errno(e.abs()))),
        }
    })
}

unsafe extern "C" fn notify(this: *mut c_void, kind: u32, ov: *mut c_void) -> HResult {
    hr_boundary("IND2CompletionQueue::Notify", || {
        // SAFETY: the caller's object.
        let cq = unsafe { self::this::<CqBody>(this)? };
        let solicited_only = match kind {
            // Verbs cannot arm for errors alone: ND_CQ_NOTIFY_ERRORS wakes on any completion.
            ND_CQ_NOTIFY_ERRORS | ND_CQ_NOTIFY_ANY => 0,
            ND_CQ_NOTIFY_SOLICITED => 1,
            _ => return Err(ND_INVALID_PARAMETER),
        };
        // Two first Notify calls at once may both route it: the same entry, written twice.
        if !cq.routed.load(Ordering::Acquire) {
            cq.adapter.notify.register(cq.cq.as_raw(), weak_self(this));
            cq.routed.store(true, Ordering::Release);
        }
        // SAFETY: the caller's OVERLAPPED, live until the request completes.
        let request = unsafe { Request::start(ov, &cq.file)? };
        cq.notifies.lock().push_back(request);
        // SAFETY: the CQ is live.
        let armed = unsafe { ffi::ibv_req_notify_cq(cq.cq.as_raw(), solicited_only) };
        if armed != 0 {
            let failed = code(crate::status::from_errno(armed.abs()));
            let mut notifies = cq.notifies.lock();
            if let Some(at) = notifies.iter().rposition(|r| r.address() == ov as usize) {
                if let Some(request) = notifies.remove(at) {
                    request.fail(failed);
                }
            }
            return Err(failed);
        }
        Ok(ND_PENDING)
    })
}

/// A weak reference to the body of a live CQ object.
fn weak_self(this: *mut c_void) -> Weak<CqBody> {
    // SAFETY: checked live by the caller (Notify's `this`).
    match unsafe { super::object::<CqBody>(this) }.and_then(|o| o.arc()) {
        Ok(body) => Arc::downgrade(&body),
        Err(_) => Weak::new(),
    }
}

/// Completions read per ibv_poll_cq call.
const BATCH: usize = 16;

/// Up to `n` (at most BATCH) completions of `cq` into `wcs`: how many (0 when the CQ is empty
/// or the poll failed).
///
/// # Safety
/// `cq` is a live verbs CQ.
#[inline]
unsafe fn poll_batch(cq: *mut ffi::ibv_cq, wcs: &mut [MaybeUninit<ffi::ibv_wc>; BATCH], n: usize) -> usize {
    let n = n.min(BATCH);
    // SAFETY: the CQ is live (the caller's promise); wcs has room for n <= BATCH entries.
    let got = unsafe { ffi::ibv_poll_cq(cq, n as i32, wcs[0].as_mut_ptr()) };
    usize::try_from(got).unwrap_or(0).min(n)
}

/// A work completion as ND2_RESULT, with its QueuePairContext, RequestContext and RequestType.
#[inline]
fn result_of(wc: &ffi::ibv_wc, (qp_context, request_context, request_type): (usize, u64, u32)) -> Nd2Result {
    Nd2Result {
        status: from_wc_status_for(wc.status, RequestKind::from_nd2(request_type)).0,
        bytes_transferred: wc.byte_len,
        queue_pair_context: qp_context as *mut c_void,
        request_context: request_context as *mut c_void,
        request_type,
    }
}

unsafe extern "C" fn get_results(this: *mut c_void, results: *mut Nd2Result, max: u32) -> u32 {
    // The empty poll, which a polling program makes many times per completion, stays outside
    // the panic boundary and costs about what ibv_poll_cq does: the object check, the
    // provider's poll (C) and comparisons, none of which can panic. So does the common
    // completion, a direct request of a live QP (Requests::completed_direct: arithmetic and
    // atomic loads; the batch's indices are within BATCH and `max` by construction). The first
    // other completion, and the rest of the call from there, go through the boundary to the
    // request records.
    // SAFETY: the caller's object.
    let Ok(cq) = (unsafe { self::this::<CqBody>(this) }) else {
        return 0;
    };
    if results.is_null() || max == 0 {
        return 0;
    }
    let max = max as usize;
    let raw = cq.cq.as_raw();
    // Not zeroed: ibv_poll_cq writes the entries it returns, and only those are read.
    let mut wcs = [const { MaybeUninit::<ffi::ibv_wc>::uninit() }; BATCH];
    let asked = max.min(BATCH);
    // SAFETY: the CQ is live while the caller's object is.
    let got = unsafe { poll_batch(raw, &mut wcs, asked) };
    if got == 0 {
        return 0;
    }
    if got == 1 {
        // One completion ends the call: it was a short batch (the CQ is empty) or `max` is 1.
        // The common one, a direct request, is translated here, without translate's frame.
        // SAFETY: ibv_poll_cq filled the first entry.
        let wc = unsafe { wcs[0].assume_init_ref() };
        if let Some(found) = cq.adapter.requests.completed_direct(wc.qp_num, wc.wr_id) {
            // SAFETY: the caller's array has room for `max` >= 1 results.
            unsafe { results.write(result_of(wc, found)) };
            return 1;
        }
    }
    // SAFETY: as above; the caller's array has room for `max` results.
    unsafe { translate(cq, results, max, &mut wcs, asked, got) }
}

/// GetResults once a poll found `got` completions of the `asked`: translates them into the
/// caller's `results` (room for `max`) and polls again while the CQ gives full batches; how
/// many results it wrote. Out of line, so that the empty poll keeps a small frame.
///
/// # Safety
/// `cq`'s verbs CQ is live; `wcs` holds `got` entries filled by ibv_poll_cq; `results` is
/// writable for `max` entries, `asked` is at most `max` and BATCH.
#[inline(never)]
unsafe fn translate(
    cq: &CqBody,
    results: *mut Nd2Result,
    max: usize,
    wcs: &mut [MaybeUninit<ffi::ibv_wc>; BATCH],
    mut asked: usize,
    mut got: usize,
) -> u32 {
    let raw = cq.cq.as_raw();
    let requests = &cq.adapter.requests;
    let mut done = 0usize;
    // How many of the batch are translated when one is not on the common path.
    let mut from = loop {
        if got == 0 {
            return done as u32;
        }
        let mut taken = 0;
        for wc in &wcs[..got] {
            // SAFETY: ibv_poll_cq filled the first `got` entries.
            let wc = unsafe { wc.assume_init_ref() };
            let Some(found) = requests.completed_direct(wc.qp_num, wc.wr_id) else {
                break;
            };
            // SAFETY: the caller's array has room for `max` results; done < max.
            unsafe { results.add(done).write(result_of(wc, found)) };
            done += 1;
            taken += 1;
        }
        if taken < got {
            break taken;
        }
        // A short batch emptied the CQ.
        if got < asked || done >= max {
            return done as u32;
        }
        asked = (max - done).min(BATCH);
        // SAFETY: as above.
        got = unsafe { poll_batch(raw, wcs, asked) };
    };
    // Entry `from` of the batch is not on the common path: from there on, the records. A panic
    // returns the results written before it.
    super::boundary("IND2CompletionQueue::GetResults", done as u32, || {
        loop {
            for wc in &wcs[from..got] {
                // SAFETY: as above.
                let wc = unsafe { wc.assume_init_ref() };
                let found = requests.completed(wc.qp_num, wc.wr_id, wc.status == 0, wc.opcode);
                // SAFETY: as above.
                unsafe { results.add(done).write(result_of(wc, found)) };
                done += 1;
            }
            if got < asked || done >= max {
                break;
            }
            asked = (max - done).min(BATCH);
            // SAFETY: as above.
            got = unsafe { poll_batch(raw, wcs, asked) };
            if got == 0 {
                break;
            }
            from = 0;
        }
        done as u32
    })
}
