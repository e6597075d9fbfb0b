//! Creating, modifying, querying and destroying QPs: the checks and the
//! kernel commands. The C entries are in [`crate::entry::qp`].

#![forbid(unsafe_code)]

use core::ffi::c_int;
use std::os::fd::RawFd;

use kernel_abi::{
    ib_uverbs_create_qp, ib_uverbs_create_qp_resp, ib_uverbs_destroy_qp, ib_uverbs_destroy_qp_resp,
    ib_uverbs_modify_qp, ib_uverbs_qp_dest, ib_uverbs_query_qp, ib_uverbs_query_qp_resp, rxe_create_qp_resp,
    IB_USER_VERBS_CMD_CREATE_QP, IB_USER_VERBS_CMD_DESTROY_QP, IB_USER_VERBS_CMD_MODIFY_QP, IB_USER_VERBS_CMD_QUERY_QP,
};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::wr;
use crate::command::{self, impl_write_cmd, WriteReq};
use crate::errno::Errno;
use crate::libibverbs::control_objects::{ibv_ah_attr, ibv_gid, ibv_global_route, ibv_qp};
use crate::libibverbs::qp::*;
use crate::lock::QueueLock;
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

/// Maps the rings of a freshly created QP and checks every size the kernel
/// gave against what we will write into the slots.
pub(crate) fn map_queues(
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

/// What `create_qp_ex` accepts: the stock provider's `RXE_QP_COMP_MASK_SUP`.
const CREATE_QP_EX_COMP_MASK: u32 =
    IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;

/// Checks `ibv_qp_init_attr_ex` as the stock provider's `check_qp_init_attr`
/// does; `EOPNOTSUPP` for what it cannot do, `EINVAL` without a PD.
pub(crate) fn check_create_ex(a: &ibv_qp_init_attr_ex, layout: QpExLayout) -> Result<(), Errno> {
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

fn qp_dest(a: &ibv_ah_attr) -> ib_uverbs_qp_dest {
    ib_uverbs_qp_dest {
        dgid: a.grh.dgid.bytes(),
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
    // Each attribute the mask names, copied into the kernel's field of that name.
    macro_rules! copy_masked {
        ($($bit:ident => $field:ident $(as $t:ty)?;)*) => {
            $(if has($bit) {
                c.$field = a.$field $(as $t)?;
            })*
        };
    }
    copy_masked! {
        IBV_QP_STATE => qp_state as u8;
        IBV_QP_CUR_STATE => cur_qp_state as u8;
        IBV_QP_EN_SQD_ASYNC_NOTIFY => en_sqd_async_notify;
        IBV_QP_ACCESS_FLAGS => qp_access_flags;
        IBV_QP_PKEY_INDEX => pkey_index;
        IBV_QP_PORT => port_num;
        IBV_QP_QKEY => qkey;
        IBV_QP_PATH_MTU => path_mtu as u8;
        IBV_QP_TIMEOUT => timeout;
        IBV_QP_RETRY_CNT => retry_cnt;
        IBV_QP_RNR_RETRY => rnr_retry;
        IBV_QP_RQ_PSN => rq_psn;
        IBV_QP_MAX_QP_RD_ATOMIC => max_rd_atomic;
        IBV_QP_MIN_RNR_TIMER => min_rnr_timer;
        IBV_QP_SQ_PSN => sq_psn;
        IBV_QP_MAX_DEST_RD_ATOMIC => max_dest_rd_atomic;
        IBV_QP_PATH_MIG_STATE => path_mig_state as u8;
        IBV_QP_DEST_QPN => dest_qp_num;
    }
    if has(IBV_QP_AV) {
        c.dest = qp_dest(&a.ah_attr);
    }
    if has(IBV_QP_ALT_PATH) {
        c.alt_pkey_index = a.alt_pkey_index;
        c.alt_port_num = a.alt_port_num;
        c.alt_timeout = a.alt_timeout;
        c.alt_dest = qp_dest(&a.alt_ah_attr);
    }
    c
}

/// Masks from `IBV_QP_RATE_LIMIT` on need the extended interface, which
/// rxe has nothing behind: `EOPNOTSUPP`, as `ibv_cmd_modify_qp` and
/// `ibv_cmd_query_qp` give for the stock provider.
pub(crate) fn check_legacy_mask(mask: c_int) -> Result<(), Errno> {
    if mask < 0 || mask & !(IBV_QP_RATE_LIMIT - 1) != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    Ok(())
}

/// Fills `attr` and `init_attr` from a `QUERY_QP` response, as
/// `ibv_cmd_query_qp` does.
pub(crate) fn fill_query(r: &ib_uverbs_query_qp_resp, q: &ibv_qp, attr: &mut ibv_qp_attr, init: &mut ibv_qp_init_attr) {
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

/// The kernel's `DESTROY_QP`: the undo of a create and the first step of
/// `destroy_qp`.
pub(crate) fn destroy_kernel_qp(fd: RawFd, handle: u32) -> Result<ib_uverbs_destroy_qp_resp, Errno> {
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
    use crate::libibverbs::control_objects::ibv_pd;
    use core::ptr;

    fn attr() -> ibv_qp_attr {
        let mut a: ibv_qp_attr = crate::libibverbs::runtime::zeroed();
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
        let mut a: ibv_qp_init_attr_ex = crate::libibverbs::runtime::zeroed();
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
}
