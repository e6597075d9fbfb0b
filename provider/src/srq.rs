//! Shared receive queues: `create_srq`, `create_srq_ex`, `modify_srq`,
//! `query_srq`, `destroy_srq` and `post_srq_recv`.
//!
//! An SRQ is an rxe receive ring like a QP's: the kernel creates it (legacy
//! `CREATE_SRQ` write; rxe answers with the ring's mmap info), we map it, and
//! `post_srq_recv` builds receive WQEs in place and publishes the producer
//! index, without a syscall, under one lock per SRQ. Resizing (`IBV_SRQ_MAX_WR`)
//! makes rxe build a new ring, copy the pending WQEs over and write the new
//! mmap info to the address in `rxe_modify_srq_cmd`; we remap under the lock.
//!
//! The SRQ limit event: arming is `modify_srq` with `IBV_SRQ_LIMIT`, the
//! kernel raises `IBV_EVENT_SRQ_LIMIT_REACHED` on the async fd with the
//! `user_handle` we gave at creation, which is the `ibv_srq` address:
//! libibverbs' `ibv_get_async_event` hands that back as `element.srq` and
//! `ibv_ack_async_event` counts `events_completed` under the SRQ's
//! mutex/cond, which is why `destroy_srq` waits for the kernel's
//! `events_reported` as `ibv_cmd_destroy_srq` does. libibverbs' per-provider
//! `async_event` hook has nothing to do for rxe (the stock provider leaves it
//! unset too).
//!
//! The C entries and the raw access to the `ibv_srq` are in `entry::srq`.

#![forbid(unsafe_code)]

use core::cell::UnsafeCell;
use core::ffi::c_int;
use core::mem::offset_of;
use core::sync::atomic::{AtomicBool, Ordering};
use std::os::fd::RawFd;

use kernel_abi::{
    ib_uverbs_create_srq, ib_uverbs_create_srq_resp, ib_uverbs_destroy_srq, ib_uverbs_destroy_srq_resp,
    ib_uverbs_modify_srq, ib_uverbs_query_srq, ib_uverbs_query_srq_resp, rxe_create_srq_resp, rxe_modify_srq_cmd,
    IB_USER_VERBS_CMD_CREATE_SRQ, IB_USER_VERBS_CMD_DESTROY_SRQ, IB_USER_VERBS_CMD_MODIFY_SRQ,
    IB_USER_VERBS_CMD_QUERY_SRQ,
};
use log::debug;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::command::{self, impl_write_cmd, WriteReq};
use crate::errno::Errno;
use crate::libibverbs::control_objects::ibv_pd;
use crate::libibverbs::device_context::ibv_context;
use crate::libibverbs::srq::*;
use crate::lifecycle::Creating;
use crate::lock::QueueLock;
use crate::pd::DomainUse;
use crate::recv_queue;
use crate::work_queue::Locked;
use crate::wqe::RecvLimits;

/// Legacy `CREATE_SRQ` response: the core part, then rxe's ring info.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct CreateSrqResp {
    pub core: ib_uverbs_create_srq_resp,
    pub drv: rxe_create_srq_resp,
}

impl_write_cmd!(ib_uverbs_create_srq, IB_USER_VERBS_CMD_CREATE_SRQ, CreateSrqResp, core: ib_uverbs_create_srq_resp);

/// Legacy `MODIFY_SRQ`: the core body, then rxe's driver part with the
/// address the kernel writes the resized ring's mmap info to.
#[repr(C)]
#[derive(IntoBytes, Immutable)]
pub(crate) struct ModifySrqCmd {
    core: ib_uverbs_modify_srq,
    drv: rxe_modify_srq_cmd,
}

impl WriteReq for ModifySrqCmd {
    const ID: u32 = IB_USER_VERBS_CMD_MODIFY_SRQ;
    const CORE_REQ: usize = core::mem::size_of::<ib_uverbs_modify_srq>();
}

impl_write_cmd!(
    ib_uverbs_query_srq,
    IB_USER_VERBS_CMD_QUERY_SRQ,
    ib_uverbs_query_srq_resp
);

impl_write_cmd!(
    ib_uverbs_destroy_srq,
    IB_USER_VERBS_CMD_DESTROY_SRQ,
    ib_uverbs_destroy_srq_resp
);

/// Our SRQ. `vsrq` must stay first: libibverbs hands its `ibv_srq` back.
#[repr(C)]
pub(crate) struct RxeSrq {
    pub(crate) vsrq: UnsafeCell<verbs_srq>,
    pub(crate) cmd_fd: RawFd,
    /// The kernel's handle, as `vsrq.srq.handle` has it: both written once,
    /// before the SRQ is handed out.
    handle: u32,
    /// `None` only while the SRQ is being created.
    pub(crate) rq: Option<Locked<RecvLimits>>,
    /// Set when a resize succeeded in the kernel but the new ring could not
    /// be mapped: the old mapping is still ours, but nothing posted there
    /// would ever be seen, so posts are refused from then on.
    pub(crate) lost: AtomicBool,
    /// The parent domain it was created on, if any.
    domain: DomainUse,
}
const _: () = assert!(offset_of!(RxeSrq, vsrq) == 0);

impl RxeSrq {
    pub(crate) fn ibv_srq(&self) -> *mut ibv_srq {
        self.vsrq.get().cast::<ibv_srq>()
    }

    /// An SRQ on `rq` as create_srq leaves it, for the tests' fake rings.
    #[cfg(test)]
    pub(crate) fn fake(rq: recv_queue::RecvQueue, lock: QueueLock) -> Box<RxeSrq> {
        Box::new(RxeSrq {
            vsrq: UnsafeCell::new(verbs_srq::default()),
            cmd_fd: -1,
            handle: 0,
            rq: Some(Locked::new(rq, lock)),
            lost: AtomicBool::new(false),
            domain: DomainUse::none(),
        })
    }

    /// The `ibv_srq` libibverbs hands back to us.
    #[cfg(test)]
    pub(crate) fn as_ibv_srq(&self) -> *mut ibv_srq {
        self.ibv_srq()
    }

    /// The kernel's handle.
    pub(crate) fn handle(&self) -> u32 {
        self.handle
    }
}

/// What a create request says, from `ibv_srq_init_attr` or its `_ex`, with the raw pointers
/// the entry was given (stored in the SRQ, not followed) and what it read through them.
pub(crate) struct CreateArgs {
    pub(crate) context: *mut ibv_context,
    /// The context's command fd.
    pub(crate) fd: RawFd,
    pub(crate) pd: *mut ibv_pd,
    pub(crate) pd_handle: u32,
    pub(crate) srq_context: *mut core::ffi::c_void,
    pub(crate) attr: ibv_srq_attr,
    pub(crate) cq: *mut crate::libibverbs::cq::ibv_cq,
}

/// Creates a basic SRQ on the PD the entry resolved (`domain`, `lock`); returns it and the
/// attributes the kernel granted.
pub(crate) fn create(
    args: &CreateArgs,
    domain: DomainUse,
    lock: QueueLock,
) -> Result<(*mut ibv_srq, ibv_srq_attr), Errno> {
    let fd = args.fd;
    let vsrq = verbs_srq {
        srq_type: IBV_SRQT_BASIC,
        cq: args.cq,
        ..Default::default()
    };
    // The ring is filled in once the kernel answered; the box gives the
    // ibv_srq its final address first, for user_handle.
    let obj = RxeSrq {
        vsrq: UnsafeCell::new(vsrq),
        cmd_fd: fd,
        handle: 0,
        rq: None,
        lost: AtomicBool::new(false),
        domain,
    };
    let mut srq = Creating::new(obj, "SRQ", fd, |fd, handle| destroy_kernel_srq(fd, handle).map(|_| ()))?;
    let ibsrq = srq.get_mut().ibv_srq();
    let cmd = ib_uverbs_create_srq {
        response: 0,
        user_handle: ibsrq as usize as u64,
        pd_handle: args.pd_handle,
        max_wr: args.attr.max_wr,
        max_sge: args.attr.max_sge,
        srq_limit: args.attr.srq_limit,
        driver_data: [],
    };
    let resp = command::write_cmd(fd, cmd)?;
    srq.created(resp.core.srq_handle);
    let rq = recv_queue::map(fd, &resp.drv.mi, resp.core.max_sge)?;
    let obj = srq.get_mut();
    obj.rq = Some(Locked::new(rq, lock));
    obj.handle = resp.core.srq_handle;
    let vsrq = obj.vsrq.get_mut();
    vsrq.srq_num = resp.core.srqn;
    let s = &mut vsrq.srq;
    s.context = args.context;
    s.srq_context = args.srq_context;
    s.pd = args.pd;
    s.handle = resp.core.srq_handle;
    s.events_completed = 0;
    // Fresh, as pthread_mutex_init and pthread_cond_init with default
    // attributes leave them, before anyone else sees the SRQ.
    s.mutex = libc::PTHREAD_MUTEX_INITIALIZER;
    s.cond = libc::PTHREAD_COND_INITIALIZER;
    debug!("created SRQ {:#x}, handle {}", resp.core.srqn, resp.core.srq_handle);
    let granted = ibv_srq_attr {
        max_wr: resp.core.max_wr,
        max_sge: resp.core.max_sge,
        srq_limit: args.attr.srq_limit,
    };
    Ok((srq.finish().as_ptr().cast::<ibv_srq>(), granted))
}

/// Checks `ibv_srq_init_attr_ex` as `ibv_cmd_create_srq_ex` does; rxe has
/// basic SRQs only (no XRC domains, no tag matching): `EOPNOTSUPP`.
pub(crate) fn check_create_ex(a: &ibv_srq_init_attr_ex) -> Result<(), Errno> {
    if a.comp_mask >= IBV_SRQ_INIT_ATTR_RESERVED {
        return Err(Errno::EOPNOTSUPP);
    }
    if a.comp_mask & IBV_SRQ_INIT_ATTR_PD == 0 || a.pd.is_null() {
        return Err(Errno::EINVAL);
    }
    let basic = a.comp_mask & IBV_SRQ_INIT_ATTR_TYPE == 0 || a.srq_type == IBV_SRQT_BASIC;
    if !basic || a.comp_mask & (IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_TM) != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    Ok(())
}

/// The `MODIFY_SRQ` command for `attr`/`mask`, with `mi` as the address
/// the kernel writes a resized ring's mmap info to.
pub(crate) fn modify_cmd(handle: u32, a: &ibv_srq_attr, mask: c_int, mi: u64) -> ModifySrqCmd {
    ModifySrqCmd {
        core: ib_uverbs_modify_srq {
            srq_handle: handle,
            attr_mask: mask as u32,
            max_wr: a.max_wr,
            srq_limit: a.srq_limit,
            driver_data: [],
        },
        drv: rxe_modify_srq_cmd { mmap_info_addr: mi },
    }
}

impl RxeSrq {
    /// `modify_srq`: resize (`IBV_SRQ_MAX_WR`, under the SRQ lock as rxe copies
    /// the pending WQEs into the new ring) and/or arm the limit (`IBV_SRQ_LIMIT`).
    pub(crate) fn modify(&self, a: &ibv_srq_attr, mask: c_int) -> Result<(), Errno> {
        if mask & IBV_SRQ_MAX_WR == 0 {
            return self.modify_in_kernel(a, mask).map(|_| ());
        }
        let Some(rq) = &self.rq else {
            return Err(Errno::EINVAL);
        };
        rq.with(|wq| {
            let mi = self.modify_in_kernel(a, mask)?;
            match recv_queue::map(self.cmd_fd, &mi, wq.limits.max_sge) {
                Ok(new) => {
                    // Drops (unmaps) the old ring: the kernel moved every
                    // pending WQE into the new one.
                    *wq = new;
                    Ok(())
                }
                Err(e) => {
                    self.lost.store(true, Ordering::Relaxed);
                    Err(e)
                }
            }
        })
        .and_then(|modified| modified)
    }

    /// `query_srq`: the attributes the kernel reports.
    pub(crate) fn query(&self) -> Result<ibv_srq_attr, Errno> {
        let r = command::write_cmd(
            self.cmd_fd,
            ib_uverbs_query_srq {
                response: 0,
                srq_handle: self.handle(),
                reserved: 0,
                driver_data: [],
            },
        )?;
        Ok(ibv_srq_attr {
            max_wr: r.max_wr,
            max_sge: r.max_sge,
            srq_limit: r.srq_limit,
        })
    }
}

/// The kernel's `DESTROY_SRQ`: the undo of a create and the first step of
/// `destroy_srq`.
pub(crate) fn destroy_kernel_srq(fd: RawFd, handle: u32) -> Result<ib_uverbs_destroy_srq_resp, Errno> {
    command::write_cmd(
        fd,
        ib_uverbs_destroy_srq {
            response: 0,
            srq_handle: handle,
            reserved: 0,
        },
    )
}

// The test-only re-export after it stays out of the import graph (tests/module-graph).
#[allow(clippy::items_after_test_module)]
#[cfg(test)]
pub(crate) mod tests {
    use core::ptr;

    use super::*;

    #[test]
    fn create_ex_takes_basic_srqs_only() {
        let mut pd = ibv_pd {
            context: ptr::null_mut(),
            handle: 0,
        };
        let mut a = ibv_srq_init_attr_ex {
            srq_context: ptr::null_mut(),
            attr: ibv_srq_attr::default(),
            comp_mask: IBV_SRQ_INIT_ATTR_PD,
            srq_type: 0,
            pd: &mut pd,
            xrcd: ptr::null_mut(),
            cq: ptr::null_mut(),
            tm_cap: ibv_tm_cap::default(),
        };
        assert_eq!(check_create_ex(&a), Ok(()));
        a.comp_mask |= IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_CQ;
        assert_eq!(check_create_ex(&a), Ok(()));
        a.srq_type = 1; // XRC
        assert_eq!(check_create_ex(&a), Err(Errno::EOPNOTSUPP));
        a.srq_type = IBV_SRQT_BASIC;
        a.comp_mask |= IBV_SRQ_INIT_ATTR_RESERVED;
        assert_eq!(check_create_ex(&a), Err(Errno::EOPNOTSUPP));
        a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE;
        assert_eq!(check_create_ex(&a), Err(Errno::EINVAL));
    }

    #[test]
    fn modify_carries_the_mmap_info_address() {
        let a = ibv_srq_attr {
            max_wr: 64,
            max_sge: 1,
            srq_limit: 10,
        };
        let c = modify_cmd(5, &a, IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT, 0xabcd_0000);
        let b = c.as_bytes();
        assert_eq!(b.len(), 24);
        assert_eq!(u32::from_ne_bytes(b[0..4].try_into().unwrap()), 5);
        assert_eq!(u32::from_ne_bytes(b[4..8].try_into().unwrap()), 3);
        assert_eq!(u32::from_ne_bytes(b[8..12].try_into().unwrap()), 64);
        assert_eq!(u32::from_ne_bytes(b[12..16].try_into().unwrap()), 10);
        assert_eq!(u64::from_ne_bytes(b[16..24].try_into().unwrap()), 0xabcd_0000);
    }

    /// A create on `kernel`'s fd: the error, and the `user_handle` the kernel was given.
    pub(crate) fn create_against_a_deaf_kernel(kernel: &crate::lifecycle::fault::DeafKernel) -> (Errno, u64) {
        let mut pd = crate::pd::RxePd::protection(ptr::null_mut(), 1);
        let args = CreateArgs {
            context: ptr::null_mut(),
            fd: kernel.fd(),
            pd: ptr::from_mut(&mut pd).cast(),
            pd_handle: 1,
            srq_context: ptr::null_mut(),
            attr: ibv_srq_attr {
                max_wr: 4,
                max_sge: 1,
                srq_limit: 0,
            },
            cq: ptr::null_mut(),
        };
        let err = create(&args, DomainUse::none(), QueueLock::new()).err().unwrap();
        (
            err,
            kernel.first_body_u64(offset_of!(ib_uverbs_create_srq, user_handle)),
        )
    }

    #[test]
    fn a_failed_create_whose_undo_succeeds_frees_the_srq() {
        let kernel = crate::lifecycle::fault::DeafKernel::new();
        let (err, _) = create_against_a_deaf_kernel(&kernel);
        assert_eq!(err, Errno::EPROTO);
        assert!(crate::lifecycle::fault::take_leaked().is_empty());
        let hdr = size_of::<kernel_abi::ib_uverbs_cmd_hdr>();
        let create_len = hdr + size_of::<ib_uverbs_create_srq>();
        let w = kernel.written();
        assert_eq!(w.len(), create_len + hdr + size_of::<ib_uverbs_destroy_srq>());
        assert_eq!(
            u32::from_ne_bytes(w[create_len..create_len + 4].try_into().unwrap()),
            IB_USER_VERBS_CMD_DESTROY_SRQ
        );
    }
}
