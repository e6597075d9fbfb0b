//! The send queue of a QP: its ring mapped and checked, and one legacy
//! work request ([`ibv_send_wr`]) checked and built into the next slot
//! ([`crate::wqe`] validates and encodes).

use core::ffi::c_int;
use std::os::fd::RawFd;

use kernel_abi::mminfo;

use crate::ah::RxeAh;
use crate::errno::Errno;
use crate::libibverbs::qp::*;
use crate::ring::Producer;
use crate::work_queue::WorkQueue;
use crate::wqe::{self, MwBind, SendLimits, UdDest, WrObjects, SEND_WQE_HEADER};

/// A QP's send queue.
pub(crate) type SendQueue = WorkQueue<SendLimits>;

/// Maps the send ring at `mi` and sizes what a WQE may carry from what the
/// kernel granted (`max_sge`, `max_inline`) and the slots' room.
pub(crate) fn map(fd: RawFd, mi: &mminfo, qp_type: c_int, max_sge: u32, max_inline: u32) -> Result<SendQueue, Errno> {
    let ring = Producer::map(fd, mi, SEND_WQE_HEADER)?;
    let room = ring.geometry().elem_size() - SEND_WQE_HEADER;
    WorkQueue::new(ring, SendLimits::new(qp_type, max_sge, max_inline, room))
}

/// What the provider objects a legacy request points at mean for its WQE:
/// for a UD QP the AH (with the request's QPN and Q_Key), for BIND_MW the
/// window and the MR. Only those pointers are read, each for its case.
///
/// # Safety
/// `wr` is a live work request whose AH (UD) and MW/MR (BIND_MW) pointers
/// are objects of ours or null.
unsafe fn wr_objects(wr: &ibv_send_wr, qp_type: c_int) -> WrObjects<'_> {
    if qp_type == IBV_QPT_UD {
        // SAFETY: the ud arm, for a UD QP; the AH is one our create_ah made
        // (RxeAh begins with its ibv_ah) or null.
        let u = unsafe { &wr.wr.ud };
        // SAFETY: as above: the AH is ours or null.
        let ah = unsafe { u.ah.cast::<RxeAh>().as_ref() };
        return match ah {
            Some(ah) => WrObjects::Ud(UdDest {
                remote_qpn: u.remote_qpn,
                remote_qkey: u.remote_qkey,
                ah_num: ah.ah_num,
                av: &ah.av,
            }),
            None => WrObjects::Missing,
        };
    }
    if wr.opcode != IBV_WR_BIND_MW {
        return WrObjects::None;
    }
    // SAFETY: the bind_mw arm for BIND_MW; the MW is ours or null, the MR is
    // ours or null (an unbind, length 0, needs none).
    unsafe {
        let b = &wr.ext.bind_mw;
        let mr = b.bind_info.mr.as_ref();
        match b.mw.as_ref() {
            Some(mw) if mr.is_some() || b.bind_info.length == 0 => WrObjects::Bind(MwBind {
                addr: b.bind_info.addr,
                length: b.bind_info.length,
                mr_lkey: mr.map_or(0, |mr| mr.lkey),
                mw_rkey: mw.rkey,
                new_rkey: b.rkey,
                access: b.bind_info.mw_access_flags,
            }),
            _ => WrObjects::Missing,
        }
    }
}

/// Checks one request and, when it passes, builds it in the next slot.
///
/// # Safety
/// As for [`wr_objects`]; `sg_list` has `num_sge` entries, and with
/// `IBV_SEND_INLINE` the SGEs describe readable memory.
#[inline]
pub(crate) unsafe fn post_one_send(sq: &mut SendQueue, wr: &ibv_send_wr) -> Result<(), Errno> {
    if sq.limits.allows_naming_no_object(wr.opcode) {
        // The RC/UC request that names no AH or window, its opcode allowed:
        // built with the objects known to be none, so nothing about them
        // stays live in the loop (fewer registers spilled to the stack).
        // SAFETY: forwarded; wr_objects would have answered None.
        return unsafe { post_one_send_with(sq, wr, &WrObjects::None, true) };
    }
    if sq.limits.qp_type == IBV_QPT_UD {
        // SAFETY: forwarded.
        return unsafe { post_one_send_ud(sq, wr) };
    }
    // SAFETY: forwarded.
    unsafe { post_one_send_naming_objects(sq, wr) }
}

/// [`post_one_send`] on a UD QP: [`post_one_send_naming_objects`] with the objects known to
/// be a UD destination (or missing), so that the WQE's writers need not ask.
///
/// # Safety
/// As for [`post_one_send`].
#[inline(never)]
unsafe fn post_one_send_ud(sq: &mut SendQueue, wr: &ibv_send_wr) -> Result<(), Errno> {
    // SAFETY: forwarded (a UD QP).
    match unsafe { wr_objects(wr, IBV_QPT_UD) } {
        // SAFETY: forwarded.
        objects @ WrObjects::Ud(_) => unsafe { post_one_send_with(sq, wr, &objects, false) },
        _ => Err(Errno::EINVAL),
    }
}

/// [`post_one_send`] of a UD request, a window bind, or an opcode the
/// queue does not allow.
///
/// # Safety
/// As for [`post_one_send`].
#[inline(never)]
unsafe fn post_one_send_naming_objects(sq: &mut SendQueue, wr: &ibv_send_wr) -> Result<(), Errno> {
    // SAFETY: forwarded.
    let objects = unsafe { wr_objects(wr, sq.limits.qp_type) };
    // SAFETY: forwarded.
    unsafe { post_one_send_with(sq, wr, &objects, false) }
}

/// # Safety
/// As for [`post_one_send`]; `objects` is what [`wr_objects`] answers for `wr`;
/// `allowed`: [`SendLimits::allows_naming_no_object`](crate::wqe::SendLimits::allows_naming_no_object)
/// said yes (a constant at each call).
#[inline(always)]
unsafe fn post_one_send_with(
    sq: &mut SendQueue,
    wr: &ibv_send_wr,
    objects: &WrObjects<'_>,
    allowed: bool,
) -> Result<(), Errno> {
    // SAFETY: forwarded.
    let sges = unsafe { wqe::send_sges(wr, &sq.limits) }?;
    let length = if allowed {
        wqe::check_allowed_send(wr, sges, &sq.limits)?
    } else {
        wqe::check_send(wr, sges, objects, &sq.limits)?
    };
    let slot = sq.prod_slot_ptr();
    if sq.is_full() {
        return Err(Errno::ENOMEM);
    }
    // SAFETY: the slot of `prod`, the ring not full: unpublished, ours.
    let (hdr, payload) = unsafe { sq.slot_parts(slot) };
    // SAFETY: checked above; inline sources per the contract.
    unsafe { wqe::encode_send(wr, sges, length, objects, hdr, payload) };
    sq.advance();
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ring::testing::FakeRing;
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
        // SAFETY: plain C data.
        let mut w: ibv_send_wr = unsafe { core::mem::zeroed() };
        w.wr_id = wr_id;
        w.opcode = opcode;
        w.sg_list = sges.as_ptr().cast_mut();
        w.num_sge = sges.len() as c_int;
        w
    }

    #[test]
    fn the_ring_fills_up_and_a_refused_request_leaves_no_trace() {
        // 4 slots of 256 bytes: capacity 3.
        let fq = FakeRing::new(8, 3, 0);
        let mut sq = send_queue(&fq, 2);
        let sges = [ibv_sge {
            addr: 0x1000,
            length: 8,
            lkey: 1,
        }];
        for id in 0..3 {
            // SAFETY: no inline data, no AH or MW.
            let posted = unsafe { post_one_send(&mut sq, &wr(id, IBV_WR_SEND, &sges)) };
            assert_eq!(posted, Ok(()));
        }
        // SAFETY: as above.
        let posted = unsafe { post_one_send(&mut sq, &wr(3, IBV_WR_SEND, &sges)) };
        assert_eq!(posted, Err(Errno::ENOMEM));
        sq.publish();
        assert_eq!(fq.kernel.produced(), 3);
        let w: rxe_send_wqe = fq.kernel.read_slot(2);
        assert_eq!((w.wr.wr_id, w.dma.length), (2, 8));
        // The kernel consumes two; a bad request is refused without using a slot.
        fq.kernel.release_consumer(2);
        let three = [ibv_sge::default(); 3];
        // SAFETY: as above.
        let posted = unsafe { post_one_send(&mut sq, &wr(9, IBV_WR_SEND, &three)) };
        assert_eq!(posted, Err(Errno::EINVAL));
        assert_eq!(sq.prod, 3);
        // SAFETY: as above.
        let posted = unsafe { post_one_send(&mut sq, &wr(4, IBV_WR_RDMA_WRITE, &sges)) };
        assert_eq!(posted, Ok(()));
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
        let sges = [ibv_sge {
            addr: 0x1000,
            length: 8,
            lkey: 1,
        }];
        // SAFETY: no inline data, no AH or MW.
        let posted = unsafe { post_one_send(&mut sq, &wr(1, IBV_WR_SEND, &sges)) };
        assert_eq!(posted, Err(Errno::ENOMEM));
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
    fn a_negative_sge_count_is_einval() {
        let fq = FakeRing::new(8, 3, 0);
        let mut sq = send_queue(&fq, 2);
        let mut w = wr(1, IBV_WR_SEND, &[]);
        w.num_sge = -1;
        // SAFETY: refused before any pointer is read.
        assert_eq!(unsafe { post_one_send(&mut sq, &w) }, Err(Errno::EINVAL));
        w.num_sge = 1;
        w.sg_list = ptr::null_mut();
        // SAFETY: as above.
        assert_eq!(unsafe { post_one_send(&mut sq, &w) }, Err(Errno::EINVAL));
    }
}
