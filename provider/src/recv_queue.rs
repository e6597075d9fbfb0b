//! The receive queue of a QP or an SRQ: its ring mapped and checked, and a
//! list of receive requests built into it.

#![forbid(unsafe_code)]

use std::os::fd::RawFd;

use kernel_abi::mminfo;

use crate::errno::Errno;
use crate::ring::Producer;
use crate::work_queue::WorkQueue;
use crate::wqe::{RecvLimits, RECV_WQE_HEADER};

/// Posts a list of receive requests into a receive queue or SRQ (raw: the caller's
/// `ibv_recv_wr` list).
pub(crate) use crate::entry::qp::post_recv_list;

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
