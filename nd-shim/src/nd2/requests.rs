//! The requests ND2 posted and not completed yet: what a completion reports as its
//! RequestContext and RequestType (ND2_RESULT).
//!
//! Verbs defines a work completion's opcode only when its status is success (ibv_poll_cq(3):
//! for a failed or flushed completion only wr_id, status, qp_num and vendor_err are valid), and
//! an ND2 request context is any pointer the caller likes, so neither can say what a failed
//! completion was. So the wr_id handed to verbs is ours: it names a record of the request, made
//! when it is posted, that holds the caller's context and the request type.
//!
//! - A QP's send queue and receive queue: records in post order, the wr_id is the queue's tag and
//!   the request's sequence number. An RC queue completes in post order, so records leave from
//!   the front once they are done; a send posted with ND_OP_FLAG_SILENT_SUCCESS has no
//!   completion unless it fails, and is done when a later send of its queue completes
//!   successfully (which it could not have if the silent one had failed).
//! - A shared receive queue completes in any order: a slab of records, the wr_id is the SRQ's tag
//!   and the slot.
//!
//! The records of a QP are found by the completion's QP number ([`Requests::completed`]).
//! Posting and completing lock the queue's own mutex (uncontended, no allocation once the queue
//! has grown to its depth); the QP lookup takes a read lock of the adapter's map. The locks are
//! parking_lot's: one atomic each way, without std's poison checks, on a path every request and
//! completion takes.

use parking_lot::{Mutex, RwLock};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rdma_mummy_sys as ffi;

use super::int_map::IntMap;

pub(crate) const RECEIVE: u32 = 0;
pub(crate) const SEND: u32 = 1;
pub(crate) const BIND: u32 = 2;
pub(crate) const INVALIDATE: u32 = 3;
pub(crate) const READ: u32 = 4;
pub(crate) const WRITE: u32 = 5;

/// ND2_REQUEST_TYPE of a successful work completion's opcode (for a wr_id that is not ours).
pub(crate) fn of_completion(opcode: u32) -> u32 {
    use ffi::ibv_wc_opcode as Op;
    match opcode {
        Op::IBV_WC_SEND => SEND,
        Op::IBV_WC_RDMA_WRITE => WRITE,
        Op::IBV_WC_RDMA_READ => READ,
        Op::IBV_WC_BIND_MW => BIND,
        Op::IBV_WC_LOCAL_INV => INVALIDATE,
        _ => RECEIVE,
    }
}

/// ND2_REQUEST_TYPE of a send work request's opcode.
pub(crate) fn of_send(opcode: ffi::ibv_wr_opcode::Type) -> u32 {
    use ffi::ibv_wr_opcode as Op;
    match opcode {
        Op::IBV_WR_RDMA_WRITE => WRITE,
        Op::IBV_WR_RDMA_READ => READ,
        Op::IBV_WR_BIND_MW => BIND,
        Op::IBV_WR_LOCAL_INV => INVALIDATE,
        _ => SEND,
    }
}

/// The top two bits of our wr_ids: which queue the rest (a sequence number or a slot) is of.
const TAG_SHIFT: u32 = 62;
const TAG_SEND: u64 = 1;
const TAG_RECEIVE: u64 = 2;
const TAG_SRQ: u64 = 3;
const INDEX_MASK: u64 = (1 << TAG_SHIFT) - 1;

fn wr_id(tag: u64, index: u64) -> u64 {
    tag << TAG_SHIFT | (index & INDEX_MASK)
}

/// One posted request.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Record {
    context: u64,
    request_type: u32,
    silent: bool,
    done: bool,
}

/// A send or receive queue's records in post order; `base` is the sequence number of the front.
#[derive(Default)]
struct Queue {
    base: u64,
    records: VecDeque<Record>,
}

/// Silent sends kept at most (a program that never asks for a completion must not grow the
/// queue forever): beyond this, the oldest silent ones go. Far more than any QP's depth, so
/// none of them can still be in the device.
const MAX_SILENT_KEPT: usize = 1 << 16;

impl Queue {
    /// A new record at the back; its sequence number.
    fn push(&mut self, context: u64, request_type: u32, silent: bool) -> u64 {
        if self.records.len() >= MAX_SILENT_KEPT {
            self.pop_done(|r| r.silent);
        }
        self.records.push_back(Record {
            context,
            request_type,
            silent,
            done: false,
        });
        self.base + self.records.len() as u64 - 1
    }

    /// The newest record goes again (its post failed).
    fn unpush(&mut self) {
        self.records.pop_back();
    }

    /// The record of sequence number `seq`, now done: its context and type.
    fn complete(&mut self, seq: u64, success: bool) -> Option<(u64, u32)> {
        let at = usize::try_from(seq.wrapping_sub(self.base) & INDEX_MASK).ok()?;
        if at == 0 {
            // The oldest record, as an RC queue completes: it leaves at once, with no silent
            // ones before it to walk; later ones already done (completions processed out of
            // order by two threads) follow it out.
            let record = self.records.pop_front()?;
            self.base = (self.base + 1) & INDEX_MASK;
            if self.records.front().is_some_and(|r| r.done) {
                self.pop_done(|_| false);
            }
            return Some((record.context, record.request_type));
        }
        let record = self.records.get_mut(at)?;
        record.done = true;
        let found = (record.context, record.request_type);
        if success && at > 0 {
            // Everything before it succeeded: the silent ones among them complete no more.
            for earlier in self.records.range_mut(..at) {
                earlier.done |= earlier.silent;
            }
        }
        self.pop_done(|_| false);
        Some(found)
    }

    /// Drops the front records that are done (or that `also` accepts).
    fn pop_done(&mut self, also: impl Fn(&Record) -> bool) {
        while self.records.front().is_some_and(|r| r.done || also(r)) {
            self.records.pop_front();
            self.base = (self.base + 1) & INDEX_MASK;
        }
    }

    /// The silent records go (their QP is gone: no completion of theirs is interesting any more
    /// than the rest's, but only the rest can still arrive for sure).
    fn retire(&mut self) {
        for r in self.records.iter_mut() {
            r.done |= r.silent;
        }
        self.pop_done(|_| false);
    }
}

/// A shared receive queue's records: slots, reused.
#[derive(Default)]
pub(crate) struct SrqRequests(Mutex<Slab>);

#[derive(Default)]
struct Slab {
    slots: Vec<Option<u64>>,
    free: Vec<usize>,
}

impl SrqRequests {
    /// Notes a receive; returns its wr_id.
    pub(crate) fn post(&self, context: u64) -> u64 {
        let mut slab = self.0.lock();
        let slot = match slab.free.pop() {
            Some(slot) => {
                slab.slots[slot] = Some(context);
                slot
            }
            None => {
                slab.slots.push(Some(context));
                slab.slots.len() - 1
            }
        };
        wr_id(TAG_SRQ, slot as u64)
    }

    /// The receive of `wr_id`: its context; the slot is free again.
    fn complete(&self, wr_id: u64) -> Option<u64> {
        let slot = usize::try_from(wr_id & INDEX_MASK).ok()?;
        let mut slab = self.0.lock();
        let context = slab.slots.get_mut(slot)?.take()?;
        slab.free.push(slot);
        Some(context)
    }

    /// A post that failed: its slot is free again.
    pub(crate) fn withdraw(&self, wr_id: u64) {
        self.complete(wr_id);
    }
}

/// What a completion with no record reports: a wr_id of ours whose record is gone (its QP was
/// released long ago) names nothing of the caller's, so its context is NULL; any other is
/// reported as it came.
fn unknown(wr_id: u64, success: bool, opcode: u32) -> (u64, u32) {
    let context = if wr_id >> TAG_SHIFT == 0 { wr_id } else { 0 };
    (context, if success { of_completion(opcode) } else { RECEIVE })
}

/// Released QPs whose records are kept for their late completions, at most: a QP released
/// with requests that will never complete (destroyed before it was connected, or its CQ never
/// polled again) must not keep its records for the adapter's life.
const MAX_RETIRED_KEPT: usize = 256;

/// One QP's requests.
pub(crate) struct QpRequests {
    /// The context given to CreateQueuePair (ND2_RESULT.QueuePairContext).
    context: usize,
    send: Mutex<Queue>,
    receive: Mutex<Queue>,
    srq: Option<Arc<SrqRequests>>,
    /// The QP was released; its records stay until its outstanding requests have completed.
    retired: AtomicBool,
}

impl QpRequests {
    /// Notes a send-queue request, then posts it with its wr_id through `post` (under the
    /// queue's lock, so that numbers follow post order); a failed post withdraws the note.
    pub(crate) fn post_send<E>(
        &self,
        context: u64,
        request_type: u32,
        silent: bool,
        post: impl FnOnce(u64) -> Result<(), E>,
    ) -> Result<(), E> {
        Self::post(&self.send, TAG_SEND, context, request_type, silent, post)
    }

    /// As [`QpRequests::post_send`], for the QP's own receive queue.
    pub(crate) fn post_receive<E>(&self, context: u64, post: impl FnOnce(u64) -> Result<(), E>) -> Result<(), E> {
        Self::post(&self.receive, TAG_RECEIVE, context, RECEIVE, false, post)
    }

    fn post<E>(
        queue: &Mutex<Queue>,
        tag: u64,
        context: u64,
        request_type: u32,
        silent: bool,
        post: impl FnOnce(u64) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut queue = queue.lock();
        let seq = queue.push(context, request_type, silent);
        let posted = post(wr_id(tag, seq));
        if posted.is_err() {
            queue.unpush();
        }
        posted
    }

    /// What ND2_RESULT reports for a completion of this QP: QueuePairContext, RequestContext,
    /// RequestType. A wr_id with no record (not posted by the ND2 face) is reported as it is,
    /// with the type of its opcode if it succeeded.
    fn completed(&self, wr_id: u64, success: bool, opcode: u32) -> (usize, u64, u32) {
        let index = wr_id & INDEX_MASK;
        let found = match wr_id >> TAG_SHIFT {
            TAG_SEND => self.send.lock().complete(index, success),
            TAG_RECEIVE => self.receive.lock().complete(index, success).map(|(c, _)| (c, RECEIVE)),
            TAG_SRQ => self.srq.as_ref().and_then(|s| s.complete(wr_id)).map(|c| (c, RECEIVE)),
            _ => None,
        };
        let (context, request_type) = found.unwrap_or_else(|| unknown(wr_id, success, opcode));
        let qp_context = if self.retired.load(Ordering::Acquire) {
            0
        } else {
            self.context
        };
        (qp_context, context, request_type)
    }

    fn idle(&self) -> bool {
        self.send.lock().records.is_empty() && self.receive.lock().records.is_empty()
    }
}

/// The adapter's QPs by QP number, with their requests.
#[derive(Default)]
pub(crate) struct Requests(RwLock<IntMap<u32, Arc<QpRequests>>>);

impl Requests {
    /// A new QP: its records, found again by its number.
    pub(crate) fn open_qp(&self, qp_num: u32, context: usize, srq: Option<Arc<SrqRequests>>) -> Arc<QpRequests> {
        let qp = Arc::new(QpRequests {
            context,
            send: Mutex::default(),
            receive: Mutex::default(),
            srq,
            retired: AtomicBool::new(false),
        });
        let mut map = self.0.write();
        map.insert(qp_num, Arc::clone(&qp));
        qp
    }

    /// The QP is released: its records go once its outstanding requests have completed (or a
    /// new QP takes its number).
    pub(crate) fn close_qp(&self, qp_num: u32, qp: &Arc<QpRequests>) {
        qp.retired.store(true, Ordering::Release);
        qp.send.lock().retire();
        qp.receive.lock().retire();
        if qp.idle() {
            self.remove_if(qp_num, qp);
            return;
        }
        let mut map = self.0.write();
        let retired = map.values().filter(|q| q.retired.load(Ordering::Acquire)).count();
        if retired > MAX_RETIRED_KEPT {
            map.retain(|&n, q| n == qp_num || !q.retired.load(Ordering::Acquire));
        }
    }

    fn remove_if(&self, qp_num: u32, qp: &Arc<QpRequests>) {
        let mut map = self.0.write();
        if map.get(&qp_num).is_some_and(|known| Arc::ptr_eq(known, qp)) {
            map.remove(&qp_num);
        }
    }

    /// ND2_RESULT's QueuePairContext, RequestContext and RequestType for a completion.
    pub(crate) fn completed(&self, qp_num: u32, wr_id: u64, success: bool, opcode: u32) -> (usize, u64, u32) {
        let (reported, finished) = {
            let map = self.0.read();
            let Some(qp) = map.get(&qp_num) else {
                let (context, request_type) = unknown(wr_id, success, opcode);
                return (0, context, request_type);
            };
            let reported = qp.completed(wr_id, success, opcode);
            let finished = (qp.retired.load(Ordering::Acquire) && qp.idle()).then(|| Arc::clone(qp));
            (reported, finished)
        };
        if let Some(qp) = finished {
            self.remove_if(qp_num, &qp);
        }
        reported
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ffi::ibv_wc_opcode as Op;

    fn post_send(qp: &QpRequests, context: u64, request_type: u32, silent: bool) -> u64 {
        let mut id = 0;
        qp.post_send(context, request_type, silent, |w| {
            id = w;
            Ok::<(), ()>(())
        })
        .unwrap();
        id
    }

    fn post_receive(qp: &QpRequests, context: u64) -> u64 {
        let mut id = 0;
        qp.post_receive(context, |w| {
            id = w;
            Ok::<(), ()>(())
        })
        .unwrap();
        id
    }

    #[test]
    fn a_failed_completion_takes_the_type_and_context_it_was_posted_with() {
        let r = Requests::default();
        let qp = r.open_qp(7, 0x70, None);
        // The same context twice, as ND2 allows.
        let read = post_send(&qp, 42, READ, false);
        let silent = post_send(&qp, 42, SEND, true);
        let write = post_send(&qp, 43, WRITE, false);
        let receive = post_receive(&qp, 42);
        // The opcode of a failure is garbage: ignored.
        assert_eq!(r.completed(7, receive, false, Op::IBV_WC_SEND), (0x70, 42, RECEIVE));
        assert_eq!(r.completed(7, read, false, Op::IBV_WC_SEND), (0x70, 42, READ));
        assert_eq!(r.completed(7, silent, false, Op::IBV_WC_RECV), (0x70, 42, SEND));
        assert_eq!(r.completed(7, write, false, Op::IBV_WC_RECV), (0x70, 43, WRITE));
        assert!(qp.idle());
    }

    #[test]
    fn silent_sends_are_done_when_a_later_send_succeeds() {
        let r = Requests::default();
        let qp = r.open_qp(7, 0, None);
        for i in 0..3 {
            post_send(&qp, i, SEND, true);
        }
        let signaled = post_send(&qp, 9, WRITE, false);
        let after = post_send(&qp, 10, SEND, true);
        assert_eq!(r.completed(7, signaled, true, Op::IBV_WC_RDMA_WRITE), (0, 9, WRITE));
        assert_eq!(
            qp.send.lock().records.len(),
            1,
            "the silent send after it is still outstanding"
        );
        // It fails after all: still known.
        assert_eq!(r.completed(7, after, false, 0), (0, 10, SEND));
        assert!(qp.idle());
    }

    #[test]
    fn out_of_order_processing_keeps_the_records_of_earlier_completions() {
        let r = Requests::default();
        let qp = r.open_qp(7, 0, None);
        let first = post_send(&qp, 1, SEND, false);
        let second = post_send(&qp, 2, SEND, false);
        // Two threads polled both; the second is processed first.
        assert_eq!(r.completed(7, second, true, Op::IBV_WC_SEND), (0, 2, SEND));
        assert_eq!(r.completed(7, first, true, Op::IBV_WC_SEND), (0, 1, SEND));
        assert!(qp.idle());
    }

    #[test]
    fn a_failed_post_withdraws_its_record() {
        let r = Requests::default();
        let qp = r.open_qp(7, 0, None);
        assert_eq!(qp.post_send(5, BIND, false, |_| Err(12)), Err(12));
        assert!(qp.idle());
        let ok = post_send(&qp, 6, INVALIDATE, false);
        assert_eq!(r.completed(7, ok, false, 0), (0, 6, INVALIDATE));
    }

    #[test]
    fn shared_receive_queue_slots_complete_in_any_order() {
        let r = Requests::default();
        let srq = Arc::new(SrqRequests::default());
        r.open_qp(7, 0x70, Some(Arc::clone(&srq)));
        r.open_qp(8, 0x80, Some(Arc::clone(&srq)));
        let a = srq.post(100);
        let b = srq.post(200);
        assert_eq!(r.completed(8, b, false, 0), (0x80, 200, RECEIVE));
        assert_eq!(r.completed(7, a, true, Op::IBV_WC_RECV), (0x70, 100, RECEIVE));
        let c = srq.post(300);
        assert!(c & INDEX_MASK < 2, "a free slot is reused");
        srq.withdraw(c);
        assert_eq!(srq.0.lock().free.len(), 2);
    }

    #[test]
    fn a_released_qp_keeps_its_records_until_they_complete() {
        let r = Requests::default();
        let qp = r.open_qp(7, 0x70, None);
        let receive = post_receive(&qp, 1);
        post_send(&qp, 2, SEND, true);
        r.close_qp(7, &qp);
        assert_eq!(r.completed(7, receive, false, 0), (0, 1, RECEIVE));
        assert!(r.0.read().is_empty());
        // Unknown from here on: a wr_id of ours names nothing; another is reported as it came.
        assert_eq!(r.completed(7, receive, false, 0), (0, 0, RECEIVE));
        assert_eq!(r.completed(7, 77, true, Op::IBV_WC_RDMA_READ), (0, 77, READ));
    }

    #[test]
    fn released_qps_with_requests_that_never_complete_are_forgotten_in_the_end() {
        let r = Requests::default();
        for n in 0..(MAX_RETIRED_KEPT as u32 + 10) {
            let qp = r.open_qp(n, 0, None);
            post_receive(&qp, 1);
            r.close_qp(n, &qp);
        }
        assert!(r.0.read().len() <= MAX_RETIRED_KEPT + 1);
    }

    #[test]
    fn silent_sends_never_followed_by_a_completion_stay_bounded() {
        let r = Requests::default();
        let qp = r.open_qp(7, 0, None);
        for i in 0..(MAX_SILENT_KEPT as u64 + 10) {
            post_send(&qp, i, SEND, true);
        }
        assert!(qp.send.lock().records.len() <= MAX_SILENT_KEPT);
    }

    /// The ping-pong's record path, per exchange: a receive and a send posted, both completed.
    /// (Also the loop to count with callgrind on the host: `record_path_exchange`.)
    #[test]
    fn record_path_exchanges() {
        let r = Requests::default();
        let qp = r.open_qp(7, 0x70, None);
        for i in 0..1000 {
            assert_eq!(record_path_exchange(&r, &qp, i), (0x70, i, SEND));
        }
        assert!(qp.idle());
    }

    #[inline(never)]
    fn record_path_exchange(r: &Requests, qp: &QpRequests, i: u64) -> (usize, u64, u32) {
        let receive = post_receive(qp, i);
        let send = post_send(qp, i, SEND, false);
        let sent = r.completed(7, send, true, Op::IBV_WC_SEND);
        let received = r.completed(7, receive, true, Op::IBV_WC_RECV);
        assert_eq!(received, (0x70, i, RECEIVE));
        sent
    }

    #[test]
    fn send_opcodes() {
        use ffi::ibv_wr_opcode as W;
        assert_eq!(of_send(W::IBV_WR_SEND), SEND);
        assert_eq!(of_send(W::IBV_WR_RDMA_WRITE), WRITE);
        assert_eq!(of_send(W::IBV_WR_RDMA_READ), READ);
        assert_eq!(of_send(W::IBV_WR_BIND_MW), BIND);
        assert_eq!(of_send(W::IBV_WR_LOCAL_INV), INVALIDATE);
    }
}
