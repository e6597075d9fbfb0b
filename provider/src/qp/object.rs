//! Our QP: the `verbs_qp` libibverbs sees, the two work queues, the
//! `ibv_wr_*` batch, and the doorbell.

#![forbid(unsafe_code)]

use core::cell::UnsafeCell;
use core::ffi::c_int;
use core::mem::offset_of;
use core::sync::atomic::{AtomicI32, Ordering};
use std::os::fd::RawFd;

use kernel_abi::{ib_uverbs_cmd_hdr, ib_uverbs_post_send, ib_uverbs_post_send_resp, IB_USER_VERBS_CMD_POST_SEND};
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

/// The doorbell's write(): the header, then the body, in one buffer.
#[repr(C)]
#[derive(Clone, Copy, IntoBytes, Immutable)]
struct DoorbellCmd {
    hdr: ib_uverbs_cmd_hdr,
    body: PostSendDoorbell,
}
const DOORBELL_LEN: usize = size_of::<DoorbellCmd>();
const _: () = assert!(DOORBELL_LEN == size_of::<ib_uverbs_cmd_hdr>() + size_of::<PostSendDoorbell>());

/// [`Doorbell::fd`] once the kernel refused a doorbell write() (or any
/// negative value): every doorbell goes by INVOKE_WRITE on the QP's
/// `cmd_fd`.
const BY_IOCTL: RawFd = -1;

/// A QP's post_send doorbell, built once when the QP is created (the
/// command is the same on every post): the whole write() command, the word
/// the kernel writes its response (`bad_wr`, always 0 here) to, and the fd
/// the write goes to.
#[repr(C)]
pub(crate) struct Doorbell {
    cmd: DoorbellCmd,
    /// The context's command fd (never negative), or [`BY_IOCTL`].
    pub(crate) fd: AtomicI32,
    /// Written by the kernel on each doorbell (from any posting thread),
    /// never read.
    resp: UnsafeCell<ib_uverbs_post_send_resp>,
}

impl Doorbell {
    /// Not ringable until [`arm`](Self::arm)ed.
    pub(crate) fn unarmed() -> Doorbell {
        Doorbell {
            cmd: DoorbellCmd {
                hdr: ib_uverbs_cmd_hdr {
                    command: IB_USER_VERBS_CMD_POST_SEND,
                    in_words: (DOORBELL_LEN / 4) as u16,
                    out_words: (size_of::<ib_uverbs_post_send_resp>() / 4) as u16,
                },
                body: PostSendDoorbell {
                    response: 0,
                    qp_handle: 0,
                    wr_count: 0,
                    sge_count: 0,
                    wqe_size: size_of::<ibv_send_wr>() as u32,
                },
            },
            fd: AtomicI32::new(BY_IOCTL),
            resp: UnsafeCell::new(ib_uverbs_post_send_resp { bad_wr: 0 }),
        }
    }

    /// Sets the QP's handle and fd, at the doorbell's final address (the
    /// command carries the address of `resp`). By INVOKE_WRITE from the
    /// start if the process's doorbell write()s are already refused.
    pub(crate) fn arm(&mut self, fd: RawFd, qp_handle: u32) {
        self.cmd.body.qp_handle = qp_handle;
        self.cmd.body.response = self.resp.get() as usize as u64;
        let fd = if command::doorbell_write_refused() {
            BY_IOCTL
        } else {
            fd
        };
        *self.fd.get_mut() = fd;
    }
}

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
    pub doorbell: Doorbell,
}

impl RxeQp {
    pub(crate) fn ibv_qp(&self) -> *mut ibv_qp {
        // From the whole object, not from the `vqp` field: the pointer comes
        // back as the whole RxeQp (from_ibv_qp), so it must be allowed to
        // reach all of it (Stacked Borrows, Miri). vqp, an UnsafeCell, is at
        // offset 0, so writes through it to the ibv_qp stay allowed.
        core::ptr::from_ref(self).cast_mut().cast::<ibv_qp>()
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
/// write() of the QP's prebuilt command, or INVOKE_WRITE once the kernel
/// refused one (a credential change since the device was opened; see
/// [`command::doorbell_by_ioctl`]).
#[inline(always)]
pub(crate) fn ring_doorbell(q: &RxeQp) -> Result<(), Errno> {
    let d = &q.doorbell;
    let fd = d.fd.load(Ordering::Relaxed);
    if fd < 0 {
        return doorbell_by_ioctl(q);
    }
    // fd is the context's command fd, open while the QP lives.
    let n = command::write_fd(fd, d.cmd.as_bytes());
    if n != DOORBELL_LEN as isize {
        return doorbell_not_written(q, n);
    }
    Ok(())
}

/// A doorbell write() that failed (`n` < 0, errno set) or wrote short.
#[cold]
#[inline(never)]
fn doorbell_not_written(q: &RxeQp, n: isize) -> Result<(), Errno> {
    if n >= 0 {
        // The uverbs write handler consumes a command whole or fails it.
        return Err(Errno::EIO);
    }
    match Errno::last_os_error() {
        Errno::EACCES => doorbell_by_ioctl(q),
        e => Err(e),
    }
}

/// The doorbell by INVOKE_WRITE; the QP's later ones too, once the
/// process's doorbells go that way.
#[cold]
#[inline(never)]
fn doorbell_by_ioctl(q: &RxeQp) -> Result<(), Errno> {
    let d = &q.doorbell;
    let rung = command::doorbell_by_ioctl(q.cmd_fd, d.cmd.body);
    if command::doorbell_write_refused() {
        d.fd.store(BY_IOCTL, Ordering::Relaxed);
    }
    rung.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_doorbell_is_post_send_without_work_requests_answered_in_the_doorbell() {
        let mut d = Box::new(Doorbell::unarmed());
        d.arm(7, 0x1234);
        let resp = d.resp.get() as usize as u64;
        let cmd = d.cmd.as_bytes();
        assert_eq!(cmd.len(), 32);
        // The header: POST_SEND, 8 words in (header and body), 1 out (bad_wr).
        assert_eq!(cmd[..4], IB_USER_VERBS_CMD_POST_SEND.to_ne_bytes());
        assert_eq!(cmd[4..8], [8u16.to_ne_bytes(), 1u16.to_ne_bytes()].concat());
        assert_eq!(cmd[8..16], resp.to_ne_bytes());
        assert_eq!(cmd[16..20], 0x1234u32.to_ne_bytes());
        assert_eq!(cmd[20..28], [0; 8], "no work requests, no SGEs");
        assert_eq!(cmd[28..], 128u32.to_ne_bytes(), "wqe_size: sizeof(struct ibv_send_wr)");
    }
}
