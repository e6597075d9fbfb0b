//! Our CQ: the `ibv_cq_ex` libibverbs and the application see, the command
//! fd, the lock and the poll state it protects, and the parent domain. Its
//! raw accessors (the `ibv_cq_ex` fields, the poll state under the lock) are
//! in `entry::cq`.

#![forbid(unsafe_code)]

use core::cell::UnsafeCell;
use core::ptr;
use std::os::fd::RawFd;

use log::debug;

use super::poll_state::PollState;
use super::purge::PurgeQueue;
use crate::libibverbs::cq::*;
use crate::libibverbs::device_context::ibv_context;
use crate::lock::QueueLock;
use crate::pd::DomainUse;

/// Our CQ. `vcq` must stay first: libibverbs and the application hold
/// `ibv_cq *`/`ibv_cq_ex *` pointers to it, and get ours back by casting.
/// It is in an `UnsafeCell` because libibverbs writes some of its fields
/// (event counters, under its mutex) while we hold `&RxeCq`.
#[repr(C)]
pub(crate) struct RxeCq {
    pub(crate) vcq: UnsafeCell<ibv_cq_ex>,
    pub(crate) cmd_fd: RawFd,
    /// The kernel's handle, as `vcq.handle` has it: both written once, before the CQ is
    /// handed out.
    pub(crate) handle: u32,
    pub(crate) lock: QueueLock,
    pub(crate) state: UnsafeCell<PollState>,
    /// The purges of QPs reset or destroyed, until a poll applies them.
    pub(crate) purge: PurgeQueue,
    /// The parent domain it was created on (`ibv_create_cq_ex` with
    /// `IBV_CQ_INIT_ATTR_MASK_PD`), if any.
    pub(crate) domain: DomainUse,
}

impl RxeCq {
    pub(crate) fn new(
        context: *mut ibv_context,
        channel: *mut ibv_comp_channel,
        cmd_fd: RawFd,
        lock: QueueLock,
    ) -> RxeCq {
        RxeCq {
            vcq: UnsafeCell::new(ibv_cq_ex {
                context,
                channel,
                cq_context: ptr::null_mut(),
                handle: 0,
                cqe: 0,
                mutex: libc::PTHREAD_MUTEX_INITIALIZER,
                cond: libc::PTHREAD_COND_INITIALIZER,
                comp_events_completed: 0,
                async_events_completed: 0,
                comp_mask: 0,
                status: 0,
                wr_id: 0,
                start_poll: None,
                next_poll: None,
                end_poll: None,
                read_opcode: None,
                read_vendor_err: None,
                read_byte_len: None,
                read_imm_data: None,
                read_qp_num: None,
                read_src_qp: None,
                read_wc_flags: None,
                read_slid: None,
                read_sl: None,
                read_dlid_path_bits: None,
                read_completion_ts: None,
                read_cvlan: None,
                read_flow_tag: None,
                read_tm_info: None,
                read_completion_wallclock_ns: None,
            }),
            cmd_fd,
            handle: 0,
            lock,
            state: UnsafeCell::new(PollState::new(None)),
            purge: PurgeQueue::new(),
            domain: DomainUse::none(),
        }
    }

    pub(crate) fn vcq(&self) -> *mut ibv_cq_ex {
        self.vcq.get()
    }

    /// The kernel's handle of the CQ.
    pub(crate) fn handle(&self) -> u32 {
        self.handle
    }

    /// Drops `qp_num`'s completions from this CQ: queued, and applied at once if the CQ has a
    /// lock and it is free; otherwise by the CQ's next poll entry (see [`super::purge`]).
    pub(crate) fn purge_qp(&self, qp_num: u32, keep_receives: bool) {
        if !self.purge.push(qp_num, keep_receives) {
            return;
        }
        // No pair is open when the lock is free now (a pair holds it), so the poll state is
        // between polls, as `apply` wants it.
        match self.try_locked_now(|state| self.purge.apply(state)) {
            Some(dropped) => debug!(
                "QP {qp_num:#x}: {dropped} of its completions dropped from CQ {}",
                self.handle()
            ),
            None => debug!(
                "QP {qp_num:#x}: CQ {} is in use; its next poll drops the QP's completions",
                self.handle()
            ),
        }
    }
}

/// [`RxeCq::purge_qp`] for both CQs of a QP that went to RESET or is destroyed, once if they
/// are one CQ; `has_srq` keeps its receive completions.
pub(crate) fn purge_qp_from_both(send_cq: Option<&RxeCq>, recv_cq: Option<&RxeCq>, qp_num: u32, has_srq: bool) {
    if let Some(cq) = recv_cq {
        cq.purge_qp(qp_num, has_srq);
    }
    if let Some(cq) = send_cq {
        if !recv_cq.is_some_and(|r| core::ptr::eq(r, cq)) {
            cq.purge_qp(qp_num, has_srq);
        }
    }
}
