//! Creating, modifying, querying and destroying QPs.

use core::cell::UnsafeCell;
use core::ffi::{c_int, c_void};
use core::ptr::{self, addr_of_mut, NonNull};
use core::sync::atomic::{AtomicI32, Ordering};
use std::os::fd::RawFd;

use kernel_abi::{
    ib_uverbs_create_qp, ib_uverbs_create_qp_resp, ib_uverbs_destroy_qp, ib_uverbs_destroy_qp_resp,
    ib_uverbs_modify_qp, ib_uverbs_qp_dest, ib_uverbs_query_qp, ib_uverbs_query_qp_resp, rxe_create_qp_resp,
    IB_USER_VERBS_CMD_CREATE_QP, IB_USER_VERBS_CMD_DESTROY_QP, IB_USER_VERBS_CMD_MODIFY_QP, IB_USER_VERBS_CMD_QUERY_QP,
};
use log::debug;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::batch::Batch;
use super::object::{Doorbell, RxeQp};
use super::wr;
use crate::boundary;
use crate::command::{self, impl_write_cmd, WriteReq};
use crate::context::RxeContext;
use crate::cq::purge_qp_from_cqs;
use crate::errno::Errno;
use crate::libibverbs::control_objects::{ibv_ah_attr, ibv_gid, ibv_global_route, ibv_pd, ibv_qp};
use crate::libibverbs::cq::ibv_cq;
use crate::libibverbs::device_context::ibv_context;
use crate::libibverbs::qp::*;
use crate::libibverbs::srq::ibv_srq;
use crate::lifecycle::{self, Creating};
use crate::lock::QueueLock;
use crate::pd::{self, DomainUse};
use crate::work_queue::Locked;
use crate::wqe::{RecvLimits, SendLimits};
use crate::{recv_queue, send_queue};

/// Legacy `CREATE_QP` response: the core part, then rxe's ring info.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct CreateQpResp {
    pub core: ib_uverbs_create_qp_resp,
    pub drv: rxe_create_qp_resp,
}

impl_write_cmd!(ib_uverbs_create_qp, IB_USER_VERBS_CMD_CREATE_QP, CreateQpResp, core: ib_uverbs_create_qp_resp);

impl_write_cmd!(ib_uverbs_query_qp, IB_USER_VERBS_CMD_QUERY_QP, ib_uverbs_query_qp_resp);

impl WriteReq for ib_uverbs_modify_qp {
    const ID: u32 = IB_USER_VERBS_CMD_MODIFY_QP;
}

impl_write_cmd!(
    ib_uverbs_destroy_qp,
    IB_USER_VERBS_CMD_DESTROY_QP,
    ib_uverbs_destroy_qp_resp
);

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

/// The kernel handle of the SRQ a QP receives through, if any.
fn srq_handle(srq: *mut c_void) -> Option<u32> {
    // SAFETY: a non-null srq is an ibv_srq our create_srq made (the
    // ibv_create_qp contract: objects of the same context).
    unsafe { srq.cast::<ibv_srq>().as_ref() }.map(|s| s.handle)
}

fn cq_handle(cq: *mut ibv_cq) -> Result<u32, Errno> {
    // SAFETY: a CQ the caller passes for this context; null refused.
    unsafe { cq.as_ref() }.map(|c| c.handle).ok_or(Errno::EINVAL)
}

/// Maps the rings of a freshly created QP and checks every size the kernel
/// gave against what we will write into the slots.
fn map_queues(
    fd: RawFd,
    resp: &CreateQpResp,
    qp_type: c_int,
    has_srq: bool,
    lock: impl Fn() -> QueueLock,
) -> Result<(Locked<SendLimits>, Option<Locked<RecvLimits>>), Errno> {
    let core = &resp.core;
    let sq = send_queue::map(fd, &resp.drv.sq_mi, qp_type, core.max_send_sge, core.max_inline_data)?;
    let rq = if has_srq {
        None
    } else {
        Some(Locked::new(
            recv_queue::map(fd, &resp.drv.rq_mi, core.max_recv_sge)?,
            lock(),
        ))
    };
    Ok((Locked::new(sq, lock()), rq))
}

/// `send_ops` are the `ibv_qp_ex` operations asked for (checked), `None`
/// for a QP made by `create_qp` or without `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`.
fn create(args: &CreateArgs, ex: bool, send_ops: Option<u64>) -> Result<(*mut ibv_qp, ibv_qp_cap), Errno> {
    // SAFETY: the context is the live one the PD (or the caller) belongs to.
    let ctx = unsafe { RxeContext::from_ibv_context(args.context) }.ok_or(Errno::EINVAL)?;
    // SAFETY: a non-null PD is one of ours (refused when null).
    let pd = unsafe { args.pd.as_ref() }.ok_or(Errno::EINVAL)?;
    let fd = ctx.cmd_fd();
    // The types rxe serves, checked before anything else: an XRC QP comes
    // without a receive CQ (rdma_create_qp_ex), and programs that probe for
    // XRC take their branch on the kernel's EOPNOTSUPP, which stock reports.
    if !matches!(args.qp_type, IBV_QPT_RC | IBV_QPT_UC | IBV_QPT_UD) {
        return Err(Errno::EOPNOTSUPP);
    }
    let send_cq = cq_handle(args.send_cq)?;
    let recv_cq = cq_handle(args.recv_cq)?;
    let layout = ctx.layout.qp_ex;
    let qp_type = u8::try_from(args.qp_type).map_err(|_| Errno::EINVAL)?;

    // SAFETY: VerbsQp is plain C data (pointers, integers, pthread objects
    // that are initialised below); all-zero is its calloc'd state.
    let vqp = unsafe { core::mem::zeroed() };
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
    let srq = srq_handle(args.srq);
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
    let lock = || unsafe { pd::lock_for(args.pd) };
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
        wr::set_send_ops(vqp, layout, flags);
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
        let args = CreateArgs {
            context: p.context,
            pd,
            qp_context: a.qp_context,
            send_cq: a.send_cq,
            recv_cq: a.recv_cq,
            srq: a.srq,
            cap: a.cap,
            qp_type: a.qp_type,
            sq_sig_all: a.sq_sig_all,
        };
        match create(&args, false, None) {
            Ok((qp, cap)) => {
                // What the kernel granted, as ibv_cmd_create_qp reports it.
                a.cap = cap;
                qp
            }
            Err(e) => boundary::fail_ptr(e),
        }
    })
}

/// What `create_qp_ex` accepts: the stock provider's `RXE_QP_COMP_MASK_SUP`.
const CREATE_QP_EX_COMP_MASK: u32 =
    IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;

/// Checks `ibv_qp_init_attr_ex` as the stock provider's `check_qp_init_attr`
/// does; `EOPNOTSUPP` for what it cannot do, `EINVAL` without a PD.
fn check_create_ex(a: &ibv_qp_init_attr_ex, layout: QpExLayout) -> Result<(), Errno> {
    if a.comp_mask & !CREATE_QP_EX_COMP_MASK != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    if a.comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS != 0 && a.create_flags != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    if a.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0 {
        wr::check_send_ops(a.qp_type, a.send_ops_flags, layout)?;
    }
    if a.comp_mask & IBV_QP_INIT_ATTR_PD == 0 || a.pd.is_null() {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// `create_qp_ex`.
pub(crate) unsafe extern "C" fn create_qp_ex(context: *mut ibv_context, attr: *mut ibv_qp_init_attr_ex) -> *mut ibv_qp {
    boundary::guard("create_qp_ex", ptr::null_mut(), || {
        // SAFETY: the caller's attributes; null refused.
        let Some(a) = (unsafe { attr.as_mut() }) else {
            return boundary::fail_ptr(Errno::EINVAL);
        };
        // SAFETY: the caller's context (ours); null refused.
        let Some(ctx) = (unsafe { RxeContext::from_ibv_context(context) }) else {
            return boundary::fail_ptr(Errno::EINVAL);
        };
        if let Err(e) = check_create_ex(a, ctx.layout.qp_ex) {
            return boundary::fail_ptr(e);
        }
        let args = CreateArgs {
            context,
            pd: a.pd,
            qp_context: a.qp_context,
            send_cq: a.send_cq,
            recv_cq: a.recv_cq,
            srq: a.srq,
            cap: a.cap,
            qp_type: a.qp_type,
            sq_sig_all: a.sq_sig_all,
        };
        let send_ops = (a.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0).then_some(a.send_ops_flags);
        match create(&args, true, send_ops) {
            Ok((qp, cap)) => {
                // What the kernel granted, as ibv_cmd_create_qp reports it.
                a.cap = cap;
                qp
            }
            Err(e) => boundary::fail_ptr(e),
        }
    })
}

fn qp_dest(a: &ibv_ah_attr) -> ib_uverbs_qp_dest {
    ib_uverbs_qp_dest {
        // SAFETY: every arm of ibv_gid is plain bytes.
        dgid: unsafe { a.grh.dgid.raw },
        flow_label: a.grh.flow_label,
        dlid: a.dlid,
        reserved: 0,
        sgid_index: a.grh.sgid_index,
        hop_limit: a.grh.hop_limit,
        traffic_class: a.grh.traffic_class,
        sl: a.sl,
        src_path_bits: a.src_path_bits,
        static_rate: a.static_rate,
        is_global: a.is_global,
        port_num: a.port_num,
    }
}

fn ah_attr_from(d: &ib_uverbs_qp_dest) -> ibv_ah_attr {
    ibv_ah_attr {
        grh: ibv_global_route {
            dgid: ibv_gid { raw: d.dgid },
            flow_label: d.flow_label,
            sgid_index: d.sgid_index,
            hop_limit: d.hop_limit,
            traffic_class: d.traffic_class,
        },
        dlid: d.dlid,
        sl: d.sl,
        src_path_bits: d.src_path_bits,
        static_rate: d.static_rate,
        is_global: d.is_global,
        port_num: d.port_num,
    }
}

/// The legacy `MODIFY_QP` body for `attr`/`mask`, as `ibv_cmd_modify_qp`
/// fills it: only the fields the mask names.
pub(crate) fn modify_cmd(handle: u32, a: &ibv_qp_attr, mask: c_int) -> ib_uverbs_modify_qp {
    let has = |bit: c_int| mask & bit != 0;
    let zero_dest = ib_uverbs_qp_dest {
        dgid: [0; 16],
        flow_label: 0,
        dlid: 0,
        reserved: 0,
        sgid_index: 0,
        hop_limit: 0,
        traffic_class: 0,
        sl: 0,
        src_path_bits: 0,
        static_rate: 0,
        is_global: 0,
        port_num: 0,
    };
    let mut c = ib_uverbs_modify_qp {
        dest: zero_dest,
        alt_dest: zero_dest,
        qp_handle: handle,
        attr_mask: mask as u32,
        qkey: 0,
        rq_psn: 0,
        sq_psn: 0,
        dest_qp_num: 0,
        qp_access_flags: 0,
        pkey_index: 0,
        alt_pkey_index: 0,
        qp_state: 0,
        cur_qp_state: 0,
        path_mtu: 0,
        path_mig_state: 0,
        en_sqd_async_notify: 0,
        max_rd_atomic: 0,
        max_dest_rd_atomic: 0,
        min_rnr_timer: 0,
        port_num: 0,
        timeout: 0,
        retry_cnt: 0,
        rnr_retry: 0,
        alt_port_num: 0,
        alt_timeout: 0,
        reserved: [0; 2],
        driver_data: [],
    };
    if has(IBV_QP_STATE) {
        c.qp_state = a.qp_state as u8;
    }
    if has(IBV_QP_CUR_STATE) {
        c.cur_qp_state = a.cur_qp_state as u8;
    }
    if has(IBV_QP_EN_SQD_ASYNC_NOTIFY) {
        c.en_sqd_async_notify = a.en_sqd_async_notify;
    }
    if has(IBV_QP_ACCESS_FLAGS) {
        c.qp_access_flags = a.qp_access_flags;
    }
    if has(IBV_QP_PKEY_INDEX) {
        c.pkey_index = a.pkey_index;
    }
    if has(IBV_QP_PORT) {
        c.port_num = a.port_num;
    }
    if has(IBV_QP_QKEY) {
        c.qkey = a.qkey;
    }
    if has(IBV_QP_AV) {
        c.dest = qp_dest(&a.ah_attr);
    }
    if has(IBV_QP_PATH_MTU) {
        c.path_mtu = a.path_mtu as u8;
    }
    if has(IBV_QP_TIMEOUT) {
        c.timeout = a.timeout;
    }
    if has(IBV_QP_RETRY_CNT) {
        c.retry_cnt = a.retry_cnt;
    }
    if has(IBV_QP_RNR_RETRY) {
        c.rnr_retry = a.rnr_retry;
    }
    if has(IBV_QP_RQ_PSN) {
        c.rq_psn = a.rq_psn;
    }
    if has(IBV_QP_MAX_QP_RD_ATOMIC) {
        c.max_rd_atomic = a.max_rd_atomic;
    }
    if has(IBV_QP_ALT_PATH) {
        c.alt_pkey_index = a.alt_pkey_index;
        c.alt_port_num = a.alt_port_num;
        c.alt_timeout = a.alt_timeout;
        c.alt_dest = qp_dest(&a.alt_ah_attr);
    }
    if has(IBV_QP_MIN_RNR_TIMER) {
        c.min_rnr_timer = a.min_rnr_timer;
    }
    if has(IBV_QP_SQ_PSN) {
        c.sq_psn = a.sq_psn;
    }
    if has(IBV_QP_MAX_DEST_RD_ATOMIC) {
        c.max_dest_rd_atomic = a.max_dest_rd_atomic;
    }
    if has(IBV_QP_PATH_MIG_STATE) {
        c.path_mig_state = a.path_mig_state as u8;
    }
    if has(IBV_QP_DEST_QPN) {
        c.dest_qp_num = a.dest_qp_num;
    }
    c
}

/// Masks from `IBV_QP_RATE_LIMIT` on need the extended interface, which
/// rxe has nothing behind: `EOPNOTSUPP`, as `ibv_cmd_modify_qp` and
/// `ibv_cmd_query_qp` give for the stock provider.
fn check_legacy_mask(mask: c_int) -> Result<(), Errno> {
    if mask < 0 || mask & !(IBV_QP_RATE_LIMIT - 1) != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    Ok(())
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
                    // SAFETY: the state field of our live QP; libibverbs
                    // writes the same value right after we return.
                    unsafe { AtomicI32::from_ptr(addr_of_mut!((*q.ibv_qp()).state)) }
                        .store(a.qp_state, Ordering::Relaxed);
                    if a.qp_state == IBV_QPS_RESET {
                        // SAFETY: the CQs of our live QP (libibverbs does
                        // not destroy a CQ a QP still uses); qp_num and
                        // the CQ pointers are written once, at creation.
                        unsafe {
                            let v = &*q.ibv_qp();
                            purge_qp_from_cqs(v.send_cq, v.recv_cq, v.qp_num, !v.srq.is_null());
                        }
                    }
                }
                0
            }
            Err(e) => boundary::fail_code(e),
        }
    })
}

/// Fills `attr` and `init_attr` from a `QUERY_QP` response, as
/// `ibv_cmd_query_qp` does.
fn fill_query(r: &ib_uverbs_query_qp_resp, q: &ibv_qp, attr: &mut ibv_qp_attr, init: &mut ibv_qp_init_attr) {
    attr.qkey = r.qkey;
    attr.rq_psn = r.rq_psn;
    attr.sq_psn = r.sq_psn;
    attr.dest_qp_num = r.dest_qp_num;
    attr.qp_access_flags = r.qp_access_flags;
    attr.pkey_index = r.pkey_index;
    attr.alt_pkey_index = r.alt_pkey_index;
    attr.qp_state = c_int::from(r.qp_state);
    attr.cur_qp_state = c_int::from(r.cur_qp_state);
    attr.path_mtu = c_int::from(r.path_mtu);
    attr.path_mig_state = c_int::from(r.path_mig_state);
    attr.sq_draining = r.sq_draining;
    attr.max_rd_atomic = r.max_rd_atomic;
    attr.max_dest_rd_atomic = r.max_dest_rd_atomic;
    attr.min_rnr_timer = r.min_rnr_timer;
    attr.port_num = r.port_num;
    attr.timeout = r.timeout;
    attr.retry_cnt = r.retry_cnt;
    attr.rnr_retry = r.rnr_retry;
    attr.alt_port_num = r.alt_port_num;
    attr.alt_timeout = r.alt_timeout;
    let cap = ibv_qp_cap {
        max_send_wr: r.max_send_wr,
        max_recv_wr: r.max_recv_wr,
        max_send_sge: r.max_send_sge,
        max_recv_sge: r.max_recv_sge,
        max_inline_data: r.max_inline_data,
    };
    attr.cap = cap;
    attr.ah_attr = ah_attr_from(&r.dest);
    attr.alt_ah_attr = ah_attr_from(&r.alt_dest);
    init.qp_context = q.qp_context;
    init.send_cq = q.send_cq.cast();
    init.recv_cq = q.recv_cq.cast();
    init.srq = q.srq;
    init.qp_type = q.qp_type;
    init.cap = cap;
    init.sq_sig_all = c_int::from(r.sq_sig_all);
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
                // SAFETY: the core fields of our live QP, read only.
                fill_query(&r, unsafe { &*q.ibv_qp() }, attr, init);
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
        // SAFETY: the QP is live; its CQ pointers, SRQ and qp_num were written at creation.
        let (send_cq, recv_cq, qp_num, has_srq) = unsafe {
            let v = &*q.ibv_qp();
            (v.send_cq, v.recv_cq, v.qp_num, !v.srq.is_null())
        };
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
        // SAFETY: made by Creating::finish in create, freed once, after the
        // kernel let the QP go; dropping the rings unmaps them.
        match unsafe { lifecycle::destroy(obj, || destroy_kernel_qp(fd, handle), wait) } {
            Ok(()) => {
                // As at RESET: the destroyed QP's completions leave its CQs,
                // which libibverbs keeps alive while the QP used them.
                // SAFETY: the QP's CQs, live (the QP was using them until now).
                unsafe { purge_qp_from_cqs(send_cq.cast(), recv_cq.cast(), qp_num, has_srq) };
                0
            }
            Err(e) => boundary::fail_code(e),
        }
    })
}

/// The kernel's `DESTROY_QP`: the undo of a create and the first step of
/// `destroy_qp`.
fn destroy_kernel_qp(fd: RawFd, handle: u32) -> Result<ib_uverbs_destroy_qp_resp, Errno> {
    command::write_cmd(
        fd,
        ib_uverbs_destroy_qp {
            response: 0,
            qp_handle: handle,
            reserved: 0,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::offset_of;

    fn attr() -> ibv_qp_attr {
        // SAFETY: plain C data.
        let mut a: ibv_qp_attr = unsafe { core::mem::zeroed() };
        a.qp_state = 3;
        a.path_mtu = 3;
        a.dest_qp_num = 0x123;
        a.rq_psn = 7;
        a.sq_psn = 9;
        a.max_dest_rd_atomic = 1;
        a.min_rnr_timer = 12;
        a.ah_attr.dlid = 5;
        a.ah_attr.is_global = 1;
        a.ah_attr.port_num = 1;
        a.ah_attr.grh.sgid_index = 1;
        a.ah_attr.grh.hop_limit = 64;
        a.timeout = 14;
        a.qkey = 0x1111;
        a
    }

    #[test]
    fn modify_copies_only_the_masked_fields() {
        let a = attr();
        let c = modify_cmd(4, &a, IBV_QP_STATE);
        assert_eq!(
            (c.qp_handle, c.attr_mask, c.qp_state, c.path_mtu, c.dest_qp_num),
            (4, 1, 3, 0, 0)
        );
        let rtr = IBV_QP_STATE
            | IBV_QP_AV
            | IBV_QP_PATH_MTU
            | IBV_QP_DEST_QPN
            | IBV_QP_RQ_PSN
            | IBV_QP_MAX_DEST_RD_ATOMIC
            | IBV_QP_MIN_RNR_TIMER;
        let c = modify_cmd(4, &a, rtr);
        assert_eq!(
            (
                c.path_mtu,
                c.dest_qp_num,
                c.rq_psn,
                c.max_dest_rd_atomic,
                c.min_rnr_timer
            ),
            (3, 0x123, 7, 1, 12)
        );
        assert_eq!(
            (
                c.dest.dlid,
                c.dest.is_global,
                c.dest.port_num,
                c.dest.sgid_index,
                c.dest.hop_limit
            ),
            (5, 1, 1, 1, 64)
        );
        assert_eq!((c.sq_psn, c.timeout, c.qkey), (0, 0, 0));
        let c = modify_cmd(4, &a, IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_QKEY);
        assert_eq!((c.sq_psn, c.timeout, c.qkey, c.dest.dlid), (9, 14, 0x1111, 0));
    }

    #[test]
    fn extended_masks_are_not_supported() {
        assert_eq!(check_legacy_mask(IBV_QP_STATE | IBV_QP_DEST_QPN), Ok(()));
        assert_eq!(check_legacy_mask(IBV_QP_RATE_LIMIT), Err(Errno::EOPNOTSUPP));
        assert_eq!(check_legacy_mask(-1), Err(Errno::EOPNOTSUPP));
    }

    #[test]
    fn create_ex_checks_masks_and_send_ops_as_stock_does() {
        let v44 = QpExLayout::for_release(44);
        // SAFETY: plain C data.
        let mut a: ibv_qp_init_attr_ex = unsafe { core::mem::zeroed() };
        let mut pd = ibv_pd {
            context: ptr::null_mut(),
            handle: 0,
        };
        a.pd = &mut pd;
        a.qp_type = IBV_QPT_UD;
        a.comp_mask = IBV_QP_INIT_ATTR_PD;
        assert_eq!(check_create_ex(&a, v44), Ok(()));
        a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
        a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
        assert_eq!(check_create_ex(&a, v44), Ok(()));
        a.send_ops_flags |= IBV_QP_EX_WITH_RDMA_WRITE;
        assert_eq!(check_create_ex(&a, v44), Err(Errno::EOPNOTSUPP));
        a.qp_type = IBV_QPT_UC;
        assert_eq!(check_create_ex(&a, v44), Ok(()));
        a.send_ops_flags |= IBV_QP_EX_WITH_RDMA_READ;
        assert_eq!(check_create_ex(&a, v44), Err(Errno::EOPNOTSUPP));
        a.qp_type = IBV_QPT_RC;
        a.send_ops_flags = ((1 << 10) - 1) | IBV_QP_EX_WITH_ATOMIC_WRITE;
        assert_eq!(check_create_ex(&a, v44), Ok(()));
        // No wr_atomic_write slot before v44, no wr_flush before v45; never TSO.
        assert_eq!(check_create_ex(&a, QpExLayout::for_release(43)), Err(Errno::EOPNOTSUPP));
        a.send_ops_flags = IBV_QP_EX_WITH_FLUSH;
        assert_eq!(check_create_ex(&a, v44), Err(Errno::EOPNOTSUPP));
        assert_eq!(check_create_ex(&a, QpExLayout::for_release(45)), Ok(()));
        a.qp_type = IBV_QPT_UC;
        assert_eq!(check_create_ex(&a, QpExLayout::for_release(45)), Err(Errno::EOPNOTSUPP));
        a.qp_type = IBV_QPT_RC;
        a.send_ops_flags = IBV_QP_EX_WITH_TSO;
        assert_eq!(check_create_ex(&a, QpExLayout::for_release(45)), Err(Errno::EOPNOTSUPP));
        a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
        a.create_flags = 1;
        assert_eq!(check_create_ex(&a, v44), Err(Errno::EOPNOTSUPP));
        a.create_flags = 0;
        assert_eq!(check_create_ex(&a, v44), Ok(()));
        a.comp_mask = IBV_QP_INIT_ATTR_CREATE_FLAGS;
        assert_eq!(check_create_ex(&a, v44), Err(Errno::EINVAL));
        a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD;
        assert_eq!(check_create_ex(&a, v44), Err(Errno::EOPNOTSUPP));
    }

    /// Creates a QP against a command fd that answers nothing, so the
    /// create fails after the "kernel object" exists and is undone. Returns
    /// the errno and the `user_handle` the kernel was given.
    fn create_against_a_deaf_kernel(kernel: &crate::lifecycle::fault::DeafKernel) -> (Errno, u64) {
        use crate::libibverbs::layout::Layout;
        // SAFETY: plain C data, all-zero as calloc leaves it.
        let mut ibv_ctx: ibv_context = unsafe { core::mem::zeroed() };
        ibv_ctx.cmd_fd = kernel.fd();
        let mut ctx = RxeContext {
            ibv_ctx: core::cell::UnsafeCell::new(ibv_ctx),
            layout: Layout::select(34, 44).unwrap(),
        };
        let context = ptr::from_mut(&mut ctx).cast::<ibv_context>();
        let mut pd = crate::pd::RxePd::protection(context, 1);
        // SAFETY: plain C data.
        let mut cq: ibv_cq = unsafe { core::mem::zeroed() };
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
        // SAFETY: plain C data, all-zero as calloc leaves it.
        let mut ibv_ctx: ibv_context = unsafe { core::mem::zeroed() };
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
}
