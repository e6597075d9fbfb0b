//! The receive queue of a QP or an SRQ: its ring mapped and checked, and a
//! list of receive requests built into it.

use core::ffi::c_int;
use std::os::fd::RawFd;

use kernel_abi::mminfo;

use crate::boundary::c_slice;
use crate::errno::Errno;
use crate::libibverbs::qp::ibv_recv_wr;
use crate::ring::Producer;
use crate::work_queue::WorkQueue;
use crate::wqe::{self, RecvLimits, RECV_WQE_HEADER, SGE_SIZE};

/// A receive queue (a QP's or an SRQ's).
pub(crate) type RecvQueue = WorkQueue<RecvLimits>;

/// Maps a receive ring at `mi` (fresh, or an SRQ's after a resize) for
/// requests of up to `max_sge` SGEs.
pub(crate) fn map(fd: RawFd, mi: &mminfo, max_sge: u32) -> Result<RecvQueue, Errno> {
    let ring = Producer::map(fd, mi, RECV_WQE_HEADER)?;
    let limits = RecvLimits {
        max_sge,
        payload_room: ring.geometry().elem_size() - RECV_WQE_HEADER,
    };
    WorkQueue::new(ring, limits)
}

/// Posts a list of receive requests into a receive queue or SRQ (held
/// locked by the caller): each is validated whole before its slot is
/// written; the first that fails is refused and returned in `*bad_wr`,
/// those before it are published. No syscall: rxe reads the ring itself.
///
/// # Safety
/// `wr` is a list of live `ibv_recv_wr` whose `sg_list`s have `num_sge`
/// entries; `bad_wr` is writable.
#[inline(always)]
pub(crate) unsafe fn post_recv_list(rq: &mut RecvQueue, wr: *mut ibv_recv_wr, bad_wr: *mut *mut ibv_recv_wr) -> c_int {
    // SAFETY: the caller's live request (not null: the callers return before a null list).
    let w = unsafe { &*wr };
    // The data path's common case, without the list's loop: one request of one SGE, which
    // the queue takes (max_sge and the slot's room), the ring not full.
    if w.next.is_null() && w.num_sge == 1 && !w.sg_list.is_null() && !rq.is_full() {
        let lim = rq.limits;
        if lim.max_sge != 0 && lim.payload_room >= SGE_SIZE {
            // SAFETY: num_sge is 1 (ibv_post_recv contract).
            let sge = unsafe { &*w.sg_list };
            let (hdr, payload) = rq.slot_at(rq.prod);
            wqe::encode_recv(w.wr_id, core::slice::from_ref(sge), sge.length, hdr, payload);
            rq.advance();
            rq.publish();
            return 0;
        }
    }
    // SAFETY: forwarded.
    unsafe { post_recv_list_general(rq, wr, bad_wr) }
}

/// [`post_recv_list`] of a list, or of a request it may refuse.
///
/// # Safety
/// As for [`post_recv_list`].
#[inline(never)]
unsafe fn post_recv_list_general(rq: &mut RecvQueue, wr: *mut ibv_recv_wr, bad_wr: *mut *mut ibv_recv_wr) -> c_int {
    let mut cur = wr;
    let mut rc = 0;
    let mut posted = false;
    while !cur.is_null() {
        // SAFETY: the caller's list of live work requests.
        let w = unsafe { &*cur };
        // SAFETY: sg_list has num_sge entries (ibv_post_recv contract).
        let r = unsafe { c_slice(w.sg_list, w.num_sge) }.and_then(|sges| {
            let length = wqe::validate_recv(sges, &rq.limits)?;
            let (hdr, payload) = rq.next_slot()?;
            wqe::encode_recv(w.wr_id, sges, length, hdr, payload);
            rq.advance();
            Ok(())
        });
        if let Err(e) = r {
            // SAFETY: the caller's out pointer.
            unsafe { *bad_wr = cur };
            rc = e.code();
            break;
        }
        posted = true;
        cur = w.next;
    }
    if posted {
        rq.publish();
    }
    rc
}
