//! Completion queues: [`object`] (our CQ, `RxeCq`), [`control`] (`create_cq`,
//! `create_cq_ex`, `destroy_cq`, `req_notify_cq`, `resize_cq`), and apart
//! the poll paths: [`poll`] (`poll_cq` and the `ibv_cq_ex` API) over
//! [`poll_state`] (the ring consumer the CQ lock protects); [`purge`] drops a
//! QP's completions.
//!
//! The kernel writes completions (`ib_uverbs_wc` at the start of each slot)
//! into the CQ's ring, our [`Consumer`](crate::ring::Consumer); we copy each
//! one out once and advance our consumer index. As in the stock provider one
//! lock per CQ ([`QueueLock`](crate::lock::QueueLock)) serializes pollers.
//!
//! What libibverbs expects of the `ibv_cq` we return: `context`, `handle`
//! and `cqe` filled as `ibv_cmd_create_cq` fills them; `verbs_init_cq` then
//! sets `channel` (and its refcount), `cq_context`, the event counters and
//! `mutex`/`cond`, which we also give valid initial values. `destroy_cq`
//! waits, as `ibv_cmd_destroy_cq` does, until the application acked every
//! event the kernel reported. Completion events need no `cq_event` hook (the
//! stock provider has none either).
//!
//! The C entries (the verbs ops and the `ibv_cq_ex` callbacks) and the raw
//! access to the `ibv_cq_ex` are in `entry::cq`.

#![forbid(unsafe_code)]

pub(crate) mod control;
pub(crate) mod object;
pub(crate) mod poll;
pub(crate) mod poll_state;
pub(crate) mod purge;

#[cfg(test)]
pub(crate) use object::RxeCq;

#[cfg(test)]
pub(crate) mod testing {
    use core::ptr;

    use super::object::RxeCq;
    use super::poll_state::PollState;
    use crate::entry::cq::set_ex_callbacks;
    use crate::libibverbs::cq::*;
    use crate::lock::QueueLock;
    use crate::ring::testing::FakeRing;
    use crate::ring::Consumer;
    use kernel_abi::ib_uverbs_wc;
    use kernel_abi::ib_uverbs_wc_ex;
    use zerocopy::FromZeros;

    /// Three QP numbers the purge tests flush completions of.
    pub(crate) const A: u32 = 0x11;
    pub(crate) const B: u32 = 0x22;
    pub(crate) const C: u32 = 0x33;

    /// A flushed completion (IBV_WC_WR_FLUSH_ERR) of `wr_id` on `qp_num`.
    pub(crate) fn flush_wc(qp_num: u32, wr_id: u64) -> ib_uverbs_wc {
        let mut c = ib_uverbs_wc::new_zeroed();
        c.qp_num = qp_num;
        c.wr_id = wr_id;
        c.status = 5; // IBV_WC_WR_FLUSH_ERR
        c
    }

    /// A CQ as create_cq leaves it, on a fake ring of 8 slots (the
    /// `FakeRing` plays the kernel), with the callbacks for `wc_flags`.
    /// Free it with `Box::from_raw(cq.cast::<RxeCq>())`.
    pub(crate) fn fake_rxe_cq(wc_flags: u64) -> (FakeRing, *mut ibv_cq_ex) {
        fake_rxe_cq_with(wc_flags, QueueLock::new())
    }

    /// [`fake_rxe_cq`] with `lock` ([`QueueLock::unlocked`]: a CQ on a thread domain).
    pub(crate) fn fake_rxe_cq_with(wc_flags: u64, lock: QueueLock) -> (FakeRing, *mut ibv_cq_ex) {
        let (fq, cq) = fake_cq(wc_flags, lock);
        (fq, Box::into_raw(cq).cast::<ibv_cq_ex>())
    }

    /// [`fake_rxe_cq_with`] as a box, for the safe tests.
    pub(crate) fn fake_cq(wc_flags: u64, lock: QueueLock) -> (FakeRing, Box<RxeCq>) {
        let fq = FakeRing::new(7, 7, 0);
        let mut cq = Box::new(RxeCq::new(ptr::null_mut(), ptr::null_mut(), -1, lock));
        *cq.state.get_mut() = PollState::new(Some(Consumer::map(fq.raw_fd(), &fq.mi, 48).unwrap()));
        cq.purge.ring_changed(cq.state.get_mut());
        set_ex_callbacks(cq.vcq.get_mut(), wc_flags);
        (fq, cq)
    }

    pub(crate) fn cqe(i: u32, opcode: u32, status: u32) -> ib_uverbs_wc {
        let mut c = ib_uverbs_wc::new_zeroed();
        c.wr_id = 0x1000_0000_0000 + u64::from(i);
        c.status = status;
        c.opcode = opcode;
        c.vendor_err = 0x100 + i;
        c.byte_len = 0x2000 + i;
        c.ex = ib_uverbs_wc_ex {
            imm_data: 0xdead_0000 + i,
        };
        c.qp_num = 0x11 + i;
        c.src_qp = 0x22 + i;
        c.wc_flags = i % 16;
        c.pkey_index = 3;
        c.slid = 0x4400 + i as u16;
        c.sl = (i % 16) as u8;
        c.dlid_path_bits = (i % 7) as u8;
        c
    }

    pub(crate) fn assert_wc_is(w: &ibv_wc, c: &ib_uverbs_wc) {
        assert_eq!(w.wr_id, c.wr_id);
        assert_eq!(w.status as u32, c.status);
        assert_eq!(w.opcode as u32, c.opcode);
        assert_eq!(w.vendor_err, c.vendor_err);
        assert_eq!(w.byte_len, c.byte_len);
        assert_eq!(crate::entry::cq::wc_imm_data(w), crate::entry::cq::cqe_imm_data(c));
        assert_eq!((w.qp_num, w.src_qp, w.wc_flags), (c.qp_num, c.src_qp, c.wc_flags));
        assert_eq!(
            (w.pkey_index, w.slid, w.sl, w.dlid_path_bits),
            (c.pkey_index, c.slid, c.sl, c.dlid_path_bits)
        );
    }
}
