//! The send queue of a QP: its ring mapped and checked. A legacy work request is checked and
//! built into its next slot by `post_one_send` (in [`crate::entry::qp`]: it reads the caller's
//! request), with [`crate::wqe`]'s checks and writers.

#![forbid(unsafe_code)]

use core::ffi::c_int;
use std::os::fd::RawFd;

use kernel_abi::mminfo;

use crate::errno::Errno;
use crate::ring::Producer;
use crate::work_queue::WorkQueue;
use crate::wqe::{SendLimits, SEND_WQE_HEADER};

/// A QP's send queue.
pub(crate) type SendQueue = WorkQueue<SendLimits>;

/// Maps the send ring at `mi` and sizes what a WQE may carry from what the
/// kernel granted (`max_sge`, `max_inline`) and the slots' room.
pub(crate) fn map(fd: RawFd, mi: &mminfo, qp_type: c_int, max_sge: u32, max_inline: u32) -> Result<SendQueue, Errno> {
    let ring = Producer::map(fd, mi, SEND_WQE_HEADER)?;
    let room = ring.geometry().elem_size() - SEND_WQE_HEADER;
    WorkQueue::new(ring, SendLimits::new(qp_type, max_sge, max_inline, room))
}
