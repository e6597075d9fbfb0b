//! Our QP: the `verbs_qp` libibverbs sees, the two work queues, the
//! `ibv_wr_*` batch, and the doorbell.

use core::cell::UnsafeCell;
use core::ffi::c_int;
use core::mem::offset_of;
use core::ptr::{self, addr_of_mut};
use core::sync::atomic::{AtomicI32, Ordering};
use std::os::fd::RawFd;

use kernel_abi::{ib_uverbs_post_send, ib_uverbs_post_send_resp, IB_USER_VERBS_CMD_POST_SEND};
use zerocopy::{Immutable, IntoBytes};

use super::batch::Batch;
use crate::command::{self, impl_write_cmd};
use crate::errno::Errno;
use crate::libibverbs::control_objects::ibv_qp;
use crate::libibverbs::qp::*;
use crate::pd::DomainUse;
use crate::work_queue::Locked;
use crate::wqe::{RecvLimits, SendLimits};

/// The doorbell: `ib_uverbs_post_send` without work requests (the kernel
/// type has a trailing array of unions, hence this plain twin).
#[repr(C)]
#[derive(Clone, Copy, IntoBytes, Immutable)]
struct PostSendDoorbell {
    response: u64,
    qp_handle: u32,
    wr_count: u32,
    sge_count: u32,
    wqe_size: u32,
}
const _: () = assert!(size_of::<PostSendDoorbell>() == size_of::<ib_uverbs_post_send>());
const _: () = assert!(offset_of!(PostSendDoorbell, wqe_size) == offset_of!(ib_uverbs_post_send, wqe_size));

impl_write_cmd!(PostSendDoorbell, IB_USER_VERBS_CMD_POST_SEND, ib_uverbs_post_send_resp);

/// Our QP. `vqp` must stay first: libibverbs hands its `ibv_qp` back to us.
#[repr(C)]
pub(crate) struct RxeQp {
    pub vqp: UnsafeCell<VerbsQp>,
    pub qp_type: c_int,
    pub cmd_fd: RawFd,
    /// The release-dependent offsets of `verbs_qp`.
    pub layout: QpExLayout,
    pub sq: Option<Locked<SendLimits>>,
    /// `None` when the QP receives through an SRQ.
    pub rq: Option<Locked<RecvLimits>>,
    /// The `ibv_wr_*` batch in progress, guarded by the `sq` lock.
    pub batch: UnsafeCell<Batch>,
    /// The parent domain it was created on, if any.
    pub domain: DomainUse,
}

// SAFETY: the queue state is only touched under its lock; the libibverbs
// part is shared with C exactly as the stock provider's is.
unsafe impl Sync for RxeQp {}

impl RxeQp {
    /// # Safety
    /// `qp` is an `ibv_qp` our create_qp made and not yet destroyed.
    pub(crate) unsafe fn from_ibv_qp<'a>(qp: *mut ibv_qp) -> Option<&'a RxeQp> {
        // SAFETY: ibv_qp is at offset 0 of VerbsQp, which is at offset 0 of RxeQp.
        unsafe { qp.cast::<RxeQp>().as_ref() }
    }

    pub(crate) fn ibv_qp(&self) -> *mut ibv_qp {
        // From the whole object, not from the `vqp` field: the pointer comes
        // back as the whole RxeQp (from_ibv_qp), so it must be allowed to
        // reach all of it (Stacked Borrows, Miri). vqp, an UnsafeCell, is at
        // offset 0, so writes through it to the ibv_qp stay allowed.
        core::ptr::from_ref(self).cast_mut().cast::<ibv_qp>()
    }

    /// The handle the kernel gave the QP (written once, before publication).
    pub(crate) fn handle(&self) -> u32 {
        // SAFETY: handle is set at creation and never written again.
        unsafe { ptr::read(addr_of_mut!((*self.ibv_qp()).handle)) }
    }

    /// The QP's state as libibverbs last recorded it (`ibv_modify_qp` stores
    /// it after our `modify_qp` returns, from whichever thread). An atomic
    /// load: posting threads read it while another thread may be storing it.
    pub(crate) fn state(&self) -> c_int {
        // SAFETY: `state` is a live, 4-aligned C int of our QP (an enum
        // ibv_qp_state); libibverbs' store to it is a plain aligned int
        // store, which no reader can see torn, and the load is atomic.
        unsafe { AtomicI32::from_ptr(addr_of_mut!((*self.ibv_qp()).state)) }.load(Ordering::Relaxed)
    }
}

const _: () = assert!(offset_of!(RxeQp, vqp) == 0);

/// Whether rxe takes send work now: from RTS on (the kernel's requester
/// refuses a doorbell before, with `EINVAL`). Checked before publishing,
/// so a refused batch leaves nothing in the ring to run later.
pub(crate) fn sq_accepts_posts(q: &RxeQp) -> bool {
    !matches!(q.state(), IBV_QPS_RESET | IBV_QPS_INIT | IBV_QPS_RTR)
}

/// POST_SEND without work requests: rxe's requester then runs the ring. A
/// write(), or INVOKE_WRITE once the kernel refused one (a credential change
/// since the device was opened; see [`command::write_cmd_doorbell`]).
#[inline]
pub(crate) fn ring_doorbell(q: &RxeQp) -> Result<(), Errno> {
    let cmd = PostSendDoorbell {
        response: 0,
        qp_handle: q.handle(),
        wr_count: 0,
        sge_count: 0,
        wqe_size: size_of::<ibv_send_wr>() as u32,
    };
    command::write_cmd_doorbell(q.cmd_fd, cmd).map(|_| ())
}
