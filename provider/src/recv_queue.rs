//! The receive queue of a QP or an SRQ: its ring mapped and checked, and a
//! list of receive requests built into it (the caller's list as
//! [`crate::post_raw`] reads it).

#![forbid(unsafe_code)]

use core::ffi::c_int;
use std::os::fd::RawFd;

use kernel_abi::mminfo;

use crate::errno::Errno;
use crate::libibverbs::qp::ibv_recv_wr;
use crate::post_raw::RecvWr;
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

/// Posts a list of receive requests into a receive queue or SRQ (held locked by the caller):
/// each is validated whole before its slot is written; the first that fails is refused and
/// returned in `*bad_wr`, those before it are published. No syscall: rxe reads the ring itself.
#[inline(always)]
pub(crate) fn post_recv_list(rq: &mut RecvQueue, wr: RecvWr<'_>, bad_wr: &mut *mut ibv_recv_wr) -> c_int {
    // The data path's common case, without the list's loop: one request of one SGE, which
    // the queue takes (max_sge and the slot's room), the ring not full.
    if let Some(sge) = wr.lone_sge().filter(|_| !rq.is_full()) {
        let lim = rq.limits;
        if lim.max_sge != 0 && lim.payload_room >= SGE_SIZE {
            let (hdr, payload) = rq.slot_at(rq.prod);
            wqe::encode_recv(wr.wr_id(), core::slice::from_ref(sge), sge.length, hdr, payload);
            rq.advance();
            rq.publish();
            return 0;
        }
    }
    post_recv_list_general(rq, wr, bad_wr)
}

/// [`post_recv_list`] of a list, or of a request it may refuse.
#[inline(never)]
fn post_recv_list_general(rq: &mut RecvQueue, wr: RecvWr<'_>, bad_wr: &mut *mut ibv_recv_wr) -> c_int {
    let mut cur = Some(wr);
    let mut rc = 0;
    let mut posted = false;
    while let Some(w) = cur {
        let r = w.sges().and_then(|sges| {
            let length = wqe::validate_recv(sges, &rq.limits)?;
            let (hdr, payload) = rq.next_slot()?;
            wqe::encode_recv(w.wr_id(), sges, length, hdr, payload);
            rq.advance();
            Ok(())
        });
        if let Err(e) = r {
            *bad_wr = w.as_ptr();
            rc = e.code();
            break;
        }
        posted = true;
        cur = w.next();
    }
    if posted {
        rq.publish();
    }
    rc
}
