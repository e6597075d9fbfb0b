//! The writers of a WQE's header and data, for checked requests.

#![forbid(unsafe_code)]

use core::ffi::c_int;

use kernel_abi::{
    rxe_recv_wqe, rxe_send_wqe, rxe_send_wr_wr_atomic, rxe_send_wr_wr_flush, rxe_send_wr_wr_mw, rxe_send_wr_wr_rdma,
};
use zerocopy::{FromZeros, IntoBytes};

use crate::errno::Errno;
use crate::libibverbs::qp::*;

use super::limits::{SendLimits, SGE_SIZE};
use super::payload::{kernel_sge, write_sges};
use super::request::{Flush, MwBind, SendRequest};
use super::validate::sge_total;

/// Writes every field of a send WQE's header but the opcode's operands and
/// the data ([`set_data`]): the progress fields the kernel keeps in the
/// slot reset, the operand arm zeroed. Field by field rather than a zeroed
/// copy of the 208-byte header: only what the kernel reads is written.
#[inline(always)]
pub(crate) fn write_header(wqe: &mut rxe_send_wqe, wr_id: u64, opcode: c_int, send_flags: u32, imm_data: u32) {
    let wr = &mut wqe.wr;
    wr.wr_id = wr_id;
    wr.reserved = 0;
    wr.opcode = opcode as u32;
    wr.send_flags = send_flags;
    wr.ex.imm_data = imm_data;
    // The largest arm but ud (whose writer sets what it uses).
    wr.wr.atomic = rxe_send_wr_wr_atomic {
        remote_addr: 0,
        compare_add: 0,
        swap: 0,
        rkey: 0,
        reserved: 0,
    };
    wqe.status = 0;
    wqe.state = 0;
    wqe.iova = 0;
    wqe.mask = 0;
    wqe.first_psn = 0;
    wqe.last_psn = 0;
    wqe.ack_length = 0;
    wqe.ssn = 0;
    wqe.has_rd_atomic = 0;
    wqe.dma.reserved = 0;
}

/// The data part of a send WQE's header: `num_sge` SGEs (or, inline,
/// `length` bytes) after the header, none of them consumed yet.
#[inline(always)]
pub(crate) fn set_data(wqe: &mut rxe_send_wqe, length: u32, num_sge: u32) {
    let dma = &mut wqe.dma;
    dma.length = length;
    dma.resid = length;
    dma.cur_sge = 0;
    dma.num_sge = num_sge;
    dma.sge_offset = 0;
}

/// The operands of RDMA WRITE/READ (and ATOMIC_WRITE).
#[inline(always)]
pub(crate) fn set_rdma(wqe: &mut rxe_send_wqe, remote_addr: u64, rkey: u32) {
    wqe.wr.wr.rdma = rxe_send_wr_wr_rdma {
        remote_addr,
        rkey,
        reserved: 0,
    };
    wqe.iova = remote_addr;
}

/// The operands of a FLUSH (`ibv_wr_flush`, rdma-core v45+, Linux 6.2+), as
/// the stock provider writes them: the range's length travels as the WQE's
/// data length, not in `wr.flush.length`.
pub(crate) fn set_flush(wqe: &mut rxe_send_wqe, f: &Flush) {
    wqe.wr.wr.flush = rxe_send_wr_wr_flush {
        remote_addr: f.remote_addr,
        length: 0,
        rkey: f.rkey,
        r#type: f.placement,
        level: f.level,
    };
    set_data(wqe, f.length, 0);
    wqe.iova = f.remote_addr;
}

/// The operands of the two atomics.
#[inline]
pub(crate) fn set_atomic(wqe: &mut rxe_send_wqe, remote_addr: u64, rkey: u32, compare_add: u64, swap: u64) {
    wqe.wr.wr.atomic = rxe_send_wr_wr_atomic {
        remote_addr,
        compare_add,
        swap,
        rkey,
        reserved: 0,
    };
    wqe.iova = remote_addr;
}

/// The operands of a window bind.
#[inline]
pub(crate) fn set_mw(wqe: &mut rxe_send_wqe, b: &MwBind) {
    wqe.wr.wr.mw = rxe_send_wr_wr_mw {
        addr: b.addr,
        length: b.length,
        mr_lkey: b.mr_lkey,
        mw_rkey: b.mw_rkey,
        rkey: b.new_rkey,
        access: b.access,
    };
}

/// Writes the header of a send WQE built through the `ibv_wr_*` API: the
/// operation and its operands, no data. The data setters add it with
/// [`set_sges`] or [`set_inline`](crate::post_raw::set_inline), [`set_ud`](crate::post_raw::set_ud) the UD destination.
#[inline(always)]
pub(crate) fn encode_header(req: &SendRequest, wqe: &mut rxe_send_wqe) {
    write_header(wqe, req.wr_id, req.opcode, req.send_flags, req.imm_data);
    set_data(wqe, 0, 0);
    match req.opcode {
        IBV_WR_RDMA_WRITE | IBV_WR_RDMA_WRITE_WITH_IMM | IBV_WR_RDMA_READ | IBV_WR_ATOMIC_WRITE => {
            set_rdma(wqe, req.remote_addr, req.rkey);
        }
        IBV_WR_ATOMIC_CMP_AND_SWP | IBV_WR_ATOMIC_FETCH_AND_ADD => {
            set_atomic(wqe, req.remote_addr, req.rkey, req.compare_add, req.swap);
        }
        IBV_WR_BIND_MW => {
            if let Some(b) = &req.bind {
                set_mw(wqe, b);
            }
        }
        _ => {}
    }
}

/// Gives a built send WQE its scatter/gather list (`ibv_wr_set_sge`,
/// `ibv_wr_set_sge_list`). More SGEs than the QP has, or than the slot
/// holds, is `ENOSPC` (the stock provider's errno for it); a total over
/// 4 GiB is `EINVAL`. The data is then not inline.
pub(crate) fn set_sges(
    wqe: &mut rxe_send_wqe,
    payload: &mut [u8],
    sges: &[ibv_sge],
    lim: &SendLimits,
) -> Result<(), Errno> {
    if sges.len() > lim.max_sge as usize || sges.len() * SGE_SIZE > lim.payload_room.min(payload.len()) {
        return Err(Errno::ENOSPC);
    }
    let length = sge_total(sges).ok_or(Errno::EINVAL)?;
    write_sges(sges, payload);
    wqe.wr.send_flags &= !IBV_SEND_INLINE;
    set_data(wqe, length, sges.len() as u32);
    Ok(())
}

/// [`set_sges`] of one SGE (`ibv_wr_set_sge`), without the list's loop; a zero-length SGE is
/// no data at all, as for the stock provider.
#[inline(always)]
pub(crate) fn set_sge(
    wqe: &mut rxe_send_wqe,
    payload: &mut [u8],
    sge: &ibv_sge,
    lim: &SendLimits,
) -> Result<(), Errno> {
    let num_sge = if sge.length == 0 {
        0
    } else {
        // sge_room: max_sge, bounded by the slot's room (which `payload` is).
        match payload.get_mut(..SGE_SIZE) {
            Some(chunk) if lim.sge_room != 0 => chunk.copy_from_slice(kernel_sge(sge).as_bytes()),
            _ => return Err(Errno::ENOSPC),
        }
        1
    };
    wqe.wr.send_flags &= !IBV_SEND_INLINE;
    // The builder zeroed the progress fields (cur_sge, sge_offset), which no setter writes.
    let dma = &mut wqe.dma;
    dma.length = sge.length;
    dma.resid = sge.length;
    dma.num_sge = num_sge;
    Ok(())
}

/// Writes a validated receive request into a slot.
#[inline(always)]
pub(crate) fn encode_recv(wr_id: u64, sges: &[ibv_sge], length: u32, wqe: &mut rxe_recv_wqe, payload: &mut [u8]) {
    *wqe = rxe_recv_wqe::new_zeroed();
    wqe.wr_id = wr_id;
    write_sges(sges, payload);
    wqe.dma.length = length;
    wqe.dma.resid = length;
    wqe.dma.num_sge = sges.len() as u32;
}

/// The rkey a type 1 window gets from `ibv_bind_mw`: the same index, the
/// next 8-bit key (libibverbs' `ibv_inc_rkey`).
pub(crate) fn next_rkey(rkey: u32) -> u32 {
    (rkey & 0xffff_ff00) | (rkey.wrapping_add(1) & 0xff)
}
