//! The control verbs of a CQ: create (legacy and extended), destroy,
//! `req_notify_cq` and `resize_cq`, and the kernel commands they issue. The
//! C entries are in `entry::cq`.

#![forbid(unsafe_code)]

use core::ffi::c_int;
use core::mem::size_of;
use std::os::fd::RawFd;

use kernel_abi::{
    ib_uverbs_create_cq, ib_uverbs_create_cq_resp, ib_uverbs_destroy_cq, ib_uverbs_destroy_cq_resp,
    ib_uverbs_ex_create_cq, ib_uverbs_ex_create_cq_resp, ib_uverbs_req_notify_cq, ib_uverbs_resize_cq,
    ib_uverbs_resize_cq_resp, ib_uverbs_wc, mminfo, rxe_create_cq_resp, rxe_resize_cq_resp,
    IB_USER_VERBS_CMD_CREATE_CQ, IB_USER_VERBS_CMD_DESTROY_CQ, IB_USER_VERBS_CMD_REQ_NOTIFY_CQ,
    IB_USER_VERBS_CMD_RESIZE_CQ, IB_USER_VERBS_EX_CMD_CREATE_CQ, IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN,
};
use log::{debug, error};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::command::{self, impl_write_cmd, WriteCmd, WriteExCmd};
use crate::errno::Errno;
use crate::libibverbs::cq::*;
use crate::libibverbs::device_context::ibv_context;
use crate::lifecycle::Creating;
use crate::lock::QueueLock;
use crate::ring::Consumer;

use super::object::RxeCq;
use super::poll::SUPPORTED_WC_FLAGS;
use super::poll_state::PollState;

/// Legacy `CREATE_CQ` response: the core part, then rxe's.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct CreateCqResp {
    pub core: ib_uverbs_create_cq_resp,
    pub drv: rxe_create_cq_resp,
}

/// `RESIZE_CQ` response: the core part, then rxe's.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ResizeCqResp {
    pub core: ib_uverbs_resize_cq_resp,
    pub drv: rxe_resize_cq_resp,
}

impl_write_cmd!(ib_uverbs_create_cq, IB_USER_VERBS_CMD_CREATE_CQ, CreateCqResp, core: ib_uverbs_create_cq_resp);

impl WriteExCmd for ib_uverbs_ex_create_cq {
    const ID: u32 = IB_USER_VERBS_EX_CMD_CREATE_CQ;
    type Resp = ib_uverbs_ex_create_cq_resp;
}

impl_write_cmd!(ib_uverbs_resize_cq, IB_USER_VERBS_CMD_RESIZE_CQ, ResizeCqResp, core: ib_uverbs_resize_cq_resp);

impl_write_cmd!(
    ib_uverbs_destroy_cq,
    IB_USER_VERBS_CMD_DESTROY_CQ,
    ib_uverbs_destroy_cq_resp
);

/// `REQ_NOTIFY_CQ` has no response.
impl WriteCmd for ib_uverbs_req_notify_cq {
    const ID: u32 = IB_USER_VERBS_CMD_REQ_NOTIFY_CQ;
    type Resp = ();
    fn set_response(&mut self, _addr: u64) {}
}

/// The kernel CQ a create made, to undo if the rest fails.
pub(crate) fn destroy_kernel_cq(fd: RawFd, handle: u32) -> Result<ib_uverbs_destroy_cq_resp, Errno> {
    command::write_cmd(
        fd,
        ib_uverbs_destroy_cq {
            response: 0,
            cq_handle: handle,
            reserved: 0,
        },
    )
}

/// What a create response must satisfy: the ring maps and is sane, and the
/// `cqe` the kernel granted is at least what was asked and fits the ring.
fn map_cq_ring(fd: RawFd, mi: &mminfo, asked: u32, granted: u32) -> Result<(Consumer, c_int), Errno> {
    let ring = Consumer::map(fd, mi, size_of::<ib_uverbs_wc>())?;
    if granted < asked || granted > ring.indices().capacity() {
        debug!(
            "CQ: kernel granted {granted} CQEs for {asked} on a ring of {}",
            ring.indices().capacity()
        );
        return Err(Errno::EPROTO);
    }
    let cqe = c_int::try_from(granted).map_err(|_| Errno::EPROTO)?;
    Ok((ring, cqe))
}

/// What a create asks for, with the raw pointers the entry was given (stored in the CQ, not
/// followed) and what the entry read through them.
pub(crate) struct CreateArgs {
    pub(crate) context: *mut ibv_context,
    /// The context's command fd.
    pub(crate) fd: RawFd,
    pub(crate) channel: *mut ibv_comp_channel,
    /// The channel's fd, or -1 without one.
    pub(crate) comp_channel: c_int,
    pub(crate) cqe: c_int,
    pub(crate) comp_vector: c_int,
}

/// Creates the CQ: the kernel object (legacy command, or the extended one
/// with `ex_flags`), then the mapping. Any failure after the kernel object
/// exists destroys it again.
pub(crate) fn create(args: &CreateArgs, ex_flags: Option<u32>, lock: QueueLock) -> Result<Creating<RxeCq>, Errno> {
    let (fd, comp_channel, comp_vector) = (args.fd, args.comp_channel, args.comp_vector);
    let mut cq = Creating::new(
        RxeCq::new(args.context, args.channel, fd, lock),
        "CQ",
        fd,
        |fd, handle| destroy_kernel_cq(fd, handle).map(|_| ()),
    )?;
    // The kernel hands this back in completion events (ibv_get_cq_event).
    let user_handle = cq.get_mut().vcq() as u64;
    // The C library passes these ints through as u32; so do we, and the
    // kernel rejects what is out of range.
    let asked = args.cqe as u32;

    let (handle, granted, mi) = match ex_flags {
        None => {
            let cmd = ib_uverbs_create_cq {
                response: 0,
                user_handle,
                cqe: asked,
                comp_vector: comp_vector as u32,
                comp_channel,
                reserved: 0,
                driver_data: [],
            };
            let r = command::write_cmd(fd, cmd)?;
            (r.core.cq_handle, r.core.cqe, r.drv.mi)
        }
        Some(flags) => {
            let cmd = ib_uverbs_ex_create_cq {
                user_handle,
                cqe: asked,
                comp_vector: comp_vector as u32,
                comp_channel,
                comp_mask: 0,
                flags,
                reserved: 0,
            };
            let (core, drv) = command::write_ex_cmd_drv::<_, rxe_create_cq_resp>(fd, cmd)?;
            if (core.response_length as usize) < size_of::<ib_uverbs_create_cq_resp>() {
                // Without the core part we do not even know the handle; the
                // kernel always writes it, so this cannot leak in practice.
                return Err(Errno::EPROTO);
            }
            (core.base.cq_handle, core.base.cqe, drv.mi)
        }
    };

    cq.created(handle);
    let (ring, cqe) = map_cq_ring(fd, &mi, asked, granted)?;
    let c = cq.get_mut();
    c.handle = handle;
    let vcq = c.vcq.get_mut();
    vcq.handle = handle;
    vcq.cqe = cqe;
    *c.state.get_mut() = PollState::new(Some(ring));
    c.purge.ring_changed(c.state.get_mut());
    Ok(cq)
}

/// The kernel's create flags for `ibv_cq_init_attr_ex`, as
/// `ibv_cmd_create_cq_ex` derives them; or the errno to fail with.
pub(crate) fn ex_create_flags(attr: &ibv_cq_init_attr_ex) -> Result<u32, Errno> {
    if attr.wc_flags & !SUPPORTED_WC_FLAGS != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    if attr.comp_mask & !(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD) != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    let mut flags = 0;
    if attr.comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS != 0 && attr.flags & IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN != 0 {
        flags |= IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN;
    }
    Ok(flags)
}

/// Whether the application asked for a CQ it uses from one thread at a time
/// (`IBV_CREATE_CQ_ATTR_SINGLE_THREADED`): the stock provider locks anyway;
/// mlx5 takes no lock, and neither do we.
pub(crate) fn single_threaded(attr: &ibv_cq_init_attr_ex) -> bool {
    attr.comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS != 0 && attr.flags & IBV_CREATE_CQ_ATTR_SINGLE_THREADED != 0
}

impl RxeCq {
    /// `req_notify_cq`: arms the CQ for its next (solicited) completion event, with the
    /// `REQ_NOTIFY_CQ` write as the stock provider's `ibv_cmd_req_notify_cq` issues it.
    pub(crate) fn req_notify(&self, solicited_only: bool) -> Result<(), Errno> {
        let cmd = ib_uverbs_req_notify_cq {
            cq_handle: self.handle(),
            solicited_only: u32::from(solicited_only),
        };
        command::write_cmd(self.cmd_fd, cmd)
    }

    /// `resize_cq`. The kernel moves the unpolled CQEs into a new ring; we
    /// map it in place of the old one with the lock held, so no poller sees
    /// the switch half-done. 0 or the errno.
    pub(crate) fn resize(&self, cqe: c_int) -> c_int {
        let asked = cqe as u32;
        self.locked(|state| {
            // Queued purges first: their snapshots are of this ring.
            self.purge.around_resize(state, |state| {
                // Our consumer index is already in the shared page (every poll
                // stores it), which is where the kernel reads it from to copy.
                let cmd = ib_uverbs_resize_cq {
                    response: 0,
                    cq_handle: self.handle(),
                    cqe: asked,
                    driver_data: [],
                };
                let resp = match command::write_cmd(self.cmd_fd, cmd) {
                    Ok(resp) => resp,
                    Err(errno) => return errno.code(),
                };
                match map_cq_ring(self.cmd_fd, &resp.drv.mi, asked, resp.core.cqe) {
                    Ok((ring, cqe)) => {
                        state.replace_ring(Some(ring));
                        self.set_cqe(cqe);
                        0
                    }
                    Err(errno) => {
                        // The old ring is dead (the kernel writes only the new
                        // one): polling must fail rather than read stale CQEs.
                        error!(
                            "CQ {}: resized, but the new ring is unusable (errno {errno})",
                            self.handle()
                        );
                        state.replace_ring(None);
                        errno.code()
                    }
                }
            })
        })
        .unwrap_or_else(Errno::code)
    }
}

#[cfg(test)]
mod tests {
    use core::ptr;

    use super::*;
    use crate::ring::testing::FakeRing;

    #[test]
    fn create_responses_are_checked() {
        let fq = FakeRing::new(7, 7, 0);
        assert_eq!(map_cq_ring(fq.raw_fd(), &fq.mi, 5, 7).map(|(_, c)| c).ok(), Some(7));
        // Fewer than asked, more than the ring holds.
        assert_eq!(map_cq_ring(fq.raw_fd(), &fq.mi, 8, 7).err(), Some(Errno::EPROTO));
        assert_eq!(map_cq_ring(fq.raw_fd(), &fq.mi, 1, 8).err(), Some(Errno::EPROTO));
        // Slots too small for a CQE.
        let small = FakeRing::new(5, 7, 0);
        assert_eq!(map_cq_ring(small.raw_fd(), &small.mi, 1, 7).err(), Some(Errno::EPROTO));
    }

    fn init_attr(wc_flags: u64, comp_mask: u32, flags: u32) -> ibv_cq_init_attr_ex {
        ibv_cq_init_attr_ex {
            cqe: 4,
            cq_context: ptr::null_mut(),
            channel: ptr::null_mut(),
            comp_vector: 0,
            wc_flags,
            comp_mask,
            flags,
            parent_domain: ptr::null_mut(),
        }
    }

    #[test]
    fn create_cq_ex_attributes_as_stock_checks_them() {
        assert_eq!(ex_create_flags(&init_attr(SUPPORTED_WC_FLAGS, 0, 0)), Ok(0));
        for unsupported in [
            IBV_WC_EX_WITH_COMPLETION_TIMESTAMP,
            IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK,
            1 << 8,
        ] {
            assert_eq!(ex_create_flags(&init_attr(unsupported, 0, 0)), Err(Errno::EOPNOTSUPP));
        }
        assert_eq!(ex_create_flags(&init_attr(0, 1 << 2, 0)), Err(Errno::EOPNOTSUPP));
        let overrun = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN | IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
        assert_eq!(
            ex_create_flags(&init_attr(0, IBV_CQ_INIT_ATTR_MASK_FLAGS, overrun)),
            Ok(IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN)
        );
        // Flags count only with their comp_mask bit.
        assert_eq!(ex_create_flags(&init_attr(0, IBV_CQ_INIT_ATTR_MASK_PD, overrun)), Ok(0));
        // SINGLE_THREADED is ours to honour (no lock), with its comp_mask bit only.
        assert!(single_threaded(&init_attr(0, IBV_CQ_INIT_ATTR_MASK_FLAGS, overrun)));
        assert!(!single_threaded(&init_attr(0, IBV_CQ_INIT_ATTR_MASK_PD, overrun)));
        assert!(!single_threaded(&init_attr(
            0,
            IBV_CQ_INIT_ATTR_MASK_FLAGS,
            IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN
        )));
    }

    #[test]
    fn create_fails_with_an_errno_without_a_kernel() {
        // A command fd that is not a uverbs file: the command fails before the
        // kernel object exists, and the CQ is freed.
        let args = CreateArgs {
            context: ptr::null_mut(),
            fd: -1,
            channel: ptr::null_mut(),
            comp_channel: -1,
            cqe: 4,
            comp_vector: 0,
        };
        assert_eq!(create(&args, None, QueueLock::new()).err(), Some(Errno::EBADF));
        assert_eq!(create(&args, Some(0), QueueLock::new()).err(), Some(Errno::EBADF));
    }
}
