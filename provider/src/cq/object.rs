//! Our CQ: the `ibv_cq_ex` libibverbs and the application see, the command
//! fd, the lock and the poll state it protects, and the parent domain.

use core::cell::UnsafeCell;
use core::ffi::c_int;
use core::ptr::{self, addr_of_mut};
use std::os::fd::RawFd;

use kernel_abi::ib_uverbs_wc;
use log::debug;

use super::poll_state::PollState;
use super::purge::PurgeQueue;
use crate::errno::Errno;
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
    pub(super) vcq: UnsafeCell<ibv_cq_ex>,
    pub(super) cmd_fd: RawFd,
    pub(super) lock: QueueLock,
    pub(super) state: UnsafeCell<PollState>,
    /// The purges of QPs reset or destroyed, until a poll applies them.
    pub(super) purge: PurgeQueue,
    /// The parent domain it was created on (`ibv_create_cq_ex` with
    /// `IBV_CQ_INIT_ATTR_MASK_PD`), if any.
    pub(super) domain: DomainUse,
}

impl RxeCq {
    pub(super) fn new(
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
            lock,
            state: UnsafeCell::new(PollState::new(None)),
            purge: PurgeQueue::new(),
            domain: DomainUse::none(),
        }
    }

    /// # Safety
    /// `cq` is NULL or a CQ our `create_cq`/`create_cq_ex` returned and that
    /// is not destroyed (true for every CQ libibverbs passes to our ops).
    pub(super) unsafe fn from_ptr<'a, T>(cq: *mut T) -> Option<&'a RxeCq> {
        // SAFETY: per the contract; vcq is at offset 0 of a live RxeCq.
        unsafe { cq.cast::<RxeCq>().as_ref() }
    }

    pub(super) fn vcq(&self) -> *mut ibv_cq_ex {
        self.vcq.get()
    }

    pub(super) fn handle(&self) -> u32 {
        // SAFETY: handle is written once, before the CQ is handed out.
        unsafe { (*self.vcq()).handle }
    }

    /// Runs `f` on the poll state with the lock held (released on return
    /// and on unwind); EDEADLK inside this thread's `start_poll`.
    #[inline(always)]
    pub(super) fn locked<R>(&self, f: impl FnOnce(&mut PollState) -> R) -> Result<R, Errno> {
        // SAFETY: the lock is held while f runs, so this is the only reference.
        self.lock.with(|| f(unsafe { &mut *self.state.get() }))
    }

    /// [`locked`](Self::locked) when the lock is free now; `None` (nothing run) otherwise
    /// ([`QueueLock::try_with`]).
    #[inline(always)]
    pub(super) fn try_locked<R>(&self, f: impl FnOnce(&mut PollState) -> R) -> Option<R> {
        // SAFETY: the lock is held while f runs, so this is the only reference.
        self.lock.try_with(|| f(unsafe { &mut *self.state.get() }))
    }

    /// # Safety
    /// A pair is open on the lock (between a successful `start_poll` and
    /// `end_poll`, on whichever thread continues it, one at a time, as the
    /// `ibv_cq_ex` API requires), or the caller took the lock for a call.
    #[allow(clippy::mut_from_ref)]
    pub(super) unsafe fn state_locked(&self) -> &mut PollState {
        // SAFETY: per the contract, the lock makes this the only reference.
        unsafe { &mut *self.state.get() }
    }

    /// Publishes the current CQE's `status` and `wr_id` in `ibv_cq_ex`,
    /// where libibverbs' inline readers look for them.
    pub(super) fn set_current(&self, wc: &ib_uverbs_wc) {
        let vcq = self.vcq();
        // SAFETY: vcq is our live ibv_cq_ex; only the poller (holding the
        // lock) writes these fields.
        unsafe {
            addr_of_mut!((*vcq).status).write(wc.status as c_int);
            addr_of_mut!((*vcq).wr_id).write(wc.wr_id);
        }
    }
}

/// Drops `qp_num`'s completions from `cq` (ours, or NULL: nothing): queued,
/// and applied at once if the CQ has a lock and it is free; otherwise by
/// the CQ's next poll entry (see the module docs).
///
/// # Safety
/// `cq` is NULL or a CQ our create made and that is not destroyed (the
/// `send_cq`/`recv_cq` of a live QP of ours: libibverbs keeps a CQ with
/// QPs from being destroyed).
pub(crate) unsafe fn purge_qp(cq: *mut core::ffi::c_void, qp_num: u32, keep_receives: bool) {
    // SAFETY: per the contract.
    let Some(cq) = (unsafe { RxeCq::from_ptr(cq) }) else {
        return;
    };
    if !cq.purge.push(qp_num, keep_receives) {
        return;
    }
    if !cq.lock.try_acquire_now() {
        debug!(
            "QP {qp_num:#x}: CQ {} is in use; its next poll drops the QP's completions",
            cq.handle()
        );
        return;
    }
    // SAFETY: we hold the lock and no pair is open (it would hold the lock):
    // no other reference to the poll state lives.
    let dropped = cq.purge.apply(unsafe { cq.state_locked() });
    // SAFETY: taken just above.
    unsafe { cq.lock.release() };
    debug!(
        "QP {qp_num:#x}: {dropped} of its completions dropped from CQ {}",
        cq.handle()
    );
}

/// `purge_qp` for both CQs of a QP that went to RESET or is destroyed, once
/// if they are one CQ; `has_srq` keeps its receive completions.
///
/// # Safety
/// As for [`purge_qp`], for both.
pub(crate) unsafe fn purge_qp_from_cqs(
    send_cq: *mut core::ffi::c_void,
    recv_cq: *mut core::ffi::c_void,
    qp_num: u32,
    has_srq: bool,
) {
    // SAFETY: per the contract.
    unsafe { purge_qp(recv_cq, qp_num, has_srq) };
    if send_cq != recv_cq {
        // SAFETY: per the contract.
        unsafe { purge_qp(send_cq, qp_num, has_srq) };
    }
}
