//! Dropping a QP's completions from its CQs when the QP goes to RESET or is
//! destroyed, as mlx5 does (`__mlx5_cq_clean`, from `mlx5_modify_qp` and
//! `mlx5_destroy_qp`).
//!
//! rdma_rxe leaves a QP's completions in its CQs across RESET and destroy
//! (and so does the stock rxe provider). A QP moved ERR → RESET → RTS then
//! hands the application, on its first poll, the flushed completions of work
//! it posted before the reset, which pyverbs' `test_mr_rereg_pd` (and any
//! application that recycles QPs) takes for a failure of the new work.
//!
//! # The rule
//!
//! When `ibv_modify_qp` to RESET or `ibv_destroy_qp` returns, no poll of the
//! QP's CQs that begins after it (`ibv_poll_cq`, `ibv_start_poll`) returns a
//! completion of that QP that was in the CQ when the reset or destroy took
//! its snapshot; completions the QP makes later (after it left RESET again)
//! are kept. Destroy follows mlx5's rule (clean), not stock rxe's (leave):
//! a destroyed QP's `wr_id`s name application state the application is
//! tearing down with the QP, and a QP must go through RESET on its way to
//! being destroyed anyway, so one rule covers both. Two exceptions:
//! - the receive completions of a QP that receives through an SRQ: each
//!   carries an SRQ buffer the application posted, and rxe cannot take a
//!   consumed SRQ entry back (mlx5 frees the WQE back into its SRQ), so the
//!   application must still see them to get its buffers back;
//! - an `ibv_start_poll` … `ibv_end_poll` pair already open on the CQ when
//!   the purge runs (on any thread, the caller's own included) keeps its
//!   view: its `next_poll` may still return the QP's completions; its
//!   `end_poll` applies the purge before it releases the CQ.
//!
//! # Who applies it
//!
//! The purge is never skipped and never waits for a CQ: it records itself
//! in the CQ's [`PurgeQueue`] (the QP number and a snapshot of the ring's
//! consumer and producer indices, under the queue's own mutex), then
//! - on a CQ with a lock, applies the queue at once if the lock is free
//!   (one compare-and-swap); if it is held (a `poll_cq` on another thread,
//!   or an open pair, possibly this thread's own), it leaves the queue to
//!   the holder: every poll entry (`poll_cq`, before it takes the lock;
//!   `start_poll` and `end_poll`, with it) tests the queue's flag and, with
//!   the lock held, applies what is queued before it reads the ring (after
//!   it consumed, in `end_poll`). Waiting instead could deadlock: a thread
//!   inside its own poll pair on the CQ, or two threads, each inside a poll
//!   pair on the CQ of a QP the other resets.
//! - on a CQ of a thread domain (no lock, by contract used by one thread at
//!   a time), never touches the ring from the resetting thread: the CQ's
//!   own next poll, on the thread using it, applies the queue.
//!   `resize_cq` applies it too, before the kernel copies the ring.
//!
//! # The sweep
//!
//! The slots between our consumer index and the kernel's producer index
//! are ours until we release them: the kernel writes only from its producer
//! on. So, with the poll state to ourselves, from the snapshot's producer
//! index back to our consumer index: drop those of the QP, move each other
//! one up by the number dropped so far (towards the producer, so the other
//! QPs' completions keep their order), then release the freed slots by
//! advancing our consumer index past them. Completions the kernel wrote
//! after the snapshot lie beyond it and are left alone. A poll that ran
//! concurrently with the purge (it tested the flag before the purge queued)
//! may have consumed past the snapshot: the distance from the snapshot's
//! consumer index tells how far (both distances are below the ring's size,
//! since neither a snapshot nor one poll spans more than a full ring), and
//! nothing before our consumer index is touched.

use core::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use kernel_abi::ib_uverbs_wc;
use log::debug;

use super::poll_state::PollState;
use crate::ring::{Consumer, IndexView};

impl PollState {
    /// Drops the completions of `qp_num` between our consumer index and the
    /// kernel's producer index now (see
    /// [`drop_qp_completions_before`](Self::drop_qp_completions_before)): the
    /// tests' and the fuzz target's immediate purge.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn drop_qp_completions(&mut self, qp_num: u32, keep_receives: bool) -> u32 {
        let Some(ring) = &self.ring else {
            return 0;
        };
        let end = ring.produced();
        self.drop_qp_completions_before(qp_num, keep_receives, self.cons, end)
    }

    /// Drops the completions of `qp_num` from our consumer index up to
    /// `end` (a producer index the kernel had published when our consumer
    /// index, as the kernel saw it, was `from`), keeping the others in order,
    /// and the QP's receive completions too when `keep_receives` (it receives
    /// through an SRQ). Nothing if we have consumed up to `end` or past it
    /// since. Returns how many were dropped. Not during an `ibv_cq_ex` poll
    /// (`cur` is reset to the new consumer index).
    pub(crate) fn drop_qp_completions_before(&mut self, qp_num: u32, keep_receives: bool, from: u32, end: u32) -> u32 {
        let Some(ring) = &self.ring else {
            return 0;
        };
        let q = ring.indices();
        let cons = self.cons;
        let polled = q.used(cons, from);
        let span = q.used(end, from);
        if polled >= span {
            return 0;
        }
        let used = span - polled;
        let mut dropped = 0u32;
        for offset in (0..used).rev() {
            let index = q.wrap(cons.wrapping_add(offset));
            let wc: ib_uverbs_wc = ring.read_slot(index);
            // IB_UVERBS_WC_RECV (128) and RECV_RDMA_WITH_IMM (129).
            let receive = wc.opcode & 0x80 != 0;
            if wc.qp_num == qp_num && !(keep_receives && receive) {
                dropped += 1;
            } else if dropped > 0 {
                ring.write_slot(q.wrap(index.wrapping_add(dropped)), &wc);
            }
        }
        if dropped > 0 {
            self.cons = q.wrap(cons.wrapping_add(dropped));
            self.cur = self.cons;
            // Release: the moved completions are written before the kernel
            // may reuse the slots we hand back.
            ring.release(self.cons);
        }
        dropped
    }
}

/// A CQ's purges not yet applied (see the module docs).
pub(crate) struct PurgeQueue {
    /// Something is queued: what a poll entry tests, with the CQ to itself.
    queued: AtomicBool,
    pending: Mutex<Pending>,
}

struct Pending {
    /// The index words of the CQ's ring, for the snapshot. Replaced, under
    /// the mutex, before the ring it points into is unmapped.
    view: Option<IndexView>,
    purges: Vec<Purge>,
}

#[derive(Clone, Copy, Debug)]
struct Purge {
    qp_num: u32,
    keep_receives: bool,
    /// The consumer index the kernel saw at the snapshot.
    from: u32,
    /// The producer index at the snapshot.
    end: u32,
}

impl PurgeQueue {
    pub(crate) const fn new() -> PurgeQueue {
        PurgeQueue {
            queued: AtomicBool::new(false),
            pending: Mutex::new(Pending {
                view: None,
                purges: Vec::new(),
            }),
        }
    }

    fn pending(&self) -> MutexGuard<'_, Pending> {
        // A panic while it was held left it consistent (a push or a drain).
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a purge is queued: one load, for the poll entries, which call
    /// [`apply`](Self::apply) when it says so.
    #[inline(always)]
    pub(crate) fn is_queued(&self) -> bool {
        self.queued.load(Ordering::Relaxed)
    }

    /// Queues a purge of `qp_num` with a snapshot of the ring's indices;
    /// `false` (nothing queued) when there is nothing it could drop (no
    /// ring, or an empty one).
    pub(super) fn push(&self, qp_num: u32, keep_receives: bool) -> bool {
        let mut p = self.pending();
        let Some(view) = p.view else {
            return false;
        };
        // SAFETY: the view is replaced, under this mutex, before its ring
        // is unmapped (ring_changed, around_resize, the CQ's drop).
        let (from, end) = unsafe { (view.consumer_index(), view.produced()) };
        if from == end {
            return false;
        }
        p.purges.push(Purge {
            qp_num,
            keep_receives,
            from,
            end,
        });
        self.queued.store(true, Ordering::Release);
        true
    }

    /// Applies the queued purges, oldest first; returns how many completions
    /// were dropped.
    ///
    /// The caller has the poll state to itself: the CQ's lock, or on a
    /// thread domain, the CQ's own call; and no `ibv_cq_ex` pair is mid-way
    /// (`start_poll` before it reads, `end_poll` after it consumed).
    #[cold]
    #[inline(never)]
    pub(crate) fn apply(&self, state: &mut PollState) -> u32 {
        let mut p = self.pending();
        Self::apply_locked(&self.queued, &mut p, state)
    }

    fn apply_locked(queued: &AtomicBool, p: &mut Pending, state: &mut PollState) -> u32 {
        queued.store(false, Ordering::Relaxed);
        p.purges
            .drain(..)
            .map(|x| state.drop_qp_completions_before(x.qp_num, x.keep_receives, x.from, x.end))
            .sum()
    }

    /// After the CQ's ring was mapped into `state` (create): the snapshots'
    /// view of it.
    pub(crate) fn ring_changed(&self, state: &PollState) {
        self.pending().view = state.ring.as_ref().map(Consumer::index_view);
    }

    /// Runs `resize` (which replaces `state`'s ring) with the queue applied
    /// first and held until the view follows the new ring, so that no
    /// snapshot of the old ring is applied to the new one and none is
    /// taken of an unmapped one. Same caller's exclusion as [`apply`](Self::apply).
    pub(crate) fn around_resize<R>(&self, state: &mut PollState, resize: impl FnOnce(&mut PollState) -> R) -> R {
        let mut p = self.pending();
        let dropped = Self::apply_locked(&self.queued, &mut p, state);
        if dropped > 0 {
            debug!("{dropped} completions purged before a resize");
        }
        // The old ring is unmapped in here: no view of it outlives it.
        p.view = None;
        let r = resize(state);
        p.view = state.ring.as_ref().map(Consumer::index_view);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cq::object::{purge_qp, purge_qp_from_cqs, RxeCq};
    use crate::cq::testing::{fake_rxe_cq, fake_rxe_cq_with};
    use crate::lock::QueueLock;
    use crate::ring::testing::FakeRing;
    use core::mem::MaybeUninit;
    use zerocopy::FromZeros;

    use crate::libibverbs::cq::{ibv_cq_ex, ibv_poll_cq_attr, ibv_wc, IBV_WC_EX_WITH_QP_NUM};

    const A: u32 = 0x11;
    const B: u32 = 0x22;
    const C: u32 = 0x33;

    fn wc(qp_num: u32, wr_id: u64) -> ib_uverbs_wc {
        let mut c = ib_uverbs_wc::new_zeroed();
        c.qp_num = qp_num;
        c.wr_id = wr_id;
        c.status = 5; // IBV_WC_WR_FLUSH_ERR
        c
    }

    fn fake(mask: u32) -> (FakeRing, PollState) {
        let fq = FakeRing::new(7, mask, 0);
        let ring = Consumer::map(fq.raw_fd(), &fq.mi, size_of::<ib_uverbs_wc>()).unwrap();
        (fq, PollState::new(Some(ring)))
    }

    fn poll_all(s: &mut PollState) -> Vec<(u32, u64)> {
        let mut out = vec![MaybeUninit::<ibv_wc>::uninit(); 64];
        let n = s.poll(&mut out).unwrap();
        out[..n]
            .iter()
            // SAFETY: poll initialised the first n entries.
            .map(|w| unsafe { w.assume_init() })
            .map(|w| (w.qp_num, w.wr_id))
            .collect()
    }

    #[test]
    fn drops_only_that_qp_and_keeps_the_others_in_order_across_the_wrap() {
        // 8 slots; start the indices at 5 so the completions wrap.
        let (fq, mut s) = fake(7);
        for i in 0..5 {
            fq.produce(&wc(C, i));
        }
        assert_eq!(poll_all(&mut s).len(), 5);
        let mixed = [(A, 1), (B, 2), (A, 3), (A, 4), (B, 5), (C, 6), (A, 7)];
        for &(qp, id) in &mixed {
            fq.produce(&wc(qp, id));
        }
        assert_eq!(s.drop_qp_completions(A, false), 4);
        // The freed slots went back to the kernel.
        assert_eq!(fq.kernel.consumer_index(), (5 + 4) & 7);
        assert_eq!(fq.kernel.produced(), (5 + 7) & 7);
        // The kernel may fill the slots we freed, after the survivors.
        for id in 8..12 {
            fq.produce(&wc(A, id));
        }
        let rest = poll_all(&mut s);
        assert_eq!(rest, vec![(B, 2), (B, 5), (C, 6), (A, 8), (A, 9), (A, 10), (A, 11)]);
    }

    #[test]
    fn leaves_completions_after_the_snapshot_and_other_qps_alone() {
        let (fq, mut s) = fake(7);
        assert_eq!(s.drop_qp_completions(A, false), 0, "empty ring");
        fq.produce(&wc(B, 1));
        fq.produce(&wc(C, 2));
        assert_eq!(s.drop_qp_completions(A, false), 0);
        assert_eq!(fq.kernel.consumer_index(), 0, "nothing released when nothing dropped");
        // Everything the QP's.
        let (fq2, mut s2) = fake(3);
        for id in 0..3 {
            fq2.produce(&wc(A, id));
        }
        assert_eq!(s2.drop_qp_completions(A, false), 3);
        assert!(poll_all(&mut s2).is_empty());
        assert_eq!(fq2.kernel.consumer_index(), 3);
        assert_eq!(poll_all(&mut s), vec![(B, 1), (C, 2)]);
    }

    #[test]
    fn a_ring_lost_to_a_failed_resize_drops_nothing() {
        let mut s = PollState::new(None);
        assert_eq!(s.drop_qp_completions(A, false), 0);
    }

    #[test]
    fn an_srq_qp_keeps_its_receive_completions() {
        let (fq, mut s) = fake(7);
        let mut recv = wc(A, 1);
        recv.opcode = 128;
        let mut recv_imm = wc(A, 2);
        recv_imm.opcode = 129;
        fq.produce(&recv);
        fq.produce(&wc(A, 3)); // a send of the QP (opcode 0)
        fq.produce(&recv_imm);
        fq.produce(&wc(B, 4));
        assert_eq!(s.drop_qp_completions(A, true), 1, "the send only");
        assert_eq!(poll_all(&mut s), vec![(A, 1), (A, 2), (B, 4)]);
    }

    fn poll_cq_ids(cq: *mut ibv_cq_ex) -> Vec<(u32, u64)> {
        let mut out = vec![MaybeUninit::<ibv_wc>::uninit(); 16];
        // SAFETY: our live fake CQ; room for 16.
        let n = unsafe { crate::cq::poll::poll_cq(cq.cast(), 16, out.as_mut_ptr().cast()) };
        assert!(n >= 0, "poll_cq: {n}");
        out[..n as usize]
            .iter()
            // SAFETY: poll_cq initialised the first n entries.
            .map(|w| unsafe { w.assume_init() })
            .map(|w| (w.qp_num, w.wr_id))
            .collect()
    }

    /// start_poll, next_poll until ENOENT, end_poll through the CQ's callbacks: what the pair saw.
    fn ex_poll_ids(cq: *mut ibv_cq_ex) -> Vec<(u32, u64)> {
        let mut seen = Vec::new();
        // SAFETY: our live fake CQ with its ex callbacks (made with IBV_WC_EX_WITH_QP_NUM).
        unsafe {
            let v = &*cq;
            let mut attr = ibv_poll_cq_attr { comp_mask: 0 };
            if v.start_poll.unwrap()(cq, &mut attr) != 0 {
                return seen;
            }
            loop {
                seen.push((v.read_qp_num.unwrap()(cq), (*cq).wr_id));
                if v.next_poll.unwrap()(cq) != 0 {
                    break;
                }
            }
            v.end_poll.unwrap()(cq);
        }
        seen
    }

    fn free(cq: *mut ibv_cq_ex) {
        // SAFETY: a fake CQ made by fake_rxe_cq*, freed once.
        drop(unsafe { Box::from_raw(cq.cast::<RxeCq>()) });
    }

    #[test]
    fn a_free_cq_is_purged_at_once_and_once_for_one_cq() {
        let (fq, cq) = fake_rxe_cq(IBV_WC_EX_WITH_QP_NUM);
        for &(qp, id) in &[(A, 1), (B, 2), (A, 3)] {
            fq.produce(&wc(qp, id));
        }
        // Send and receive CQ the same: purged once.
        // SAFETY: our live fake CQ; NULL is allowed.
        unsafe { purge_qp_from_cqs(cq.cast(), cq.cast(), A, false) };
        assert_eq!(fq.kernel.consumer_index(), 2, "applied before the call returned");
        // SAFETY: as above.
        let cq_ref = unsafe { RxeCq::from_ptr(cq) }.unwrap();
        assert!(!cq_ref.purge.is_queued() && !cq_ref.lock.is_locked());
        // SAFETY: as above.
        unsafe { purge_qp_from_cqs(core::ptr::null_mut(), cq.cast(), B, false) };
        assert_eq!(fq.kernel.consumer_index(), 3);
        // An empty CQ queues nothing.
        // SAFETY: as above.
        unsafe { purge_qp(cq.cast(), A, false) };
        assert!(!cq_ref.purge.is_queued());
        free(cq);
    }

    #[test]
    fn a_cq_held_by_another_threads_pair_is_purged_by_its_end_poll() {
        let (fq, cq) = fake_rxe_cq(IBV_WC_EX_WITH_QP_NUM);
        for &(qp, id) in &[(A, 1), (B, 2), (A, 3)] {
            fq.produce(&wc(qp, id));
        }
        let addr = cq as usize;
        let (to_poller, poller_rx) = std::sync::mpsc::channel::<()>();
        let (to_main, main_rx) = std::sync::mpsc::channel::<Vec<(u32, u64)>>();
        let poller = std::thread::spawn(move || {
            let cq = addr as *mut ibv_cq_ex;
            let mut attr = ibv_poll_cq_attr { comp_mask: 0 };
            // SAFETY: the live fake CQ of the test, polled by this thread only.
            unsafe {
                let v = &*cq;
                assert_eq!(v.start_poll.unwrap()(cq, &mut attr), 0);
                let first = (v.read_qp_num.unwrap()(cq), (*cq).wr_id);
                to_main.send(vec![first]).unwrap();
                // The reset happens now, while this pair holds the CQ.
                poller_rx.recv().unwrap();
                let mut rest = Vec::new();
                while v.next_poll.unwrap()(cq) == 0 {
                    rest.push((v.read_qp_num.unwrap()(cq), (*cq).wr_id));
                }
                v.end_poll.unwrap()(cq);
                to_main.send(rest).unwrap();
            }
        });
        assert_eq!(main_rx.recv().unwrap(), vec![(A, 1)]);
        // SAFETY: our live fake CQ.
        unsafe { purge_qp(cq.cast(), B, false) };
        // SAFETY: as above.
        let cq_ref = unsafe { RxeCq::from_ptr(cq) }.unwrap();
        assert!(cq_ref.purge.is_queued(), "queued for the holder, not waited for");
        assert_eq!(
            fq.kernel.consumer_index(),
            0,
            "the ring untouched while the pair holds it"
        );
        to_poller.send(()).unwrap();
        // The pair keeps its view of what was there when it opened...
        assert_eq!(main_rx.recv().unwrap(), vec![(B, 2), (A, 3)]);
        poller.join().unwrap();
        // ...and its end_poll applied the purge (nothing left to drop: all consumed).
        assert!(!cq_ref.purge.is_queued());
        assert_eq!(fq.kernel.consumer_index(), 3);
        free(cq);
    }

    #[test]
    fn this_threads_own_open_pair_defers_the_purge_to_its_end_poll() {
        let (fq, cq) = fake_rxe_cq(IBV_WC_EX_WITH_QP_NUM);
        for &(qp, id) in &[(A, 1), (B, 2), (A, 3), (C, 4)] {
            fq.produce(&wc(qp, id));
        }
        let mut attr = ibv_poll_cq_attr { comp_mask: 0 };
        // SAFETY: our live fake CQ, this thread only.
        unsafe {
            let v = &*cq;
            assert_eq!(v.start_poll.unwrap()(cq, &mut attr), 0);
            assert_eq!((*cq).wr_id, 1);
            // Reset a QP of this CQ from inside the pair: no deadlock, no wait.
            purge_qp(cq.cast(), A, false);
            v.end_poll.unwrap()(cq);
        }
        // end_poll consumed (A, 1) and dropped (A, 3).
        assert_eq!(poll_cq_ids(cq), vec![(B, 2), (C, 4)]);
        assert_eq!(fq.kernel.consumer_index(), 4);
        free(cq);
    }

    #[test]
    fn a_busy_cq_drops_the_qps_completions_at_its_next_poll() {
        let (fq, cq) = fake_rxe_cq(IBV_WC_EX_WITH_QP_NUM);
        for &(qp, id) in &[(A, 1), (B, 2), (A, 3)] {
            fq.produce(&wc(qp, id));
        }
        // SAFETY: our live fake CQ.
        let cq_ref = unsafe { RxeCq::from_ptr(cq) }.unwrap();
        // A poll_cq in progress on another thread: the lock is taken.
        cq_ref.lock.acquire_mutex();
        // SAFETY: as above.
        unsafe { purge_qp(cq.cast(), A, false) };
        assert_eq!(fq.kernel.consumer_index(), 0);
        // SAFETY: taken above.
        unsafe { cq_ref.lock.release() };
        // The QP leaves RESET and completes new work before anyone polls: kept.
        fq.produce(&wc(A, 5));
        assert_eq!(ex_poll_ids(cq), vec![(B, 2), (A, 5)]);
        free(cq);
    }

    #[test]
    fn a_thread_domain_cq_is_purged_by_its_own_next_poll_only() {
        let (fq, cq) = fake_rxe_cq_with(IBV_WC_EX_WITH_QP_NUM, QueueLock::unlocked());
        for &(qp, id) in &[(A, 1), (B, 2), (A, 3)] {
            fq.produce(&wc(qp, id));
        }
        let addr = cq as usize;
        // The reset on another thread than the CQ's user: the ring is not touched.
        std::thread::spawn(move || {
            // SAFETY: the live fake CQ of the test.
            unsafe { purge_qp((addr as *mut ibv_cq_ex).cast(), A, false) };
        })
        .join()
        .unwrap();
        assert_eq!(fq.kernel.consumer_index(), 0);
        fq.produce(&wc(A, 4));
        assert_eq!(poll_cq_ids(cq), vec![(B, 2), (A, 4)]);
        // And through start_poll.
        fq.produce(&wc(B, 5));
        fq.produce(&wc(C, 6));
        // SAFETY: the live fake CQ of the test.
        unsafe { purge_qp(cq.cast(), B, false) };
        assert_eq!(ex_poll_ids(cq), vec![(C, 6)]);
        free(cq);
    }

    #[test]
    fn a_poll_that_raced_the_snapshot_is_not_undone() {
        let (fq, mut s) = fake(7);
        for &(qp, id) in &[(A, 1), (B, 2), (A, 3)] {
            fq.produce(&wc(qp, id));
        }
        let (from, end) = (fq.kernel.consumer_index(), fq.kernel.produced());
        // A concurrent poll consumed two before the purge was applied: only (A, 3) is left.
        let mut two = vec![MaybeUninit::<ibv_wc>::uninit(); 2];
        assert_eq!(s.poll(&mut two).unwrap(), 2);
        assert_eq!(s.drop_qp_completions_before(A, false, from, end), 1, "(A, 3)");
        // The QP's later completions (after the snapshot) are never the purge's.
        for id in 4..7 {
            fq.produce(&wc(A, id));
        }
        assert_eq!(
            s.drop_qp_completions_before(A, false, from, end),
            0,
            "consumed up to the snapshot"
        );
        assert_eq!(poll_all(&mut s), vec![(A, 4), (A, 5), (A, 6)]);
        assert_eq!(s.drop_qp_completions_before(A, false, from, end), 0, "consumed past it");
    }

    #[test]
    fn a_resize_applies_the_queue_to_the_old_ring() {
        let (fq, cq) = fake_rxe_cq(IBV_WC_EX_WITH_QP_NUM);
        fq.produce(&wc(A, 1));
        fq.produce(&wc(B, 2));
        // SAFETY: our live fake CQ.
        let cq_ref = unsafe { RxeCq::from_ptr(cq) }.unwrap();
        cq_ref.lock.acquire_mutex();
        // SAFETY: as above.
        unsafe { purge_qp(cq.cast(), A, false) };
        let bigger = FakeRing::new(7, 15, 4096);
        bigger.produce(&wc(B, 2));
        bigger.produce(&wc(A, 3));
        // SAFETY: the lock is held: the poll state is ours.
        cq_ref.purge.around_resize(unsafe { cq_ref.state_locked() }, |s| {
            assert_eq!(fq.kernel.consumer_index(), 1, "applied to the old ring first");
            s.replace_ring(Some(Consumer::map(bigger.raw_fd(), &bigger.mi, 48).unwrap()));
        });
        // SAFETY: taken above.
        unsafe { cq_ref.lock.release() };
        // The new ring's snapshots come from it.
        // SAFETY: as above.
        unsafe { purge_qp(cq.cast(), A, false) };
        assert_eq!(poll_cq_ids(cq), vec![(B, 2)]);
        free(cq);
    }
}
