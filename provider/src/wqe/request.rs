//! What a send request names beyond its SGEs: the UD destination, the
//! window bind, the operation built through the `ibv_wr_*` API.

#![forbid(unsafe_code)]

use core::ffi::c_int;

use kernel_abi::rxe_av;

/// The destination of a UD send, from the work request and its AH.
#[derive(Clone, Copy)]
pub(crate) struct UdDest<'a> {
    pub remote_qpn: u32,
    pub remote_qkey: u32,
    /// The kernel's AH index; 0 on kernels without them, where `av` goes
    /// into the WQE instead.
    pub ah_num: u32,
    pub av: &'a rxe_av,
}

/// A memory-window bind (`IBV_WR_BIND_MW`). `pub`: `crate::fuzzing` hands it to the fuzz targets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MwBind {
    pub addr: u64,
    pub length: u64,
    pub mr_lkey: u32,
    pub mw_rkey: u32,
    /// The rkey the window has after the bind.
    pub new_rkey: u32,
    pub access: u32,
}

/// What the provider objects a legacy `ibv_send_wr` points at (its AH, its
/// MW and MR) mean for the WQE, read by the caller, who owns those types.
#[derive(Clone, Copy)]
pub(crate) enum WrObjects<'a> {
    /// The request names no object (not UD, not BIND_MW).
    None,
    /// A UD QP's request and its AH.
    Ud(UdDest<'a>),
    /// A BIND_MW request and its window (and MR, unless it unbinds).
    Bind(MwBind),
    /// A UD request without an AH, or a bind without a window (or without
    /// an MR for a non-empty range): refused.
    Missing,
}

/// The operation of a send WQE built through the `ibv_wr_*` API: what
/// `ibv_qp_ex`'s builders set before the data setters add the data.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SendRequest {
    pub wr_id: u64,
    pub opcode: c_int,
    pub send_flags: u32,
    /// Immediate data (big-endian) or the rkey to invalidate.
    pub imm_data: u32,
    /// `wr.rdma` (or `wr.atomic`'s address and rkey for atomics).
    pub remote_addr: u64,
    pub rkey: u32,
    pub compare_add: u64,
    pub swap: u64,
    pub bind: Option<MwBind>,
}

/// What `ibv_wr_flush` asks for.
pub(crate) struct Flush {
    pub remote_addr: u64,
    pub rkey: u32,
    pub length: u32,
    /// `IB_FLUSH_GLOBAL` and/or `IB_FLUSH_PERSISTENT`.
    pub placement: u8,
    /// `IB_FLUSH_RANGE` or `IB_FLUSH_MR`.
    pub level: u8,
}
