//! The send queue of a QP: its ring mapped and checked. A legacy work request is checked and
//! built into its next slot by `post_one_send` (in [`crate::entry::qp`]: it reads the caller's
//! request), with [`crate::wqe`]'s checks and writers.

#![forbid(unsafe_code)]

use core::ffi::c_int;
use std::os::fd::RawFd;

use kernel_abi::mminfo;

use crate::entry::qp::{post_one_send_with, SendWr};
use crate::errno::Errno;
use crate::libibverbs::qp::IBV_QPT_UD;
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
#[inline]
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
