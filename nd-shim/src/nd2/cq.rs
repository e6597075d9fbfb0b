//! IND2CompletionQueue over a verbs CQ on the adapter's completion channel
//! ([`NotifyChannel`](super::notify::NotifyChannel)).
//!
//! Notify is overlapped and, as Windows providers do (IND2CompletionQueue.md, Implementation
//! Note), never misses a completion already in the CQ: verbs signals only completions that
//! arrive after ibv_req_notify_cq, so Notify polls once, arms, and polls once more; a completion
//! it finds goes to the CQ's [`Stash`], which GetResults returns first, and the Notify completes
//! at once (it still returns ND_PENDING, then completes: the doc's Case 1 split in two steps,
//! which every waiting style sees the same way). The types:
//!
//! - ND_CQ_NOTIFY_ANY and ND_CQ_NOTIFY_SOLICITED arm the verbs CQ (for any completion, or for
//!   solicited ones and errors, unless an ANY request is also waiting: ANY takes precedence) and
//!   complete together at the CQ's next event. A completion found by the Notify itself completes
//!   a SOLICITED request too: a work completion does not say whether its Send was solicited.
//! - ND_CQ_NOTIFY_ERRORS does not arm: it completes on the CQ's error (the device's
//!   IBV_EVENT_CQ_ERR, an overrun: ND_BUFFER_OVERFLOW) or the device's failure
//!   (IBV_EVENT_DEVICE_FATAL: ND_DEVICE_REMOVED), which also fail the other waiting requests; a
//!   Notify on a CQ so failed fails inline with that code.

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
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

/// Completions taken out of the CQ by Notify and not yet returned by GetResults, oldest first.
/// The empty stash costs GetResults one relaxed load: `held` is only a hint, the queue under its
/// lock is the truth. A thread that finds a Notify complete sees what that Notify stashed (the
/// request's completion orders the push before it).
pub(crate) struct Stash<T> {
    held: AtomicBool,
    queue: Mutex<VecDeque<T>>,
}

impl<T> Default for Stash<T> {
    fn default() -> Self {
        Stash {
            held: AtomicBool::new(false),
            queue: Mutex::new(VecDeque::new()),
        }
    }
}

impl<T> Stash<T> {
    /// Perhaps something is stashed (false: certainly nothing was when the caller last
    /// synchronised with a push).
    #[inline]
    pub(crate) fn maybe_held(&self) -> bool {
        self.held.load(Ordering::Relaxed)
    }

    pub(crate) fn push(&self, item: T) {
        let mut queue = self.queue.lock();
        queue.push_back(item);
        self.held.store(true, Ordering::Relaxed);
    }

    /// Moves the oldest entries, as many as `out` holds, into `out`: how many.
    pub(crate) fn take(&self, out: &mut [MaybeUninit<T>]) -> usize {
        let mut queue = self.queue.lock();
        let n = queue.len().min(out.len());
        for (slot, item) in out.iter_mut().zip(queue.drain(..n)) {
            slot.write(item);
        }
        if queue.is_empty() {
            self.held.store(false, Ordering::Relaxed);
        }
        n
    }

    /// Something is stashed now.
    pub(crate) fn is_held(&self) -> bool {
        self.maybe_held() && !self.queue.lock().is_empty()
    }
}

pub(crate) struct CqBody {
    adapter: Arc<AdapterBody>,
    pub(super) cq: Arc<CompletionQueue>,
    file: Arc<OverlappedFile>,
    /// The waiting ANY and SOLICITED requests, with whether each is ANY (parking_lot's: taken on
    /// every CQ event and every Notify that waits).
    notifies: Mutex<VecDeque<(Request, bool)>>,
    /// The waiting ERRORS requests.
    errors: Mutex<Vec<Request>>,
    /// Completions Notify polled out of the CQ.
    stash: Stash<ffi::ibv_wc>,
    /// The CQ's failure as an HRESULT (0: none): the device reported it unusable.
    failure: AtomicI32,
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
            errors: Mutex::new(Vec::new()),
            stash: Stash::default(),
            failure: AtomicI32::new(0),
            routed: AtomicBool::new(false),
        })
    }

    /// One completion polled out of the CQ into the stash: whether there was one.
    fn stash_one(&self) -> bool {
        let mut wc = [const { MaybeUninit::<ffi::ibv_wc>::uninit() }; BATCH];
        // SAFETY: the CQ is live while self is.
        if unsafe { poll_batch(self.cq.as_raw(), &mut wc, 1) } == 0 {
            return false;
        }
        // SAFETY: ibv_poll_cq filled the first entry.
        self.stash.push(unsafe { wc[0].assume_init() });
        true
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
        while let Some((request, _)) = next {
            request.complete(NdStatus::ND_SUCCESS, 0);
            if others == 0 {
                break;
            }
            others -= 1;
            next = self.notifies.lock().pop_front();
        }
    }

    fn failed(&self, status: NdStatus) {
        // The first failure stays: the CQ is unusable from then on.
        let _ = self
            .failure
            .compare_exchange(0, status.0, Ordering::AcqRel, Ordering::Acquire);
        let errors: Vec<Request> = std::mem::take(&mut *self.errors.lock());
        let waiting: Vec<(Request, bool)> = self.notifies.lock().drain(..).collect();
        for request in errors.into_iter().chain(waiting.into_iter().map(|(r, _)| r)) {
            request.complete(status, 0);
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
        let errors: Vec<Request> = std::mem::take(&mut *self.errors.lock());
        let waiting: Vec<(Request, bool)> = self.notifies.lock().drain(..).collect();
        for request in errors.into_iter().chain(waiting.into_iter().map(|(r, _)| r)) {
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
        let any = match kind {
            ND_CQ_NOTIFY_ERRORS => false,
            ND_CQ_NOTIFY_ANY => true,
            ND_CQ_NOTIFY_SOLICITED => false,
            _ => return Err(ND_INVALID_PARAMETER),
        };
        // Two first Notify calls at once may both route it: the same entry, written twice.
        // ERRORS needs the route too: the device's CQ error finds the CQ by it.
        if !cq.routed.load(Ordering::Acquire) {
            cq.adapter.notify.register(cq.cq.as_raw(), weak_self(this));
            cq.routed.store(true, Ordering::Release);
        }
        // After the route: a removal that came before it reached no route, and said so first.
        if cq.adapter.adapter.inner.is_removed() {
            cq.failed(NdStatus::ND_DEVICE_REMOVED);
        }
        match cq.failure.load(Ordering::Acquire) {
            0 => {}
            failed => return Err(failed),
        }
        // SAFETY: the caller's OVERLAPPED, live until the request completes.
        let request = unsafe { Request::start(ov, &cq.file)? };
        if kind == ND_CQ_NOTIFY_ERRORS {
            cq.errors.lock().push(request);
            // A failure reported meanwhile may have missed the request: fail it now.
            let failed = cq.failure.load(Ordering::Acquire);
            if failed != 0 {
                cq.failed(NdStatus(failed));
            }
            return Ok(ND_PENDING);
        }
        // A completion not yet returned (stashed, or in the CQ now): the request completes at
        // once, the CQ unarmed (no system call).
        if cq.stash.is_held() || cq.stash_one() {
            request.complete(NdStatus::ND_SUCCESS, 0);
            return Ok(ND_PENDING);
        }
        let solicited_only = {
            let mut notifies = cq.notifies.lock();
            notifies.push_back((request, any));
            i32::from(!notifies.iter().any(|&(_, any)| any))
        };
        // SAFETY: the CQ is live.
        let armed = unsafe { ffi::ibv_req_notify_cq(cq.cq.as_raw(), solicited_only) };
        if armed != 0 {
            let failed = code(crate::status::from_errno(armed.abs()));
            let mut notifies = cq.notifies.lock();
            if let Some(at) = notifies.iter().rposition(|(r, _)| r.address() == ov as usize) {
                if let Some((request, _)) = notifies.remove(at) {
                    request.fail(failed);
                }
            }
            return Err(failed);
        }
        // A failure (the device's removal) that drained the requests before this one was queued:
        // it fails this one too.
        let failed = cq.failure.load(Ordering::Acquire);
        if failed != 0 {
            cq.failed(NdStatus(failed));
            return Ok(ND_PENDING);
        }
        // A completion that came between the poll and the arm raised no event: found now, it
        // completes the waiting requests as an event would (its event, if the arm saw it, later
        // completes the next ones early: a wake-up that finds nothing, never a lost one).
        if cq.stash_one() {
            cq.notified();
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
    if wc.status != 0 {
        log_failed(wc, request_type);
    }
    Nd2Result {
        status: from_wc_status_for(wc.status, RequestKind::from_nd2(request_type)).0,
        bytes_transferred: wc.byte_len,
        queue_pair_context: qp_context as *mut c_void,
        request_context: request_context as *mut c_void,
        request_type,
    }
}

/// A completion in error, at debug level: the verbs status, opcode and vendor code say which
/// request failed and why (ND2_RESULT keeps only the ND code).
#[cold]
#[inline(never)]
fn log_failed(wc: &ffi::ibv_wc, request_type: u32) {
    log::debug!(
        "completion in error: QP {} request type {} wc status {} opcode {} vendor_err {:#x}",
        wc.qp_num,
        request_type,
        wc.status,
        wc.opcode,
        wc.vendor_err
    );
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
    if cq.stash.maybe_held() {
        // SAFETY: as below.
        return unsafe { get_stashed(&cq, results, max) };
    }
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
    unsafe { translate(&cq, results, max, &mut wcs, asked, got) }
}

/// GetResults when Notify may have stashed completions: those first, oldest first, then the CQ's.
///
/// # Safety
/// `cq`'s verbs CQ is live; `results` is writable for `max` (at least 1) entries.
#[inline(never)]
unsafe fn get_stashed(cq: &CqBody, results: *mut Nd2Result, max: usize) -> u32 {
    let mut wcs = [const { MaybeUninit::<ffi::ibv_wc>::uninit() }; BATCH];
    let asked = max.min(BATCH);
    let got = cq.stash.take(&mut wcs[..asked]);
    if got == 0 {
        // Taken meanwhile by another thread: the CQ itself.
        // SAFETY: the CQ is live while the caller's object is.
        let got = unsafe { poll_batch(cq.cq.as_raw(), &mut wcs, asked) };
        // SAFETY: as translate's; `got` entries filled by ibv_poll_cq.
        return unsafe { translate(cq, results, max, &mut wcs, asked, got) };
    }
    // The stash emptied: a full batch, so that translate goes on to the CQ's own completions.
    // Else only these (fewer than asked, perhaps: the caller then asks again, or Notifies, which
    // finds the rest stashed and completes at once).
    let max = if cq.stash.maybe_held() { got } else { max };
    // SAFETY: `got` entries filled by the stash; got <= max, BATCH.
    unsafe { translate(cq, results, max, &mut wcs, got, got) }
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

#[cfg(test)]
mod tests {
    use super::Stash;
    use std::mem::MaybeUninit;
    use std::sync::Arc;

    fn take(stash: &Stash<u32>, room: usize) -> Vec<u32> {
        let mut out = vec![MaybeUninit::<u32>::uninit(); room];
        let n = stash.take(&mut out);
        // SAFETY: take wrote the first n.
        out[..n].iter().map(|v| unsafe { v.assume_init() }).collect()
    }

    #[test]
    fn empty_stash_is_one_flag() {
        let stash = Stash::<u32>::default();
        assert!(!stash.maybe_held());
        assert!(!stash.is_held());
        assert!(take(&stash, 4).is_empty());
    }

    #[test]
    fn stash_returns_oldest_first_and_clears_when_emptied() {
        let stash = Stash::default();
        for v in 1..=5 {
            stash.push(v);
        }
        assert!(stash.maybe_held() && stash.is_held());
        assert_eq!(take(&stash, 2), [1, 2]);
        assert!(stash.maybe_held(), "three left");
        stash.push(6);
        assert_eq!(take(&stash, 8), [3, 4, 5, 6]);
        assert!(!stash.maybe_held() && !stash.is_held());
    }

    #[test]
    fn concurrent_pushes_and_takes_lose_nothing() {
        let stash = Arc::new(Stash::default());
        let pushers: Vec<_> = (0..4u32)
            .map(|t| {
                let stash = Arc::clone(&stash);
                std::thread::spawn(move || {
                    for i in 0..10_000 {
                        stash.push(t * 10_000 + i);
                    }
                })
            })
            .collect();
        let mut seen = Vec::new();
        while pushers.iter().any(|p| !p.is_finished()) {
            seen.extend(take(&stash, 3));
        }
        for p in pushers {
            p.join().unwrap();
        }
        seen.extend(take(&stash, 100_000));
        assert!(!stash.maybe_held());
        // Each pusher's items come out in its order, and all of them.
        for t in 0..4u32 {
            let own: Vec<u32> = seen.iter().copied().filter(|v| v / 10_000 == t).collect();
            assert_eq!(own, (t * 10_000..(t + 1) * 10_000).collect::<Vec<_>>());
        }
    }
}
