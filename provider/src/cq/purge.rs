//! Dropping a QP's completions from its CQs when the QP goes to RESET, as
//! mlx5 does (`__mlx5_cq_clean`, called from `mlx5_modify_qp`).
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

use kernel_abi::ib_uverbs_wc;
use log::debug;

use super::object::RxeCq;
use super::poll_state::PollState;

impl PollState {
    /// Drops the completions of `qp_num` between our consumer index and the
    /// kernel's producer index, keeping the others in order. Returns how
    /// many were dropped. Not during an `ibv_cq_ex` poll (the caller checks:
    /// `cur` is reset to the new consumer index).
    pub(super) fn drop_qp_completions(&mut self, qp_num: u32) -> u32 {
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
            if wc.qp_num == qp_num {
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
/// its lock. Skipped, with a debug line, when this thread is inside an
/// `ibv_cq_ex` poll of that CQ: it holds the lock, and taking it again
/// would deadlock (mlx5 would spin forever on its own lock there).
///
/// # Safety
/// `cq` is NULL or a CQ our create made and that is not destroyed (the
/// `send_cq`/`recv_cq` of a live QP of ours: libibverbs keeps a CQ with
/// QPs from being destroyed).
pub(crate) unsafe fn purge_qp(cq: *mut core::ffi::c_void, qp_num: u32) {
    // SAFETY: per the contract.
    let Some(cq) = (unsafe { RxeCq::from_ptr(cq) }) else {
        return;
    };
    match cq.locked(|s| s.drop_qp_completions(qp_num)) {
        Ok(0) => {}
        Ok(dropped) => debug!(
            "QP {qp_num:#x} reset: {dropped} of its completions dropped from CQ {}",
            cq.handle()
        ),
        Err(_) => debug!("QP {qp_num:#x} reset inside a poll of its CQ: its completions are left there"),
    }
}

/// `purge_qp` for both CQs of a QP that went to RESET, once if they are
/// one CQ. One lock at a time, so there is no lock order to keep.
///
/// # Safety
/// As for [`purge_qp`], for both.
pub(crate) unsafe fn purge_qp_from_cqs(send_cq: *mut core::ffi::c_void, recv_cq: *mut core::ffi::c_void, qp_num: u32) {
    // SAFETY: per the contract.
    unsafe { purge_qp(recv_cq, qp_num) };
    if send_cq != recv_cq {
        // SAFETY: per the contract.
        unsafe { purge_qp(send_cq, qp_num) };
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
        assert_eq!(s.drop_qp_completions(A), 4);
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
        assert_eq!(s.drop_qp_completions(A), 0, "empty ring");
        fq.produce(&wc(B, 1));
        fq.produce(&wc(C, 2));
        assert_eq!(s.drop_qp_completions(A), 0);
        assert_eq!(fq.kernel.consumer_index(), 0, "nothing released when nothing dropped");
        // Everything the QP's.
        let (fq2, mut s2) = fake(3);
        for id in 0..3 {
            fq2.produce(&wc(A, id));
        }
        assert_eq!(s2.drop_qp_completions(A), 3);
        assert!(poll_all(&mut s2).is_empty());
        assert_eq!(fq2.kernel.consumer_index(), 3);
        assert_eq!(poll_all(&mut s), vec![(B, 1), (C, 2)]);
    }

    #[test]
    fn a_ring_lost_to_a_failed_resize_drops_nothing() {
        let mut s = PollState::new(None);
        assert_eq!(s.drop_qp_completions(A), 0);
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
        unsafe { purge_qp(cq.cast(), A) };
        assert_eq!(fq.kernel.consumer_index(), 0);
        assert!(cq_ref.lock.release_held());
        // Send and receive CQ the same: purged once.
        // SAFETY: as above; NULL is allowed.
        unsafe { purge_qp_from_cqs(cq.cast(), cq.cast(), A) };
        assert_eq!(fq.kernel.consumer_index(), 2);
        assert!(!cq_ref.lock.is_locked());
        // SAFETY: as above.
        unsafe { purge_qp_from_cqs(core::ptr::null_mut(), cq.cast(), B) };
        assert_eq!(fq.kernel.consumer_index(), 3);
        // SAFETY: the fake CQ, made by fake_rxe_cq, freed once.
        drop(unsafe { Box::from_raw(cq.cast::<RxeCq>()) });
        let _: *mut ibv_cq_ex = cq;
    }
}
