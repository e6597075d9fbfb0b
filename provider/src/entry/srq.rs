//! The C entries of shared receive queues (`create_srq`, `create_srq_ex`,
//! `modify_srq`, `query_srq`, `destroy_srq`, `post_srq_recv`) and the raw
//! access to our SRQ they share. What they do is in `srq`.

use core::ffi::c_int;
use core::ptr::{self, addr_of_mut, NonNull};
use core::sync::atomic::Ordering;

use kernel_abi::{ib_uverbs_destroy_srq_resp, mminfo};

use crate::boundary;
use crate::command;
use crate::context::RxeContext;
use crate::errno::Errno;
use crate::libibverbs::control_objects::ibv_pd;
use crate::libibverbs::device_context::ibv_context;
use crate::libibverbs::qp::ibv_recv_wr;
use crate::libibverbs::srq::*;
use crate::lifecycle;
use crate::pd::{self, DomainUse, RxePd};
use crate::post_raw::RecvWr;
use crate::recv_queue::post_recv_list;
use crate::srq::{self, check_create_ex, destroy_kernel_srq, modify_cmd, CreateArgs, RxeSrq};

// SAFETY: the ring state is only touched under its lock; the libibverbs
// part is shared with C exactly as the stock provider's is.
unsafe impl Sync for RxeSrq {}

impl RxeSrq {
    /// # Safety
    /// `srq` is NULL or an `ibv_srq` our create_srq made and not yet destroyed.
    #[inline(always)]
    unsafe fn from_ibv_srq<'a>(srq: *mut ibv_srq) -> Option<&'a RxeSrq> {
        // SAFETY: ibv_srq is at offset 0 of verbs_srq, at offset 0 of RxeSrq.
        unsafe { srq.cast::<RxeSrq>().as_ref() }
    }

    /// Issues `MODIFY_SRQ`; returns the new ring's mmap info, which the kernel writes to our
    /// memory when it resized (zero otherwise).
    pub(crate) fn modify_in_kernel(&self, a: &ibv_srq_attr, mask: c_int) -> Result<mminfo, Errno> {
        let mut mi = mminfo {
            offset: 0,
            size: 0,
            pad: 0,
        };
        // The cast exposes mi's provenance: the kernel writes it during write().
        let addr = ptr::from_mut(&mut mi) as usize as u64;
        command::write_req(self.cmd_fd, modify_cmd(self.handle(), a, mask, addr))?;
        // SAFETY: mi is a live local the kernel may have written; read it anew.
        Ok(unsafe { ptr::read_volatile(&mi) })
    }
}

/// The SRQ `create_on_pd` made, with what the kernel granted written back
/// into `attr` (as ibv_cmd_create_srq reports it), or NULL with errno set.
fn report_granted(created: Result<(*mut ibv_srq, ibv_srq_attr), Errno>, attr: &mut ibv_srq_attr) -> *mut ibv_srq {
    match created {
        Ok((srq, granted)) => {
            attr.max_wr = granted.max_wr;
            attr.max_sge = granted.max_sge;
            srq
        }
        Err(e) => boundary::fail_ptr(e),
    }
}

/// Creates an SRQ on `args.pd` ([`srq::create`]), with what that takes of the context and
/// the PD; EINVAL for a NULL context or PD.
///
/// # Safety
/// `args.context` is NULL or our live context, `args.pd` NULL or our live PD.
unsafe fn create_on_pd(args: CreateArgs) -> Result<(*mut ibv_srq, ibv_srq_attr), Errno> {
    // SAFETY: per the contract; NULLs refused.
    let (ctx, pd, domain, lock) = unsafe {
        let ctx = RxeContext::from_ibv_context(args.context).ok_or(Errno::EINVAL)?;
        let pd = args.pd.as_ref().ok_or(Errno::EINVAL)?;
        (ctx, pd, DomainUse::of(args.pd), pd::lock_on(RxePd::from_ibv(args.pd)))
    };
    let args = CreateArgs {
        fd: ctx.cmd_fd(),
        pd_handle: pd.handle,
        ..args
    };
    srq::create(&args, domain, lock)
}

/// `create_srq`.
pub(crate) unsafe extern "C" fn create_srq(pd: *mut ibv_pd, attr: *mut ibv_srq_init_attr) -> *mut ibv_srq {
    boundary::guard("create_srq", ptr::null_mut(), || {
        // SAFETY: the caller's PD (ours) and attributes; nulls refused.
        let (Some(p), Some(a)) = (unsafe { (pd.as_ref(), attr.as_mut()) }) else {
            return boundary::fail_ptr(Errno::EINVAL);
        };
        let args = CreateArgs {
            context: p.context,
            fd: -1,
            pd,
            pd_handle: 0,
            srq_context: a.srq_context,
            attr: a.attr,
            cq: ptr::null_mut(),
        };
        // SAFETY: the PD's context is ours, the PD is ours (not NULL).
        report_granted(unsafe { create_on_pd(args) }, &mut a.attr)
    })
}

/// `create_srq_ex`.
pub(crate) unsafe extern "C" fn create_srq_ex(
    context: *mut ibv_context,
    attr: *mut ibv_srq_init_attr_ex,
) -> *mut ibv_srq {
    boundary::guard("create_srq_ex", ptr::null_mut(), || {
        // SAFETY: the caller's attributes; null refused.
        let Some(a) = (unsafe { attr.as_mut() }) else {
            return boundary::fail_ptr(Errno::EINVAL);
        };
        if let Err(e) = check_create_ex(a) {
            return boundary::fail_ptr(e);
        }
        let cq = if a.comp_mask & IBV_SRQ_INIT_ATTR_CQ != 0 {
            a.cq
        } else {
            ptr::null_mut()
        };
        let args = CreateArgs {
            context,
            fd: -1,
            pd: a.pd,
            pd_handle: 0,
            srq_context: a.srq_context,
            attr: a.attr,
            cq,
        };
        // SAFETY: libibverbs passes our context; the PD is the application's PD of ours.
        report_granted(unsafe { create_on_pd(args) }, &mut a.attr)
    })
}

/// `modify_srq` ([`RxeSrq::modify`]).
pub(crate) unsafe extern "C" fn modify_srq(srq: *mut ibv_srq, attr: *mut ibv_srq_attr, mask: c_int) -> c_int {
    boundary::guard("modify_srq", Errno::EIO.code(), || {
        // SAFETY: an SRQ of ours and the caller's attributes; nulls refused.
        let (Some(s), Some(a)) = (unsafe { (RxeSrq::from_ibv_srq(srq), attr.as_ref()) }) else {
            return boundary::fail_code(Errno::EINVAL);
        };
        match s.modify(a, mask) {
            Ok(()) => 0,
            Err(e) => boundary::fail_code(e),
        }
    })
}

/// `query_srq`.
pub(crate) unsafe extern "C" fn query_srq(srq: *mut ibv_srq, attr: *mut ibv_srq_attr) -> c_int {
    boundary::guard("query_srq", Errno::EIO.code(), || {
        // SAFETY: an SRQ of ours and the caller's output; nulls refused.
        let (Some(s), Some(a)) = (unsafe { (RxeSrq::from_ibv_srq(srq), attr.as_mut()) }) else {
            return boundary::fail_code(Errno::EINVAL);
        };
        match s.query() {
            Ok(attr) => {
                *a = attr;
                0
            }
            Err(e) => boundary::fail_code(e),
        }
    })
}

/// `destroy_srq`: waits, as `ibv_cmd_destroy_srq` does, until the
/// application acked every async event reported for it; then unmaps and frees.
pub(crate) unsafe extern "C" fn destroy_srq(srq: *mut ibv_srq) -> c_int {
    boundary::guard("destroy_srq", Errno::EIO.code(), || {
        // SAFETY: an SRQ of ours (null refused).
        let Some(s) = (unsafe { RxeSrq::from_ibv_srq(srq) }) else {
            return boundary::fail_code(Errno::EINVAL);
        };
        let Some(obj) = NonNull::new(srq.cast::<RxeSrq>()) else {
            return boundary::fail_code(Errno::EINVAL);
        };
        let (fd, handle) = (s.cmd_fd, s.handle());
        // SAFETY: made by Creating::finish in create, freed once, after the
        // kernel let the SRQ go; dropping the ring unmaps it. The wait:
        // mutex/cond were initialised at create; libibverbs counts acked
        // events under that mutex (ibv_ack_async_event).
        let destroyed = unsafe {
            lifecycle::destroy(
                obj,
                || destroy_kernel_srq(fd, handle),
                |resp: &ib_uverbs_destroy_srq_resp| {
                    lifecycle::wait_for_async_acks(
                        addr_of_mut!((*srq).mutex),
                        addr_of_mut!((*srq).cond),
                        addr_of_mut!((*srq).events_completed),
                        resp.events_reported,
                    )
                },
            )
        };
        match destroyed {
            Ok(()) => 0,
            Err(e) => boundary::fail_code(e),
        }
    })
}

/// `post_srq_recv`: builds the WQEs in the SRQ ring and advances its
/// producer index; no syscall. The first request that fails is refused
/// whole and returned in `*bad_wr`; those before it are posted.
pub(crate) unsafe extern "C" fn post_srq_recv(
    srq: *mut ibv_srq,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    boundary::guard("post_srq_recv", Errno::EIO.code(), || {
        // SAFETY: libibverbs passes an SRQ of ours, and the caller's out pointer; nulls refused.
        let (Some(s), Some(bad_wr)) = (unsafe { (RxeSrq::from_ibv_srq(srq), bad_wr.as_mut()) }) else {
            return Errno::EINVAL.code();
        };
        *bad_wr = ptr::null_mut();
        let Some(rq) = &s.rq else { return Errno::EINVAL.code() };
        if wr.is_null() {
            return 0;
        }
        rq.with(|rq| {
            if s.lost.load(Ordering::Relaxed) {
                *bad_wr = wr;
                return Errno::EIO.code();
            }
            // SAFETY: the caller's list (not null: returned above), under the ibv_post_srq_recv
            // contract.
            post_recv_list(rq, unsafe { RecvWr::from_caller(wr) }, bad_wr)
        })
        .unwrap_or_else(|e| {
            *bad_wr = wr;
            e.code()
        })
    })
}

#[cfg(test)]
mod tests {
    use kernel_abi::rxe_recv_wqe;

    use super::*;
    use crate::libibverbs::qp::ibv_sge;
    use crate::recv_queue;
    use crate::ring::testing::FakeRing;
    use crate::wqe::RecvLimits;

    fn recv_wr(wr_id: u64, sges: &mut [ibv_sge]) -> ibv_recv_wr {
        ibv_recv_wr {
            wr_id,
            next: ptr::null_mut(),
            sg_list: sges.as_mut_ptr(),
            num_sge: sges.len() as c_int,
        }
    }

    /// `post_recv_list` over the list at `first`: its return and the request `*bad_wr` names.
    ///
    /// # Safety
    /// `first` heads a list of live requests, each with its SGEs.
    unsafe fn post_list(rq: &mut recv_queue::RecvQueue, first: *mut ibv_recv_wr) -> (c_int, *mut ibv_recv_wr) {
        let mut bad = ptr::null_mut();
        // SAFETY: as the caller promises.
        let rc = post_recv_list(rq, unsafe { RecvWr::from_caller(first) }, &mut bad);
        (rc, bad)
    }

    #[test]
    fn a_single_receive_of_one_sge_is_built_whole_and_refused_on_a_full_ring() {
        // 4 slots of 128 bytes: capacity 3.
        let fq = FakeRing::new(7, 3, 0);
        let mut rq = recv_queue::map(fq.raw_fd(), &fq.mi, 1).unwrap();
        let mut sge = [ibv_sge {
            addr: 0x1000,
            length: 24,
            lkey: 7,
        }];
        // SAFETY: every request is a live one on our stack, with its SGEs.
        unsafe {
            for id in 0..3 {
                let mut w = recv_wr(id, &mut sge);
                assert_eq!(post_list(&mut rq, &mut w), (0, ptr::null_mut()));
            }
            assert_eq!(fq.kernel.produced(), 3);
            let k: rxe_recv_wqe = fq.kernel.read_slot(2);
            assert_eq!(
                (k.wr_id, k.dma.length, k.dma.resid, k.dma.num_sge, k.dma.cur_sge),
                (2, 24, 24, 1, 0)
            );
            let mut w = recv_wr(3, &mut sge);
            assert_eq!(post_list(&mut rq, &mut w), (Errno::ENOMEM.code(), ptr::addr_of_mut!(w)));
            assert_eq!(fq.kernel.produced(), 3);
            // On a queue of max_sge 0, one SGE is too many.
            let fq = FakeRing::new(7, 3, 0);
            let mut rq = recv_queue::map(fq.raw_fd(), &fq.mi, 0).unwrap();
            assert_eq!(post_list(&mut rq, &mut w).0, Errno::EINVAL.code());
            assert_eq!(fq.kernel.produced(), 0);
        }
    }

    #[test]
    fn srq_receives_are_built_in_place_and_a_bad_one_stops_the_list() {
        // 4 slots of 128 bytes: capacity 3; 128 - 40 = 88 bytes hold 5 SGEs.
        let fq = FakeRing::new(7, 3, 0);
        let mut rq = recv_queue::map(fq.raw_fd(), &fq.mi, 2).unwrap();
        assert_eq!(
            rq.limits,
            RecvLimits {
                max_sge: 2,
                payload_room: 88
            }
        );
        let mut a = [
            ibv_sge {
                addr: 0x1000,
                length: 100,
                lkey: 7,
            },
            ibv_sge {
                addr: 0x2000,
                length: 28,
                lkey: 7,
            },
        ];
        let mut b = [ibv_sge {
            addr: 0x3000,
            length: 1,
            lkey: 8,
        }; 3];
        let mut c = [ibv_sge {
            addr: 0x4000,
            length: 4,
            lkey: 9,
        }];
        let mut w9 = recv_wr(9, &mut c);
        let mut w2 = recv_wr(2, &mut b);
        w2.next = &mut w9;
        let mut w1 = recv_wr(1, &mut a);
        w1.next = &mut w2;
        // SAFETY: every list is of live requests on our stack, with their SGEs.
        unsafe {
            assert_eq!(
                post_list(&mut rq, &mut w1),
                (Errno::EINVAL.code(), ptr::addr_of_mut!(w2))
            );
            assert_eq!(fq.kernel.produced(), 1);
            let k: rxe_recv_wqe = fq.kernel.read_slot(0);
            assert_eq!((k.wr_id, k.dma.length, k.dma.resid, k.dma.num_sge), (1, 128, 128, 2));
            // Three more: two go in, then the ring is full (ENOMEM). The three
            // share one SGE list: each `&mut c` would invalidate the pointer
            // the request before holds.
            let mut w5 = recv_wr(5, &mut c);
            let mut w4 = ibv_recv_wr { wr_id: 4, ..w5 };
            w4.next = &mut w5;
            let mut w3 = ibv_recv_wr { wr_id: 3, ..w4 };
            w3.next = &mut w4;
            assert_eq!(
                post_list(&mut rq, &mut w3),
                (Errno::ENOMEM.code(), ptr::addr_of_mut!(w5))
            );
            assert_eq!(fq.kernel.produced(), 3);
            let k: rxe_recv_wqe = fq.kernel.read_slot(2);
            assert_eq!((k.wr_id, k.dma.length), (4, 4));
            assert_eq!(fq.kernel.read_slot::<rxe_recv_wqe>(1).wr_id, 3);
        }
    }

    /// As for the QP: with the undo forced to fail, the SRQ the kernel may
    /// still name in an SRQ_LIMIT_REACHED event is leaked, not freed (under
    /// valgrind, the read below is clean).
    #[test]
    fn a_failed_undo_leaks_the_srq_the_kernel_may_still_name() {
        let kernel = crate::lifecycle::fault::DeafKernel::new();
        crate::lifecycle::fault::fail_undo(true);
        let (err, user_handle) = crate::srq::tests::create_against_a_deaf_kernel(&kernel);
        crate::lifecycle::fault::fail_undo(false);
        assert_eq!(err, Errno::EPROTO);
        assert_eq!(crate::lifecycle::fault::take_leaked(), vec![user_handle as usize]);
        let srq = user_handle as usize as *const ibv_srq;
        // SAFETY: leaked, so still allocated; what libibverbs reads of it.
        let events = unsafe { ptr::read(ptr::addr_of!((*srq).events_completed)) };
        assert_eq!(events, 0);
    }
}
