//! The state the CQ lock protects: our consumer of the CQ's ring, and the
//! current completion of an `ibv_cq_ex` poll. Pure ring logic, tested on a
//! fake ring.

#![forbid(unsafe_code)]

use core::mem::{size_of, MaybeUninit};

use kernel_abi::ib_uverbs_wc;
use zerocopy::FromZeros;

use crate::errno::Errno;
use crate::libibverbs::cq::ibv_wc;
use crate::ring::{Consumer, ConsumerOf};

/// Asserts that each field sits at the same offset in both structs.
macro_rules! same_offsets {
    ($a:ty, $b:ty: $($field:ident),+ $(,)?) => {
        $(assert!(core::mem::offset_of!($a, $field) == core::mem::offset_of!($b, $field));)+
    };
}

// `ibv_wc` is the kernel's `ib_uverbs_wc` with C enums for status and
// opcode: the same fields at the same offsets, so poll_cq copies a CQE to
// the caller whole, as the ibv_wc it is (any bits are one: `FromBytes`), as
// the stock provider's memcpy does. (The kernel's
// port_num and reserved bytes land in ibv_wc's tail padding.)
const _: () = {
    assert!(size_of::<ibv_wc>() == size_of::<ib_uverbs_wc>());
    same_offsets!(ibv_wc, ib_uverbs_wc:
        status, opcode, vendor_err, byte_len, ex, qp_num, src_qp, wc_flags, pkey_index, slid, sl, dlid_path_bits);
};

/// What the CQ lock protects.
pub(crate) struct PollState {
    /// `None` only after a resize whose new ring could not be mapped: the
    /// kernel has switched rings, so polling fails from then on.
    pub(crate) ring: Option<ConsumerOf<ibv_wc>>,
    /// Our consumer index. Read from the ring once, when it is mapped; the
    /// shared copy is only for the kernel.
    pub(crate) cons: u32,
    /// During an `ibv_cq_ex` poll: the index of `current`.
    pub(crate) cur: u32,
    /// During an `ibv_cq_ex` poll: our copy of the current CQE.
    pub(crate) current: ib_uverbs_wc,
}

impl PollState {
    /// A ring whose slots cannot hold a CQE counts as none (every CQ ring
    /// is mapped with that minimum, so this only states what `poll` relies on).
    pub(crate) fn new(ring: Option<Consumer>) -> PollState {
        let ring = ring.and_then(ConsumerOf::new);
        let cons = ring.as_ref().map_or(0, |r| r.own_index());
        PollState {
            ring,
            cons,
            cur: cons,
            current: ib_uverbs_wc::new_zeroed(),
        }
    }

    fn ring(&self) -> Result<&ConsumerOf<ibv_wc>, Errno> {
        self.ring.as_ref().ok_or(Errno::EIO)
    }

    /// `ibv_poll_cq`: copies up to `out.len()` completions out, oldest first.
    #[inline]
    pub(crate) fn poll(&mut self, out: &mut [MaybeUninit<ibv_wc>]) -> Result<usize, Errno> {
        let ring = self.ring.as_ref().ok_or(Errno::EIO)?;
        let q = ring.indices();
        let prod = ring.kernel_index();
        let mut cons = self.cons;
        let mut n = 0;
        while n < out.len() && cons != prod {
            ring.copy_to(cons, &mut out[n]);
            cons = q.next(cons);
            n += 1;
        }
        if n > 0 {
            self.cons = cons;
            ring.hand_over(cons);
        }
        Ok(n)
    }

    /// `start_poll`: the oldest completion, or ENOENT. Consumes nothing yet.
    pub(crate) fn start(&mut self) -> Result<ib_uverbs_wc, Errno> {
        let ring = self.ring()?;
        if self.cons == ring.kernel_index() {
            return Err(Errno::ENOENT);
        }
        self.current = ring.read_slot(self.cons);
        self.cur = self.cons;
        Ok(self.current)
    }

    /// `next_poll`: the completion after the current one, or ENOENT with the
    /// current one left as it is, so that `end` consumes exactly what was
    /// handed out (upstream's consumer-index overrun was an `end_poll` that
    /// advanced once more after such an ENOENT).
    pub(crate) fn next(&mut self) -> Result<ib_uverbs_wc, Errno> {
        let ring = self.ring()?;
        let next = ring.indices().next(self.cur);
        if next == ring.kernel_index() {
            return Err(Errno::ENOENT);
        }
        self.current = ring.read_slot(next);
        self.cur = next;
        Ok(self.current)
    }

    /// `end_poll`: consumes everything up to and including the current CQE.
    pub(crate) fn end(&mut self) {
        if let Some(ring) = &self.ring {
            self.cons = ring.indices().next(self.cur);
            ring.hand_over(self.cons);
        }
    }

    /// After a resize: the new ring (the kernel copied the unpolled CQEs
    /// into it) or none; the old one is unmapped.
    pub(crate) fn replace_ring(&mut self, ring: Option<Consumer>) {
        *self = PollState::new(ring);
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{assert_wc_is, cqe};
    use super::*;
    use crate::ring::testing::FakeRing;

    /// IB_UVERBS_WC_* / ibv_wc_opcode values rxe completes with.
    const OPCODES: &[u32] = &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 128, 129];

    fn fake_cq(mask: u32) -> (FakeRing, PollState) {
        let fq = FakeRing::new(7, mask, 0);
        let ring = Consumer::map(fq.raw_fd(), &fq.mi, size_of::<ib_uverbs_wc>()).unwrap();
        (fq, PollState::new(Some(ring)))
    }

    fn poll_n(s: &mut PollState, n: usize) -> Vec<ibv_wc> {
        crate::entry::cq::poll_to_vec(s, n).unwrap()
    }

    #[test]
    fn every_opcode_and_status_reaches_ibv_wc_unchanged() {
        let (fq, mut s) = fake_cq(7);
        let mut i = 0;
        for &opcode in OPCODES {
            // IBV_WC_SUCCESS .. IBV_WC_GENERAL_ERR, as rxe reports them.
            for status in 0..=21 {
                let c = cqe(i, opcode, status);
                fq.produce(&c);
                let got = poll_n(&mut s, 4);
                assert_eq!(got.len(), 1);
                assert_wc_is(&got[0], &c);
                i += 1;
            }
        }
    }

    #[test]
    fn poll_takes_at_most_ne_in_order_across_the_wrap() {
        let (fq, mut s) = fake_cq(3);
        let all: Vec<_> = (0..11).map(|i| cqe(i, 0, 0)).collect();
        let mut next = 0;
        let mut seen = Vec::new();
        while seen.len() < all.len() {
            // Fill the ring (capacity 3), then drain it two at a time.
            while next < all.len()
                && !fq
                    .kernel
                    .indices()
                    .is_full(fq.kernel.producer_index(), fq.kernel.consumer_index())
            {
                fq.produce(&all[next]);
                next += 1;
            }
            let got = poll_n(&mut s, 2);
            assert!(!got.is_empty() && got.len() <= 2);
            seen.extend(got.into_iter().map(|w| w.wr_id));
            // The kernel sees the slots handed back.
            assert_eq!(fq.kernel.consumer_index(), s.cons);
        }
        assert_eq!(seen, all.iter().map(|c| c.wr_id).collect::<Vec<_>>());
        assert!(poll_n(&mut s, 2).is_empty());
    }

    #[test]
    fn ex_polling_consumes_exactly_what_it_handed_out() {
        let (fq, mut s) = fake_cq(7);
        assert_eq!(s.start().err(), Some(Errno::ENOENT));
        fq.produce(&cqe(1, 0, 0));
        // start, next (ENOENT), end, start: upstream's overrun sequence.
        assert_eq!(s.start().unwrap().wr_id, cqe(1, 0, 0).wr_id);
        assert_eq!(s.next().err(), Some(Errno::ENOENT));
        s.end();
        assert_eq!(fq.kernel.consumer_index(), 1);
        assert_eq!(s.start().err(), Some(Errno::ENOENT));
        // Three more: start + two nexts + ENOENT, then end consumes all three.
        for i in 2..5 {
            fq.produce(&cqe(i, 128, 0));
        }
        assert_eq!(s.start().unwrap().wr_id, cqe(2, 0, 0).wr_id);
        assert_eq!(s.next().unwrap().wr_id, cqe(3, 0, 0).wr_id);
        assert_eq!(s.next().unwrap().wr_id, cqe(4, 0, 0).wr_id);
        assert_eq!(s.next().err(), Some(Errno::ENOENT));
        s.end();
        assert_eq!((s.cons, fq.kernel.consumer_index()), (4, 4));
        // start then end without next consumes one.
        fq.produce(&cqe(5, 0, 0));
        fq.produce(&cqe(6, 0, 0));
        s.start().unwrap();
        s.end();
        assert_eq!(
            poll_n(&mut s, 8).iter().map(|w| w.wr_id).collect::<Vec<_>>(),
            vec![cqe(6, 0, 0).wr_id]
        );
    }

    #[test]
    fn resize_bookkeeping_follows_the_new_ring() {
        let (fq, mut s) = fake_cq(3);
        fq.produce(&cqe(0, 0, 0));
        fq.produce(&cqe(1, 0, 0));
        assert_eq!(poll_n(&mut s, 1).len(), 1);
        // The kernel's new ring: 8 slots, the unpolled CQE copied to slot 0,
        // and the consumer index where its resize left it.
        let bigger = FakeRing::new(7, 7, 4096);
        bigger.produce(&cqe(1, 0, 0));
        bigger.produce(&cqe(2, 0, 0));
        bigger.kernel.release_consumer(1);
        s.replace_ring(Some(Consumer::map(bigger.raw_fd(), &bigger.mi, 48).unwrap()));
        assert_eq!((s.cons, s.cur), (1, 1));
        assert_eq!(
            poll_n(&mut s, 8).iter().map(|w| w.wr_id).collect::<Vec<_>>(),
            vec![cqe(2, 0, 0).wr_id]
        );
        // A lost ring fails every poll rather than reading stale memory.
        s.replace_ring(None);
        let mut out = [MaybeUninit::uninit(); 1];
        assert_eq!(s.poll(&mut out), Err(Errno::EIO));
        assert_eq!(s.start().err(), Some(Errno::EIO));
        s.end();
        // A ring whose slots cannot hold a CQE is not polled (poll copies whole CQEs).
        let small = FakeRing::new(5, 7, 0);
        s.replace_ring(Some(Consumer::map(small.raw_fd(), &small.mi, 0).unwrap()));
        assert_eq!(s.poll(&mut out), Err(Errno::EIO));
    }
}
