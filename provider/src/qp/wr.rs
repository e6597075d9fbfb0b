//! The `ibv_qp_ex` work-request API: `ibv_wr_start`, the builders
//! (`ibv_wr_send`, `ibv_wr_rdma_write`, ...), the setters
//! (`ibv_wr_set_sge`, `ibv_wr_set_inline_data`, `ibv_wr_set_ud_addr`, ...),
//! `ibv_wr_complete` and `ibv_wr_abort`.
//!
//! `wr_start` takes the send queue's lock and `wr_complete`/`wr_abort`
//! release it, as in the stock provider. Each builder writes a WQE header in
//! place in the next free slot and advances our private producer index;
//! setters fill in the data of the WQE built last. Nothing is published
//! before `wr_complete`. The first error (ring full, data too large, a setter
//! without a builder, a UD WQE without address) is recorded; later calls of
//! the batch do nothing, and `wr_complete` refuses the whole batch with that
//! errno: the producer index goes back to the published one, so the slots
//! written are simply overwritten later. Nothing is ever half-posted.
//!
//! The callbacks libibverbs' inline `ibv_wr_*` call are pointers in the QP's
//! `ibv_qp_ex`; which ones a QP gets follows `send_ops_flags` as checked by
//! [`check_send_ops`], the stock provider's table. `wr_atomic_write` has its
//! slot only from rdma-core v44 on ([`QpExLayout::has_atomic_write`]); the
//! kernel (6.1) then fails it with a completion error, exactly as with the
//! stock provider. `wr_flush` likewise from v45 on ([`QpExLayout::has_flush`]):
//! Linux 6.2+ runs it (Debian 13's 6.12), older kernels fail it with a
//! completion error, as with the stock provider. There is no
//! `wr_set_xrc_srqn` (rxe has no XRC) and no TSO.
//!
//! The callbacks themselves, which take the raw `ibv_qp_ex`, are in
//! [`crate::entry::qp`]; here are the checks of the operations asked for.

#![forbid(unsafe_code)]

use core::ffi::c_int;

use log::warn;

use crate::errno::Errno;
use crate::libibverbs::qp::*;

/// The send operations a QP of `qp_type` may be created with, as the stock
/// provider's `check_qp_init_attr` allows them (`EOPNOTSUPP` otherwise).
/// Atomic write and flush only where this libibverbs has their callback slots.
pub(crate) fn check_send_ops(qp_type: c_int, flags: u64, layout: QpExLayout) -> Result<(), Errno> {
    let rc = IBV_QP_EX_WITH_RDMA_WRITE
        | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
        | IBV_QP_EX_WITH_SEND
        | IBV_QP_EX_WITH_SEND_WITH_IMM
        | IBV_QP_EX_WITH_RDMA_READ
        | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP
        | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD
        | IBV_QP_EX_WITH_LOCAL_INV
        | IBV_QP_EX_WITH_BIND_MW
        | IBV_QP_EX_WITH_SEND_WITH_INV
        | if layout.has_atomic_write() {
            IBV_QP_EX_WITH_ATOMIC_WRITE
        } else {
            0
        }
        | if layout.has_flush() { IBV_QP_EX_WITH_FLUSH } else { 0 };
    let uc = IBV_QP_EX_WITH_RDMA_WRITE
        | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
        | IBV_QP_EX_WITH_SEND
        | IBV_QP_EX_WITH_SEND_WITH_IMM
        | IBV_QP_EX_WITH_BIND_MW
        | IBV_QP_EX_WITH_SEND_WITH_INV;
    let ud = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
    let supported = match qp_type {
        IBV_QPT_RC => rc,
        IBV_QPT_UC => uc,
        IBV_QPT_UD => ud,
        _ => return Err(Errno::EOPNOTSUPP),
    };
    if flags & !supported != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    Ok(())
}

/// Logs a misuse of the `ibv_wr_*` pairs, out of line: the entries' frames stay as small as
/// their normal paths need.
#[cold]
#[inline(never)]
pub(crate) fn misuse(what: &'static str) {
    warn!("{what}");
}
