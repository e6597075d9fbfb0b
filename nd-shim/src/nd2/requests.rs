//! What a completion reports as its RequestContext and RequestType (ND2_RESULT), and the wr_ids
//! that carry them.
//!
//! Verbs defines a work completion's opcode only when its status is success (ibv_poll_cq(3):
//! for a failed or flushed completion only wr_id, status, qp_num and vendor_err are valid), and
//! an ND2 request context is any pointer the caller likes, so neither says what a failed
//! completion was. So the wr_id handed to verbs is ours, in one of two forms:
//!
//! - **Direct**, the common case: a context whose top 6 bits are zero (any user-space pointer,
//!   below 2^47, or 2^56 with 5-level paging; any small integer) travels in the wr_id itself,
//!   with the request type. Posting it takes no lock and makes no record, and its completion is
//!   decoded from the wr_id alone, whatever its status: a failed or flushed request, a silent
//!   send's failure (ND_OP_FLAG_SILENT_SUCCESS, unsignaled: only a failure completes), a late
//!   completion of a released QP.
//! - **Recorded**, for any other context (a pointer with its top bits set, a negative integer):
//!   the wr_id names a record of the request, made when it is posted, that holds the context and
//!   the type.
//!
//! The wr_id, bit 63 first:
//!
//! | form | 63-62 | 61 | 60-58 | 57-0 |
//! |---|---|---|---|---|
//! | direct | queue: 1 send, 2 QP receive, 3 SRQ receive | 1 | ND2_REQUEST_TYPE | context |
//! | recorded | queue | 0 | sequence number (QP queues) or slot (SRQ), bits 60-0 | |
//! | not ours | 0 | anything: reported as it came (context = wr_id) | | |
//!
//! Direct wr_ids are made only with a type of their queue (Receive on the receive queues; Send,
//! Bind, Invalidate, Read or Write on the send queue), so every wr_id the ND2 face makes decodes
//! back to what it was posted with; one with bit 61 set and another type is nobody's (context
//! NULL, as a recorded one whose record is gone).
//!
//! The records:
//!
//! - A QP's send queue and receive queue: records in post order, numbered. An RC queue completes
//!   in post order, so records leave from the front once they are done; a recorded silent send
//!   has no completion unless it fails, and is done when a later *recorded* send of its queue
//!   completes successfully (which it could not have if the silent one had failed). A direct
//!   send's success does not retire it: the records do not see direct requests, so a recorded
//!   silent send followed only by direct ones stays until a recorded success, or until
//!   [`MAX_SILENT_KEPT`] silent records push it out.
//! - A shared receive queue completes in any order: a slab of records, the wr_id names the slot.
//!
//! ND2_RESULT.QueuePairContext comes from the completion's QP number. The adapter's map of QPs
//! (under a read lock) is the truth; a direct completion reads it from a slot table instead
//! ([`ContextSlots`]: a seqlock slot per `qp_num % 256`, written under the map's write lock),
//! with no lock and nothing that can panic, so that GetResults translates it outside its panic
//! boundary ([`Requests::completed_direct`]). A released QP reports 0: it leaves its slot at
//! Release, and the map then too if it has no records left (so a late direct completion finds
//! no QP: QueuePairContext 0, its context and type decoded all the same), else when its last
//! record completes. The records of a queue are under its own mutex; the locks are
//! parking_lot's (one atomic each way, no poison checks).
//!
//! The direct path is the cheap one by design: its cost per ping-pong exchange (a receive and a
//! send posted, both completed) and the record path's are counted on the host by callgrind over
//! the unit tests `common_path_exchanges` and `record_path_exchanges`; the figures are in
//! docs/nd2-performance.md.

#![forbid(unsafe_code)]

use parking_lot::{Mutex, RwLock};
use std::collections::VecDeque;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use rdma_mummy_sys as ffi;

use super::int_map::{store_in_slot, IntMap};

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

/// The top two bits of our wr_ids: which queue the request is of (0: not ours).
const QUEUE_SHIFT: u32 = 62;
const QUEUE_SEND: u64 = 1;
const QUEUE_RECEIVE: u64 = 2;
const QUEUE_SRQ: u64 = 3;
/// Bit 61: the wr_id carries the request itself (else it names a record).
const DIRECT: u64 = 1 << 61;
/// A recorded wr_id's sequence number or slot: the bits below [`DIRECT`].
const INDEX_MASK: u64 = DIRECT - 1;
/// A direct wr_id's request type: bits 60-58; its context: the bits below.
const TYPE_SHIFT: u32 = 58;
/// Contexts of at most this many bits travel in the wr_id (the top 6 bits zero).
const CONTEXT_BITS: u32 = TYPE_SHIFT;
const CONTEXT_MASK: u64 = (1 << CONTEXT_BITS) - 1;

// The send queue's types are SEND..=WRITE, each fits in 3 bits (DIRECT_HEADS, the tests).
const _: () = assert!(RECEIVE == 0 && SEND == 1 && BIND == 2 && INVALIDATE == 3 && READ == 4 && WRITE == 5);

/// A direct wr_id's top six bits (queue, direct, type).
const fn direct_head(queue: u64, request_type: u32) -> u64 {
    queue << 4 | 1 << 3 | request_type as u64
}

/// The top six bits of every direct wr_id the ND2 face makes, as a set (bit n for head n): the
/// receive queues' with Receive, the send queue's with the send types.
const DIRECT_HEADS: u64 = {
    let mut heads = 1 << direct_head(QUEUE_RECEIVE, RECEIVE) | 1 << direct_head(QUEUE_SRQ, RECEIVE);
    let mut request_type = SEND;
    while request_type <= WRITE {
        heads |= 1 << direct_head(QUEUE_SEND, request_type);
        request_type += 1;
    }
    heads
};

/// Whether a request with this context takes the direct path.
#[inline]
pub(crate) fn is_direct(context: u64) -> bool {
    context >> CONTEXT_BITS == 0
}

/// The direct wr_id of a request, if its context fits.
#[inline]
fn direct_wr_id(queue: u64, request_type: u32, context: u64) -> Option<u64> {
    is_direct(context).then_some(direct_head(queue, request_type) << TYPE_SHIFT | context)
}

/// A direct wr_id's context and request type (None for any other wr_id).
#[inline]
fn direct(wr_id: u64) -> Option<(u64, u32)> {
    let head = wr_id >> TYPE_SHIFT;
    (DIRECT_HEADS >> head & 1 != 0).then_some((wr_id & CONTEXT_MASK, (head & 0b111) as u32))
}

/// A recorded wr_id: the queue and the record's sequence number or slot.
fn recorded_wr_id(queue: u64, index: u64) -> u64 {
    queue << QUEUE_SHIFT | (index & INDEX_MASK)
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

/// A shared receive queue's records (of receives whose context is not direct): slots, reused;
/// and its count of receives posted and of their completions returned (GetResults), for Notify.
#[derive(Default)]
pub(crate) struct SrqRequests(Mutex<Slab>, SrqCounts);

#[derive(Default)]
struct SrqCounts {
    posted: AtomicU64,
    taken: AtomicU64,
}

#[derive(Default)]
struct Slab {
    slots: Vec<Option<u64>>,
    free: Vec<usize>,
}

impl SrqRequests {
    /// The wr_id of a receive: direct if its context fits, else a slot noting it.
    pub(crate) fn post(&self, context: u64) -> u64 {
        self.1.posted.fetch_add(1, Ordering::Relaxed);
        match direct_wr_id(QUEUE_SRQ, RECEIVE, context) {
            Some(wr_id) => wr_id,
            None => self.record(context),
        }
    }

    fn record(&self, context: u64) -> u64 {
        let mut slab = self.0.lock();
        let free = slab.free.pop();
        let slot = store_in_slot(&mut slab.slots, free, context);
        recorded_wr_id(QUEUE_SRQ, slot as u64)
    }

    /// The receives posted whose completions GetResults has not returned yet: at least as many
    /// as the SRQ holds (a receive the device has taken counts until its completion is
    /// returned).
    pub(crate) fn outstanding(&self) -> u64 {
        let taken = self.1.taken.load(Ordering::Acquire);
        self.1.posted.load(Ordering::Acquire).saturating_sub(taken)
    }

    /// A completion of one of the SRQ's receives was returned.
    fn taken(&self) {
        self.1.taken.fetch_add(1, Ordering::Release);
    }

    /// The recorded receive of `wr_id`, completed: its context; the slot is free again.
    fn complete(&self, wr_id: u64) -> Option<u64> {
        self.taken();
        self.free(wr_id)
    }

    /// The recorded receive of `wr_id`: its context; the slot is free again.
    fn free(&self, wr_id: u64) -> Option<u64> {
        let slot = usize::try_from(wr_id & INDEX_MASK).ok()?;
        let mut slab = self.0.lock();
        let context = slab.slots.get_mut(slot)?.take()?;
        slab.free.push(slot);
        Some(context)
    }

    /// A post that failed: a recorded receive's slot is free again.
    pub(crate) fn withdraw(&self, wr_id: u64) {
        self.1.posted.fetch_sub(1, Ordering::Relaxed);
        if wr_id & DIRECT == 0 {
            self.free(wr_id);
        }
    }
}

/// What a completion reports without its QP's records: a direct wr_id what it carries; a
/// recorded wr_id whose record is gone (its QP was released long ago), or one of ours that the
/// ND2 face never makes, names nothing of the caller's, so its context is NULL; any other (not
/// ours) is reported as it came, with the type of its opcode if it succeeded.
fn unknown(wr_id: u64, success: bool, opcode: u32) -> (u64, u32) {
    if let Some(found) = direct(wr_id) {
        return found;
    }
    let context = if wr_id >> QUEUE_SHIFT == 0 { wr_id } else { 0 };
    (context, if success { of_completion(opcode) } else { RECEIVE })
}

/// Released QPs whose records are kept for their late completions, at most: a QP released
/// with requests that will never complete (destroyed before it was connected, or its CQ never
/// polled again) must not keep its records for the adapter's life.
const MAX_RETIRED_KEPT: usize = 256;

/// One QP's requests.
pub(crate) struct QpRequests {
    /// ND2_RESULT.QueuePairContext: the context given to CreateQueuePair, 0 once released.
    context: AtomicUsize,
    send: Mutex<Queue>,
    receive: Mutex<Queue>,
    srq: Option<Arc<SrqRequests>>,
    /// The QP was released; its records stay until its outstanding requests have completed.
    retired: AtomicBool,
}

impl QpRequests {
    /// Posts a send-queue request through `post`, with its wr_id: direct if its context fits
    /// (nothing noted), else a record's, noted first (under the queue's lock, so that numbers
    /// follow post order) and withdrawn if the post fails.
    #[inline]
    pub(crate) fn post_send<E>(
        &self,
        context: u64,
        request_type: u32,
        silent: bool,
        post: impl FnOnce(u64) -> Result<(), E>,
    ) -> Result<(), E> {
        match direct_wr_id(QUEUE_SEND, request_type, context) {
            Some(wr_id) => post(wr_id),
            None => Self::post_recorded(&self.send, QUEUE_SEND, context, request_type, silent, post),
        }
    }

    /// As [`QpRequests::post_send`], for the QP's own receive queue.
    #[inline]
    pub(crate) fn post_receive<E>(&self, context: u64, post: impl FnOnce(u64) -> Result<(), E>) -> Result<(), E> {
        match direct_wr_id(QUEUE_RECEIVE, RECEIVE, context) {
            Some(wr_id) => post(wr_id),
            None => Self::post_recorded(&self.receive, QUEUE_RECEIVE, context, RECEIVE, false, post),
        }
    }

    fn post_recorded<E>(
        queue: &Mutex<Queue>,
        tag: u64,
        context: u64,
        request_type: u32,
        silent: bool,
        post: impl FnOnce(u64) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut queue = queue.lock();
        let seq = queue.push(context, request_type, silent);
        let posted = post(recorded_wr_id(tag, seq));
        if posted.is_err() {
            queue.unpush();
        }
        posted
    }

    /// What ND2_RESULT reports for a completion of this QP that is not direct: QueuePairContext,
    /// RequestContext, RequestType. A wr_id with no record is reported as [`unknown`] says.
    fn completed_recorded(&self, wr_id: u64, success: bool, opcode: u32) -> (usize, u64, u32) {
        let index = wr_id & INDEX_MASK;
        let found = match wr_id >> QUEUE_SHIFT {
            _ if wr_id & DIRECT != 0 => None,
            QUEUE_SEND => self.send.lock().complete(index, success),
            QUEUE_RECEIVE => self.receive.lock().complete(index, success).map(|(c, _)| (c, RECEIVE)),
            QUEUE_SRQ => self.srq.as_ref().and_then(|s| s.complete(wr_id)).map(|c| (c, RECEIVE)),
            _ => None,
        };
        let (context, request_type) = found.unwrap_or_else(|| unknown(wr_id, success, opcode));
        (self.context.load(Ordering::Relaxed), context, request_type)
    }

    fn idle(&self) -> bool {
        self.send.lock().records.is_empty() && self.receive.lock().records.is_empty()
    }
}

/// QueuePairContext by QP number without a lock, for the direct path: a slot per
/// `qp_num % CONTEXT_SLOTS` holding one live QP's number and context, read as a seqlock (a
/// stamp before and after the context; the stamp's sequence is odd while the slot is written
/// or empty). Written only under the map's write lock: a new QP takes its slot (the QP there
/// before falls back to the map), a released one empties its own. A QP not found here is
/// looked up in the map, which stays the truth.
struct ContextSlots([ContextSlot; CONTEXT_SLOTS]);

/// Slots per adapter (4 KiB): QP numbers are handed out in sequence by rxe, so up to this many
/// live QPs each have their own.
const CONTEXT_SLOTS: usize = 256;

#[repr(C, align(16))]
struct ContextSlot {
    /// Sequence (high 32 bits) and QP number (low 32).
    stamp: AtomicU64,
    context: AtomicUsize,
}

impl Default for ContextSlots {
    fn default() -> Self {
        ContextSlots(std::array::from_fn(|_| ContextSlot {
            // Sequence 1: empty.
            stamp: AtomicU64::new(1 << 32),
            context: AtomicUsize::new(0),
        }))
    }
}

impl ContextSlots {
    fn slot(&self, qp_num: u32) -> &ContextSlot {
        &self.0[qp_num as usize % CONTEXT_SLOTS]
    }

    /// The context of live QP `qp_num`, if its slot holds it.
    #[inline]
    fn get(&self, qp_num: u32) -> Option<usize> {
        let slot = self.slot(qp_num);
        let before = slot.stamp.load(Ordering::Acquire);
        let context = slot.context.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        let after = slot.stamp.load(Ordering::Relaxed);
        let held = before == after && before as u32 == qp_num && before >> 32 & 1 == 0;
        held.then_some(context)
    }

    /// The slot's sequence made odd (being written, or empty) and newer; returns it.
    fn begin(slot: &ContextSlot, qp_num: u32) -> u64 {
        let sequence = ((slot.stamp.load(Ordering::Relaxed) >> 32) + 1) | 1;
        slot.stamp.store(sequence << 32 | u64::from(qp_num), Ordering::Relaxed);
        sequence
    }

    /// `qp_num` takes its slot with `context`. Only under the map's write lock.
    fn set(&self, qp_num: u32, context: usize) {
        let slot = self.slot(qp_num);
        let sequence = Self::begin(slot, qp_num);
        fence(Ordering::Release);
        slot.context.store(context, Ordering::Relaxed);
        slot.stamp
            .store((sequence + 1) << 32 | u64::from(qp_num), Ordering::Release);
    }

    /// `qp_num` leaves its slot, if it holds it. Only under the map's write lock.
    fn clear(&self, qp_num: u32) {
        let slot = self.slot(qp_num);
        if slot.stamp.load(Ordering::Relaxed) as u32 == qp_num {
            Self::begin(slot, 0);
        }
    }
}

/// The adapter's QPs by QP number, with their requests.
#[derive(Default)]
pub(crate) struct Requests {
    map: RwLock<IntMap<u32, Arc<QpRequests>>>,
    /// The live QPs' contexts, for the direct path.
    contexts: ContextSlots,
}

impl Requests {
    /// A new QP: its records, found again by its number.
    pub(crate) fn open_qp(&self, qp_num: u32, context: usize, srq: Option<Arc<SrqRequests>>) -> Arc<QpRequests> {
        let qp = Arc::new(QpRequests {
            context: AtomicUsize::new(context),
            send: Mutex::default(),
            receive: Mutex::default(),
            srq,
            retired: AtomicBool::new(false),
        });
        let mut map = self.map.write();
        map.insert(qp_num, Arc::clone(&qp));
        self.contexts.set(qp_num, context);
        qp
    }

    /// The QP is released: it reports QueuePairContext 0 from now on, and leaves the map now if
    /// it has no records left, else once its recorded requests have completed (or a new QP takes
    /// its number).
    pub(crate) fn close_qp(&self, qp_num: u32, qp: &Arc<QpRequests>) {
        qp.context.store(0, Ordering::Relaxed);
        qp.retired.store(true, Ordering::Release);
        qp.send.lock().retire();
        qp.receive.lock().retire();
        let mut map = self.map.write();
        let known = map.get(&qp_num).is_some_and(|known| Arc::ptr_eq(known, qp));
        if known {
            self.contexts.clear(qp_num);
        }
        if qp.idle() {
            if known {
                map.remove(&qp_num);
            }
            return;
        }
        let retired = map.values().filter(|q| q.retired.load(Ordering::Acquire)).count();
        if retired > MAX_RETIRED_KEPT {
            map.retain(|&n, q| n == qp_num || !q.retired.load(Ordering::Acquire));
        }
    }

    fn remove_if(&self, qp_num: u32, qp: &Arc<QpRequests>) {
        let mut map = self.map.write();
        if map.get(&qp_num).is_some_and(|known| Arc::ptr_eq(known, qp)) {
            map.remove(&qp_num);
        }
    }

    /// ND2_RESULT's QueuePairContext, RequestContext and RequestType for a completion. A direct
    /// wr_id is decoded without a lock, and QueuePairContext is read from its slot.
    #[inline]
    pub(crate) fn completed(&self, qp_num: u32, wr_id: u64, success: bool, opcode: u32) -> (usize, u64, u32) {
        match direct(wr_id) {
            Some((context, request_type)) => {
                if wr_id >> QUEUE_SHIFT == QUEUE_SRQ {
                    self.srq_taken(qp_num);
                }
                (self.qp_context(qp_num), context, request_type)
            }
            None => self.completed_recorded(qp_num, wr_id, success, opcode),
        }
    }

    /// A direct completion of an SRQ's receive: counted on the SRQ of QP `qp_num`.
    #[cold]
    fn srq_taken(&self, qp_num: u32) {
        if let Some(srq) = self.map.read().get(&qp_num).and_then(|qp| qp.srq.as_ref()) {
            srq.taken();
        }
    }

    /// [`Requests::completed`] on the common path: a direct completion of a live QP that holds
    /// its slot. Takes no lock and cannot panic (a shift below 64, an index modulo the table's
    /// length, atomic loads), so GetResults needs no panic boundary for it. None: any other.
    #[inline]
    pub(crate) fn completed_direct(&self, qp_num: u32, wr_id: u64) -> Option<(usize, u64, u32)> {
        let (context, request_type) = direct(wr_id)?;
        // An SRQ's receive is counted on its SRQ ([`Requests::completed`]).
        if wr_id >> QUEUE_SHIFT == QUEUE_SRQ {
            return None;
        }
        Some((self.contexts.get(qp_num)?, context, request_type))
    }

    /// ND2_RESULT.QueuePairContext of a QP number: 0 for a QP released or unknown.
    #[inline]
    fn qp_context(&self, qp_num: u32) -> usize {
        match self.contexts.get(qp_num) {
            Some(context) => context,
            None => self.qp_context_mapped(qp_num),
        }
    }

    fn qp_context_mapped(&self, qp_num: u32) -> usize {
        self.map
            .read()
            .get(&qp_num)
            .map_or(0, |qp| qp.context.load(Ordering::Relaxed))
    }

    fn completed_recorded(&self, qp_num: u32, wr_id: u64, success: bool, opcode: u32) -> (usize, u64, u32) {
        let (reported, finished) = {
            let map = self.map.read();
            let Some(qp) = map.get(&qp_num) else {
                let (context, request_type) = unknown(wr_id, success, opcode);
                return (0, context, request_type);
            };
            let reported = qp.completed_recorded(wr_id, success, opcode);
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

    /// A context that travels in the wr_id (the common path).
    fn direct_context(n: u64) -> u64 {
        n
    }

    /// A context that does not fit (top bits set): the record path.
    fn recorded_context(n: u64) -> u64 {
        u64::MAX - n
    }

    /// A path's name and how it makes the context of request n.
    type Path = (&'static str, fn(u64) -> u64);

    const PATHS: [Path; 2] = [("direct", direct_context), ("recorded", recorded_context)];

    /// Requests with QP 7 open (its context `context`, no SRQ), and the QP's.
    fn with_qp_7(context: usize) -> (Requests, Arc<QpRequests>) {
        let r = Requests::default();
        let qp = r.open_qp(7, context, None);
        (r, qp)
    }

    /// Requests and an SRQ's, for QPs to open on.
    fn with_srq() -> (Requests, Arc<SrqRequests>) {
        (Requests::default(), Arc::new(SrqRequests::default()))
    }

    /// `test` on each path, with its own Requests and QP 7 (its context `context`).
    fn on_each_path(context: usize, test: impl Fn(&str, fn(u64) -> u64, &Requests, &QpRequests)) {
        for (path, ctx) in PATHS {
            let (r, qp) = with_qp_7(context);
            test(path, ctx, &r, &qp);
        }
    }

    /// QP 7's completion `wr_id` reports `want` (on the path named `path`).
    fn expect_completion(r: &Requests, wr_id: u64, success: bool, opcode: u32, want: (usize, u64, u32), path: &str) {
        assert_eq!(r.completed(7, wr_id, success, opcode), want, "{path}");
    }

    fn records(qp: &QpRequests) -> usize {
        qp.send.lock().records.len() + qp.receive.lock().records.len()
    }

    #[test]
    fn a_failed_completion_takes_the_type_and_context_it_was_posted_with() {
        on_each_path(0x70, |path, ctx, r, qp| {
            // The same context twice, as ND2 allows.
            let read = post_send(qp, ctx(42), READ, false);
            let silent = post_send(qp, ctx(42), SEND, true);
            let write = post_send(qp, ctx(43), WRITE, false);
            let receive = post_receive(qp, ctx(42));
            // The opcode of a failure is garbage: ignored.
            expect_completion(r, receive, false, Op::IBV_WC_SEND, (0x70, ctx(42), RECEIVE), path);
            expect_completion(r, read, false, Op::IBV_WC_SEND, (0x70, ctx(42), READ), path);
            expect_completion(r, silent, false, Op::IBV_WC_RECV, (0x70, ctx(42), SEND), path);
            expect_completion(r, write, false, Op::IBV_WC_RECV, (0x70, ctx(43), WRITE), path);
            assert!(qp.idle(), "{path}");
        });
    }

    #[test]
    fn failed_direct_requests_report_their_type_and_context_without_records() {
        let (r, qp) = with_qp_7(0x70);
        for request_type in [SEND, BIND, INVALIDATE, READ, WRITE] {
            for silent in [false, true] {
                let context = 0x7ffd_1234_5678 + u64::from(request_type);
                let id = post_send(&qp, context, request_type, silent);
                assert_eq!(id & DIRECT, DIRECT);
                assert_eq!(records(&qp), 0, "nothing noted");
                for garbage in [Op::IBV_WC_RECV, Op::IBV_WC_SEND, 0xdead] {
                    assert_eq!(r.completed(7, id, false, garbage), (0x70, context, request_type));
                }
            }
        }
        let receive = post_receive(&qp, 5);
        assert_eq!(r.completed(7, receive, false, Op::IBV_WC_SEND), (0x70, 5, RECEIVE));
        assert_eq!(records(&qp), 0);
    }

    #[test]
    fn a_silent_direct_send_that_fails_reports_its_context() {
        let (r, qp) = with_qp_7(0x70);
        let silent = post_send(&qp, 0x5555_0000, SEND, true);
        // Later sends succeed and fail around it; it keeps its meaning.
        let ok = post_send(&qp, 1, WRITE, false);
        assert_eq!(r.completed(7, ok, true, Op::IBV_WC_RDMA_WRITE), (0x70, 1, WRITE));
        assert_eq!(r.completed(7, silent, false, 0), (0x70, 0x5555_0000, SEND));
    }

    #[test]
    fn silent_sends_are_done_when_a_later_send_succeeds() {
        // The record path (direct silent sends leave nothing behind).
        let (r, qp) = with_qp_7(0);
        for i in 0..3 {
            post_send(&qp, recorded_context(i), SEND, true);
        }
        let signaled = post_send(&qp, recorded_context(9), WRITE, false);
        let after = post_send(&qp, recorded_context(10), SEND, true);
        assert_eq!(
            r.completed(7, signaled, true, Op::IBV_WC_RDMA_WRITE),
            (0, recorded_context(9), WRITE)
        );
        assert_eq!(
            qp.send.lock().records.len(),
            1,
            "the silent send after it is still outstanding"
        );
        // It fails after all: still known.
        assert_eq!(r.completed(7, after, false, 0), (0, recorded_context(10), SEND));
        assert!(qp.idle());
    }

    #[test]
    fn a_recorded_silent_send_is_retired_only_by_a_later_recorded_success() {
        let (r, qp) = with_qp_7(0x70);
        let silent = post_send(&qp, recorded_context(1), SEND, true);
        // Direct sends complete around it: the records do not see them.
        for i in 0..3 {
            let direct = post_send(&qp, i, SEND, false);
            assert_eq!(r.completed(7, direct, true, Op::IBV_WC_SEND), (0x70, i, SEND));
        }
        assert_eq!(qp.send.lock().records.len(), 1, "still outstanding");
        // So a failure of it found now is still known.
        let again = post_send(&qp, recorded_context(2), SEND, true);
        assert_eq!(r.completed(7, silent, false, 0), (0x70, recorded_context(1), SEND));
        // A recorded success retires the silent ones before it.
        let signaled = post_send(&qp, recorded_context(3), READ, false);
        assert_eq!(
            r.completed(7, signaled, true, Op::IBV_WC_RDMA_READ),
            (0x70, recorded_context(3), READ)
        );
        assert!(qp.idle(), "the silent one before it ({again:#x}) went too");
    }

    #[test]
    fn recorded_silent_sends_among_direct_ones_stay_bounded() {
        let (r, qp) = with_qp_7(0);
        for i in 0..(MAX_SILENT_KEPT as u64 + 10) {
            post_send(&qp, recorded_context(i), SEND, true);
            let direct = post_send(&qp, i, SEND, false);
            r.completed(7, direct, true, Op::IBV_WC_SEND);
        }
        assert!(qp.send.lock().records.len() <= MAX_SILENT_KEPT);
    }

    #[test]
    fn out_of_order_processing_keeps_the_records_of_earlier_completions() {
        on_each_path(0, |path, ctx, r, qp| {
            let first = post_send(qp, ctx(1), SEND, false);
            let second = post_send(qp, ctx(2), SEND, false);
            // Two threads polled both; the second is processed first.
            expect_completion(r, second, true, Op::IBV_WC_SEND, (0, ctx(2), SEND), path);
            expect_completion(r, first, true, Op::IBV_WC_SEND, (0, ctx(1), SEND), path);
            assert!(qp.idle(), "{path}");
        });
    }

    #[test]
    fn a_failed_post_withdraws_its_record() {
        on_each_path(0, |path, ctx, r, qp| {
            assert_eq!(qp.post_send(ctx(5), BIND, false, |_| Err(12)), Err(12), "{path}");
            assert_eq!(qp.post_receive(ctx(5), |_| Err(13)), Err(13), "{path}");
            assert!(qp.idle(), "{path}");
            let ok = post_send(qp, ctx(6), INVALIDATE, false);
            assert_eq!(r.completed(7, ok, false, 0), (0, ctx(6), INVALIDATE), "{path}");
        });
    }

    #[test]
    fn shared_receive_queue_slots_complete_in_any_order() {
        // The record path.
        let (r, srq) = with_srq();
        r.open_qp(7, 0x70, Some(Arc::clone(&srq)));
        r.open_qp(8, 0x80, Some(Arc::clone(&srq)));
        let a = srq.post(recorded_context(100));
        let b = srq.post(recorded_context(200));
        assert_eq!(r.completed(8, b, false, 0), (0x80, recorded_context(200), RECEIVE));
        assert_eq!(
            r.completed(7, a, true, Op::IBV_WC_RECV),
            (0x70, recorded_context(100), RECEIVE)
        );
        let c = srq.post(recorded_context(300));
        assert!(c & INDEX_MASK < 2, "a free slot is reused");
        srq.withdraw(c);
        assert_eq!(srq.0.lock().free.len(), 2);
    }

    #[test]
    fn shared_receive_queue_direct_receives_take_no_slot() {
        let (r, srq) = with_srq();
        r.open_qp(7, 0x70, Some(Arc::clone(&srq)));
        r.open_qp(8, 0x80, Some(Arc::clone(&srq)));
        let a = srq.post(100);
        let b = srq.post(200);
        assert_eq!((a & DIRECT, b & DIRECT), (DIRECT, DIRECT));
        assert!(srq.0.lock().slots.is_empty());
        // Any order, either QP, success or failure.
        assert_eq!(r.completed(8, b, false, Op::IBV_WC_SEND), (0x80, 200, RECEIVE));
        assert_eq!(r.completed(7, a, true, Op::IBV_WC_RECV), (0x70, 100, RECEIVE));
        // A failed post has nothing to withdraw.
        let c = srq.post(300);
        srq.withdraw(c);
        let slab = srq.0.lock();
        assert!(slab.slots.is_empty() && slab.free.is_empty());
    }

    /// What SRQ Notify compares with its threshold: receives posted (direct or recorded, not
    /// withdrawn) less their completions returned, on either path.
    #[test]
    fn shared_receive_queue_counts_what_is_outstanding() {
        let (r, srq) = with_srq();
        r.open_qp(7, 0x70, Some(Arc::clone(&srq)));
        assert_eq!(srq.outstanding(), 0);
        let a = srq.post(100);
        let b = srq.post(recorded_context(200));
        let c = srq.post(300);
        assert_eq!(srq.outstanding(), 3);
        srq.withdraw(c);
        assert_eq!(srq.outstanding(), 2);
        assert_eq!(
            r.completed_direct(7, a),
            None,
            "an SRQ's receive is counted, off the direct path"
        );
        assert_eq!(r.completed(7, a, true, Op::IBV_WC_RECV), (0x70, 100, RECEIVE));
        assert_eq!(srq.outstanding(), 1);
        assert_eq!(r.completed(7, b, false, 0), (0x70, recorded_context(200), RECEIVE));
        assert_eq!(srq.outstanding(), 0);
    }

    #[test]
    fn a_released_qp_keeps_its_records_until_they_complete() {
        // The record path.
        let (r, qp) = with_qp_7(0x70);
        let receive = post_receive(&qp, recorded_context(1));
        post_send(&qp, recorded_context(2), SEND, true);
        r.close_qp(7, &qp);
        assert_eq!(r.map.read().len(), 1, "kept for its receive");
        assert_eq!(r.completed(7, receive, false, 0), (0, recorded_context(1), RECEIVE));
        assert!(r.map.read().is_empty());
        // Unknown from here on: a recorded wr_id names nothing; another is reported as it came.
        assert_eq!(r.completed(7, receive, false, 0), (0, 0, RECEIVE));
        assert_eq!(r.completed(7, 77, true, Op::IBV_WC_RDMA_READ), (0, 77, READ));
    }

    #[test]
    fn a_late_direct_completion_after_release_keeps_its_context_and_type() {
        let (r, srq) = with_srq();
        let qp = r.open_qp(7, 0x70, Some(Arc::clone(&srq)));
        let receive = post_receive(&qp, 1);
        let shared = srq.post(2);
        let read = post_send(&qp, 3, READ, false);
        let silent = post_send(&qp, 4, BIND, true);
        r.close_qp(7, &qp);
        assert!(r.map.read().is_empty(), "no records: out of the map at once");
        // Flushed after the release: QueuePairContext 0, the rest decoded.
        assert_eq!(r.completed(7, receive, false, Op::IBV_WC_SEND), (0, 1, RECEIVE));
        assert_eq!(r.completed(7, shared, false, 0), (0, 2, RECEIVE));
        assert_eq!(r.completed(7, read, false, 0), (0, 3, READ));
        assert_eq!(r.completed(7, silent, false, 0), (0, 4, BIND));
        // Released but still in the map (a recorded request outstanding): 0 too.
        let qp = r.open_qp(8, 0x80, None);
        let direct = post_receive(&qp, 5);
        let recorded = post_receive(&qp, recorded_context(6));
        r.close_qp(8, &qp);
        assert_eq!(r.map.read().len(), 1);
        assert_eq!(r.completed(8, direct, false, 0), (0, 5, RECEIVE));
        assert_eq!(r.completed(8, recorded, false, 0), (0, recorded_context(6), RECEIVE));
        assert!(r.map.read().is_empty());
    }

    #[test]
    fn released_qps_with_requests_that_never_complete_are_forgotten_in_the_end() {
        // The record path (a QP with direct requests only leaves the map at Release).
        let r = Requests::default();
        for n in 0..(MAX_RETIRED_KEPT as u32 + 10) {
            let qp = r.open_qp(n, 0, None);
            post_receive(&qp, recorded_context(1));
            r.close_qp(n, &qp);
        }
        assert!(r.map.read().len() <= MAX_RETIRED_KEPT + 1);
    }

    #[test]
    fn silent_sends_never_followed_by_a_completion_stay_bounded() {
        // The record path.
        let (_r, qp) = with_qp_7(0);
        for i in 0..(MAX_SILENT_KEPT as u64 + 10) {
            post_send(&qp, recorded_context(i), SEND, true);
        }
        assert!(qp.send.lock().records.len() <= MAX_SILENT_KEPT);
    }

    #[test]
    fn qp_contexts_of_qps_sharing_a_slot_come_from_the_map() {
        let r = Requests::default();
        let slotless = 5 + CONTEXT_SLOTS as u32;
        let first = r.open_qp(5, 0x50, None);
        let second = r.open_qp(slotless, 0x60, None);
        let a = post_receive(&first, 1);
        let b = post_receive(&second, 2);
        assert_eq!(r.contexts.get(5), None, "the newer QP took the slot");
        assert_eq!(r.completed(5, a, true, Op::IBV_WC_RECV), (0x50, 1, RECEIVE));
        assert_eq!(r.completed(slotless, b, true, Op::IBV_WC_RECV), (0x60, 2, RECEIVE));
        // The one without the slot goes: the other keeps it.
        r.close_qp(5, &first);
        assert_eq!(r.contexts.get(slotless), Some(0x60));
        assert_eq!(r.completed(5, a, false, 0), (0, 1, RECEIVE));
        r.close_qp(slotless, &second);
        assert_eq!(r.contexts.get(slotless), None);
        assert_eq!(r.completed(slotless, b, false, 0), (0, 2, RECEIVE));
        // A new QP with a released one's number reports its own context.
        let again = r.open_qp(5, 0x55, None);
        let c = post_send(&again, 3, WRITE, false);
        assert_eq!(r.completed(5, c, true, Op::IBV_WC_RDMA_WRITE), (0x55, 3, WRITE));
    }

    #[test]
    fn a_slot_read_while_it_changes_hands_never_gives_another_qps_context() {
        let slots = Arc::new(ContextSlots::default());
        let other = 7 + CONTEXT_SLOTS as u32;
        let writer = {
            let slots = Arc::clone(&slots);
            std::thread::spawn(move || {
                for _ in 0..20_000 {
                    slots.set(7, 7);
                    slots.set(other, other as usize);
                    slots.clear(other);
                }
            })
        };
        while !writer.is_finished() {
            for qp_num in [7, other] {
                if let Some(context) = slots.get(qp_num) {
                    assert_eq!(context, qp_num as usize);
                }
            }
        }
        writer.join().unwrap();
        assert_eq!(
            (slots.get(7), slots.get(other)),
            (None, None),
            "the last clear emptied the slot"
        );
    }

    /// Contexts at the edges of the direct form, and real pointers.
    fn edge_contexts() -> Vec<u64> {
        let on_stack = 0u8;
        let on_heap = Box::new(0u64);
        let mut contexts = vec![
            0,
            1,
            2,
            0xff,
            (1 << 47) - 1,
            1 << 47,
            (1 << 56) + 8,
            CONTEXT_MASK - 1,
            CONTEXT_MASK,
            CONTEXT_MASK + 1,
            1 << 59,
            1 << 60,
            DIRECT,
            DIRECT | 5,
            1 << 62,
            1 << 63,
            (1 << 63) | 1,
            u64::MAX - 1,
            u64::MAX,
            std::ptr::addr_of!(on_stack) as u64,
            std::ptr::addr_of!(*on_heap) as u64,
        ];
        // Contexts shaped like wr_ids of ours.
        contexts.extend((1..4).flat_map(|q| [recorded_wr_id(q, 0), direct_head(q, RECEIVE) << TYPE_SHIFT | 9]));
        contexts
    }

    fn success_opcode(request_type: u32) -> u32 {
        match request_type {
            SEND => Op::IBV_WC_SEND,
            BIND => Op::IBV_WC_BIND_MW,
            INVALIDATE => Op::IBV_WC_LOCAL_INV,
            READ => Op::IBV_WC_RDMA_READ,
            WRITE => Op::IBV_WC_RDMA_WRITE,
            _ => Op::IBV_WC_RECV,
        }
    }

    #[test]
    fn every_wr_id_made_decodes_back_to_what_was_posted() {
        let (r, srq) = with_srq();
        let qp = r.open_qp(7, 0x70, Some(Arc::clone(&srq)));
        for context in edge_contexts() {
            let fits = context <= CONTEXT_MASK;
            for success in [true, false] {
                // What a failure's opcode holds is garbage: a send's opcode on a receive and back.
                let check = |id: u64, request_type: u32| {
                    assert_ne!(id >> QUEUE_SHIFT, 0, "never taken for a foreign wr_id: {id:#x}");
                    assert_eq!(id & DIRECT != 0, fits, "{context:#x}: direct iff it fits");
                    let opcode = if success {
                        success_opcode(request_type)
                    } else {
                        success_opcode(if request_type == RECEIVE { SEND } else { RECEIVE })
                    };
                    assert_eq!(
                        r.completed(7, id, success, opcode),
                        (0x70, context, request_type),
                        "context {context:#x}, type {request_type}, success {success}, wr_id {id:#x}"
                    );
                };
                for request_type in [SEND, BIND, INVALIDATE, READ, WRITE] {
                    for silent in [false, true] {
                        check(post_send(&qp, context, request_type, silent), request_type);
                    }
                }
                check(post_receive(&qp, context), RECEIVE);
                check(srq.post(context), RECEIVE);
            }
        }
        assert!(qp.idle());
        assert!(srq.0.lock().slots.iter().all(Option::is_none));
    }

    #[test]
    fn direct_and_recorded_wr_ids_never_coincide() {
        let mut seen = std::collections::HashMap::new();
        for context in edge_contexts().into_iter().filter(|&c| c <= CONTEXT_MASK) {
            let mut made = vec![
                (QUEUE_RECEIVE, RECEIVE, direct_wr_id(QUEUE_RECEIVE, RECEIVE, context)),
                (QUEUE_SRQ, RECEIVE, direct_wr_id(QUEUE_SRQ, RECEIVE, context)),
            ];
            for t in [SEND, BIND, INVALIDATE, READ, WRITE] {
                made.push((QUEUE_SEND, t, direct_wr_id(QUEUE_SEND, t, context)));
            }
            for (queue, request_type, id) in made {
                let id = id.unwrap();
                assert_eq!(direct(id), Some((context, request_type)));
                assert_eq!(unknown(id, false, 0), (context, request_type));
                let before = seen.insert(id, (queue, request_type, context));
                assert!(before.is_none(), "{id:#x} made twice: {before:?}");
            }
        }
        for queue in 1..4 {
            for index in [0, 1, INDEX_MASK - 1, INDEX_MASK, INDEX_MASK + 1] {
                let id = recorded_wr_id(queue, index);
                assert_eq!(direct(id), None, "{id:#x}");
                assert!(!seen.contains_key(&id));
            }
        }
    }

    #[test]
    fn wr_ids_the_nd2_face_never_makes() {
        let r = Requests::default();
        r.open_qp(7, 0x70, None);
        // Not ours (top two bits 0): reported as they came, with the type of a success's opcode.
        for id in [0, 1, DIRECT, DIRECT | 42, (1 << QUEUE_SHIFT) - 1, 0x7ffd_0000_1000] {
            assert_eq!(r.completed(7, id, true, Op::IBV_WC_RDMA_WRITE), (0x70, id, WRITE));
            assert_eq!(r.completed(7, id, false, Op::IBV_WC_RDMA_WRITE), (0x70, id, RECEIVE));
            assert_eq!(r.completed(8, id, true, Op::IBV_WC_SEND), (0, id, SEND), "unknown QP");
        }
        // Ours in form, with a type its queue never has, or a record that is not there: nothing.
        let strays = [
            direct_head(QUEUE_SEND, RECEIVE) << TYPE_SHIFT | 5,
            direct_head(QUEUE_SEND, 6) << TYPE_SHIFT | 5,
            direct_head(QUEUE_SEND, 7) << TYPE_SHIFT | 5,
            direct_head(QUEUE_RECEIVE, SEND) << TYPE_SHIFT | 5,
            direct_head(QUEUE_SRQ, WRITE) << TYPE_SHIFT | 5,
            recorded_wr_id(QUEUE_SEND, 3),
            recorded_wr_id(QUEUE_SRQ, 3),
            u64::MAX,
        ];
        for id in strays {
            assert_eq!(direct(id), None, "{id:#x}");
            assert_eq!(r.completed(7, id, false, 0), (0x70, 0, RECEIVE), "{id:#x}");
            assert_eq!(r.completed(7, id, true, Op::IBV_WC_SEND), (0x70, 0, SEND), "{id:#x}");
            assert_eq!(r.completed(8, id, false, 0), (0, 0, RECEIVE), "{id:#x}");
        }
    }

    /// The ping-pong's common path, per exchange: a receive and a send posted with direct
    /// contexts, both completed. Also the loop to count with callgrind on the host (see
    /// docs/nd2-performance.md): `common_path_exchange`.
    #[test]
    fn common_path_exchanges() {
        let (r, qp) = with_qp_7(0x70);
        for i in 0..1000 {
            assert_eq!(
                common_path_exchange(&r, &qp, 0x7ffd_0000_0000 + i),
                (0x70, 0x7ffd_0000_0000 + i, SEND)
            );
        }
        assert!(qp.idle());
    }

    #[inline(never)]
    fn common_path_exchange(r: &Requests, qp: &QpRequests, i: u64) -> (usize, u64, u32) {
        exchange(r, qp, i)
    }

    /// The same with contexts that do not fit: the record path (`record_path_exchange`).
    #[test]
    fn record_path_exchanges() {
        let (r, qp) = with_qp_7(0x70);
        for i in 0..1000 {
            assert_eq!(
                record_path_exchange(&r, &qp, recorded_context(i)),
                (0x70, recorded_context(i), SEND)
            );
        }
        assert!(qp.idle());
    }

    #[inline(never)]
    fn record_path_exchange(r: &Requests, qp: &QpRequests, i: u64) -> (usize, u64, u32) {
        exchange(r, qp, i)
    }

    #[inline(always)]
    fn exchange(r: &Requests, qp: &QpRequests, i: u64) -> (usize, u64, u32) {
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
