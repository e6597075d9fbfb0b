//! The send queue of a QP: its ring mapped and checked, and a legacy work request checked and
//! built into its next slot ([`post_one_send`]), with [`crate::wqe`]'s checks over the view of
//! the caller's request that [`crate::post_raw`] reads.

#![forbid(unsafe_code)]

use core::ffi::c_int;
use std::os::fd::RawFd;

use kernel_abi::mminfo;

use crate::errno::Errno;
use crate::libibverbs::qp::IBV_QPT_UD;
use crate::post_raw::SendWr;
use crate::ring::Producer;
use crate::work_queue::WorkQueue;
use crate::wqe::{SendLimits, WrObjects, SEND_WQE_HEADER};

/// A QP's send queue.
pub(crate) type SendQueue = WorkQueue<SendLimits>;

/// Maps the send ring at `mi` and sizes what a WQE may carry from what the
/// kernel granted (`max_sge`, `max_inline`) and the slots' room.
pub(crate) fn map(fd: RawFd, mi: &mminfo, qp_type: c_int, max_sge: u32, max_inline: u32) -> Result<SendQueue, Errno> {
    let ring = Producer::map(fd, mi, SEND_WQE_HEADER)?;
    let room = ring.geometry().elem_size() - SEND_WQE_HEADER;
    WorkQueue::new(ring, SendLimits::new(qp_type, max_sge, max_inline, room))
}

/// Checks one request and, when it passes, builds it in the next slot.
#[inline(always)]
pub(crate) fn post_one_send(sq: &mut SendQueue, wr: SendWr<'_>) -> Result<(), Errno> {
    if sq.limits.allows_naming_no_object(wr.wr().opcode) {
        // The RC/UC request that names no AH or window, its opcode allowed:
        // built with the objects known to be none, so nothing about them
        // stays live in the loop (fewer registers spilled to the stack).
        return post_one_send_with(sq, wr, &WrObjects::None, true);
    }
    if sq.limits.qp_type == IBV_QPT_UD {
        return post_one_send_ud(sq, wr);
    }
    post_one_send_naming_objects(sq, wr)
}

/// [`post_one_send`] on a UD QP: [`post_one_send_naming_objects`] with the objects known to
/// be a UD destination (or missing), so that the WQE's writers need not ask.
#[inline(never)]
fn post_one_send_ud(sq: &mut SendQueue, wr: SendWr<'_>) -> Result<(), Errno> {
    match wr.objects(IBV_QPT_UD) {
        objects @ WrObjects::Ud(_) => post_one_send_with(sq, wr, &objects, false),
        _ => Err(Errno::EINVAL),
    }
}

/// [`post_one_send`] of a UD request, a window bind, or an opcode the
/// queue does not allow.
#[inline(never)]
fn post_one_send_naming_objects(sq: &mut SendQueue, wr: SendWr<'_>) -> Result<(), Errno> {
    let objects = wr.objects(sq.limits.qp_type);
    post_one_send_with(sq, wr, &objects, false)
}

/// Checks `wr` against the send queue and, when it passes, builds it in the next slot.
/// `objects` is what [`SendWr::objects`] answers for it; `allowed`:
/// [`SendLimits::allows_naming_no_object`] said yes (a constant at each call).
#[inline(always)]
fn post_one_send_with(sq: &mut SendQueue, wr: SendWr<'_>, objects: &WrObjects<'_>, allowed: bool) -> Result<(), Errno> {
    wr.check_for(sq, objects, allowed)?.build(objects)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::libibverbs::qp::*;
    use crate::ring::testing::FakeRing;
    use crate::ring::Producer;
    use crate::wqe::{RecvLimits, RECV_WQE_HEADER};
    use core::ptr;
    use kernel_abi::rxe_send_wqe;

    pub(crate) fn send_queue(fq: &FakeRing, max_sge: u32) -> WorkQueue<SendLimits> {
        let ring = Producer::map(fq.raw_fd(), &fq.mi, SEND_WQE_HEADER).unwrap();
        let payload_room = ring.geometry().elem_size() - SEND_WQE_HEADER;
        WorkQueue::new(ring, SendLimits::new(IBV_QPT_RC, max_sge, 0, payload_room)).unwrap()
    }

    /// A request over `sges`, which the provider only reads: a shared borrow, so that several
    /// requests may point at one list (a `&mut` per request would invalidate the pointers the
    /// earlier ones hold, under Stacked Borrows).
    pub(crate) fn wr(wr_id: u64, opcode: c_int, sges: &[ibv_sge]) -> ibv_send_wr {
        let mut w: ibv_send_wr = crate::libibverbs::runtime::zeroed();
        w.wr_id = wr_id;
        w.opcode = opcode;
        w.sg_list = sges.as_ptr().cast_mut();
        w.num_sge = sges.len() as c_int;
        w
    }

    /// One 8-byte SGE at 0x1000 (lkey 1).
    const ONE_SGE: [ibv_sge; 1] = [ibv_sge {
        addr: 0x1000,
        length: 8,
        lkey: 1,
    }];

    /// `post_one_send` of a request of `opcode` over `sges`.
    fn post(sq: &mut WorkQueue<SendLimits>, wr_id: u64, opcode: c_int, sges: &[ibv_sge]) -> Result<(), Errno> {
        post_one_send(sq, SendWr::over(&wr(wr_id, opcode, sges), sges))
    }

    #[test]
    fn the_ring_fills_up_and_a_refused_request_leaves_no_trace() {
        // 4 slots of 256 bytes: capacity 3.
        let fq = FakeRing::new(8, 3, 0);
        let mut sq = send_queue(&fq, 2);
        for id in 0..3 {
            assert_eq!(post(&mut sq, id, IBV_WR_SEND, &ONE_SGE), Ok(()));
        }
        assert_eq!(post(&mut sq, 3, IBV_WR_SEND, &ONE_SGE), Err(Errno::ENOMEM));
        sq.publish();
        assert_eq!(fq.kernel.produced(), 3);
        let w: rxe_send_wqe = fq.kernel.read_slot(2);
        assert_eq!((w.wr.wr_id, w.dma.length), (2, 8));
        // The kernel consumes two; a bad request is refused without using a slot.
        fq.kernel.release_consumer(2);
        let three = [ibv_sge::default(); 3];
        assert_eq!(post(&mut sq, 9, IBV_WR_SEND, &three), Err(Errno::EINVAL));
        assert_eq!(sq.prod, 3);
        assert_eq!(post(&mut sq, 4, IBV_WR_RDMA_WRITE, &ONE_SGE), Ok(()));
        sq.publish();
        assert_eq!(fq.kernel.produced(), 0); // wrapped
        let w: rxe_send_wqe = fq.kernel.read_slot(3);
        assert_eq!(w.wr.wr_id, 4);
    }

    #[test]
    fn a_queue_made_for_no_work_requests_maps_and_refuses_every_post() {
        // rxe's answer to max_send_wr = 0 (qperf's rc_bw server, the receive
        // side of its RDMA and atomic tests): one slot, index_mask 0.
        let fq = FakeRing::new(8, 0, 0);
        let mut sq = send_queue(&fq, 1);
        assert_eq!(post(&mut sq, 1, IBV_WR_SEND, &ONE_SGE), Err(Errno::ENOMEM));
        sq.publish();
        assert_eq!((sq.prod, fq.kernel.produced()), (0, 0));
    }

    #[test]
    fn a_ring_whose_slots_cannot_hold_a_wqe_header_is_refused() {
        // 64-byte slots: smaller than a send WQE header (208) and a receive one (40) fits.
        let fq = FakeRing::new(6, 3, 0);
        let ring = Producer::map(fq.raw_fd(), &fq.mi, 0).unwrap();
        assert_eq!(
            WorkQueue::new(ring, SendLimits::new(IBV_QPT_RC, 1, 0, 0)).err(),
            Some(Errno::EPROTO)
        );
        let ring = Producer::map(fq.raw_fd(), &fq.mi, 0).unwrap();
        let limits = RecvLimits {
            max_sge: 1,
            payload_room: 64 - RECV_WQE_HEADER,
        };
        assert!(WorkQueue::new(ring, limits).is_ok());
    }

    #[test]
    fn a_null_sge_list_with_entries_is_einval() {
        // (A negative count: entry::qp's tests, which may hand over a request SendWr::over refuses.)
        let fq = FakeRing::new(8, 3, 0);
        let mut sq = send_queue(&fq, 2);
        let mut w = wr(1, IBV_WR_SEND, &[]);
        w.num_sge = 1;
        w.sg_list = ptr::null_mut();
        assert_eq!(post_one_send(&mut sq, SendWr::over(&w, &[])), Err(Errno::EINVAL));
    }
}
