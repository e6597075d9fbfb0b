//! IND2CompletionQueue over a verbs CQ on the adapter's completion channel
//! ([`NotifyChannel`](super::notify::NotifyChannel)).
//!
//! Notify is overlapped and, as Windows providers do (IND2CompletionQueue.md, Implementation
//! Note), never misses a completion already in the CQ: verbs signals only completions that
//! arrive after ibv_req_notify_cq, and has no way to look at a CQ without taking from it, so
//! Notify arms and then looks by polling one completion into the CQ's [`Front`]; a completion it
//! finds completes the Notify at once (it still returns ND_PENDING, then completes: the doc's
//! Case 1 split in two steps, which every waiting style sees the same way). Notify takes
//! nothing from the program: the front is the head of the CQ as GetResults sees it. Every poll of
//! the verbs CQ, Notify's and GetResults', is made under the front's lock, and GetResults
//! returns the front's completions before it polls, so completions come out in the CQ's order
//! (a QP's in the order it posted them), each once; the front's completions that no GetResults
//! took when the CQ goes retire their request records. The types:
//!
//! - ND_CQ_NOTIFY_ANY and ND_CQ_NOTIFY_SOLICITED arm the verbs CQ (for any completion, or for
//!   solicited ones and errors, unless an ANY request is also waiting: ANY takes precedence) and
//!   complete together at the CQ's next event. A completion found by the Notify itself completes
//!   a SOLICITED request too: a work completion does not say whether its Send was solicited.
//! - ND_CQ_NOTIFY_ERRORS does not arm: it completes on the CQ's error (the device's
//!   IBV_EVENT_CQ_ERR, an overrun: ND_BUFFER_OVERFLOW) or the device's failure
//!   (IBV_EVENT_DEVICE_FATAL: ND_DEVICE_REMOVED), which also fail the other waiting requests; a
//!   Notify on a CQ so failed fails inline with that code.
//!
//! Its vtable and C entries, GetResults' included, are in `entry_data`.
#![forbid(unsafe_code)]

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use rdma_mummy_sys as ffi;

use super::adapter::AdapterBody;
use super::data_verbs::{poll_one, req_notify_cq, resize_cq};
use super::notify::Notified;
use super::overlapped::{CallerOverlapped, Request};
use super::win32::OverlappedFile;
use super::{code, HResult, Overlapped, ND_INVALID_PARAMETER, ND_PENDING, ND_SUCCESS};
use crate::status::{from_wc_status_for, NdStatus, RequestKind};
use crate::CompletionQueue;

const ND_CQ_NOTIFY_ERRORS: u32 = 0;
const ND_CQ_NOTIFY_ANY: u32 = 1;
const ND_CQ_NOTIFY_SOLICITED: u32 = 2;

/// The head of the CQ that Notify polled to see whether the CQ was empty, oldest first, under
/// the lock that every poll of the verbs CQ holds: GetResults takes the front's entries first
/// and then polls, Notify polls only into the front, so that the two see one queue in the CQ's
/// order. Generic over the entry and the poll, for the models (a unit test and loom).
pub(crate) struct Front<T> {
    queue: FrontMutex<VecDeque<T>>,
}

#[cfg(not(loom))]
use parking_lot::{Mutex as FrontMutex, MutexGuard as FrontGuard};

/// The front's lock under loom (its models check the front's protocol), with parking_lot's
/// face.
#[cfg(loom)]
struct FrontMutex<T>(loom::sync::Mutex<T>);
#[cfg(loom)]
type FrontGuard<'a, T> = loom::sync::MutexGuard<'a, T>;
#[cfg(loom)]
impl<T> FrontMutex<T> {
    fn new(value: T) -> Self {
        FrontMutex(loom::sync::Mutex::new(value))
    }
    fn lock(&self) -> FrontGuard<'_, T> {
        self.0.lock().unwrap()
    }
}

impl<T> Default for Front<T> {
    fn default() -> Self {
        Front {
            queue: FrontMutex::new(VecDeque::new()),
        }
    }
}

impl<T> Front<T> {
    /// Notify's look: whether the CQ holds a completion, the front's or one `poll` (which
    /// takes at most one) moved into the front.
    pub(crate) fn holds_one(&self, poll: impl FnOnce() -> Option<T>) -> bool {
        let mut queue = self.queue.lock();
        if !queue.is_empty() {
            return true;
        }
        let Some(one) = poll() else {
            return false;
        };
        queue.push_back(one);
        true
    }

    /// The front's lock, held by GetResults for its whole call (its polls included).
    pub(crate) fn lock(&self) -> FrontGuard<'_, VecDeque<T>> {
        self.queue.lock()
    }

    /// What the front holds, oldest first, taking it (the CQ is going).
    pub(crate) fn drain(&self) -> Vec<T> {
        self.queue.lock().drain(..).collect()
    }
}

/// The oldest entries of a locked front, at most `room`, taken out of it.
pub(super) fn take<T>(front: &mut VecDeque<T>, room: usize) -> std::collections::vec_deque::Drain<'_, T> {
    let n = front.len().min(room);
    front.drain(..n)
}

pub(crate) struct CqBody {
    pub(super) adapter: Arc<AdapterBody>,
    pub(super) cq: Arc<CompletionQueue>,
    file: Arc<OverlappedFile>,
    /// The waiting ANY and SOLICITED requests, with what each waits for and its serial number
    /// (parking_lot's: taken on every CQ event and every Notify that waits).
    notifies: FrontMutex<VecDeque<(Request, Armed, u64)>>,
    /// The serial number of the next waiting request: what a Notify whose arming failed takes its
    /// own request back by, if no event completed it meanwhile (exactly once either way).
    serial: AtomicU64,
    /// The waiting ERRORS requests.
    errors: Mutex<Vec<Request>>,
    /// The head of the CQ that Notify polled, and the lock of every poll.
    pub(super) front: Front<ffi::ibv_wc>,
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
            notifies: FrontMutex::new(VecDeque::new()),
            serial: AtomicU64::new(0),
            errors: Mutex::new(Vec::new()),
            front: Front::default(),
            failure: AtomicI32::new(0),
            routed: AtomicBool::new(false),
        })
    }

    /// The CQ holds a completion (in the front, or polled into it now).
    fn holds_one(&self) -> bool {
        self.front.holds_one(|| poll_one(&self.cq))
    }

    /// IND2CompletionQueue::Resize.
    pub(super) fn resize(&self, depth: u32) -> Result<HResult, HResult> {
        let depth = i32::try_from(depth)
            .ok()
            .filter(|&d| d > 0)
            .ok_or(ND_INVALID_PARAMETER)?;
        match resize_cq(&self.cq, depth) {
            0 => Ok(ND_SUCCESS),
            e => Err(code(crate::status::from_errno(e.abs()))),
        }
    }

    /// IND2CompletionQueue::Notify: `weak_self` is this body's, for the channel's route.
    pub(super) fn notify(
        &self,
        kind: u32,
        ov: CallerOverlapped,
        weak_self: impl FnOnce() -> Weak<CqBody>,
    ) -> Result<HResult, HResult> {
        let cq = self;
        let any = match kind {
            ND_CQ_NOTIFY_ERRORS => false,
            ND_CQ_NOTIFY_ANY => true,
            ND_CQ_NOTIFY_SOLICITED => false,
            _ => return Err(ND_INVALID_PARAMETER),
        };
        // Two first Notify calls at once may both route it: the same entry, written twice.
        // ERRORS needs the route too: the device's CQ error finds the CQ by it.
        if !cq.routed.load(Ordering::Acquire) {
            cq.adapter.notify.register(cq.cq.as_raw(), weak_self());
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
        let request = ov.start(&cq.file)?;
        if kind == ND_CQ_NOTIFY_ERRORS {
            cq.errors.lock().push(request);
            // A failure reported meanwhile may have missed the request: fail it now.
            let failed = cq.failure.load(Ordering::Acquire);
            if failed != 0 {
                cq.failed(NdStatus(failed));
            }
            return Ok(ND_PENDING);
        }
        // The request waits, the CQ is armed, and then looked at (below): a completion already
        // there (in the front, or in the CQ) completes the request at once. No look before the
        // arm: a program Notifies after GetResults found the CQ empty (IND2CompletionQueue.md),
        // so that look would be one more empty poll on every wait.
        let armed = Armed {
            any,
            _watch: super::pump::watch(),
        };
        let arm = |solicited_only| req_notify_cq(&cq.cq, solicited_only);
        if let Some(outcome) = queue_and_arm(&cq.notifies, &cq.serial, request, armed, arm, Request::fail) {
            return outcome;
        }
        // A failure (the device's removal) that drained the requests before this one was queued:
        // it fails this one too.
        let failed = cq.failure.load(Ordering::Acquire);
        if failed != 0 {
            cq.failed(NdStatus(failed));
            return Ok(ND_PENDING);
        }
        // A completion that came before the arm raised no event: found now (and left at the
        // front for GetResults), it completes the waiting requests as an event would (an event
        // the arm still raises later completes the next ones early: a wake-up that finds
        // nothing, never a lost one).
        if cq.holds_one() {
            cq.notified();
        }
        Ok(ND_PENDING)
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
        while let Some((request, _, _)) = next {
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
        let waiting: Vec<(Request, Armed, u64)> = self.notifies.lock().drain(..).collect();
        for request in errors.into_iter().chain(waiting.into_iter().map(|(r, _, _)| r)) {
            request.complete(status, 0);
        }
    }
}

impl Drop for CqBody {
    fn drop(&mut self) {
        self.adapter.notify.unregister(self.cq.as_raw());
        // The front's completions no GetResults took: their request records retire, as
        // GetResults would have retired them.
        let requests = &self.adapter.requests;
        for wc in self.front.drain() {
            crate::sync::contain("retiring a completion of a CQ released", || {
                requests.completed(wc.qp_num, wc.wr_id, wc.status == 0, wc.opcode)
            });
        }
    }
}

impl Overlapped for CqBody {
    fn cancel(&self) {
        let errors: Vec<Request> = std::mem::take(&mut *self.errors.lock());
        let waiting: Vec<(Request, Armed, u64)> = self.notifies.lock().drain(..).collect();
        for request in errors.into_iter().chain(waiting.into_iter().map(|(r, _, _)| r)) {
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

/// What a waiting ANY or SOLICITED request waits for, and, if its thread is not the one that
/// last waited in the shim, its place among the pump's followers while it waits (pump.rs, rule
/// 5: the relay reads for it whenever no leader does).
struct Armed {
    any: bool,
    _watch: Option<super::pump::Follower>,
}

/// Queues `request` as waiting, numbered from `serial`, and arms the CQ with `arm` (given
/// solicited_only; 0 or minus an errno, as ibv_req_notify_cq): None if armed (the request
/// waits). Else the call's outcome: the arm's failure, with the request taken back and failed
/// by `fail` if it still waits; ND_PENDING if an event, a cancel or the CQ's failure completed
/// it meanwhile (it has that completion, and the call reports no second outcome). The lock is
/// not held across `arm`.
fn queue_and_arm<R>(
    notifies: &FrontMutex<VecDeque<(R, Armed, u64)>>,
    serial: &AtomicU64,
    request: R,
    armed: Armed,
    arm: impl FnOnce(i32) -> i32,
    fail: impl FnOnce(R, HResult),
) -> Option<Result<HResult, HResult>> {
    let serial = serial.fetch_add(1, Ordering::Relaxed);
    let solicited_only = {
        let mut notifies = notifies.lock();
        let any = armed.any;
        notifies.push_back((request, armed, serial));
        // An ANY request arms for any completion, whatever else waits.
        i32::from(!any && !notifies.iter().any(|(_, armed, _)| armed.any))
    };
    let armed = arm(solicited_only);
    if armed == 0 {
        return None;
    }
    let failed = code(crate::status::from_errno(armed.abs()));
    Some(match take_back(&mut notifies.lock(), serial) {
        Some(request) => {
            fail(request, failed);
            Err(failed)
        }
        None => Ok(ND_PENDING),
    })
}

/// The waiting request numbered `serial`, taken out of `waiting` if it is still there (None: it
/// was completed meanwhile, by an event, a cancel or a failure).
fn take_back<R, K>(waiting: &mut VecDeque<(R, K, u64)>, serial: u64) -> Option<R> {
    let at = waiting.iter().rposition(|&(_, _, s)| s == serial)?;
    waiting.remove(at).map(|(request, _, _)| request)
}

/// A work completion as ND2_RESULT, with its QueuePairContext, RequestContext and RequestType.
/// A success is ND_SUCCESS whatever the request (from_wc_status_for), so only a failure is
/// translated, out of line.
#[inline(always)]
pub(super) fn result_of(wc: &ffi::ibv_wc, (qp_context, request_context, request_type): (usize, u64, u32)) -> Nd2Result {
    Nd2Result {
        status: if wc.status == 0 {
            ND_SUCCESS
        } else {
            failed_status(wc, request_type)
        },
        bytes_transferred: wc.byte_len,
        queue_pair_context: qp_context as *mut c_void,
        request_context: request_context as *mut c_void,
        request_type,
    }
}

/// A completion in error: its ND code, logged at debug level with the verbs status, opcode and
/// vendor code, which say which request failed and why (ND2_RESULT keeps only the ND code).
#[cold]
#[inline(never)]
fn failed_status(wc: &ffi::ibv_wc, request_type: u32) -> HResult {
    log::debug!(
        "completion in error: QP {} request type {} wc status {} opcode {} vendor_err {:#x}",
        wc.qp_num,
        request_type,
        wc.status,
        wc.opcode,
        wc.vendor_err
    );
    from_wc_status_for(wc.status, RequestKind::from_nd2(request_type)).0
}

/// The front's protocol as GetResults runs it (the model's GetResults): under the front's lock,
/// the front's entries first, then, if it emptied, `poll` into the rest of `out`.
#[cfg(test)]
fn model_get<T>(front: &Front<T>, room: usize, poll: impl FnOnce(usize) -> Vec<T>) -> Vec<T> {
    let mut locked = front.lock();
    let mut got: Vec<T> = take(&mut locked, room).collect();
    if locked.is_empty() && got.len() < room {
        got.extend(poll(room - got.len()));
    }
    got
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{model_get, queue_and_arm, take, Armed, Front, FrontMutex};
    use crate::nd2::{ND_PENDING, ND_SUCCESS};
    use std::collections::VecDeque;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    /// A CQ: what was posted, oldest first.
    type Cq = Mutex<VecDeque<u32>>;

    fn poll(cq: &Cq, room: usize) -> Vec<u32> {
        take(&mut cq.lock().unwrap(), room).collect()
    }

    fn poll_one(cq: &Cq) -> Option<u32> {
        poll(cq, 1).pop()
    }

    fn get(front: &Front<u32>, cq: &Cq, room: usize) -> Vec<u32> {
        model_get(front, room, |rest| poll(cq, rest))
    }

    #[test]
    fn notify_looks_without_taking_from_the_program() {
        let front = Front::<u32>::default();
        let cq: Cq = Mutex::new(VecDeque::from([1, 2, 3]));
        assert!(front.holds_one(|| poll_one(&cq)));
        assert!(front.holds_one(|| unreachable!("the front answers")));
        assert_eq!(get(&front, &cq, 2), [1, 2], "the front first, then the CQ");
        assert_eq!(get(&front, &cq, 8), [3]);
        assert!(!front.holds_one(|| poll_one(&cq)));
        cq.lock().unwrap().push_back(4);
        assert!(front.holds_one(|| poll_one(&cq)));
        assert_eq!(front.drain(), [4], "what the CQ's release retires");
    }

    /// Notify looking again and again while GetResults takes and a QP posts: GetResults returns
    /// every completion once, in the CQ's order (a front filled outside the polls' lock, found
    /// by a relaxed hint, would let a GetResults return a later completion before an earlier
    /// one).
    #[test]
    fn notify_and_get_results_keep_the_order_and_lose_nothing() {
        const N: u32 = 50_000;
        let front = Arc::new(Front::<u32>::default());
        let cq: Arc<Cq> = Arc::default();
        let done = Arc::new(AtomicBool::new(false));
        let producer = {
            let cq = Arc::clone(&cq);
            std::thread::spawn(move || {
                for i in 0..N {
                    cq.lock().unwrap().push_back(i);
                }
            })
        };
        let found = Arc::new(AtomicU64::new(0));
        let notifier = {
            let (front, cq, done, found) = (
                Arc::clone(&front),
                Arc::clone(&cq),
                Arc::clone(&done),
                Arc::clone(&found),
            );
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    found.fetch_add(u64::from(front.holds_one(|| poll_one(&cq))), Ordering::Relaxed);
                }
            })
        };
        // GetResults starts once the notifier holds a completion, so the two always meet.
        while found.load(Ordering::Relaxed) == 0 {
            std::thread::yield_now();
        }
        let mut seen = Vec::new();
        while seen.len() < N as usize {
            seen.extend(get(&front, &cq, 1 + seen.len() % 5));
        }
        done.store(true, Ordering::Relaxed);
        producer.join().unwrap();
        notifier.join().unwrap();
        assert_eq!(seen, (0..N).collect::<Vec<_>>());
        assert!(get(&front, &cq, 8).is_empty(), "none twice");
    }

    /// A failed arm (ibv_req_notify_cq's EINVAL, injected) while the CQ's event completes the
    /// request inside the arm's window: the request completes once (the event's), and the call
    /// returns ND_PENDING, not the failure as a second outcome. With no event meanwhile the
    /// request fails inline, once; an arm that succeeds leaves it waiting.
    #[test]
    fn a_failed_arm_fails_only_a_request_that_no_event_completed() {
        let notifies = FrontMutex::new(VecDeque::new());
        let serial = AtomicU64::new(0);
        let armed = || Armed {
            any: true,
            _watch: None,
        };
        let completed = AtomicU64::new(0);
        let failed = AtomicU64::new(0);
        let fail = |_request: u32, _code: i32| {
            failed.fetch_add(1, Ordering::SeqCst);
        };

        // The event's notified() comes between the queueing and the arm's failure.
        let outcome = queue_and_arm(
            &notifies,
            &serial,
            1u32,
            armed(),
            |_| {
                let (request, _, _) = notifies.lock().pop_front().expect("queued before the arm");
                assert_eq!(request, 1);
                completed.fetch_add(1, Ordering::SeqCst);
                -libc::EINVAL
            },
            fail,
        );
        assert_eq!(
            outcome,
            Some(Ok(ND_PENDING)),
            "the event's completion is the only outcome"
        );
        assert_eq!(
            (completed.load(Ordering::SeqCst), failed.load(Ordering::SeqCst)),
            (1, 0)
        );

        // No event: the request is taken back and fails inline, once.
        let outcome = queue_and_arm(&notifies, &serial, 2u32, armed(), |_| -libc::EINVAL, fail);
        assert!(matches!(outcome, Some(Err(code)) if code != ND_SUCCESS && code != ND_PENDING));
        assert_eq!(failed.load(Ordering::SeqCst), 1);
        assert!(notifies.lock().is_empty(), "taken back");

        // Another request waiting is not the one taken back.
        assert_eq!(queue_and_arm(&notifies, &serial, 3u32, armed(), |_| 0, fail), None);
        let outcome = queue_and_arm(&notifies, &serial, 4u32, armed(), |_| -libc::EINVAL, fail);
        assert!(matches!(outcome, Some(Err(_))));
        assert_eq!(failed.load(Ordering::SeqCst), 2);
        let left: Vec<u32> = notifies.lock().iter().map(|(request, _, _)| *request).collect();
        assert_eq!(left, [3], "the armed request still waits");
    }
}

/// The front's protocol under loom (`RUSTFLAGS="--cfg loom" cargo test --release -p nd-shim
/// --lib loom_`): the real [`Front`] over loom's mutex, a CQ with its arm as verbs has it (an
/// event only for a completion after the arm), every interleaving of a QP's two completions, a
/// Notify (arm, then look) and a GetResults.
#[cfg(all(test, loom))]
mod loom_models {
    use super::{model_get, take, Front};
    use loom::sync::atomic::{AtomicBool, Ordering};
    use loom::sync::{Arc, Mutex};
    use loom::thread;
    use std::collections::VecDeque;

    /// A verbs CQ: its completions, and whether it is armed.
    #[derive(Default)]
    struct Cq {
        queue: Mutex<(VecDeque<u32>, bool)>,
        event: AtomicBool,
    }

    impl Cq {
        fn post(&self, value: u32) {
            let mut cq = self.queue.lock().unwrap();
            cq.0.push_back(value);
            if std::mem::take(&mut cq.1) {
                self.event.store(true, Ordering::SeqCst);
            }
        }
        fn arm(&self) {
            self.queue.lock().unwrap().1 = true;
        }
        fn poll(&self, room: usize) -> Vec<u32> {
            take(&mut self.queue.lock().unwrap().0, room).collect()
        }
    }

    fn get(front: &Front<u32>, cq: &Cq, room: usize) -> Vec<u32> {
        model_get(front, room, |rest| cq.poll(rest))
    }

    /// A Notify whose arm fails (injected) while the CQ's event (`notified`: the oldest waiting
    /// request, under the list's lock) races it: in every interleaving the request completes
    /// once, by the event or by the inline failure, and the call fails inline only if it failed
    /// the request itself.
    #[test]
    fn loom_a_failed_arm_and_an_event_complete_a_request_once() {
        use super::{queue_and_arm, Armed, FrontMutex};
        use crate::nd2::ND_PENDING;
        use loom::sync::atomic::AtomicUsize;
        loom::model(|| {
            let notifies = Arc::new(FrontMutex::new(VecDeque::<(u32, Armed, u64)>::new()));
            let completions = Arc::new(AtomicUsize::new(0));
            let event = {
                let (notifies, completions) = (Arc::clone(&notifies), Arc::clone(&completions));
                thread::spawn(move || {
                    if notifies.lock().pop_front().is_some() {
                        completions.fetch_add(1, Ordering::SeqCst);
                    }
                })
            };
            let serial = std::sync::atomic::AtomicU64::new(0);
            let failed_inline = AtomicUsize::new(0);
            let outcome = queue_and_arm_model(&notifies, &serial, &failed_inline, &completions);
            event.join().unwrap();
            assert_eq!(completions.load(Ordering::SeqCst), 1, "one completion");
            match outcome {
                Some(Err(_)) => assert_eq!(failed_inline.load(Ordering::SeqCst), 1),
                Some(Ok(hr)) => {
                    assert_eq!(hr, ND_PENDING);
                    assert_eq!(failed_inline.load(Ordering::SeqCst), 0);
                }
                None => unreachable!("the arm failed"),
            }
        });

        fn queue_and_arm_model(
            notifies: &FrontMutex<VecDeque<(u32, Armed, u64)>>,
            serial: &std::sync::atomic::AtomicU64,
            failed_inline: &AtomicUsize,
            completions: &AtomicUsize,
        ) -> Option<Result<i32, i32>> {
            queue_and_arm(
                notifies,
                serial,
                1,
                Armed {
                    any: true,
                    _watch: None,
                },
                |_| -libc::EINVAL,
                |_, _| {
                    failed_inline.fetch_add(1, Ordering::SeqCst);
                    completions.fetch_add(1, Ordering::SeqCst);
                },
            )
        }
    }

    /// No completion lost or returned twice, the order kept, and no Notify left waiting on a
    /// CQ that holds a completion with no event to come.
    #[test]
    fn loom_notify_and_get_results_keep_order_and_miss_no_wake_up() {
        loom::model(|| {
            let front = Arc::new(Front::<u32>::default());
            let cq = Arc::new(Cq::default());
            let producer = {
                let cq = Arc::clone(&cq);
                thread::spawn(move || {
                    cq.post(1);
                    cq.post(2);
                })
            };
            let notifier = {
                let (front, cq) = (Arc::clone(&front), Arc::clone(&cq));
                thread::spawn(move || {
                    // Notify: the arm, then a look (cq.rs's notify).
                    cq.arm();
                    front.holds_one(|| cq.poll(1).pop())
                })
            };
            let first = get(&front, &cq, 1);
            producer.join().unwrap();
            let completed = notifier.join().unwrap();
            let left = front.lock().len() + cq.queue.lock().unwrap().0.len();
            if left > 0 {
                assert!(
                    completed || cq.event.load(Ordering::SeqCst),
                    "a completion is there, and the Notify waits for an event that never comes"
                );
            }
            let mut seen = first;
            seen.extend(get(&front, &cq, 4));
            assert_eq!(seen, [1, 2], "each once, in order");
        });
    }
}
