//! The C entries of queue pairs and the raw access behind them: create, modify, query and
//! destroy, the legacy posts (`post_send`, `post_recv`, `bind_mw`), the `ibv_qp_ex`
//! work-request callbacks (`ibv_wr_*`), and the raw access to our QP behind them (the `ibv_qp`
//! fields libibverbs shares with us). Everything else of a QP is safe code in [`crate::qp`],
//! [`crate::send_queue`], [`crate::recv_queue`], [`crate::work_queue`] and [`crate::wqe`], which
//! forbid `unsafe`, over the views of [`crate::post_raw`] (work requests, ring slots, the queue
//! lock's critical section) and [`crate::command`] (the doorbell's write()).

use core::cell::UnsafeCell;
use core::ffi::{c_int, c_void};
use core::ptr::{self, addr_of_mut, NonNull};
use core::sync::atomic::{AtomicI32, Ordering};

use kernel_abi::{ib_uverbs_create_qp, ib_uverbs_destroy_qp_resp, ib_uverbs_query_qp};
use log::debug;

use crate::boundary;
use crate::command;
use crate::context::RxeContext;
use crate::entry::cq::purge_qp_from_cqs;
use crate::errno::Errno;
use crate::libibverbs::control_objects::{ibv_mw, ibv_pd, ibv_qp, IBV_MW_TYPE_1};
use crate::libibverbs::cq::ibv_cq;
use crate::libibverbs::device_context::ibv_context;
use crate::libibverbs::qp::*;
use crate::libibverbs::runtime::{zeroed, PlainC};
use crate::libibverbs::srq::ibv_srq;
use crate::lifecycle::{self, Creating};
use crate::pd::{self, DomainUse, RxePd};
use crate::post_raw::{RecvWr, SendWr};
use crate::qp::batch::Batch;
use crate::qp::control::{check_create_ex, check_legacy_mask, destroy_kernel_qp, fill_query, map_queues, modify_cmd};
use crate::qp::object::{ring_doorbell, sq_accepts_posts, Doorbell, RxeQp};
use crate::recv_queue::post_recv_list;
use crate::send_queue::post_one_send;
use crate::wqe::{self};

// ---------------------------------------------------------------------------------------------
// Plain C data

// SAFETY: integers, pointers and unions of them (verbs.h).
unsafe impl PlainC for ibv_send_wr {}
// SAFETY: as above.
unsafe impl PlainC for ibv_qp_attr {}
// SAFETY: as above.
unsafe impl PlainC for ibv_qp_init_attr_ex {}
// SAFETY: integers, pointers and pthread objects (whose all-zero state is what calloc leaves
// before pthread_*_init), with the release-dependent tail as bytes.
unsafe impl PlainC for VerbsQp {}
// SAFETY: integers, pointers and pthread objects, as in calloc'd memory.
unsafe impl PlainC for ibv_context {}
// SAFETY: integers and pointers.
unsafe impl PlainC for ibv_cq {}
// SAFETY: integers.
unsafe impl PlainC for crate::libibverbs::cq::ibv_wc {}

// ---------------------------------------------------------------------------------------------
// The QP object: the ibv_qp fields libibverbs shares with us

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

    /// The handle the kernel gave the QP (written once, before publication).
    pub(crate) fn handle(&self) -> u32 {
        self.core_fields().handle
    }

    /// The QP's state as libibverbs last recorded it (`ibv_modify_qp` stores
    /// it after our `modify_qp` returns, from whichever thread). An atomic
    /// load: posting threads read it while another thread may be storing it.
    pub(crate) fn state(&self) -> c_int {
        self.state_word().load(Ordering::Relaxed)
    }

    /// Stores the QP's state as libibverbs does after a modify (it stores the same value
    /// again after we return).
    #[inline]
    fn store_state(&self, state: c_int) {
        self.state_word().store(state, Ordering::Relaxed);
    }

    /// The `ibv_qp`'s `state`, accessed atomically by us.
    #[inline(always)]
    fn state_word(&self) -> &AtomicI32 {
        // SAFETY: `state` is a live, 4-aligned C int of our QP (an enum
        // ibv_qp_state); libibverbs' store to it is a plain aligned int
        // store, which no reader can see torn, and our accesses are atomic.
        unsafe { AtomicI32::from_ptr(addr_of_mut!((*self.ibv_qp()).state)) }
    }

    /// The core `ibv_qp` fields libibverbs shares with us (context, CQs, SRQ, handle, qp_num, ...),
    /// read only: written at creation, before the QP is published.
    #[inline]
    fn core_fields(&self) -> &ibv_qp {
        // SAFETY: our live QP's ibv_qp, at offset 0; the fields read through this reference
        // are written once, at creation (state, which libibverbs stores, is read atomically
        // by state(), not through this).
        unsafe { &*self.ibv_qp() }
    }
}

// ---------------------------------------------------------------------------------------------
// C entries: create, modify, query, destroy

/// Where a create request comes from: the fields shared by
/// `ibv_qp_init_attr` and `ibv_qp_init_attr_ex`.
struct CreateArgs {
    context: *mut ibv_context,
    pd: *mut ibv_pd,
    qp_context: *mut c_void,
    send_cq: *mut ibv_cq,
    recv_cq: *mut ibv_cq,
    srq: *mut c_void,
    cap: ibv_qp_cap,
    qp_type: c_int,
    sq_sig_all: c_int,
}

/// The [`CreateArgs`] of `attr`, an `ibv_qp_init_attr` or an `ibv_qp_init_attr_ex`
/// (whose fields of the same names these are).
macro_rules! create_args {
    ($context:expr, $pd:expr, $attr:expr) => {
        CreateArgs {
            context: $context,
            pd: $pd,
            qp_context: $attr.qp_context,
            send_cq: $attr.send_cq,
            recv_cq: $attr.recv_cq,
            srq: $attr.srq,
            cap: $attr.cap,
            qp_type: $attr.qp_type,
            sq_sig_all: $attr.sq_sig_all,
        }
    };
}

/// A create entry's answer: the QP, with what the kernel granted written to the caller's
/// `cap` (as `ibv_cmd_create_qp` reports it); NULL with errno set when the create failed.
fn granted_into(created: Result<(*mut ibv_qp, ibv_qp_cap), Errno>, cap: &mut ibv_qp_cap) -> *mut ibv_qp {
    match created {
        Ok((qp, granted)) => {
            *cap = granted;
            qp
        }
        Err(e) => boundary::fail_ptr(e),
    }
}

/// The kernel handles of the QP's send and receive CQs (`EINVAL` for a null one) and of the
/// SRQ it receives through, if any.
fn queue_handles(args: &CreateArgs) -> Result<(u32, u32, Option<u32>), Errno> {
    // SAFETY: the CQs the caller passes for this context, and a non-null srq is an ibv_srq our
    // create_srq made (the ibv_create_qp contract: objects of the same context); nulls refused
    // (CQs) or none (SRQ).
    let (send_cq, recv_cq, srq) = unsafe {
        (
            args.send_cq.as_ref(),
            args.recv_cq.as_ref(),
            args.srq.cast::<ibv_srq>().as_ref(),
        )
    };
    let send_cq = send_cq.map(|c| c.handle).ok_or(Errno::EINVAL)?;
    let recv_cq = recv_cq.map(|c| c.handle).ok_or(Errno::EINVAL)?;
    Ok((send_cq, recv_cq, srq.map(|s| s.handle)))
}

/// `send_ops` are the `ibv_qp_ex` operations asked for (checked), `None`
/// for a QP made by `create_qp` or without `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`.
fn create(args: &CreateArgs, ex: bool, send_ops: Option<u64>) -> Result<(*mut ibv_qp, ibv_qp_cap), Errno> {
    // SAFETY: the context is the live one the PD (or the caller) belongs to; a non-null PD
    // is one of ours (refused when null).
    let (ctx, pd) = unsafe { (RxeContext::from_ibv_context(args.context), args.pd.as_ref()) };
    let ctx = ctx.ok_or(Errno::EINVAL)?;
    let pd = pd.ok_or(Errno::EINVAL)?;
    let fd = ctx.cmd_fd();
    // The types rxe serves, checked before anything else: an XRC QP comes
    // without a receive CQ (rdma_create_qp_ex), and programs that probe for
    // XRC take their branch on the kernel's EOPNOTSUPP, which stock reports.
    if !matches!(args.qp_type, IBV_QPT_RC | IBV_QPT_UC | IBV_QPT_UD) {
        return Err(Errno::EOPNOTSUPP);
    }
    let (send_cq, recv_cq, srq) = queue_handles(args)?;
    let layout = ctx.layout.qp_ex;
    let qp_type = u8::try_from(args.qp_type).map_err(|_| Errno::EINVAL)?;

    // Its pthread objects are initialised below.
    let vqp: VerbsQp = zeroed();
    let obj = RxeQp {
        vqp: UnsafeCell::new(vqp),
        qp_type: args.qp_type,
        cmd_fd: fd,
        layout,
        sq: None,
        rq: None,
        batch: UnsafeCell::new(Batch::default()),
        // SAFETY: args.pd is a live PD of ours (checked non-null above).
        domain: unsafe { DomainUse::of(args.pd) },
        doorbell: Doorbell::unarmed(),
    };
    let mut qp = Creating::new(obj, "QP", fd, |fd, handle| destroy_kernel_qp(fd, handle).map(|_| ()))?;
    let ibqp = qp.get_mut().ibv_qp();
    let cmd = ib_uverbs_create_qp {
        response: 0,
        user_handle: ibqp as usize as u64,
        pd_handle: pd.handle,
        send_cq_handle: send_cq,
        recv_cq_handle: recv_cq,
        srq_handle: srq.unwrap_or(0),
        max_send_wr: args.cap.max_send_wr,
        max_recv_wr: args.cap.max_recv_wr,
        max_send_sge: args.cap.max_send_sge,
        max_recv_sge: args.cap.max_recv_sge,
        max_inline_data: args.cap.max_inline_data,
        sq_sig_all: u8::from(args.sq_sig_all != 0),
        qp_type,
        is_srq: u8::from(srq.is_some()),
        reserved: 0,
        driver_data: [],
    };
    let resp = command::write_cmd(fd, cmd)?;
    qp.created(resp.core.qp_handle);
    // SAFETY: args.pd is a live PD of ours (checked non-null above).
    let lock = || unsafe { pd::lock_on(RxePd::from_ibv(args.pd)) };
    let (sq, rq) = map_queues(fd, &resp, args.qp_type, srq.is_some(), lock)?;
    let obj = qp.get_mut();
    obj.doorbell.arm(fd, resp.core.qp_handle);
    obj.sq = Some(sq);
    obj.rq = rq;

    let vqp = obj.vqp.get_mut();
    let q = &mut vqp.qp_ex.qp_base;
    q.context = args.context;
    q.qp_context = args.qp_context;
    q.pd = args.pd;
    q.send_cq = args.send_cq.cast();
    q.recv_cq = args.recv_cq.cast();
    q.srq = args.srq;
    q.handle = resp.core.qp_handle;
    q.qp_num = resp.core.qpn;
    q.state = IBV_QPS_RESET;
    q.qp_type = args.qp_type;
    q.events_completed = 0;
    // SAFETY: fresh, zeroed pthread objects at their final (boxed) address.
    unsafe {
        libc::pthread_mutex_init(&mut q.mutex, ptr::null());
        libc::pthread_cond_init(&mut q.cond, ptr::null());
    }
    // As the stock provider: every QP made by create_qp_ex is an ibv_qp_ex.
    vqp.set_comp_mask(layout, if ex { VERBS_QP_EX } else { 0 });
    if let Some(flags) = send_ops {
        super::wr::set_send_ops(vqp, layout, flags);
    }
    debug!(
        "created QP {:#x} (type {}), handle {}",
        resp.core.qpn, args.qp_type, resp.core.qp_handle
    );
    let granted = ibv_qp_cap {
        max_send_wr: resp.core.max_send_wr,
        max_recv_wr: resp.core.max_recv_wr,
        max_send_sge: resp.core.max_send_sge,
        max_recv_sge: resp.core.max_recv_sge,
        max_inline_data: resp.core.max_inline_data,
    };
    Ok((qp.finish().as_ptr().cast::<ibv_qp>(), granted))
}

/// `create_qp`.
pub(crate) unsafe extern "C" fn create_qp(pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr) -> *mut ibv_qp {
    boundary::guard("create_qp", ptr::null_mut(), || {
        // SAFETY: the caller's PD (one of ours) and attributes; nulls refused.
        let (Some(p), Some(a)) = (unsafe { pd.as_ref() }, unsafe { attr.as_mut() }) else {
            return boundary::fail_ptr(Errno::EINVAL);
        };
        let created = create(&create_args!(p.context, pd, a), false, None);
        granted_into(created, &mut a.cap)
    })
}

/// `create_qp_ex`.
pub(crate) unsafe extern "C" fn create_qp_ex(context: *mut ibv_context, attr: *mut ibv_qp_init_attr_ex) -> *mut ibv_qp {
    boundary::guard("create_qp_ex", ptr::null_mut(), || {
        // SAFETY: the caller's attributes and context (ours); nulls refused.
        let (a, ctx) = unsafe { (attr.as_mut(), RxeContext::from_ibv_context(context)) };
        let (Some(a), Some(ctx)) = (a, ctx) else {
            return boundary::fail_ptr(Errno::EINVAL);
        };
        if let Err(e) = check_create_ex(a, ctx.layout.qp_ex) {
            return boundary::fail_ptr(e);
        }
        let send_ops = (a.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0).then_some(a.send_ops_flags);
        let created = create(&create_args!(context, a.pd, a), true, send_ops);
        granted_into(created, &mut a.cap)
    })
}

/// `modify_qp`.
pub(crate) unsafe extern "C" fn modify_qp(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, mask: c_int) -> c_int {
    boundary::guard("modify_qp", Errno::EIO.code(), || {
        // SAFETY: a QP of ours and the caller's attributes; nulls refused.
        let (Some(q), Some(a)) = (unsafe { RxeQp::from_ibv_qp(qp) }, unsafe { attr.as_ref() }) else {
            return boundary::fail_code(Errno::EINVAL);
        };
        if let Err(e) = check_legacy_mask(mask) {
            return boundary::fail_code(e);
        }
        match command::write_req(q.cmd_fd, modify_cmd(q.handle(), a, mask)) {
            Ok(()) => {
                if mask & IBV_QP_STATE != 0 {
                    q.store_state(a.qp_state);
                    if a.qp_state == IBV_QPS_RESET {
                        let v = q.core_fields();
                        // SAFETY: the CQs of our live QP (libibverbs does
                        // not destroy a CQ a QP still uses); qp_num and
                        // the CQ pointers are written once, at creation.
                        unsafe { purge_qp_from_cqs(v.send_cq, v.recv_cq, v.qp_num, !v.srq.is_null()) };
                    }
                }
                0
            }
            Err(e) => boundary::fail_code(e),
        }
    })
}

/// `query_qp`.
pub(crate) unsafe extern "C" fn query_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    mask: c_int,
    init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    boundary::guard("query_qp", Errno::EIO.code(), || {
        // SAFETY: a QP of ours and the caller's output structs; nulls refused.
        let (Some(q), Some(attr), Some(init)) = (unsafe { RxeQp::from_ibv_qp(qp) }, unsafe { attr.as_mut() }, unsafe {
            init_attr.as_mut()
        }) else {
            return boundary::fail_code(Errno::EINVAL);
        };
        if let Err(e) = check_legacy_mask(mask) {
            return boundary::fail_code(e);
        }
        let cmd = ib_uverbs_query_qp {
            response: 0,
            qp_handle: q.handle(),
            attr_mask: mask as u32,
            driver_data: [],
        };
        match command::write_cmd(q.cmd_fd, cmd) {
            Ok(r) => {
                fill_query(&r, q.core_fields(), attr, init);
                0
            }
            Err(e) => boundary::fail_code(e),
        }
    })
}

/// `destroy_qp`: waits, as `ibv_cmd_destroy_qp` does, until the application
/// acked every async event the kernel reported; then unmaps and frees.
pub(crate) unsafe extern "C" fn destroy_qp(qp: *mut ibv_qp) -> c_int {
    boundary::guard("destroy_qp", Errno::EIO.code(), || {
        // SAFETY: a QP of ours (null refused).
        let Some(q) = (unsafe { RxeQp::from_ibv_qp(qp) }) else {
            return boundary::fail_code(Errno::EINVAL);
        };
        let Some(obj) = NonNull::new(qp.cast::<RxeQp>()) else {
            return boundary::fail_code(Errno::EINVAL);
        };
        let (fd, handle) = (q.cmd_fd, q.handle());
        let v = q.core_fields();
        let (send_cq, recv_cq, qp_num, has_srq) = (v.send_cq, v.recv_cq, v.qp_num, !v.srq.is_null());
        let wait = |resp: &ib_uverbs_destroy_qp_resp| {
            // SAFETY: mutex/cond were initialised at create; libibverbs
            // counts acked events under that mutex (ibv_ack_async_event).
            unsafe {
                lifecycle::wait_for_async_acks(
                    addr_of_mut!((*qp).mutex),
                    addr_of_mut!((*qp).cond),
                    addr_of_mut!((*qp).events_completed),
                    resp.events_reported,
                )
            }
        };
        // As at RESET: the destroyed QP's completions leave its CQs,
        // which libibverbs keeps alive while the QP used them.
        // SAFETY: made by Creating::finish in create, freed once, after the
        // kernel let the QP go; dropping the rings unmaps them. The QP's CQs
        // are live (the QP was using them until now).
        let destroyed = unsafe {
            lifecycle::destroy(obj, || destroy_kernel_qp(fd, handle), wait)
                .map(|()| purge_qp_from_cqs(send_cq.cast(), recv_cq.cast(), qp_num, has_srq))
        };
        match destroyed {
            Ok(()) => 0,
            Err(e) => boundary::fail_code(e),
        }
    })
}

// ---------------------------------------------------------------------------------------------
// C entries: the legacy data path

/// A post's QP and its `*bad_wr`, cleared; None (EINVAL) for a NULL of either.
#[inline(always)]
fn post_args<'a, W>(q: Option<&'a RxeQp>, bad_wr: Option<&'a mut *mut W>) -> Option<(&'a RxeQp, &'a mut *mut W)> {
    let (q, bad_wr) = (q?, bad_wr?);
    *bad_wr = ptr::null_mut();
    Some((q, bad_wr))
}

/// `post_send`. Requests are taken in order; the first that fails is
/// refused whole and returned in `*bad_wr`, those before it stay posted.
pub(crate) unsafe extern "C" fn post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    boundary::guard("post_send", Errno::EIO.code(), || {
        // SAFETY: libibverbs passes a QP of ours, and the caller's out pointer (or null).
        let (q, bad_wr) = unsafe { (RxeQp::from_ibv_qp(qp), bad_wr.as_mut()) };
        let Some((q, bad_wr)) = post_args(q, bad_wr) else {
            return Errno::EINVAL.code();
        };
        let Some(sq) = &q.sq else { return Errno::EINVAL.code() };
        if wr.is_null() {
            return 0;
        }
        // Before RTS the kernel refuses the doorbell while the WQEs would
        // stay in the ring and run later: refuse the whole list instead.
        if !sq_accepts_posts(q) {
            *bad_wr = wr;
            return Errno::EINVAL.code();
        }
        let posting = sq.with(|sq| {
            let mut cur = wr;
            let mut posted = false;
            let mut rc = 0;
            while !cur.is_null() {
                // SAFETY: the caller's list of live work requests, under the
                // ibv_post_send contract.
                let w = unsafe { SendWr::from_caller(cur) };
                if let Err(e) = post_one_send(sq, w) {
                    debug!("post_send: work request {:#x} refused (errno {e})", w.wr().wr_id);
                    *bad_wr = cur;
                    rc = e.code();
                    break;
                }
                posted = true;
                cur = w.wr().next;
            }
            if posted {
                sq.publish();
            }
            (rc, posted)
        });
        let (rc, posted) = match posting {
            Ok(done) => done,
            Err(e) => {
                *bad_wr = wr;
                return e.code();
            }
        };
        if posted {
            if let Err(e) = ring_doorbell(q) {
                return e.code();
            }
        }
        rc
    })
}

/// `post_recv`: only advances the producer index.
pub(crate) unsafe extern "C" fn post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    boundary::guard("post_recv", Errno::EIO.code(), || {
        // SAFETY: libibverbs passes a QP of ours, and the caller's out pointer (or null).
        let (q, bad) = unsafe { (RxeQp::from_ibv_qp(qp), bad_wr.as_mut()) };
        let Some((q, bad)) = post_args(q, bad) else {
            return Errno::EINVAL.code();
        };
        let Some(rq) = &q.rq else { return Errno::EINVAL.code() };
        if wr.is_null() {
            return 0;
        }
        // C10-97.2.1: no receives in RESET.
        if q.state() == IBV_QPS_RESET {
            *bad = wr;
            return Errno::EINVAL.code();
        }
        // SAFETY: the caller's list (not null: returned above), under the ibv_post_recv contract.
        let list = unsafe { RecvWr::from_caller(wr) };
        match rq.with(|rq| post_recv_list(rq, list, bad)) {
            Ok(rc) => rc,
            Err(e) => {
                *bad = wr;
                e.code()
            }
        }
    })
}

/// `bind_mw` for type 1 windows: a BIND_MW work request with the window's
/// next rkey, which the window takes when the post succeeded (the
/// application undoes it if the completion reports an error).
pub(crate) unsafe extern "C" fn bind_mw(qp: *mut ibv_qp, mw: *mut ibv_mw, bind: *mut ibv_mw_bind) -> c_int {
    boundary::guard("bind_mw", Errno::EIO.code(), || {
        // SAFETY: the caller's window (ours) and bind description; nulls refused.
        let (Some(m), Some(b)) = (unsafe { mw.as_mut() }, unsafe { bind.as_ref() }) else {
            return boundary::fail_code(Errno::EINVAL);
        };
        if m.r#type != IBV_MW_TYPE_1 || b.bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED != 0 {
            return boundary::fail_code(Errno::EINVAL);
        }
        let mut wr: ibv_send_wr = zeroed();
        wr.wr_id = b.wr_id;
        wr.opcode = IBV_WR_BIND_MW;
        wr.send_flags = b.send_flags;
        let new_rkey = wqe::next_rkey(m.rkey);
        wr.ext.bind_mw = ibv_send_wr_bind_mw {
            mw,
            rkey: new_rkey,
            bind_info: b.bind_info,
        };
        let mut bad: *mut ibv_send_wr = ptr::null_mut();
        // SAFETY: a complete work request on our stack, a QP of the caller's.
        let rc = unsafe { post_send(qp, &mut wr, &mut bad) };
        if rc != 0 {
            return boundary::fail_code(Errno::from_raw(rc));
        }
        m.rkey = new_rkey;
        0
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::libibverbs::cq::ibv_cq;
    use crate::qp::batch::Batch;
    use crate::ring::testing::FakeRing;
    use crate::ring::Producer;
    use crate::send_queue::tests::{send_queue, wr};
    use crate::work_queue::{Locked, WorkQueue};
    use crate::wqe::{RecvLimits, SendLimits, RECV_WQE_HEADER};
    use core::cell::UnsafeCell;
    use kernel_abi::rxe_send_wqe;

    /// A QP as create_qp and a modify to RTS leave it, on fake rings: the
    /// `FakeRing`s play the kernel's side of the send queue (16 slots of
    /// 512 bytes) and the receive queue, and the doorbell goes to /dev/null.
    struct FakeQp {
        sq: FakeRing,
        rq: FakeRing,
        qp: Box<RxeQp>,
        _doorbell: std::fs::File,
    }

    impl FakeQp {
        fn new(qp_type: c_int, max_sge: u32, max_inline: u32) -> FakeQp {
            use std::os::fd::AsRawFd;
            let sq = FakeRing::new(9, 15, 0);
            let rq = FakeRing::new(7, 15, 0);
            let doorbell = std::fs::File::options().write(true).open("/dev/null").unwrap();
            let mut send = send_queue(&sq, max_sge);
            send.limits = SendLimits::new(qp_type, max_sge, max_inline, send.limits.payload_room);
            let ring = Producer::map(rq.raw_fd(), &rq.mi, RECV_WQE_HEADER).unwrap();
            let limits = RecvLimits {
                max_sge,
                payload_room: ring.geometry().elem_size() - RECV_WQE_HEADER,
            };
            let recv = WorkQueue::new(ring, limits).unwrap();
            let mut qp = Box::new(RxeQp {
                vqp: UnsafeCell::new(zeroed()),
                qp_type,
                cmd_fd: doorbell.as_raw_fd(),
                layout: QpExLayout::for_release(44),
                sq: Some(Locked::new(send, crate::lock::QueueLock::new())),
                rq: Some(Locked::new(recv, crate::lock::QueueLock::new())),
                batch: UnsafeCell::new(Batch::default()),
                domain: crate::pd::DomainUse::none(),
                doorbell: crate::qp::object::Doorbell::unarmed(),
            });
            qp.doorbell.arm(doorbell.as_raw_fd(), 0);
            let base = &mut qp.vqp.get_mut().qp_ex.qp_base;
            base.qp_type = qp_type;
            base.state = IBV_QPS_RTS;
            FakeQp {
                sq,
                rq,
                qp,
                _doorbell: doorbell,
            }
        }

        fn ibv_qp(&self) -> *mut ibv_qp {
            self.qp.ibv_qp()
        }

        fn set_state(&mut self, state: c_int) {
            self.qp.vqp.get_mut().qp_ex.qp_base.state = state;
        }

        /// What the kernel would find: the published WQEs it has not consumed yet.
        fn published(&self) -> Vec<rxe_send_wqe> {
            let k = &self.sq.kernel;
            let q = k.indices();
            let (mut i, prod) = (k.consumer_index(), k.producer_index());
            let mut v = Vec::new();
            while i != prod {
                v.push(k.read_slot(i));
                i = q.next(i);
            }
            v
        }

        /// The operand arm of the oldest WQE the kernel has not consumed, read as a `T`.
        fn published_arm<T: zerocopy::FromBytes>(&self) -> T {
            let k = &self.sq.kernel;
            wqe_arm(k, k.consumer_index())
        }

        /// The kernel takes every published WQE.
        fn consume_all(&self) {
            let k = &self.sq.kernel;
            k.release_consumer(k.producer_index());
        }
    }

    /// The operand arm of the send WQE in slot `i` of a fake ring, read as a `T`.
    pub(crate) fn wqe_arm<T: zerocopy::FromBytes>(k: &crate::ring::testing::KernelSide, i: u32) -> T {
        let bytes: [u8; 256] = k.read_slot(i);
        T::read_from_prefix(&bytes[core::mem::offset_of!(rxe_send_wqe, wr.wr)..])
            .unwrap()
            .0
    }

    /// Links `wrs` into a list as an application would.
    /// Every link derives from one pointer to the list: a `&mut` to one
    /// request, or to the list, would invalidate the links made before it.
    fn link(wrs: &mut [ibv_send_wr]) -> *mut ibv_send_wr {
        let base = wrs.as_mut_ptr();
        for i in 0..wrs.len().saturating_sub(1) {
            // SAFETY: i + 1 < len: both inside the list.
            unsafe { (*base.add(i)).next = base.add(i + 1) };
        }
        if wrs.is_empty() {
            ptr::null_mut()
        } else {
            base
        }
    }

    /// Threads posting sends and receives on one QP while the kernel takes the WQEs from both
    /// rings: each queue's lock serialises its producers, so every request lands whole in a slot
    /// of its own and the kernel reads each exactly once (a full ring is ENOMEM, retried).
    /// ThreadSanitizer runs it (tests/check.sh, docs/safety.md): each queue's state is its
    /// posters' shared data.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "threads spinning on a ring: a run cut to a tenth had not ended after 8 minutes under Miri; ThreadSanitizer runs it"
    )]
    fn threads_posting_on_one_qp_land_each_request_once() {
        use crate::ring::testing::KernelSide;
        use kernel_abi::rxe_recv_wqe;
        const THREADS: u64 = 2;
        const EACH: u64 = 200;
        /// A ring's kernel side, read from a thread of its own as rxe reads it from another CPU.
        #[derive(Clone, Copy)]
        struct Kernel<'a>(&'a KernelSide);
        // SAFETY: the kernel's side reads slots and the producer index and stores the consumer
        // index, all through the shared mapping, as the kernel does concurrently with posters.
        unsafe impl Send for Kernel<'_> {}
        /// Takes `n` WQEs as they are published; their wr_ids.
        fn take(kernel: Kernel<'_>, n: usize, wr_id: impl Fn(&KernelSide, u32) -> u64) -> Vec<u64> {
            let k = kernel.0;
            let mut seen = Vec::new();
            while seen.len() < n {
                let (mut i, prod) = (k.consumer_index(), k.producer_index());
                if i == prod {
                    std::thread::yield_now();
                }
                while i != prod {
                    seen.push(wr_id(k, i));
                    i = k.indices().next(i);
                }
                k.release_consumer(i);
            }
            seen.sort_unstable();
            seen
        }
        /// Posts until accepted, retrying while the ring is full.
        fn until_posted(mut post: impl FnMut() -> c_int) {
            loop {
                match post() {
                    0 => return,
                    rc if rc == Errno::ENOMEM.code() => std::thread::yield_now(),
                    rc => panic!("post: {rc}"),
                }
            }
        }
        let fake = FakeQp::new(IBV_QPT_RC, 1, 64);
        let qp = fake.ibv_qp() as usize;
        let (sq, rq) = (Kernel(&fake.sq.kernel), Kernel(&fake.rq.kernel));
        let n = (THREADS * EACH) as usize;
        let (sent, received) = std::thread::scope(|s| {
            for t in 0..THREADS {
                s.spawn(move || {
                    let sge = [ibv_sge {
                        addr: 0x1000,
                        length: 8,
                        lkey: 1,
                    }];
                    for i in 0..EACH {
                        let mut w = wr(t * EACH + i, IBV_WR_SEND, &sge);
                        let mut bad = ptr::null_mut();
                        // SAFETY: the test's live QP, a live request.
                        until_posted(|| unsafe { post_send(qp as *mut ibv_qp, &mut w, &mut bad) });
                    }
                });
                s.spawn(move || {
                    let mut sge = [ibv_sge {
                        addr: 0x2000,
                        length: 8,
                        lkey: 1,
                    }];
                    for i in 0..EACH {
                        let mut w = ibv_recv_wr {
                            wr_id: t * EACH + i,
                            next: ptr::null_mut(),
                            sg_list: sge.as_mut_ptr(),
                            num_sge: 1,
                        };
                        let mut bad = ptr::null_mut();
                        // SAFETY: the test's live QP, a live request.
                        until_posted(|| unsafe { post_recv(qp as *mut ibv_qp, &mut w, &mut bad) });
                    }
                });
            }
            let sent = s.spawn(move || take(sq, n, |k, i| k.read_slot::<rxe_send_wqe>(i).wr.wr_id));
            let received = s.spawn(move || take(rq, n, |k, i| k.read_slot::<rxe_recv_wqe>(i).wr_id));
            (sent.join().unwrap(), received.join().unwrap())
        });
        let all: Vec<u64> = (0..THREADS * EACH).collect();
        assert_eq!(sent, all);
        assert_eq!(received, all);
        assert!(fake.published().is_empty());
    }

    #[test]
    fn a_panic_mid_list_leaves_nothing_to_publish_and_the_lock_free() {
        let fq = FakeQp::new(IBV_QPT_RC, 1, 0);
        let sq = fq.qp.sq.as_ref().unwrap();
        let before = sq.with(|wq| wq.prod);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            sq.with(|wq| {
                wq.next_slot().unwrap();
                wq.advance();
                panic!("mid-list");
            })
        }));
        assert!(r.is_err());
        assert!(!sq.lock.is_locked());
        assert_eq!(sq.with(|wq| wq.prod), before, "the built slot was forgotten");
        assert!(fq.published().is_empty());
    }

    #[test]
    fn post_send_refuses_a_bad_request_whole_and_keeps_the_ones_before() {
        let fake = FakeQp::new(IBV_QPT_RC, 2, 64);
        let one = [ibv_sge {
            addr: 0x1000,
            length: 8,
            lkey: 1,
        }];
        let three = [ibv_sge {
            addr: 0x1000,
            length: 8,
            lkey: 1,
        }; 3];
        let mut wrs = [
            wr(1, IBV_WR_SEND, &one),
            wr(2, IBV_WR_SEND, &three),
            wr(3, IBV_WR_SEND, &one),
        ];
        let list = link(&mut wrs);
        let mut bad: *mut ibv_send_wr = ptr::null_mut();
        assert_eq!(
            // SAFETY: a live QP of ours and a list of live requests.
            unsafe { post_send(fake.ibv_qp(), list, &mut bad) },
            Errno::EINVAL.code()
        );
        assert_eq!(bad, &mut wrs[1] as *mut ibv_send_wr);
        let posted = fake.published();
        assert_eq!(posted.iter().map(|w| w.wr.wr_id).collect::<Vec<_>>(), vec![1]);
    }

    #[test]
    fn post_send_before_rts_refuses_the_whole_list() {
        let mut fake = FakeQp::new(IBV_QPT_RC, 2, 64);
        let one = [ibv_sge {
            addr: 0x1000,
            length: 8,
            lkey: 1,
        }];
        for state in [IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR] {
            fake.set_state(state);
            let mut wrs = [wr(1, IBV_WR_SEND, &one), wr(2, IBV_WR_SEND, &one)];
            let list = link(&mut wrs);
            let mut bad: *mut ibv_send_wr = ptr::null_mut();
            assert_eq!(
                // SAFETY: a live QP of ours and a list of live requests.
                unsafe { post_send(fake.ibv_qp(), list, &mut bad) },
                Errno::EINVAL.code()
            );
            assert_eq!(bad, list);
            assert!(fake.published().is_empty());
        }
        fake.set_state(IBV_QPS_RTS);
        let mut w = wr(7, IBV_WR_RDMA_WRITE, &one);
        let mut bad: *mut ibv_send_wr = ptr::null_mut();
        // SAFETY: as above.
        assert_eq!(unsafe { post_send(fake.ibv_qp(), &mut w, &mut bad) }, 0);
        assert!(bad.is_null());
        assert_eq!(fake.published().len(), 1);
    }

    #[test]
    fn post_send_on_a_full_queue_is_enomem_at_the_first_that_does_not_fit() {
        let fake = FakeQp::new(IBV_QPT_RC, 1, 0);
        let one = [ibv_sge {
            addr: 0x1000,
            length: 8,
            lkey: 1,
        }];
        // 16 slots hold 15; ask for 17.
        let mut wrs: Vec<ibv_send_wr> = (0..17).map(|i| wr(i, IBV_WR_SEND, &one)).collect();
        let list = link(&mut wrs);
        let mut bad: *mut ibv_send_wr = ptr::null_mut();
        assert_eq!(
            // SAFETY: a live QP of ours and a list of live requests.
            unsafe { post_send(fake.ibv_qp(), list, &mut bad) },
            Errno::ENOMEM.code()
        );
        assert_eq!(bad, &mut wrs[15] as *mut ibv_send_wr);
        let ids: Vec<u64> = fake.published().iter().map(|w| w.wr.wr_id).collect();
        assert_eq!(ids, (0..15).collect::<Vec<_>>());
    }

    #[test]
    fn a_doorbell_that_write_refuses_for_another_reason_is_not_retried() {
        use core::sync::atomic::Ordering;
        let mut fake = FakeQp::new(IBV_QPT_RC, 1, 64);
        // A closed fd: EBADF from write(), and no switch to the ioctl path.
        let closed = 1 << 20;
        fake.qp.doorbell.arm(closed, 0);
        let sge = [ibv_sge {
            addr: 0x1000,
            length: 8,
            lkey: 1,
        }];
        let mut w = wr(1, IBV_WR_SEND, &sge);
        let mut bad = ptr::null_mut();
        // SAFETY: the test's live QP, a live request.
        let rc = unsafe { post_send(fake.ibv_qp(), &mut w, &mut bad) };
        assert_eq!(rc, Errno::EBADF.code());
        assert!(bad.is_null(), "the request was posted; only the doorbell failed");
        assert!(!crate::command::doorbell_write_refused());
        assert_eq!(fake.qp.doorbell.fd.load(Ordering::Relaxed), closed);
    }

    /// Not a test: the post_send + poll_cq pair `tests/bench/verbs.sh` counts
    /// in the rig (one signalled 8-byte RDMA WRITE, its completion polled),
    /// on fake rings, so the instructions can be counted on the host.
    /// `tests/cost-budget.sh` runs it and its siblings (SEND; WRITE with the
    /// QP and the CQ on a thread domain; WRITE by `ibv_wr_*`; SEND on UD; a
    /// receive through an SRQ) under callgrind and holds the provider's
    /// instructions per pair to `provider/perf-budget.txt`:
    ///
    /// ```text
    /// cargo test --release -p rxe-rs-provider --lib --no-run   # prints the test binary
    /// valgrind --tool=callgrind --toggle-collect='rxe_rs::entry::qp::post_send' \
    ///     --toggle-collect='rxe_rs::entry::cq::poll_cq' --toggle-collect='rxe_rs::entry::qp::wr_*' \
    ///     --toggle-collect='rxe_rs::entry::srq::post_srq_recv' target/release/deps/rxe_rs-HASH \
    ///     --ignored --exact entry::qp::tests::hot_path_pairs --test-threads=1
    /// ```
    ///
    /// Instructions per pair = the total / `RXE_RS_HOT_PATH_PAIRS` (10,000).
    #[test]
    #[ignore = "an instruction-count harness (tests/cost-budget.sh), not a test"]
    fn hot_path_pairs() {
        hot_path(IBV_WR_RDMA_WRITE, false);
    }

    /// [`hot_path_pairs`] with an 8-byte SEND.
    #[test]
    #[ignore = "an instruction-count harness (tests/cost-budget.sh), not a test"]
    fn hot_path_pairs_send() {
        hot_path(IBV_WR_SEND, false);
    }

    /// [`hot_path_pairs`] with the QP's queues and the CQ on a thread domain (no lock).
    #[test]
    #[ignore = "an instruction-count harness (tests/cost-budget.sh), not a test"]
    fn hot_path_pairs_td() {
        hot_path(IBV_WR_RDMA_WRITE, true);
    }

    /// The WRITE of [`hot_path_pairs`] by `ibv_wr_*` (`wr_start`, `wr_rdma_write`, `wr_set_sge`,
    /// `wr_complete`) and the poll_cq of its completion.
    #[test]
    #[ignore = "an instruction-count harness (tests/cost-budget.sh), not a test"]
    fn hot_path_pairs_wr() {
        use core::ffi::c_void;
        let fake = FakeQp::new(IBV_QPT_RC, 1, 64);
        let start: unsafe extern "C" fn(*mut c_void) = std::hint::black_box(crate::entry::wr::wr_start);
        let write: unsafe extern "C" fn(*mut c_void, u32, u64) = std::hint::black_box(crate::entry::wr::wr_rdma_write);
        let set_sge: unsafe extern "C" fn(*mut c_void, u32, u64, u32) =
            std::hint::black_box(crate::entry::wr::wr_set_sge);
        let complete: unsafe extern "C" fn(*mut c_void) -> c_int = std::hint::black_box(crate::entry::wr::wr_complete);
        let qx = fake.ibv_qp().cast::<c_void>();
        let ex = fake.qp.vqp.get().cast::<ibv_qp_ex_base>();
        count_pairs(
            |i| {
                // SAFETY: a live QP of ours, its ibv_qp_ex written as the inline ibv_wr_* do.
                unsafe {
                    start(qx);
                    (*ex).wr_id = i;
                    (*ex).wr_flags = IBV_SEND_SIGNALED;
                    write(qx, 2, 0x2000);
                    set_sge(qx, 1, 0x1000, 8);
                    assert_eq!(complete(qx), 0);
                }
                fake.consume_all();
            },
            false,
            crate::lock::QueueLock::new(),
        );
    }

    /// [`hot_path_pairs`] with an 8-byte SEND on a UD QP, through an AH with the kernel's index
    /// (as rxe gives one since Linux 5.10).
    #[test]
    #[ignore = "an instruction-count harness (tests/cost-budget.sh), not a test"]
    fn hot_path_pairs_ud() {
        let fake = FakeQp::new(IBV_QPT_UD, 1, 64);
        let ah = crate::ah::RxeAh::fake(1);
        let sge = [ibv_sge {
            addr: 0x1000,
            length: 8,
            lkey: 1,
        }];
        let mut w = wr(0, IBV_WR_SEND, &sge);
        w.send_flags = IBV_SEND_SIGNALED;
        w.wr.ud = ibv_send_wr_ud {
            ah: ptr::from_ref(&ah).cast_mut().cast(),
            remote_qpn: 0x12,
            remote_qkey: 0x1111_1111,
        };
        let post: unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int =
            std::hint::black_box(post_send);
        count_pairs(
            |i| {
                w.wr_id = i;
                let mut bad = ptr::null_mut();
                // SAFETY: a live QP of ours, a live request naming a live AH.
                assert_eq!(unsafe { post(fake.ibv_qp(), &mut w, &mut bad) }, 0);
                fake.consume_all();
            },
            false,
            crate::lock::QueueLock::new(),
        );
    }

    /// A receive posted to an SRQ (`post_srq_recv`, one 8-byte SGE) and the poll_cq of its
    /// completion.
    #[test]
    #[ignore = "an instruction-count harness (tests/cost-budget.sh), not a test"]
    fn hot_path_pairs_srq() {
        use crate::libibverbs::srq::ibv_srq;
        let ring = FakeRing::new(7, 15, 0);
        let rq = crate::recv_queue::map(ring.raw_fd(), &ring.mi, 1).unwrap();
        let srq = crate::srq::RxeSrq::fake(rq, crate::lock::QueueLock::new());
        let mut sge = [ibv_sge {
            addr: 0x2000,
            length: 8,
            lkey: 1,
        }];
        let mut w = ibv_recv_wr {
            wr_id: 0,
            next: ptr::null_mut(),
            sg_list: sge.as_mut_ptr(),
            num_sge: 1,
        };
        let post: unsafe extern "C" fn(*mut ibv_srq, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int =
            std::hint::black_box(crate::entry::srq::post_srq_recv);
        count_pairs(
            |i| {
                w.wr_id = i;
                let mut bad = ptr::null_mut();
                // SAFETY: a live SRQ of ours, a live request.
                assert_eq!(unsafe { post(srq.as_ibv_srq(), &mut w, &mut bad) }, 0);
                let k = &ring.kernel;
                k.release_consumer(k.producer_index());
            },
            true,
            crate::lock::QueueLock::new(),
        );
    }

    /// Runs `post(i)` (which also lets the kernel's side take what it posted) and polls the
    /// completion of `i` (a RECV's when `recv`) on a CQ behind `cq_lock`,
    /// `RXE_RS_HOT_PATH_PAIRS` times.
    fn count_pairs(mut post: impl FnMut(u64), recv: bool, cq_lock: crate::lock::QueueLock) {
        use crate::cq::testing::fake_rxe_cq_with;
        use crate::libibverbs::cq::ibv_wc;
        use kernel_abi::ib_uverbs_wc;
        use zerocopy::FromZeros;
        let pairs = harness_pairs();
        let (cq_kernel, cq) = fake_rxe_cq_with(0, cq_lock);
        let mut wc: ibv_wc = zeroed();
        let mut cqe = ib_uverbs_wc::new_zeroed();
        if recv {
            cqe.opcode = 128; // IB_WC_RECV, as rxe writes it
            cqe.byte_len = 8;
        }
        let poll: unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int =
            std::hint::black_box(crate::entry::cq::poll_cq);
        for i in 0..pairs {
            post(i);
            cqe.wr_id = i;
            cq_kernel.produce(&cqe);
            // SAFETY: a live CQ of ours, room for one completion.
            assert_eq!(unsafe { poll(cq.cast(), 1, &mut wc) }, 1);
            assert_eq!(wc.wr_id, i);
        }
        // SAFETY: made by fake_rxe_cq_with, not used again.
        drop(unsafe { Box::from_raw(cq.cast::<crate::cq::RxeCq>()) });
    }

    fn harness_pairs() -> u64 {
        std::env::var("RXE_RS_HOT_PATH_PAIRS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(10_000)
    }

    fn hot_path(opcode: c_int, thread_domain: bool) {
        use crate::lock::QueueLock;
        let lock = || {
            if thread_domain {
                QueueLock::unlocked()
            } else {
                QueueLock::new()
            }
        };
        let mut fake = FakeQp::new(IBV_QPT_RC, 1, 64);
        if let Some(sq) = &mut fake.qp.sq {
            sq.lock = lock();
        }
        if let Some(rq) = &mut fake.qp.rq {
            rq.lock = lock();
        }
        let sge = [ibv_sge {
            addr: 0x1000,
            length: 8,
            lkey: 1,
        }];
        let mut w = wr(0, opcode, &sge);
        w.send_flags = IBV_SEND_SIGNALED;
        if opcode == IBV_WR_RDMA_WRITE {
            w.wr.rdma = ibv_send_wr_rdma {
                remote_addr: 0x2000,
                rkey: 2,
            };
        }
        // Called through a pointer, as libibverbs calls it (and so that
        // it is not inlined here, out of callgrind's sight).
        let post: unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int =
            std::hint::black_box(post_send);
        count_pairs(
            |i| {
                w.wr_id = i;
                let mut bad = ptr::null_mut();
                // SAFETY: a live QP of ours, a live request.
                assert_eq!(unsafe { post(fake.ibv_qp(), &mut w, &mut bad) }, 0);
                fake.consume_all();
            },
            false,
            lock(),
        );
    }

    #[test]
    fn a_negative_sge_count_is_einval() {
        let fq = FakeRing::new(8, 3, 0);
        let mut sq = send_queue(&fq, 2);
        let sge = [ibv_sge::default()];
        let mut w = wr(1, IBV_WR_SEND, &sge);
        w.num_sge = -1;
        assert_eq!(
            // SAFETY: a count above max_sge is refused before any pointer is read.
            crate::send_queue::post_one_send(&mut sq, unsafe { SendWr::from_caller(&w) }),
            Err(Errno::EINVAL)
        );
        assert_eq!(sq.prod, 0);
    }

    #[test]
    fn a_ud_send_carries_its_destination_and_one_without_an_ah_or_of_another_opcode_is_einval() {
        let fake = FakeQp::new(IBV_QPT_UD, 1, 64);
        let ah = crate::ah::RxeAh::fake(7);
        let sge = [ibv_sge {
            addr: 0x1000,
            length: 8,
            lkey: 1,
        }];
        let ud = |wr_id, opcode, ah: *mut crate::libibverbs::control_objects::ibv_ah| {
            let mut w = wr(wr_id, opcode, &sge);
            w.wr.ud = ibv_send_wr_ud {
                ah,
                remote_qpn: 0x12,
                remote_qkey: 0x3456,
            };
            w
        };
        let ours = ptr::from_ref(&ah).cast_mut().cast();
        for mut w in [
            ud(1, IBV_WR_SEND, ptr::null_mut()),
            ud(2, IBV_WR_RDMA_WRITE, ours),
            ud(3, IBV_WR_BIND_MW, ours),
        ] {
            let mut bad: *mut ibv_send_wr = ptr::null_mut();
            // SAFETY: a live QP of ours, a live request (its AH ours or null).
            let rc = unsafe { post_send(fake.ibv_qp(), &mut w, &mut bad) };
            assert_eq!(rc, Errno::EINVAL.code());
            assert_eq!(bad, &mut w as *mut ibv_send_wr);
            assert!(fake.published().is_empty());
        }
        let mut w = ud(4, IBV_WR_SEND_WITH_IMM, ours);
        let mut bad: *mut ibv_send_wr = ptr::null_mut();
        // SAFETY: as above.
        assert_eq!(unsafe { post_send(fake.ibv_qp(), &mut w, &mut bad) }, 0);
        let posted = fake.published();
        let u: kernel_abi::rxe_send_wr_wr_ud = fake.published_arm();
        assert_eq!(
            (
                posted[0].wr.wr_id,
                u.remote_qpn,
                u.remote_qkey,
                u.ah_num,
                posted[0].dma.length
            ),
            (4, 0x12, 0x3456, 7, 8)
        );
    }

    #[test]
    fn an_inline_sge_at_address_0_with_a_length_is_einval() {
        let fake = FakeQp::new(IBV_QPT_RC, 2, 64);
        let data = [7u8; 8];
        let sges = [
            ibv_sge {
                addr: data.as_ptr() as u64,
                length: 8,
                lkey: 0,
            },
            ibv_sge {
                addr: 0,
                length: 0,
                lkey: 0,
            },
        ];
        let mut good = wr(1, IBV_WR_SEND, &sges);
        good.send_flags = IBV_SEND_INLINE;
        let null = [ibv_sge {
            addr: 0,
            length: 4,
            lkey: 0,
        }];
        let mut bad_one = wr(2, IBV_WR_SEND, &null);
        bad_one.send_flags = IBV_SEND_INLINE;
        let mut wrs = [good, bad_one];
        let list = link(&mut wrs);
        let mut bad: *mut ibv_send_wr = ptr::null_mut();
        assert_eq!(
            // SAFETY: a live QP of ours and a list of live requests (the NULL
            // SGE is what is tested: it must be refused, not read).
            unsafe { post_send(fake.ibv_qp(), list, &mut bad) },
            Errno::EINVAL.code()
        );
        assert_eq!(bad, &mut wrs[1] as *mut ibv_send_wr);
        // The first, with a zero-length NULL SGE beside real bytes, went.
        let posted = fake.published();
        assert_eq!(posted.iter().map(|w| w.wr.wr_id).collect::<Vec<_>>(), vec![1]);
        assert_eq!(posted[0].dma.length, 8);
    }
}

#[cfg(test)]
mod control_tests {
    use super::*;
    use crate::libibverbs::MUTEX_GROWTH;
    use core::mem::offset_of;
    use kernel_abi::{ib_uverbs_destroy_qp, IB_USER_VERBS_CMD_DESTROY_QP};

    /// Creates a QP against a command fd that answers nothing, so the
    /// create fails after the "kernel object" exists and is undone. Returns
    /// the errno and the `user_handle` the kernel was given.
    fn create_against_a_deaf_kernel(kernel: &crate::lifecycle::fault::DeafKernel) -> (Errno, u64) {
        use crate::libibverbs::layout::Layout;
        let mut ibv_ctx: ibv_context = zeroed();
        ibv_ctx.cmd_fd = kernel.fd();
        let mut ctx = RxeContext {
            ibv_ctx: core::cell::UnsafeCell::new(ibv_ctx),
            layout: Layout::select(34, 44).unwrap(),
        };
        let context = ptr::from_mut(&mut ctx).cast::<ibv_context>();
        let mut pd = crate::pd::RxePd::protection(context, 1);
        let mut cq: ibv_cq = zeroed();
        // One pointer for both: a second `&mut cq` would invalidate the first.
        let cq = ptr::from_mut(&mut cq);
        let args = CreateArgs {
            context,
            pd: ptr::from_mut(&mut pd).cast(), // the whole RxePd: the provider reads past ibv_pd
            qp_context: ptr::null_mut(),
            send_cq: cq,
            recv_cq: cq,
            srq: ptr::null_mut(),
            cap: ibv_qp_cap {
                max_send_wr: 4,
                max_recv_wr: 4,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: IBV_QPT_RC,
            sq_sig_all: 0,
        };
        let err = create(&args, false, None).err().unwrap();
        (err, kernel.first_body_u64(offset_of!(ib_uverbs_create_qp, user_handle)))
    }

    #[test]
    fn a_type_rxe_does_not_serve_is_eopnotsupp_before_its_cqs_are_looked_at() {
        use crate::libibverbs::layout::Layout;
        let kernel = crate::lifecycle::fault::DeafKernel::new();
        let mut ibv_ctx: ibv_context = zeroed();
        ibv_ctx.cmd_fd = kernel.fd();
        let mut ctx = RxeContext {
            ibv_ctx: core::cell::UnsafeCell::new(ibv_ctx),
            layout: Layout::select(34, 44).unwrap(),
        };
        let context = ptr::from_mut(&mut ctx).cast::<ibv_context>();
        let mut pd = crate::pd::RxePd::protection(context, 1);
        // XRC_SEND (9) and XRC_RECV (10), as rdma_create_qp_ex makes them: no receive CQ.
        for qp_type in [9, 10, 8] {
            let args = CreateArgs {
                context,
                pd: ptr::from_mut(&mut pd).cast(), // the whole RxePd: the provider reads past ibv_pd
                qp_context: ptr::null_mut(),
                send_cq: ptr::null_mut(),
                recv_cq: ptr::null_mut(),
                srq: ptr::null_mut(),
                cap: ibv_qp_cap {
                    max_send_wr: 4,
                    max_recv_wr: 0,
                    max_send_sge: 1,
                    max_recv_sge: 0,
                    max_inline_data: 0,
                },
                qp_type,
                sq_sig_all: 0,
            };
            assert_eq!(
                create(&args, true, None).err(),
                Some(Errno::EOPNOTSUPP),
                "type {qp_type}"
            );
        }
        assert!(kernel.written().is_empty(), "refused without a command");
    }

    #[test]
    fn a_failed_create_whose_undo_succeeds_frees_the_qp() {
        // What an earlier test on this thread left (Miri runs them all on one).
        crate::lifecycle::fault::take_leaked();
        let kernel = crate::lifecycle::fault::DeafKernel::new();
        let (err, _) = create_against_a_deaf_kernel(&kernel);
        assert_eq!(err, Errno::EPROTO);
        assert!(crate::lifecycle::fault::take_leaked().is_empty());
        // CREATE_QP, then the undo's DESTROY_QP.
        let w = kernel.written();
        let hdr = size_of::<kernel_abi::ib_uverbs_cmd_hdr>();
        let create_len = hdr + size_of::<ib_uverbs_create_qp>();
        assert_eq!(w.len(), create_len + hdr + size_of::<ib_uverbs_destroy_qp>());
        assert_eq!(
            u32::from_ne_bytes(w[create_len..create_len + 4].try_into().unwrap()),
            IB_USER_VERBS_CMD_DESTROY_QP
        );
    }

    /// The fault-injection switch makes the undo fail: the QP whose address
    /// the kernel holds as `user_handle` is leaked (and logged), not freed,
    /// so an async event naming it still finds it. Under valgrind
    /// (`valgrind --error-exitcode=1 <test binary> --exact
    /// qp::tests::a_failed_undo_leaks_the_qp_the_kernel_may_still_name`) the
    /// read below is what would be a use-after-free if it were freed.
    #[test]
    fn a_failed_undo_leaks_the_qp_the_kernel_may_still_name() {
        // What an earlier test on this thread left (Miri runs them all on one).
        crate::lifecycle::fault::take_leaked();
        let kernel = crate::lifecycle::fault::DeafKernel::new();
        crate::lifecycle::fault::fail_undo(true);
        let (err, user_handle) = create_against_a_deaf_kernel(&kernel);
        crate::lifecycle::fault::fail_undo(false);
        assert_eq!(err, Errno::EPROTO);
        assert_eq!(crate::lifecycle::fault::take_leaked(), vec![user_handle as usize]);
        // What libibverbs does with an async event's element: reads the
        // ibv_qp at the user_handle.
        let qp = user_handle as usize as *const ibv_qp;
        // SAFETY: leaked, so still allocated; the fields create wrote.
        let (qp_context, events) = unsafe {
            (
                ptr::read(ptr::addr_of!((*qp).qp_context)),
                ptr::read(ptr::addr_of!((*qp).events_completed)),
            )
        };
        assert_eq!((qp_context, events), (ptr::null_mut(), 0));
    }

    #[test]
    fn comp_mask_lands_at_the_release_offset() {
        let mut v: VerbsQp = zeroed();
        let l = QpExLayout::for_release(44);
        v.set_comp_mask(l, VERBS_QP_EX);
        // SAFETY: reading the u32 at the computed offset inside v.
        let raw = unsafe {
            core::ptr::from_ref(&v)
                .cast::<u8>()
                .add(352 + MUTEX_GROWTH)
                .cast::<u32>()
                .read()
        };
        assert_eq!(raw, VERBS_QP_EX);
        assert_eq!(v.comp_mask(l), VERBS_QP_EX);
        assert_eq!(v.comp_mask(QpExLayout::for_release(45)), 0);
    }
}

#[cfg(test)]
mod wqe_tests {
    use core::ffi::c_int;

    use kernel_abi::{rxe_av, rxe_recv_wqe, rxe_send_wqe};
    use zerocopy::{FromZeros, IntoBytes};

    use super::zeroed;
    use crate::errno::Errno;
    use crate::libibverbs::qp::*;
    use crate::post_raw::{encode_send, send_sges};
    use crate::wqe::encode::*;
    use crate::wqe::limits::*;
    use crate::wqe::request::*;
    use crate::wqe::validate::*;

    /// A slot of `size` bytes, 8-aligned, split into header and payload.
    pub(crate) struct Slot {
        words: Vec<u64>,
    }

    impl Slot {
        pub(crate) fn new(size: usize) -> Slot {
            Slot {
                words: vec![0xa5a5_a5a5_a5a5_a5a5; size / 8],
            }
        }
        fn bytes(&mut self) -> &mut [u8] {
            self.words.as_mut_bytes()
        }
        fn send(&mut self) -> (&mut rxe_send_wqe, &mut [u8]) {
            let (h, p) = self.bytes().split_at_mut(SEND_WQE_HEADER);
            // SAFETY: h is SEND_WQE_HEADER bytes, 8-aligned (Vec<u64>), and any
            // bytes are a valid rxe_send_wqe.
            (unsafe { &mut *h.as_mut_ptr().cast::<rxe_send_wqe>() }, p)
        }
        /// The WQE's operand arm read as a `T` (the bytes written are in the slot).
        fn arm<T: zerocopy::FromBytes>(&mut self) -> T {
            let at = core::mem::offset_of!(rxe_send_wqe, wr.wr);
            T::read_from_prefix(&self.bytes()[at..]).unwrap().0
        }
        /// The WQE's `ex` word (imm_data or invalidate_rkey).
        fn ex(&mut self) -> u32 {
            let at = core::mem::offset_of!(rxe_send_wqe, wr.ex);
            <u32 as zerocopy::FromBytes>::read_from_prefix(&self.bytes()[at..])
                .unwrap()
                .0
        }
        fn recv(&mut self) -> (&mut rxe_recv_wqe, &mut [u8]) {
            let (h, p) = self.bytes().split_at_mut(RECV_WQE_HEADER);
            // SAFETY: as above for rxe_recv_wqe.
            (unsafe { &mut *h.as_mut_ptr().cast::<rxe_recv_wqe>() }, p)
        }
    }

    fn is_atomic(opcode: c_int) -> bool {
        matches!(opcode, IBV_WR_ATOMIC_CMP_AND_SWP | IBV_WR_ATOMIC_FETCH_AND_ADD)
    }

    fn lim(qp_type: c_int) -> SendLimits {
        SendLimits::new(qp_type, 4, 64, 256 - SEND_WQE_HEADER + 64)
    }

    fn sge(addr: u64, length: u32) -> ibv_sge {
        ibv_sge {
            addr,
            length,
            lkey: 0x42,
        }
    }

    /// A signalled request for `opcode` on `sges`, with the operands of an
    /// RDMA request (or, for an atomic, of an atomic one) filled in.
    fn wr(opcode: c_int, sges: &[ibv_sge]) -> ibv_send_wr {
        let mut w: ibv_send_wr = zeroed();
        w.wr_id = 0x1234;
        w.opcode = opcode;
        w.send_flags = IBV_SEND_SIGNALED;
        w.sg_list = sges.as_ptr().cast_mut();
        w.num_sge = sges.len() as c_int;
        if is_atomic(opcode) {
            w.wr.atomic = ibv_send_wr_atomic {
                remote_addr: 0x10_0000,
                compare_add: 5,
                swap: 9,
                rkey: 0x77,
            };
        } else {
            w.wr.rdma = ibv_send_wr_rdma {
                remote_addr: 0x10_0000,
                rkey: 0x77,
            };
        }
        w
    }

    fn check(w: &ibv_send_wr, sges: &[ibv_sge], l: &SendLimits) -> Result<u32, Errno> {
        check_send(w, sges, &WrObjects::None, l)
    }

    fn encode_with(w: &ibv_send_wr, sges: &[ibv_sge], objects: &WrObjects<'_>, l: &SendLimits) -> (Slot, u32) {
        let len = check_send(w, sges, objects, l).unwrap();
        let mut slot = Slot::new(SEND_WQE_HEADER + l.payload_room);
        let (h, p) = slot.send();
        // SAFETY: checked; inline only with SGEs that point at live buffers.
        unsafe { encode_send(w, sges, len, objects, h, p) };
        (slot, len)
    }

    fn encode(w: &ibv_send_wr, sges: &[ibv_sge], l: &SendLimits) -> (Slot, u32) {
        encode_with(w, sges, &WrObjects::None, l)
    }

    fn sge_at(p: &[u8], i: usize) -> (u64, u32, u32) {
        let c = &p[i * 16..];
        (
            u64::from_ne_bytes(c[..8].try_into().unwrap()),
            u32::from_ne_bytes(c[8..12].try_into().unwrap()),
            u32::from_ne_bytes(c[12..16].try_into().unwrap()),
        )
    }

    #[test]
    fn send_carries_its_sges_and_length() {
        let sges = [sge(0x1000, 100), sge(0x2000, 28)];
        let (mut slot, len) = encode(&wr(IBV_WR_SEND, &sges), &sges, &lim(IBV_QPT_RC));
        assert_eq!(len, 128);
        // A SEND leaves the operand arm zeroed.
        assert_eq!(slot.arm::<[u8; 32]>(), [0; 32]);
        let (w, p) = slot.send();
        assert_eq!(
            (w.wr.wr_id, w.wr.opcode, w.wr.send_flags),
            (0x1234, IBV_WR_SEND as u32, IBV_SEND_SIGNALED)
        );
        assert_eq!(
            (
                w.dma.length,
                w.dma.resid,
                w.dma.num_sge,
                w.dma.cur_sge,
                w.dma.sge_offset
            ),
            (128, 128, 2, 0, 0)
        );
        assert_eq!(
            (w.state, w.status, w.mask, w.iova, w.ssn, w.first_psn),
            (0, 0, 0, 0, 0, 0)
        );
        assert_eq!(sge_at(p, 0), (0x1000, 100, 0x42));
        assert_eq!(sge_at(p, 1), (0x2000, 28, 0x42));
    }

    #[test]
    fn the_header_owes_nothing_to_what_the_slot_held_before() {
        // A slot a previous WQE (and the kernel's progress fields) left full
        // of bytes, and a fresh zeroed one, get the same SEND.
        let l = lim(IBV_QPT_RC);
        let send = wr(IBV_WR_SEND, &[]);
        let len = check(&send, &[], &l).unwrap();
        let mut used = Slot::new(SEND_WQE_HEADER + l.payload_room);
        let mut fresh = Slot::new(SEND_WQE_HEADER + l.payload_room);
        fresh.bytes()[..SEND_WQE_HEADER].fill(0);
        for slot in [&mut used, &mut fresh] {
            let (h, p) = slot.send();
            // SAFETY: checked, no data.
            unsafe { encode_send(&send, &[], len, &WrObjects::None, h, p) };
        }
        // All but the UD arm's address vector (which UD requests write) agree.
        let (a, b) = (
            used.bytes()[..SEND_WQE_HEADER].to_vec(),
            fresh.bytes()[..SEND_WQE_HEADER].to_vec(),
        );
        let av = core::mem::offset_of!(rxe_send_wqe, wr) + 24 + 32..core::mem::offset_of!(rxe_send_wqe, status);
        assert_eq!(a[..av.start], b[..av.start]);
        assert_eq!(a[av.end..], b[av.end..]);
    }

    #[test]
    fn immediate_and_invalidate_go_in_ex() {
        for op in [IBV_WR_SEND_WITH_IMM, IBV_WR_SEND_WITH_INV, IBV_WR_RDMA_WRITE_WITH_IMM] {
            let mut w = wr(op, &[]);
            w.imm_data = 0xdead_beef;
            let (mut slot, _) = encode(&w, &[], &lim(IBV_QPT_RC));
            assert_eq!(slot.ex(), 0xdead_beef);
            assert_eq!(slot.send().0.wr.opcode, op as u32);
        }
    }

    #[test]
    fn rdma_ops_carry_address_and_rkey() {
        for op in [IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_READ] {
            let sges = [sge(0x1000, 4096)];
            let (mut slot, len) = encode(&wr(op, &sges), &sges, &lim(IBV_QPT_RC));
            let a: kernel_abi::rxe_send_wr_wr_rdma = slot.arm();
            let h = slot.send().0;
            assert_eq!(
                (a.remote_addr, a.rkey, a.reserved, h.iova, len),
                (0x10_0000, 0x77, 0, 0x10_0000, 4096)
            );
        }
    }

    #[test]
    fn flush_carries_range_placement_and_level_as_stock_writes_them() {
        let mut slot = Slot::new(SEND_WQE_HEADER + lim(IBV_QPT_RC).payload_room);
        slot.bytes().fill(0xa5);
        let (h, _) = slot.send();
        write_header(h, 7, IBV_WR_FLUSH, IBV_SEND_SIGNALED, 0);
        let f = Flush {
            remote_addr: 0x20_0000,
            rkey: 0x99,
            length: 4096,
            placement: 1,
            level: 0,
        };
        set_flush(h, &f);
        let a: kernel_abi::rxe_send_wr_wr_flush = slot.arm();
        let h = slot.send().0;
        assert_eq!(
            (a.remote_addr, a.rkey, a.length, a.r#type, a.level),
            (0x20_0000, 0x99, 0, 1, 0)
        );
        assert_eq!(
            (h.dma.length, h.dma.resid, h.dma.num_sge, h.iova),
            (4096, 4096, 0, 0x20_0000)
        );
        assert_eq!((h.wr.opcode, h.wr.wr_id), (IBV_WR_FLUSH as u32, 7));
    }

    #[test]
    fn atomics_carry_operands() {
        for op in [IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD] {
            let sges = [sge(0x1000, 8)];
            let (mut slot, _) = encode(&wr(op, &sges), &sges, &lim(IBV_QPT_RC));
            let a: kernel_abi::rxe_send_wr_wr_atomic = slot.arm();
            assert_eq!((a.remote_addr, a.compare_add, a.swap, a.rkey), (0x10_0000, 5, 9, 0x77));
            assert_eq!(slot.send().0.iova, 0x10_0000);
        }
    }

    #[test]
    fn atomics_need_8_bytes_at_an_aligned_address() {
        let l = lim(IBV_QPT_RC);
        let short = [sge(0x1000, 4)];
        assert_eq!(
            check(&wr(IBV_WR_ATOMIC_FETCH_AND_ADD, &short), &short, &l),
            Err(Errno::EINVAL)
        );
        let ok = [sge(0x1000, 8)];
        let mut w = wr(IBV_WR_ATOMIC_CMP_AND_SWP, &ok);
        assert_eq!(check(&w, &ok, &l), Ok(8));
        w.wr.atomic.remote_addr = 0x10_0004;
        assert_eq!(check(&w, &ok, &l), Err(Errno::EINVAL));
    }

    #[test]
    fn local_inv_and_bind_mw() {
        let mut w = wr(IBV_WR_LOCAL_INV, &[]);
        w.imm_data = 0x55;
        let (mut slot, len) = encode(&w, &[], &lim(IBV_QPT_RC));
        assert_eq!(len, 0);
        assert_eq!(slot.ex(), 0x55);

        let w = wr(IBV_WR_BIND_MW, &[]);
        let b = MwBind {
            addr: 0x3000,
            length: 0x100,
            mr_lkey: 1,
            mw_rkey: 0x200,
            new_rkey: 0x201,
            access: 2,
        };
        for t in [IBV_QPT_RC, IBV_QPT_UC] {
            let (mut slot, _) = encode_with(&w, &[], &WrObjects::Bind(b), &lim(t));
            let m: kernel_abi::rxe_send_wr_wr_mw = slot.arm();
            assert_eq!(
                (m.addr, m.length, m.mr_lkey, m.mw_rkey, m.rkey, m.access),
                (0x3000, 0x100, 1, 0x200, 0x201, 2)
            );
        }
        // A bind carries no data and no immediate, and needs its window.
        let one = [sge(0x1000, 0)];
        let l = lim(IBV_QPT_RC);
        assert_eq!(
            check_send(&wr(IBV_WR_BIND_MW, &one), &one, &WrObjects::Bind(b), &l),
            Err(Errno::EINVAL)
        );
        let mut imm = w;
        imm.imm_data = 1;
        assert_eq!(check_send(&imm, &[], &WrObjects::Bind(b), &l), Err(Errno::EINVAL));
        assert_eq!(check_send(&w, &[], &WrObjects::Missing, &l), Err(Errno::EINVAL));
    }

    #[test]
    fn ud_sends_carry_the_ah() {
        let mut av = rxe_av::new_zeroed();
        av.port_num = 1;
        av.dmac = [1, 2, 3, 4, 5, 6];
        let w = wr(IBV_WR_SEND, &[]);
        let l = lim(IBV_QPT_UD);
        let dest = UdDest {
            remote_qpn: 0x11,
            remote_qkey: 0x1111_1111,
            ah_num: 3,
            av: &av,
        };
        let (mut slot, _) = encode_with(&w, &[], &WrObjects::Ud(dest), &l);
        let ud: kernel_abi::rxe_send_wr_wr_ud = slot.arm();
        // (The AV bytes are left as they were: the kernel reads ah_num.)
        assert_eq!(
            (ud.remote_qpn, ud.remote_qkey, ud.ah_num, ud.pkey_index),
            (0x11, 0x1111_1111, 3, 0)
        );
        // Without a kernel AH index the AV goes in whole.
        let (mut slot, _) = encode_with(&w, &[], &WrObjects::Ud(UdDest { ah_num: 0, ..dest }), &l);
        let ud: kernel_abi::rxe_send_wr_wr_ud = slot.arm();
        assert_eq!((ud.ah_num, ud.av.port_num, ud.av.dmac), (0, 1, [1, 2, 3, 4, 5, 6]));
        // No AH at all.
        assert_eq!(check_send(&w, &[], &WrObjects::Missing, &l), Err(Errno::EINVAL));
    }

    #[test]
    fn opcodes_follow_the_qp_type() {
        let all = 0..=15;
        let rc: Vec<c_int> = all.clone().filter(|&o| opcode_allowed(IBV_QPT_RC, o)).collect();
        assert_eq!(rc, vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        let uc: Vec<c_int> = all.clone().filter(|&o| opcode_allowed(IBV_QPT_UC, o)).collect();
        assert_eq!(uc, vec![0, 1, 2, 3, 8, 9]);
        let ud: Vec<c_int> = all.clone().filter(|&o| opcode_allowed(IBV_QPT_UD, o)).collect();
        assert_eq!(ud, vec![2, 3]);
        assert!(!opcode_allowed(1, IBV_WR_SEND)); // IBV_QPT_XRC..., not ours
                                                  // The limits' opcode set is the same one.
        for t in [IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD, 1] {
            let l = lim(t);
            for op in [-1, 0, 5, 9, 10, 15, 31, 32, 33, c_int::MAX, c_int::MIN] {
                assert_eq!(l.allows(op), opcode_allowed(t, op), "type {t} opcode {op}");
            }
        }
        let ud = lim(IBV_QPT_UD);
        assert_eq!(check(&wr(IBV_WR_RDMA_READ, &[]), &[], &ud), Err(Errno::EINVAL));
        assert_eq!(
            check(&wr(IBV_WR_ATOMIC_CMP_AND_SWP, &[]), &[], &lim(IBV_QPT_UC)),
            Err(Errno::EINVAL)
        );
        assert_eq!(check(&wr(-1, &[]), &[], &lim(IBV_QPT_RC)), Err(Errno::EINVAL));
        assert_eq!(check(&wr(10, &[]), &[], &lim(IBV_QPT_RC)), Err(Errno::EINVAL));
        // TSO
    }

    #[test]
    fn too_many_sges_is_einval() {
        let sges = [sge(0, 1); 5];
        let l = lim(IBV_QPT_RC);
        // SAFETY: every count given matches the list's entries or is refused.
        unsafe {
            assert_eq!(send_sges(&wr(IBV_WR_SEND, &sges), &l), Err(Errno::EINVAL));
            assert_eq!(send_sges(&wr(IBV_WR_SEND, &sges[..4]), &l).map(<[_]>::len), Ok(4));
            let mut negative = wr(IBV_WR_SEND, &sges);
            negative.num_sge = -1;
            assert_eq!(send_sges(&negative, &l), Err(Errno::EINVAL));
            let mut null = wr(IBV_WR_SEND, &sges[..1]);
            null.sg_list = core::ptr::null_mut();
            assert_eq!(send_sges(&null, &l), Err(Errno::EINVAL));
            null.num_sge = 0;
            assert_eq!(send_sges(&null, &l).map(<[_]>::len), Ok(0));
        }
        assert_eq!(check(&wr(IBV_WR_SEND, &sges[..4]), &sges[..4], &l), Ok(4));
        // The slot, not only the capability, bounds the list.
        let tight = SendLimits::new(IBV_QPT_RC, 8, 64, 3 * 16);
        assert_eq!(
            check(&wr(IBV_WR_SEND, &sges[..4]), &sges[..4], &tight),
            Err(Errno::EINVAL)
        );
        assert_eq!(check(&wr(IBV_WR_SEND, &sges[..3]), &sges[..3], &tight), Ok(3));
    }

    #[test]
    fn inline_data_is_copied_across_sges() {
        let a = *b"hello, ";
        let b = *b"inline ";
        let c = *b"world";
        let sges = [
            sge(a.as_ptr() as u64, 7),
            sge(b.as_ptr() as u64, 7),
            sge(0, 0),
            sge(c.as_ptr() as u64, 5),
        ];
        let mut w = wr(IBV_WR_SEND, &sges);
        w.send_flags |= IBV_SEND_INLINE;
        // SAFETY (in encode): every SGE points at a live local array of its length.
        let (mut slot, len) = encode(&w, &sges, &lim(IBV_QPT_RC));
        assert_eq!(len, 19);
        let (h, p) = slot.send();
        assert_eq!((h.dma.length, h.dma.num_sge), (19, 4));
        assert_eq!(&p[..19], b"hello, inline world");
        // The rest of the slot is left as it was.
        assert_eq!(p[19], 0xa5);
    }

    #[test]
    fn inline_too_long_is_einval_and_lengths_do_not_wrap() {
        let l = lim(IBV_QPT_RC);
        let inline = |sges: &[ibv_sge]| {
            let mut w = wr(IBV_WR_SEND, sges);
            w.send_flags |= IBV_SEND_INLINE;
            w
        };
        let long = [sge(0, 65)];
        assert_eq!(check(&inline(&long), &long, &l), Err(Errno::EINVAL));
        // Two lengths whose 32-bit sum wraps to a small number.
        let wrap = [sge(0, u32::MAX), sge(0, 2)];
        assert_eq!(check(&inline(&wrap), &wrap, &l), Err(Errno::EINVAL));
        // A capability larger than the slot is bounded by the slot.
        let big = SendLimits::new(IBV_QPT_RC, 4, 4096, l.payload_room);
        let slot_plus_one = [sge(0, (l.payload_room + 1) as u32)];
        assert_eq!(check(&inline(&slot_plus_one), &slot_plus_one, &big), Err(Errno::EINVAL));
        let slot_exactly = [sge(0x1000, l.payload_room as u32)];
        assert!(check(&inline(&slot_exactly), &slot_exactly, &big).is_ok());
        // Without INLINE, a message over 4 GiB is refused too.
        assert_eq!(check(&wr(IBV_WR_SEND, &wrap), &wrap, &l), Err(Errno::EINVAL));
    }

    #[test]
    fn receive_wqes() {
        let l = RecvLimits {
            max_sge: 2,
            payload_room: 128 - RECV_WQE_HEADER,
        };
        let sges = [sge(0x1000, 10), sge(0x2000, 20)];
        let len = validate_recv(&sges, &l).unwrap();
        let mut slot = Slot::new(128);
        let (w, p) = slot.recv();
        encode_recv(7, &sges, len, w, p);
        let (w, p) = slot.recv();
        assert_eq!(
            (w.wr_id, w.dma.length, w.dma.resid, w.dma.num_sge, w.dma.cur_sge),
            (7, 30, 30, 2, 0)
        );
        assert_eq!(sge_at(p, 1), (0x2000, 20, 0x42));
        assert_eq!(validate_recv(&[sge(0, 1); 3], &l), Err(Errno::EINVAL));
        let tight = RecvLimits {
            max_sge: 4,
            payload_room: 16,
        };
        assert_eq!(validate_recv(&sges, &tight), Err(Errno::EINVAL));
        assert_eq!(validate_recv(&[sge(0, u32::MAX), sge(0, 1)], &l), Err(Errno::EINVAL));
    }

    #[test]
    fn type_1_bind_bumps_only_the_key_byte() {
        assert_eq!(next_rkey(0x1234_5600), 0x1234_5601);
        assert_eq!(next_rkey(0x1234_56ff), 0x1234_5600);
        assert_eq!(next_rkey(0xffff_ffff), 0xffff_ff00);
    }

    #[test]
    fn only_ud_requests_and_window_binds_name_objects_and_the_fast_path_takes_allowed_opcodes_only() {
        for qp_type in [IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD] {
            let l = SendLimits::new(qp_type, 1, 0, 64);
            for opcode in (-2..40).chain([c_int::MIN, c_int::MAX]) {
                let names = qp_type == IBV_QPT_UD || opcode == IBV_WR_BIND_MW;
                assert_eq!(
                    l.allows_naming_no_object(opcode),
                    l.allows(opcode) && !names,
                    "QP type {qp_type}, opcode {opcode}"
                );
                if !(0..32).contains(&opcode) {
                    assert!(!l.allows(opcode));
                }
            }
        }
    }
}
