use core::ffi::c_int;

use kernel_abi::{rxe_av, rxe_recv_wqe, rxe_send_wqe};
use zerocopy::{FromZeros, IntoBytes};

use super::encode::*;
use super::limits::*;
use super::request::*;
use super::validate::*;
use crate::errno::Errno;
use crate::libibverbs::qp::*;

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
