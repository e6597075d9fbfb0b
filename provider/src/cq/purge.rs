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

#![forbid(unsafe_code)]

use core::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use kernel_abi::ib_uverbs_wc;
use log::debug;

use super::poll_state::PollState;
use crate::ring::IndexView;

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
        let end = ring.kernel_index();
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
            ring.hand_over(self.cons);
        }
        dropped
    }
}

/// A CQ's purges not yet applied (see the module docs).
pub(crate) struct PurgeQueue {
    /// Something is queued: what a poll entry tests, with the CQ to itself.
    pub(crate) queued: AtomicBool,
    pending: Mutex<Pending>,
}

pub(crate) struct Pending {
    /// The index words of the CQ's ring, for the snapshot. Replaced, under
    /// the mutex, before the ring it points into is unmapped.
    pub(crate) view: Option<IndexView>,
    pub(crate) purges: Vec<Purge>,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Purge {
    pub(crate) qp_num: u32,
    pub(crate) keep_receives: bool,
    /// The consumer index the kernel saw at the snapshot.
    pub(crate) from: u32,
    /// The producer index at the snapshot.
    pub(crate) end: u32,
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

    pub(crate) fn pending(&self) -> MutexGuard<'_, Pending> {
        // A panic while it was held left it consistent (a push or a drain).
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a purge is queued: one load, for the poll entries, which call
    /// [`apply`](Self::apply) when it says so.
    #[inline(always)]
    pub(crate) fn is_queued(&self) -> bool {
        self.queued.load(Ordering::Relaxed)
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
        self.pending().view = state.ring.as_ref().map(|r| r.index_view());
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
        p.view = state.ring.as_ref().map(|r| r.index_view());
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cq::testing::{flush_wc as wc, A, B, C};
    use crate::libibverbs::cq::ibv_wc;
    use crate::ring::testing::FakeRing;
    use crate::ring::Consumer;
    use core::mem::MaybeUninit;

    fn fake(mask: u32) -> (FakeRing, PollState) {
        let fq = FakeRing::new(7, mask, 0);
        let ring = Consumer::map(fq.raw_fd(), &fq.mi, size_of::<ib_uverbs_wc>()).unwrap();
        (fq, PollState::new(Some(ring)))
    }

    fn poll_all(s: &mut PollState) -> Vec<(u32, u64)> {
        let polled = crate::entry::cq::poll_to_vec(s, 64).unwrap();
        polled.iter().map(|w| (w.qp_num, w.wr_id)).collect()
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
}
