//! What a queue accepts: the slot layout and the limits each request is
//! checked against.

#![forbid(unsafe_code)]

use core::ffi::c_int;
use core::mem::size_of;

use kernel_abi::{rxe_recv_wqe, rxe_send_wqe, rxe_sge};

use crate::libibverbs::qp::*;

/// Bytes of a send slot before its payload.
pub(crate) const SEND_WQE_HEADER: usize = size_of::<rxe_send_wqe>();
/// Bytes of a receive slot before its SGEs.
pub(crate) const RECV_WQE_HEADER: usize = size_of::<rxe_recv_wqe>();
pub(crate) const SGE_SIZE: usize = size_of::<rxe_sge>();

/// What a send queue accepts: the QP type, its capabilities as the kernel
/// granted them, and the payload room of one slot; and, derived from them
/// once, what the per-request checks compare against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SendLimits {
    pub qp_type: c_int,
    pub max_sge: u32,
    pub max_inline: u32,
    /// Slot size minus [`SEND_WQE_HEADER`].
    pub payload_room: usize,
    /// Bit `n` set: the legacy opcode `n` is allowed ([`opcode_allowed`]).
    opcodes: u32,
    /// Bit `n` set: the legacy opcode `n` is allowed and a request with it
    /// names no provider object (no AH: not UD; no window: not BIND_MW)
    /// ([`allows_naming_no_object`](Self::allows_naming_no_object)).
    no_objects: u32,
    /// SGEs a WQE may carry: `max_sge`, bounded by the slot.
    pub(crate) sge_room: u32,
    /// Inline bytes a WQE may carry: `max_inline`, bounded by the slot.
    pub(crate) inline_room: u32,
}

impl SendLimits {
    pub(crate) fn new(qp_type: c_int, max_sge: u32, max_inline: u32, payload_room: usize) -> SendLimits {
        let opcodes = (0..32)
            .filter(|&op| opcode_allowed(qp_type, op))
            .fold(0, |m, op| m | 1 << op);
        let no_objects = if qp_type == IBV_QPT_UD {
            0
        } else {
            opcodes & !(1 << IBV_WR_BIND_MW)
        };
        let sge_room = max_sge.min(u32::try_from(payload_room / SGE_SIZE).unwrap_or(u32::MAX));
        let inline_room = max_inline.min(u32::try_from(payload_room).unwrap_or(u32::MAX));
        SendLimits {
            qp_type,
            max_sge,
            max_inline,
            payload_room,
            opcodes,
            no_objects,
            sge_room,
            inline_room,
        }
    }

    /// Whether `opcode` is allowed and a request with it names no AH or
    /// window: on an RC or UC QP every allowed opcode but BIND_MW, never on a
    /// UD QP. A request it answers yes for needs no [`allows`](Self::allows).
    #[inline(always)]
    pub(crate) fn allows_naming_no_object(&self, opcode: c_int) -> bool {
        // A negative opcode is a huge u32, outside the set as any >= 32 is.
        let op = opcode as u32;
        op < 32 && (self.no_objects >> op) & 1 != 0
    }

    #[inline(always)]
    pub(crate) fn allows(&self, opcode: c_int) -> bool {
        // A negative opcode is a huge u32, outside the set as any >= 32 is.
        let op = opcode as u32;
        op < 32 && (self.opcodes >> op) & 1 != 0
    }
}

/// What a receive queue accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RecvLimits {
    pub max_sge: u32,
    /// Slot size minus [`RECV_WQE_HEADER`].
    pub payload_room: usize,
}

/// A queue's limits also say what its slots begin with.
pub(crate) trait QueueLimits {
    type Header: zerocopy::FromBytes;
}

impl QueueLimits for SendLimits {
    type Header = rxe_send_wqe;
}

impl QueueLimits for RecvLimits {
    type Header = rxe_recv_wqe;
}

/// Whether `opcode` may be posted on a QP of `qp_type` with the legacy
/// `ibv_post_send` (the opcodes of rdma-core's rxe send-ops tables, as the
/// kernel's `rxe_wr_opcode_info` allows them).
pub(crate) fn opcode_allowed(qp_type: c_int, opcode: c_int) -> bool {
    match qp_type {
        IBV_QPT_RC => matches!(
            opcode,
            IBV_WR_RDMA_WRITE
                | IBV_WR_RDMA_WRITE_WITH_IMM
                | IBV_WR_SEND
                | IBV_WR_SEND_WITH_IMM
                | IBV_WR_RDMA_READ
                | IBV_WR_ATOMIC_CMP_AND_SWP
                | IBV_WR_ATOMIC_FETCH_AND_ADD
                | IBV_WR_LOCAL_INV
                | IBV_WR_BIND_MW
                | IBV_WR_SEND_WITH_INV
        ),
        IBV_QPT_UC => matches!(
            opcode,
            IBV_WR_RDMA_WRITE
                | IBV_WR_RDMA_WRITE_WITH_IMM
                | IBV_WR_SEND
                | IBV_WR_SEND_WITH_IMM
                | IBV_WR_BIND_MW
                | IBV_WR_SEND_WITH_INV
        ),
        IBV_QPT_UD => matches!(opcode, IBV_WR_SEND | IBV_WR_SEND_WITH_IMM),
        _ => false,
    }
}
