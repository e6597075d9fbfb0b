//! Work requests to rxe WQEs: validation and encoding, as pure functions.
//!
//! A send WQE is a `rxe_send_wqe` header at the start of a send-queue slot,
//! followed in the same slot by its payload: the scatter/gather list, or the
//! inline data itself. A receive WQE is `rxe_recv_wqe` followed by its SGEs.
//! The slot size is the kernel's (`log2_elem_size` of the ring), so every
//! payload is checked against it as well as against the QP's capabilities:
//! nothing is ever written past the slot into the next WQE.
//!
//! A request is checked whole ([`check_send`], [`validate_recv`]) before its
//! slot is touched, so a rejected request leaves the ring as it was. Legacy
//! sends are checked and encoded straight from the caller's `ibv_send_wr`
//! (the data path: no intermediate copy); the `ibv_wr_*` builders describe
//! their operation as a [`SendRequest`] and share the field writers.

use core::ffi::c_int;
use core::mem::size_of;

use kernel_abi::{
    rxe_av, rxe_recv_wqe, rxe_send_wqe, rxe_send_wr_wr_atomic, rxe_send_wr_wr_flush, rxe_send_wr_wr_mw,
    rxe_send_wr_wr_rdma, rxe_sge,
};
use zerocopy::{FromZeros, IntoBytes};

use crate::errno::Errno;
use crate::libibverbs::qp::*;

/// Bytes of a send slot before its payload.
pub(crate) const SEND_WQE_HEADER: usize = size_of::<rxe_send_wqe>();
/// Bytes of a receive slot before its SGEs.
pub(crate) const RECV_WQE_HEADER: usize = size_of::<rxe_recv_wqe>();
const SGE_SIZE: usize = size_of::<rxe_sge>();

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
    /// SGEs a WQE may carry: `max_sge`, bounded by the slot.
    sge_room: u32,
    /// Inline bytes a WQE may carry: `max_inline`, bounded by the slot.
    inline_room: u32,
}

impl SendLimits {
    pub(crate) fn new(qp_type: c_int, max_sge: u32, max_inline: u32, payload_room: usize) -> SendLimits {
        let opcodes = (0..32)
            .filter(|&op| opcode_allowed(qp_type, op))
            .fold(0, |m, op| m | 1 << op);
        let sge_room = max_sge.min(u32::try_from(payload_room / SGE_SIZE).unwrap_or(u32::MAX));
        let inline_room = max_inline.min(u32::try_from(payload_room).unwrap_or(u32::MAX));
        SendLimits {
            qp_type,
            max_sge,
            max_inline,
            payload_room,
            opcodes,
            sge_room,
            inline_room,
        }
    }

    #[inline]
    fn allows(&self, opcode: c_int) -> bool {
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

/// A memory-window bind (`IBV_WR_BIND_MW`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct MwBind {
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

/// The total length of a list of SGEs, without 32-bit overflow.
#[inline]
pub(crate) fn sge_total(sges: &[ibv_sge]) -> u64 {
    match sges {
        // The common case, without the set-up of the (unrolled) loop.
        [one] => u64::from(one.length),
        _ => sges.iter().map(|s| u64::from(s.length)).sum(),
    }
}

/// The SGE list of a legacy send request. More entries than the QP's
/// `max_sge` (a negative count included) is `EINVAL`, as is a null list
/// with entries.
///
/// # Safety
/// With a count up to `max_sge`, `sg_list` points at that many entries
/// (the `ibv_post_send` contract).
#[inline]
pub(crate) unsafe fn send_sges<'a>(wr: &'a ibv_send_wr, lim: &SendLimits) -> Result<&'a [ibv_sge], Errno> {
    // A negative count is a huge u32.
    let n = wr.num_sge as u32;
    if n > lim.max_sge {
        return Err(Errno::EINVAL);
    }
    if n == 0 {
        return Ok(&[]);
    }
    if wr.sg_list.is_null() {
        return Err(Errno::EINVAL);
    }
    // SAFETY: per the contract; n <= max_sge, a u32.
    Ok(unsafe { core::slice::from_raw_parts(wr.sg_list, n as usize) })
}

/// The opcodes with operand rules beyond the common ones.
const ATOMICS_AND_BIND: u32 = 1 << IBV_WR_ATOMIC_CMP_AND_SWP | 1 << IBV_WR_ATOMIC_FETCH_AND_ADD | 1 << IBV_WR_BIND_MW;

/// Checks a legacy send request against the queue; returns its message
/// length. `sges` is the request's list from [`send_sges`] (which bounds
/// it by `max_sge`), `objects` what its pointers name. Every rejection is
/// `EINVAL`, as `ibv_post_send(3)` and the stock provider give it (a full
/// queue is `ENOMEM`, checked by the caller).
#[inline]
pub(crate) fn check_send(
    wr: &ibv_send_wr,
    sges: &[ibv_sge],
    objects: &WrObjects<'_>,
    lim: &SendLimits,
) -> Result<u32, Errno> {
    let opcode = wr.opcode;
    if !lim.allows(opcode) || matches!(objects, WrObjects::Missing) {
        return Err(Errno::EINVAL);
    }
    let length = sge_total(sges);
    if wr.send_flags & IBV_SEND_INLINE != 0 {
        // Inline bytes are read here, from addr: a NULL one with a length
        // would crash us (ibv_wr_set_inline_data* refuse it the same way).
        if length > u64::from(lim.inline_room) || sges.iter().any(|s| s.addr == 0 && s.length != 0) {
            return Err(Errno::EINVAL);
        }
    } else if sges.len() > lim.sge_room as usize {
        return Err(Errno::EINVAL);
    }
    let length = u32::try_from(length).map_err(|_| Errno::EINVAL)?;
    // allows() proved 0 <= opcode < 32.
    if (ATOMICS_AND_BIND >> opcode) & 1 != 0 {
        let refused = if opcode == IBV_WR_BIND_MW {
            length != 0 || !sges.is_empty() || wr.imm_data != 0
        } else {
            // SAFETY: the atomic arm for an atomic opcode; plain data.
            length < 8 || unsafe { wr.wr.atomic.remote_addr } & 7 != 0
        };
        if refused {
            return Err(Errno::EINVAL);
        }
    }
    Ok(length)
}

/// Writes a checked legacy send request into a slot: `wqe` is the slot's
/// header, `payload` the rest of the slot.
///
/// # Safety
/// The request passed [`check_send`] with `sges` and `objects` for the
/// queue `payload` belongs to; with `IBV_SEND_INLINE`, every SGE describes
/// `length` readable bytes at `addr` (the caller's promise to
/// `ibv_post_send`).
#[inline]
pub(crate) unsafe fn encode_send(
    wr: &ibv_send_wr,
    sges: &[ibv_sge],
    length: u32,
    objects: &WrObjects<'_>,
    wqe: &mut rxe_send_wqe,
    payload: &mut [u8],
) {
    write_header(wqe, wr.wr_id, wr.opcode, wr.send_flags, wr.imm_data);
    // SAFETY: the unions are plain data; each arm is read for its opcodes.
    unsafe {
        match wr.opcode {
            IBV_WR_RDMA_WRITE | IBV_WR_RDMA_WRITE_WITH_IMM | IBV_WR_RDMA_READ => {
                set_rdma(wqe, wr.wr.rdma.remote_addr, wr.wr.rdma.rkey);
            }
            IBV_WR_ATOMIC_CMP_AND_SWP | IBV_WR_ATOMIC_FETCH_AND_ADD => {
                let a = &wr.wr.atomic;
                set_atomic(wqe, a.remote_addr, a.rkey, a.compare_add, a.swap);
            }
            _ => {}
        }
    }
    match objects {
        WrObjects::Ud(ud) => set_ud(wqe, ud),
        WrObjects::Bind(b) => set_mw(wqe, b),
        WrObjects::None | WrObjects::Missing => {}
    }
    if wr.send_flags & IBV_SEND_INLINE != 0 {
        // SAFETY: forwarded from this function's contract; check_send
        // proved the bytes fit the payload.
        unsafe { copy_inline(sges, payload) };
    } else {
        write_sges(sges, payload);
    }
    set_data(wqe, length, sges.len() as u32);
}

/// Writes every field of a send WQE's header but the opcode's operands and
/// the data ([`set_data`]): the progress fields the kernel keeps in the
/// slot reset, the operand arm zeroed. Field by field rather than a zeroed
/// copy of the 208-byte header: only what the kernel reads is written.
#[inline]
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
#[inline]
fn set_data(wqe: &mut rxe_send_wqe, length: u32, num_sge: u32) {
    let dma = &mut wqe.dma;
    dma.length = length;
    dma.resid = length;
    dma.cur_sge = 0;
    dma.num_sge = num_sge;
    dma.sge_offset = 0;
}

/// The operands of RDMA WRITE/READ (and ATOMIC_WRITE).
#[inline]
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
/// [`set_sges`] or [`set_inline`], [`set_ud`] the UD destination.
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

/// Writes a UD destination into a send WQE.
pub(crate) fn set_ud(wqe: &mut rxe_send_wqe, ud: &UdDest<'_>) {
    // SAFETY: the ud arm is plain data; its other fields were zeroed with
    // the header or are written here.
    let u = unsafe { &mut wqe.wr.wr.ud };
    u.remote_qpn = ud.remote_qpn;
    u.remote_qkey = ud.remote_qkey;
    u.pkey_index = 0;
    u.reserved = 0;
    u.ah_num = ud.ah_num;
    u.pad = [0; 4];
    if ud.ah_num == 0 {
        // Kernels without AH indices take the address vector whole.
        u.av = *ud.av;
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
    let length = u32::try_from(sge_total(sges)).map_err(|_| Errno::EINVAL)?;
    write_sges(sges, payload);
    wqe.wr.send_flags &= !IBV_SEND_INLINE;
    set_data(wqe, length, sges.len() as u32);
    Ok(())
}

/// Copies inline data into a built send WQE (`ibv_wr_set_inline_data`,
/// `ibv_wr_set_inline_data_list`): the whole list is measured first, in
/// 64 bits, and refused with `ENOSPC` when it exceeds the QP's
/// `max_inline_data` or the slot, so nothing is written past the slot.
/// The WQE is marked inline: that is how rxe knows where its data is.
///
/// # Safety
/// Every buffer describes `length` readable bytes at `addr`.
pub(crate) unsafe fn set_inline(
    wqe: &mut rxe_send_wqe,
    payload: &mut [u8],
    bufs: &[ibv_data_buf],
    lim: &SendLimits,
) -> Result<(), Errno> {
    let room = u64::from(lim.max_inline).min(lim.payload_room.min(payload.len()) as u64);
    let mut total = 0u64;
    for b in bufs {
        total = total.checked_add(b.length as u64).ok_or(Errno::ENOSPC)?;
        if total > room {
            return Err(Errno::ENOSPC);
        }
    }
    let mut at = 0usize;
    for b in bufs.iter().filter(|b| b.length != 0) {
        // SAFETY: per the contract; the caller's buffer, never the ring.
        let src = unsafe { core::slice::from_raw_parts(b.addr.cast::<u8>(), b.length) };
        payload[at..at + b.length].copy_from_slice(src);
        at += b.length;
    }
    wqe.wr.send_flags |= IBV_SEND_INLINE;
    // total <= room, which came from a u32.
    set_data(wqe, total as u32, 0);
    Ok(())
}

/// Copies the bytes the SGEs point at, back to back, to the start of `out`.
///
/// # Safety
/// Every SGE describes `length` readable bytes at `addr`, and their total
/// fits `out` (both checked or promised by the caller).
unsafe fn copy_inline(sges: &[ibv_sge], out: &mut [u8]) {
    let mut at = 0usize;
    for s in sges {
        let len = s.length as usize;
        if len == 0 {
            continue;
        }
        // SAFETY: per the contract the source is readable for len bytes; it
        // is the caller's buffer, never the ring slot we write.
        let src = unsafe { core::slice::from_raw_parts(s.addr as usize as *const u8, len) };
        out[at..at + len].copy_from_slice(src);
        at += len;
    }
}

/// Writes SGEs into a payload area (which the caller sized for them).
#[inline]
fn write_sges(sges: &[ibv_sge], out: &mut [u8]) {
    let put = |s: &ibv_sge, chunk: &mut [u8]| {
        chunk.copy_from_slice(
            rxe_sge {
                addr: s.addr,
                length: s.length,
                lkey: s.lkey,
            }
            .as_bytes(),
        );
    };
    match (sges, out.get_mut(..SGE_SIZE)) {
        // The common case, without the set-up of the (unrolled) loop.
        ([one], Some(chunk)) => put(one, chunk),
        _ => sges
            .iter()
            .zip(out.chunks_exact_mut(SGE_SIZE))
            .for_each(|(s, chunk)| put(s, chunk)),
    }
}

/// Checks a receive request; returns its total length. Too many SGEs (for
/// the QP, or for the slot) is `EINVAL`, as for the stock provider.
pub(crate) fn validate_recv(sges: &[ibv_sge], lim: &RecvLimits) -> Result<u32, Errno> {
    if sges.len() > lim.max_sge as usize || sges.len() * SGE_SIZE > lim.payload_room {
        return Err(Errno::EINVAL);
    }
    u32::try_from(sge_total(sges)).map_err(|_| Errno::EINVAL)
}

/// Writes a validated receive request into a slot.
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

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
        // SAFETY: plain C data.
        let mut w: ibv_send_wr = unsafe { core::mem::zeroed() };
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
        // SAFETY: the operand arm is plain data; a SEND leaves it zeroed.
        assert_eq!(unsafe { w.wr.wr.atomic }.as_bytes(), [0; 32]);
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
            let (h, _) = slot.send();
            // SAFETY: both arms are u32.
            assert_eq!(unsafe { h.wr.ex.imm_data }, 0xdead_beef);
            assert_eq!(h.wr.opcode, op as u32);
        }
    }

    #[test]
    fn rdma_ops_carry_address_and_rkey() {
        for op in [IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_READ] {
            let sges = [sge(0x1000, 4096)];
            let (mut slot, len) = encode(&wr(op, &sges), &sges, &lim(IBV_QPT_RC));
            let (h, _) = slot.send();
            // SAFETY: the rdma arm was written.
            let (ra, rk, res) = unsafe { (h.wr.wr.rdma.remote_addr, h.wr.wr.rdma.rkey, h.wr.wr.rdma.reserved) };
            assert_eq!((ra, rk, res, h.iova, len), (0x10_0000, 0x77, 0, 0x10_0000, 4096));
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
        // SAFETY: the flush arm was written whole.
        let a = unsafe { &h.wr.wr.flush };
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
            let (h, _) = slot.send();
            // SAFETY: the atomic arm was written.
            let a = unsafe { h.wr.wr.atomic };
            assert_eq!((a.remote_addr, a.compare_add, a.swap, a.rkey), (0x10_0000, 5, 9, 0x77));
            assert_eq!(h.iova, 0x10_0000);
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
        // SAFETY: u32 arm.
        assert_eq!(unsafe { slot.send().0.wr.ex.invalidate_rkey }, 0x55);

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
            // SAFETY: the mw arm was written.
            let m = unsafe { slot.send().0.wr.wr.mw };
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
        // SAFETY: the ud arm was written.
        let ud = unsafe { slot.send().0.wr.wr.ud };
        // (The AV bytes are left as they were: the kernel reads ah_num.)
        assert_eq!(
            (ud.remote_qpn, ud.remote_qkey, ud.ah_num, ud.pkey_index),
            (0x11, 0x1111_1111, 3, 0)
        );
        // Without a kernel AH index the AV goes in whole.
        let (mut slot, _) = encode_with(&w, &[], &WrObjects::Ud(UdDest { ah_num: 0, ..dest }), &l);
        // SAFETY: as above.
        let ud = unsafe { slot.send().0.wr.wr.ud };
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
}
