//! Dropping a QP's completions from its CQs when the QP goes to RESET or is
//! destroyed, as mlx5 does (`__mlx5_cq_clean`, from `mlx5_modify_qp` and
//! `mlx5_destroy_qp`).
//!
//! rdma_rxe leaves a QP's completions in its CQs across RESET (and so does
//! the stock rxe provider). A QP moved ERR → RESET → RTS then hands the
//! application, on its first poll, the flushed completions of work it
//! posted before the reset, which pyverbs' `test_mr_rereg_pd` (and any
//! application that recycles QPs) takes for a failure of the new work.
//!
//! The slots between our consumer index and the kernel's producer index
//! are ours until we release them: the kernel writes only from its producer
//! on. So, under the CQ's lock, with a snapshot of the producer: sweep from
//! the newest completion back to the oldest, drop those of the QP, move
//! each other one up by the number dropped so far (towards the producer, so
//! the other QPs' completions keep their order), then release the freed
//! slots by advancing our consumer index past them. Completions the kernel
//! writes meanwhile lie beyond the snapshot and are left alone; none of
//! them are the QP's, which is in RESET once the modify returned.
//!
//! Two things are never dropped:
//! - the receive completions of a QP that receives through an SRQ: each
//!   carries an SRQ buffer the application posted, and rxe cannot take a
//!   consumed SRQ entry back (mlx5 frees the WQE back into its SRQ), so the
//!   application must still see them to get its buffers back;
//! - anything while the CQ's lock is not free at once (a poll in progress on
//!   any thread): the purge never waits for a CQ lock, since the caller may
//!   be inside another CQ's poll (two threads, each resetting a QP of the
//!   CQ the other polls, would deadlock). It is skipped, with a debug line,
//!   and those completions stay, as with the stock provider.

use kernel_abi::ib_uverbs_wc;
use log::debug;

use super::object::RxeCq;
use super::poll_state::PollState;

impl PollState {
    /// Drops the completions of `qp_num` between our consumer index and the
    /// kernel's producer index, keeping the others in order, and the QP's
    /// receive completions too when `keep_receives` (it receives through an
    /// SRQ). Returns how many were dropped. Not during an `ibv_cq_ex` poll
    /// (the caller checks: `cur` is reset to the new consumer index).
    pub(crate) fn drop_qp_completions(&mut self, qp_num: u32, keep_receives: bool) -> u32 {
        let Some(ring) = &self.ring else {
            return 0;
        };
        let q = ring.indices();
        let cons = self.cons;
        let used = q.used(ring.produced(), cons);
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

/// Drops `qp_num`'s completions from `cq` (ours, or NULL: nothing), under
/// its lock if that comes free at once; skipped otherwise (see the module
/// docs).
///
/// # Safety
/// `cq` is NULL or a CQ our create made and that is not destroyed (the
/// `send_cq`/`recv_cq` of a live QP of ours: libibverbs keeps a CQ with
/// QPs from being destroyed).
pub(crate) unsafe fn purge_qp(cq: *mut core::ffi::c_void, qp_num: u32, keep_receives: bool) {
    // SAFETY: per the contract.
    let Some(cq) = (unsafe { RxeCq::from_ptr(cq) }) else {
        return;
    };
    if !cq.lock.try_acquire_briefly() {
        debug!(
            "QP {qp_num:#x}: CQ {} is being polled; its completions are left there",
            cq.handle()
        );
        return;
    }
    // SAFETY: we hold the lock; no other reference to the poll state lives.
    let dropped = unsafe { cq.state_locked() }.drop_qp_completions(qp_num, keep_receives);
    // SAFETY: taken just above.
    unsafe { cq.lock.release() };
    if dropped > 0 {
        debug!(
            "QP {qp_num:#x}: {dropped} of its completions dropped from CQ {}",
            cq.handle()
        );
    }
}

/// `purge_qp` for both CQs of a QP that went to RESET or is destroyed, once
/// if they are one CQ; `has_srq` keeps its receive completions. One lock at
/// a time, and none waited for.
///
/// # Safety
/// As for [`purge_qp`], for both.
pub(crate) unsafe fn purge_qp_from_cqs(
    send_cq: *mut core::ffi::c_void,
    recv_cq: *mut core::ffi::c_void,
    qp_num: u32,
    has_srq: bool,
) {
    // SAFETY: per the contract.
    unsafe { purge_qp(recv_cq, qp_num, has_srq) };
    if send_cq != recv_cq {
        // SAFETY: per the contract.
        unsafe { purge_qp(send_cq, qp_num, has_srq) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cq::testing::fake_rxe_cq;
    use crate::ring::testing::FakeRing;
    use crate::ring::Consumer;
    use core::mem::MaybeUninit;
    use zerocopy::FromZeros;

    use crate::libibverbs::cq::{ibv_cq_ex, ibv_wc};

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

    #[test]
    fn purge_never_waits_for_a_cq_lock() {
        let (fq, cq) = fake_rxe_cq(0);
        fq.produce(&wc(A, 1));
        // SAFETY: our live fake CQ.
        let cq_ref = unsafe { RxeCq::from_ptr(cq) }.unwrap();
        let addr = cq as usize;
        // Another thread's poll is open on the CQ: skipped at once, not waited for.
        std::thread::spawn(move || {
            // SAFETY: the live fake CQ of the test.
            let c = unsafe { RxeCq::from_ptr(addr as *mut ibv_cq_ex) }.unwrap();
            c.lock.hold().unwrap();
        })
        .join()
        .unwrap();
        // SAFETY: as above.
        unsafe { purge_qp(cq.cast(), A, false) };
        assert_eq!(fq.kernel.consumer_index(), 0);
        assert!(cq_ref.lock.release_held());
        // SAFETY: as above.
        unsafe { purge_qp(cq.cast(), A, false) };
        assert_eq!(fq.kernel.consumer_index(), 1);
        // SAFETY: the fake CQ, made by fake_rxe_cq, freed once.
        drop(unsafe { Box::from_raw(cq.cast::<RxeCq>()) });
    }

    #[test]
    fn purge_takes_the_cq_lock_and_skips_a_cq_this_thread_is_polling() {
        let (fq, cq) = fake_rxe_cq(0);
        for &(qp, id) in &[(A, 1), (B, 2), (A, 3)] {
            fq.produce(&wc(qp, id));
        }
        // SAFETY: our live fake CQ.
        let cq_ref = unsafe { RxeCq::from_ptr(cq) }.unwrap();
        // Inside an ibv_cq_ex poll on this thread: left alone, no deadlock.
        cq_ref.lock.hold().unwrap();
        // SAFETY: as above.
        unsafe { purge_qp(cq.cast(), A, false) };
        assert_eq!(fq.kernel.consumer_index(), 0);
        assert!(cq_ref.lock.release_held());
        // Send and receive CQ the same: purged once.
        // SAFETY: as above; NULL is allowed.
        unsafe { purge_qp_from_cqs(cq.cast(), cq.cast(), A, false) };
        assert_eq!(fq.kernel.consumer_index(), 2);
        assert!(!cq_ref.lock.is_locked());
        // SAFETY: as above.
        unsafe { purge_qp_from_cqs(core::ptr::null_mut(), cq.cast(), B, false) };
        assert_eq!(fq.kernel.consumer_index(), 3);
        // SAFETY: the fake CQ, made by fake_rxe_cq, freed once.
        drop(unsafe { Box::from_raw(cq.cast::<RxeCq>()) });
        let _: *mut ibv_cq_ex = cq;
    }
}
