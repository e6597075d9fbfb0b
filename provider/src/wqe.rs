//! Work requests to rxe WQEs: validation and encoding, as pure functions.
//!
//! A send WQE is a `rxe_send_wqe` header at the start of a send-queue slot,
//! followed in the same slot by its payload: the scatter/gather list, or the
//! inline data itself. A receive WQE is `rxe_recv_wqe` followed by its SGEs.
//! The slot size is the kernel's (`log2_elem_size` of the ring), so every
//! payload is checked against it as well as against the QP's capabilities:
//! nothing is ever written past the slot into the next WQE.
//!
//! A request is validated whole ([`validate_send`], [`validate_recv`]) before
//! its slot is touched, so a rejected request leaves the ring as it was.

use core::ffi::c_int;
use core::mem::size_of;

use kernel_abi::{rxe_av, rxe_recv_wqe, rxe_send_wqe, rxe_sge};
use zerocopy::{FromZeros, IntoBytes};

use crate::command::Errno;
use crate::libibverbs::qp::*;

/// Bytes of a send slot before its payload.
pub(crate) const SEND_WQE_HEADER: usize = size_of::<rxe_send_wqe>();
/// Bytes of a receive slot before its SGEs.
pub(crate) const RECV_WQE_HEADER: usize = size_of::<rxe_recv_wqe>();
const SGE_SIZE: usize = size_of::<rxe_sge>();

/// What a send queue accepts: the QP type, its capabilities as the kernel
/// granted them, and the payload room of one slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SendLimits {
    pub qp_type: c_int,
    pub max_sge: u32,
    pub max_inline: u32,
    /// Slot size minus [`SEND_WQE_HEADER`].
    pub payload_room: usize,
}

/// What a receive queue accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RecvLimits {
    pub max_sge: u32,
    /// Slot size minus [`RECV_WQE_HEADER`].
    pub payload_room: usize,
}

/// The destination of a UD send, from the work request and its AH.
#[derive(Clone, Copy)]
pub(crate) struct UdDest {
    pub remote_qpn: u32,
    pub remote_qkey: u32,
    /// The kernel's AH index; 0 on kernels without them, where `av` goes
    /// into the WQE instead.
    pub ah_num: u32,
    pub av: rxe_av,
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

/// A send work request as read out of the caller's `ibv_send_wr`.
#[derive(Clone, Copy)]
pub(crate) struct SendRequest<'a> {
    pub wr_id: u64,
    pub opcode: c_int,
    pub send_flags: u32,
    /// Immediate data (big-endian) or the rkey to invalidate.
    pub imm_data: u32,
    pub sges: &'a [ibv_sge],
    /// `wr.rdma` (or `wr.atomic`'s address and rkey for atomics).
    pub remote_addr: u64,
    pub rkey: u32,
    pub compare_add: u64,
    pub swap: u64,
    /// Present for UD QPs (`None` there means the request had no AH).
    pub ud: Option<UdDest>,
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

fn is_atomic(opcode: c_int) -> bool {
    matches!(opcode, IBV_WR_ATOMIC_CMP_AND_SWP | IBV_WR_ATOMIC_FETCH_AND_ADD)
}

/// The total length of a list of SGEs, without 32-bit overflow.
pub(crate) fn sge_total(sges: &[ibv_sge]) -> u64 {
    sges.iter().map(|s| u64::from(s.length)).sum()
}

/// Checks a send request against the queue; returns its message length.
/// Every rejection is `EINVAL`, as `ibv_post_send(3)` and the stock
/// provider give it (a full queue is `ENOMEM`, checked by the caller).
pub(crate) fn validate_send(req: &SendRequest<'_>, lim: &SendLimits) -> Result<u32, Errno> {
    if !opcode_allowed(lim.qp_type, req.opcode) {
        return Err(libc::EINVAL);
    }
    let num_sge = req.sges.len();
    if num_sge > lim.max_sge as usize {
        return Err(libc::EINVAL);
    }
    let length = sge_total(req.sges);
    let length32 = u32::try_from(length).map_err(|_| libc::EINVAL)?;
    if req.send_flags & IBV_SEND_INLINE != 0 {
        if length > u64::from(lim.max_inline) || length > lim.payload_room as u64 {
            return Err(libc::EINVAL);
        }
    } else if num_sge * SGE_SIZE > lim.payload_room {
        return Err(libc::EINVAL);
    }
    if is_atomic(req.opcode) && (length < 8 || req.remote_addr & 7 != 0) {
        return Err(libc::EINVAL);
    }
    if req.opcode == IBV_WR_BIND_MW && (length != 0 || num_sge != 0 || req.imm_data != 0 || req.bind.is_none()) {
        return Err(libc::EINVAL);
    }
    if lim.qp_type == IBV_QPT_UD && req.ud.is_none() {
        return Err(libc::EINVAL);
    }
    Ok(length32)
}

/// Writes a validated send request into a slot: `wqe` is the slot's header,
/// `payload` the rest of the slot.
///
/// # Safety
/// `req` passed [`validate_send`] for the queue `payload` belongs to; with
/// `IBV_SEND_INLINE`, every SGE describes `length` readable bytes at `addr`
/// (the caller's promise to `ibv_post_send`).
pub(crate) unsafe fn encode_send(req: &SendRequest<'_>, length: u32, wqe: &mut rxe_send_wqe, payload: &mut [u8]) {
    encode_header(req, wqe);
    if req.send_flags & IBV_SEND_INLINE != 0 {
        // SAFETY: forwarded from this function's contract; validate_send
        // proved the bytes fit the payload.
        unsafe { copy_inline(req.sges, payload) };
    } else {
        write_sges(req.sges, payload);
    }
    let dma = &mut wqe.dma;
    dma.length = length;
    dma.resid = length;
    dma.num_sge = req.sges.len() as u32;
}

/// Writes the header of a send WQE: the operation and its operands, no
/// data (`dma` all zero: no SGEs, length 0). The `ibv_wr_*` builders use it
/// alone and add the data with [`set_sges`] or [`set_inline`].
pub(crate) fn encode_header(req: &SendRequest<'_>, wqe: &mut rxe_send_wqe) {
    *wqe = rxe_send_wqe::new_zeroed();
    let wr = &mut wqe.wr;
    wr.wr_id = req.wr_id;
    wr.opcode = req.opcode as u32;
    wr.send_flags = req.send_flags;
    wr.ex.imm_data = req.imm_data;
    match req.opcode {
        IBV_WR_RDMA_WRITE | IBV_WR_RDMA_WRITE_WITH_IMM | IBV_WR_RDMA_READ | IBV_WR_ATOMIC_WRITE => {
            wr.wr.rdma.remote_addr = req.remote_addr;
            wr.wr.rdma.rkey = req.rkey;
            wqe.iova = req.remote_addr;
        }
        IBV_WR_ATOMIC_CMP_AND_SWP | IBV_WR_ATOMIC_FETCH_AND_ADD => {
            wr.wr.atomic.remote_addr = req.remote_addr;
            wr.wr.atomic.compare_add = req.compare_add;
            wr.wr.atomic.swap = req.swap;
            wr.wr.atomic.rkey = req.rkey;
            wqe.iova = req.remote_addr;
        }
        IBV_WR_BIND_MW => {
            if let Some(b) = req.bind {
                wr.wr.mw.addr = b.addr;
                wr.wr.mw.length = b.length;
                wr.wr.mw.mr_lkey = b.mr_lkey;
                wr.wr.mw.mw_rkey = b.mw_rkey;
                wr.wr.mw.rkey = b.new_rkey;
                wr.wr.mw.access = b.access;
            }
        }
        _ => {}
    }
    if let Some(ud) = req.ud {
        set_ud(wqe, &ud);
    }
}

/// Writes a UD destination into a send WQE.
pub(crate) fn set_ud(wqe: &mut rxe_send_wqe, ud: &UdDest) {
    let wr = &mut wqe.wr.wr;
    wr.ud.remote_qpn = ud.remote_qpn;
    wr.ud.remote_qkey = ud.remote_qkey;
    wr.ud.ah_num = ud.ah_num;
    if ud.ah_num == 0 {
        // Kernels without AH indices take the address vector whole.
        wr.ud.av = ud.av;
    }
}

/// Gives a built send WQE its scatter/gather list (`ibv_wr_set_sge`,
/// `ibv_wr_set_sge_list`). More SGEs than the QP has, or than the slot
/// holds, is `ENOSPC` (the stock provider's errno for it); a total over
/// 4 GiB is `EINVAL`. The data is then not inline.
pub(crate) fn set_sges(wqe: &mut rxe_send_wqe, payload: &mut [u8], sges: &[ibv_sge], lim: &SendLimits) -> Result<(), Errno> {
    if sges.len() > lim.max_sge as usize || sges.len() * SGE_SIZE > lim.payload_room.min(payload.len()) {
        return Err(libc::ENOSPC);
    }
    let length = u32::try_from(sge_total(sges)).map_err(|_| libc::EINVAL)?;
    write_sges(sges, payload);
    wqe.wr.send_flags &= !IBV_SEND_INLINE;
    let dma = &mut wqe.dma;
    dma.length = length;
    dma.resid = length;
    dma.num_sge = sges.len() as u32;
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
pub(crate) unsafe fn set_inline(wqe: &mut rxe_send_wqe, payload: &mut [u8], bufs: &[ibv_data_buf], lim: &SendLimits) -> Result<(), Errno> {
    let room = u64::from(lim.max_inline).min(lim.payload_room.min(payload.len()) as u64);
    let mut total = 0u64;
    for b in bufs {
        total = total.checked_add(b.length as u64).ok_or(libc::ENOSPC)?;
        if total > room {
            return Err(libc::ENOSPC);
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
    let dma = &mut wqe.dma;
    dma.length = total as u32;
    dma.resid = total as u32;
    dma.num_sge = 0;
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
fn write_sges(sges: &[ibv_sge], out: &mut [u8]) {
    for (s, chunk) in sges.iter().zip(out.chunks_exact_mut(SGE_SIZE)) {
        let k = rxe_sge { addr: s.addr, length: s.length, lkey: s.lkey };
        chunk.copy_from_slice(k.as_bytes());
    }
}

/// Checks a receive request; returns its total length. Too many SGEs (for
/// the QP, or for the slot) is `EINVAL`, as for the stock provider.
pub(crate) fn validate_recv(sges: &[ibv_sge], lim: &RecvLimits) -> Result<u32, Errno> {
    if sges.len() > lim.max_sge as usize || sges.len() * SGE_SIZE > lim.payload_room {
        return Err(libc::EINVAL);
    }
    u32::try_from(sge_total(sges)).map_err(|_| libc::EINVAL)
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
            Slot { words: vec![0xa5a5_a5a5_a5a5_a5a5; size / 8] }
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

    fn lim(qp_type: c_int) -> SendLimits {
        SendLimits { qp_type, max_sge: 4, max_inline: 64, payload_room: 256 - SEND_WQE_HEADER + 64 }
    }

    fn req(opcode: c_int, sges: &[ibv_sge]) -> SendRequest<'_> {
        SendRequest {
            wr_id: 0x1234,
            opcode,
            send_flags: IBV_SEND_SIGNALED,
            imm_data: 0,
            sges,
            remote_addr: 0x10_0000,
            rkey: 0x77,
            compare_add: 5,
            swap: 9,
            ud: None,
            bind: None,
        }
    }

    fn sge(addr: u64, length: u32) -> ibv_sge {
        ibv_sge { addr, length, lkey: 0x42 }
    }

    fn encode(r: &SendRequest<'_>, l: &SendLimits) -> (Slot, u32) {
        let len = validate_send(r, l).unwrap();
        let mut slot = Slot::new(SEND_WQE_HEADER + l.payload_room);
        let (w, p) = slot.send();
        // SAFETY: validated; no inline data unless the test passes real buffers.
        unsafe { encode_send(r, len, w, p) };
        (slot, len)
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
        let (mut slot, len) = encode(&req(IBV_WR_SEND, &sges), &lim(IBV_QPT_RC));
        assert_eq!(len, 128);
        let (w, p) = slot.send();
        assert_eq!((w.wr.wr_id, w.wr.opcode, w.wr.send_flags), (0x1234, IBV_WR_SEND as u32, IBV_SEND_SIGNALED));
        assert_eq!((w.dma.length, w.dma.resid, w.dma.num_sge, w.dma.cur_sge, w.dma.sge_offset), (128, 128, 2, 0, 0));
        assert_eq!((w.state, w.status, w.mask, w.iova), (0, 0, 0, 0));
        assert_eq!(sge_at(p, 0), (0x1000, 100, 0x42));
        assert_eq!(sge_at(p, 1), (0x2000, 28, 0x42));
    }

    #[test]
    fn immediate_and_invalidate_go_in_ex() {
        for op in [IBV_WR_SEND_WITH_IMM, IBV_WR_SEND_WITH_INV, IBV_WR_RDMA_WRITE_WITH_IMM] {
            let mut r = req(op, &[]);
            r.imm_data = 0xdead_beef;
            let (mut slot, _) = encode(&r, &lim(IBV_QPT_RC));
            let (w, _) = slot.send();
            // SAFETY: both arms are u32.
            assert_eq!(unsafe { w.wr.ex.imm_data }, 0xdead_beef);
            assert_eq!(w.wr.opcode, op as u32);
        }
    }

    #[test]
    fn rdma_ops_carry_address_and_rkey() {
        for op in [IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_READ] {
            let sges = [sge(0x1000, 4096)];
            let (mut slot, len) = encode(&req(op, &sges), &lim(IBV_QPT_RC));
            let (w, _) = slot.send();
            // SAFETY: the rdma arm was written.
            let (ra, rk) = unsafe { (w.wr.wr.rdma.remote_addr, w.wr.wr.rdma.rkey) };
            assert_eq!((ra, rk, w.iova, len), (0x10_0000, 0x77, 0x10_0000, 4096));
        }
    }

    #[test]
    fn atomics_carry_operands() {
        for op in [IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD] {
            let sges = [sge(0x1000, 8)];
            let (mut slot, _) = encode(&req(op, &sges), &lim(IBV_QPT_RC));
            let (w, _) = slot.send();
            // SAFETY: the atomic arm was written.
            let a = unsafe { w.wr.wr.atomic };
            assert_eq!((a.remote_addr, a.compare_add, a.swap, a.rkey), (0x10_0000, 5, 9, 0x77));
            assert_eq!(w.iova, 0x10_0000);
        }
    }

    #[test]
    fn atomics_need_8_bytes_at_an_aligned_address() {
        let l = lim(IBV_QPT_RC);
        let short = [sge(0x1000, 4)];
        assert_eq!(validate_send(&req(IBV_WR_ATOMIC_FETCH_AND_ADD, &short), &l), Err(libc::EINVAL));
        let ok = [sge(0x1000, 8)];
        let mut r = req(IBV_WR_ATOMIC_CMP_AND_SWP, &ok);
        r.remote_addr = 0x10_0004;
        assert_eq!(validate_send(&r, &l), Err(libc::EINVAL));
    }

    #[test]
    fn local_inv_and_bind_mw() {
        let mut r = req(IBV_WR_LOCAL_INV, &[]);
        r.imm_data = 0x55;
        let (mut slot, len) = encode(&r, &lim(IBV_QPT_RC));
        assert_eq!(len, 0);
        // SAFETY: u32 arm.
        assert_eq!(unsafe { slot.send().0.wr.ex.invalidate_rkey }, 0x55);

        let mut r = req(IBV_WR_BIND_MW, &[]);
        let b = MwBind { addr: 0x3000, length: 0x100, mr_lkey: 1, mw_rkey: 0x200, new_rkey: 0x201, access: 2 };
        r.bind = Some(b);
        for t in [IBV_QPT_RC, IBV_QPT_UC] {
            let (mut slot, _) = encode(&r, &lim(t));
            // SAFETY: the mw arm was written.
            let m = unsafe { slot.send().0.wr.wr.mw };
            assert_eq!((m.addr, m.length, m.mr_lkey, m.mw_rkey, m.rkey, m.access), (0x3000, 0x100, 1, 0x200, 0x201, 2));
        }
        // A bind carries no data and no immediate.
        let one = [sge(0x1000, 0)];
        let mut with_sge = req(IBV_WR_BIND_MW, &one);
        with_sge.bind = Some(b);
        assert_eq!(validate_send(&with_sge, &lim(IBV_QPT_RC)), Err(libc::EINVAL));
        r.imm_data = 1;
        assert_eq!(validate_send(&r, &lim(IBV_QPT_RC)), Err(libc::EINVAL));
        assert_eq!(validate_send(&req(IBV_WR_BIND_MW, &[]), &lim(IBV_QPT_RC)), Err(libc::EINVAL));
    }

    #[test]
    fn ud_sends_carry_the_ah() {
        let mut av = rxe_av::new_zeroed();
        av.port_num = 1;
        av.dmac = [1, 2, 3, 4, 5, 6];
        let mut r = req(IBV_WR_SEND, &[]);
        r.ud = Some(UdDest { remote_qpn: 0x11, remote_qkey: 0x1111_1111, ah_num: 3, av });
        let (mut slot, _) = encode(&r, &lim(IBV_QPT_UD));
        // SAFETY: the ud arm was written.
        let ud = unsafe { slot.send().0.wr.wr.ud };
        assert_eq!((ud.remote_qpn, ud.remote_qkey, ud.ah_num, ud.av.port_num), (0x11, 0x1111_1111, 3, 0));
        // Without a kernel AH index the AV goes in whole.
        r.ud = Some(UdDest { ah_num: 0, ..r.ud.unwrap() });
        let (mut slot, _) = encode(&r, &lim(IBV_QPT_UD));
        // SAFETY: as above.
        let ud = unsafe { slot.send().0.wr.wr.ud };
        assert_eq!((ud.ah_num, ud.av.port_num, ud.av.dmac), (0, 1, [1, 2, 3, 4, 5, 6]));
        // No AH at all.
        assert_eq!(validate_send(&req(IBV_WR_SEND, &[]), &lim(IBV_QPT_UD)), Err(libc::EINVAL));
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
        let mut r = req(IBV_WR_RDMA_READ, &[]);
        r.ud = Some(UdDest { remote_qpn: 1, remote_qkey: 1, ah_num: 1, av: rxe_av::new_zeroed() });
        assert_eq!(validate_send(&r, &lim(IBV_QPT_UD)), Err(libc::EINVAL));
        assert_eq!(validate_send(&req(IBV_WR_ATOMIC_CMP_AND_SWP, &[]), &lim(IBV_QPT_UC)), Err(libc::EINVAL));
        assert_eq!(validate_send(&req(-1, &[]), &lim(IBV_QPT_RC)), Err(libc::EINVAL));
        assert_eq!(validate_send(&req(10, &[]), &lim(IBV_QPT_RC)), Err(libc::EINVAL)); // TSO
    }

    #[test]
    fn too_many_sges_is_einval() {
        let sges = [sge(0, 1); 5];
        assert_eq!(validate_send(&req(IBV_WR_SEND, &sges), &lim(IBV_QPT_RC)), Err(libc::EINVAL));
        assert!(validate_send(&req(IBV_WR_SEND, &sges[..4]), &lim(IBV_QPT_RC)).is_ok());
        // The slot, not only the capability, bounds the list.
        let tight = SendLimits { max_sge: 8, payload_room: 3 * 16, ..lim(IBV_QPT_RC) };
        assert_eq!(validate_send(&req(IBV_WR_SEND, &sges[..4]), &tight), Err(libc::EINVAL));
    }

    #[test]
    fn inline_data_is_copied_across_sges() {
        let a = *b"hello, ";
        let b = *b"inline ";
        let c = *b"world";
        let sges = [sge(a.as_ptr() as u64, 7), sge(b.as_ptr() as u64, 7), sge(0, 0), sge(c.as_ptr() as u64, 5)];
        let mut r = req(IBV_WR_SEND, &sges);
        r.send_flags |= IBV_SEND_INLINE;
        let l = lim(IBV_QPT_RC);
        let len = validate_send(&r, &l).unwrap();
        let mut slot = Slot::new(SEND_WQE_HEADER + l.payload_room);
        let (w, p) = slot.send();
        // SAFETY: every SGE points at a live local array of its length.
        unsafe { encode_send(&r, len, w, p) };
        let (w, p) = slot.send();
        assert_eq!((w.dma.length, w.dma.num_sge), (19, 4));
        assert_eq!(&p[..19], b"hello, inline world");
        // The rest of the slot is left as it was.
        assert_eq!(p[19], 0xa5);
    }

    #[test]
    fn inline_too_long_is_einval_and_lengths_do_not_wrap() {
        let l = lim(IBV_QPT_RC);
        let mut r = req(IBV_WR_SEND, &[]);
        r.send_flags |= IBV_SEND_INLINE;
        let long = [sge(0, 65)];
        r.sges = &long;
        assert_eq!(validate_send(&r, &l), Err(libc::EINVAL));
        // Two lengths whose 32-bit sum wraps to a small number.
        let wrap = [sge(0, u32::MAX), sge(0, 2)];
        r.sges = &wrap;
        assert_eq!(validate_send(&r, &l), Err(libc::EINVAL));
        // A capability larger than the slot is bounded by the slot.
        let big = SendLimits { max_inline: 4096, ..l };
        let slot_plus_one = [sge(0, (l.payload_room + 1) as u32)];
        r.sges = &slot_plus_one;
        assert_eq!(validate_send(&r, &big), Err(libc::EINVAL));
        // Without INLINE, a message over 4 GiB is refused too.
        assert_eq!(validate_send(&req(IBV_WR_SEND, &wrap), &l), Err(libc::EINVAL));
    }

    #[test]
    fn receive_wqes() {
        let l = RecvLimits { max_sge: 2, payload_room: 128 - RECV_WQE_HEADER };
        let sges = [sge(0x1000, 10), sge(0x2000, 20)];
        let len = validate_recv(&sges, &l).unwrap();
        let mut slot = Slot::new(128);
        let (w, p) = slot.recv();
        encode_recv(7, &sges, len, w, p);
        let (w, p) = slot.recv();
        assert_eq!((w.wr_id, w.dma.length, w.dma.resid, w.dma.num_sge, w.dma.cur_sge), (7, 30, 30, 2, 0));
        assert_eq!(sge_at(p, 1), (0x2000, 20, 0x42));
        assert_eq!(validate_recv(&[sge(0, 1); 3], &l), Err(libc::EINVAL));
        let tight = RecvLimits { max_sge: 4, payload_room: 16 };
        assert_eq!(validate_recv(&sges, &tight), Err(libc::EINVAL));
        assert_eq!(validate_recv(&[sge(0, u32::MAX), sge(0, 1)], &l), Err(libc::EINVAL));
    }

    #[test]
    fn type_1_bind_bumps_only_the_key_byte() {
        assert_eq!(next_rkey(0x1234_5600), 0x1234_5601);
        assert_eq!(next_rkey(0x1234_56ff), 0x1234_5600);
        assert_eq!(next_rkey(0xffff_ffff), 0xffff_ff00);
    }
}
