//! `ibv_post_send`'s validation and encoding of one legacy work request (every opcode, flag, SGE
//! count and inline length against the QP's limits), against a model of the rules written from
//! `ibv_post_send(3)` and the kernel's `rxe_wr_opcode_info`: a request is accepted exactly when
//! the model accepts it; an accepted one is encoded field for field (header, operands, SGEs or
//! inline bytes) and writes nothing past its payload; a refused one leaves the slot untouched.
#![no_main]

use kernel_abi::rxe_av;
use libfuzzer_sys::fuzz_target;
use rxe_rs::fuzzing::{post_send, Objects, SendLimits, SEND_WQE_HEADER};
use rxe_rs::libibverbs::qp::*;
use rxe_rs_fuzz::{bytes_of, garbage_send_slot, Input};
use zerocopy::FromZeros;

/// Readable bytes the inline SGEs point into.
static SOURCE: [u8; 8192] = rxe_rs_fuzz::pattern(7, 3);

fn model_allows(qp_type: i32, opcode: i32) -> bool {
    let rc = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];
    let uc = [0, 1, 2, 3, 8, 9];
    let ud = [2, 3];
    match qp_type {
        IBV_QPT_RC => rc.contains(&opcode),
        IBV_QPT_UC => uc.contains(&opcode),
        IBV_QPT_UD => ud.contains(&opcode),
        _ => false,
    }
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input::new(data);
    let qp_type = match inp.u8() % 5 {
        0 => IBV_QPT_RC,
        1 => IBV_QPT_UC,
        2 => IBV_QPT_UD,
        3 => 8, // XRC send and others: nothing allowed through this path
        _ => inp.u32() as i32,
    };
    let max_sge = match inp.u8() % 4 {
        0 => inp.u32(),
        _ => u32::from(inp.u8() % 40),
    };
    let max_inline = inp.len32();
    // Slots are powers of two from 256 bytes; the payload is what follows the header.
    let slot = 1usize << (8 + inp.below(5));
    let payload_room = slot - SEND_WQE_HEADER;
    let lim = SendLimits::new(qp_type, max_sge, max_inline, payload_room);

    let opcode = match inp.u8() % 4 {
        0 => inp.u32() as i32,
        _ => i32::from(inp.u8() % 17),
    };
    let send_flags = match inp.u8() % 3 {
        0 => inp.u32(),
        _ => u32::from(inp.u8() & 0x1f),
    };
    let imm_data = if inp.bool() { inp.u32() } else { 0 };
    let remote_addr = if inp.bool() { inp.u64() } else { u64::from(inp.u8()) * 8 };
    let rkey = inp.u32();
    let compare_add = inp.u64();
    let swap = inp.u64();
    let wr_id = inp.u64();

    // The SGE list: a count (maybe negative, maybe over max_sge) and the entries.
    let num_sge: i32 = match inp.u8() % 8 {
        0 => inp.u32() as i32,
        1 => -(i32::from(inp.u8()) + 1),
        _ => i32::from(inp.u8() % 40),
    };
    let null_list = inp.u8() % 16 == 0;
    let inline = send_flags & IBV_SEND_INLINE != 0;
    let real = if (0..=64).contains(&num_sge) {
        num_sge as usize
    } else {
        0
    };
    let mut sges = Vec::with_capacity(real.max(1));
    for _ in 0..real {
        let kind = inp.u8() % 8;
        let length = match kind {
            0 => inp.u32(),
            1 => 0,
            _ => u32::from(inp.u16()) % 600,
        };
        let off = usize::from(inp.u16()) % SOURCE.len();
        let addr = if kind == 7 && inp.bool() {
            0
        } else if inline && (length as usize) <= SOURCE.len() - off {
            SOURCE[off..].as_ptr() as u64
        } else if inline {
            // Too long to be readable: the model must refuse it before anything reads it.
            SOURCE.as_ptr() as u64
        } else {
            inp.u64()
        };
        sges.push(ibv_sge {
            addr,
            length,
            lkey: inp.u32(),
        });
    }
    // What wr_objects makes of the request's AH or window: only UD requests and binds name one.
    let missing = inp.u8() % 8 == 0;
    let objects = if missing && (qp_type == IBV_QPT_UD || opcode == IBV_WR_BIND_MW) {
        Objects::Missing
    } else if qp_type == IBV_QPT_UD {
        let mut av = rxe_av::new_zeroed();
        av.port_num = inp.u8();
        Objects::Ud {
            remote_qpn: inp.u32(),
            remote_qkey: inp.u32(),
            ah_num: inp.u32() % 3,
            av,
        }
    } else if opcode == IBV_WR_BIND_MW {
        Objects::Bind(inp.mw_bind())
    } else {
        Objects::None
    };

    // SAFETY: plain C data.
    let mut wr: ibv_send_wr = unsafe { core::mem::zeroed() };
    wr.wr_id = wr_id;
    wr.opcode = opcode;
    wr.send_flags = send_flags;
    wr.imm_data = imm_data;
    wr.num_sge = num_sge;
    wr.sg_list = if null_list {
        core::ptr::null_mut()
    } else {
        sges.as_mut_ptr()
    };
    let is_atomic = opcode == IBV_WR_ATOMIC_CMP_AND_SWP || opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
    if is_atomic {
        wr.wr.atomic = ibv_send_wr_atomic {
            remote_addr,
            compare_add,
            swap,
            rkey,
        };
    } else {
        wr.wr.rdma = ibv_send_wr_rdma { remote_addr, rkey };
    }

    // The model.
    let n = num_sge as u32; // a negative count is a huge one
    let total: u64 = sges.iter().map(|s| u64::from(s.length)).sum();
    let accept = n <= max_sge
        && (n == 0 || !null_list)
        // A count the model could not even build (over 64) is refused by max_sge here, or the
        // target would hand over a list shorter than its count: keep the contract.
        && model_allows(qp_type, opcode)
        && !matches!(objects, Objects::Missing)
        && if inline {
            total <= u64::from(max_inline.min(payload_room as u32))
                && !sges.iter().any(|s| s.addr == 0 && s.length != 0)
        } else {
            (n as usize) <= (max_sge as usize).min(payload_room / 16)
        }
        && total <= u64::from(u32::MAX)
        && match opcode {
            IBV_WR_BIND_MW => total == 0 && n == 0 && imm_data == 0,
            IBV_WR_ATOMIC_CMP_AND_SWP | IBV_WR_ATOMIC_FETCH_AND_ADD => total >= 8 && remote_addr % 8 == 0,
            _ => true,
        };
    if n > max_sge || n as usize == real {
        // within the contract
    } else {
        return;
    }

    // A slot whose previous contents are garbage, and a canary after the payload.
    let canary = inp.u8() | 1;
    let (mut hdr, mut payload) = garbage_send_slot(canary, payload_room);
    let before_hdr = bytes_of(&hdr).to_vec();

    // SAFETY: the list has num_sge entries whenever that is at most max_sge; inline SGEs that
    // the model accepts point into SOURCE.
    let r = unsafe { post_send(&wr, &lim, &objects, &mut hdr, &mut payload) };
    match r {
        Err(e) => {
            assert!(!accept, "refused ({e:?}) what the model accepts");
            assert_eq!(bytes_of(&hdr), &before_hdr[..], "a refused request touched the header");
            assert!(
                payload.iter().all(|&b| b == canary),
                "a refused request touched the payload"
            );
        }
        Ok(length) => {
            assert!(accept, "accepted what the model refuses");
            assert_eq!(u64::from(length), total);
            let w = &hdr.wr;
            assert_eq!(
                (w.wr_id, w.opcode, w.send_flags, w.reserved),
                (wr_id, opcode as u32, send_flags, 0)
            );
            // SAFETY: plain data union arms.
            unsafe {
                assert_eq!(w.ex.imm_data, imm_data);
                match opcode {
                    IBV_WR_RDMA_WRITE | IBV_WR_RDMA_WRITE_WITH_IMM | IBV_WR_RDMA_READ => {
                        assert_eq!((w.wr.rdma.remote_addr, w.wr.rdma.rkey), (remote_addr, rkey));
                        assert_eq!(hdr.iova, remote_addr);
                    }
                    IBV_WR_ATOMIC_CMP_AND_SWP | IBV_WR_ATOMIC_FETCH_AND_ADD => {
                        let a = &w.wr.atomic;
                        assert_eq!(
                            (a.remote_addr, a.rkey, a.compare_add, a.swap),
                            (remote_addr, rkey, compare_add, swap)
                        );
                        assert_eq!(hdr.iova, remote_addr);
                    }
                    _ => assert_eq!(hdr.iova, 0),
                }
                match &objects {
                    Objects::Ud {
                        remote_qpn,
                        remote_qkey,
                        ah_num,
                        av,
                    } => {
                        let u = &w.wr.ud;
                        assert_eq!(
                            (u.remote_qpn, u.remote_qkey, u.ah_num),
                            (*remote_qpn, *remote_qkey, *ah_num)
                        );
                        if *ah_num == 0 {
                            assert_eq!(bytes_of(&u.av), bytes_of(av));
                        }
                    }
                    Objects::Bind(b) => {
                        let m = &w.wr.mw;
                        assert_eq!(
                            (m.addr, m.length, m.mr_lkey, m.mw_rkey, m.rkey, m.access),
                            (b.addr, b.length, b.mr_lkey, b.mw_rkey, b.new_rkey, b.access)
                        );
                    }
                    _ => {}
                }
            }
            assert_eq!(
                (hdr.status, hdr.state, hdr.mask, hdr.ssn, hdr.has_rd_atomic),
                (0, 0, 0, 0, 0)
            );
            let d = &hdr.dma;
            assert_eq!((d.length, d.resid, d.cur_sge, d.sge_offset), (length, length, 0, 0));
            assert_eq!(d.num_sge, n);
            let used = if inline {
                let mut at = 0;
                for s in &sges {
                    let l = s.length as usize;
                    if l != 0 {
                        // SAFETY: accepted inline SGEs point into SOURCE for their length.
                        let src = unsafe { core::slice::from_raw_parts(s.addr as usize as *const u8, l) };
                        assert_eq!(&payload[at..at + l], src, "inline bytes differ");
                        at += l;
                    }
                }
                at
            } else {
                for (i, s) in sges.iter().enumerate() {
                    let p = &payload[i * 16..i * 16 + 16];
                    assert_eq!(u64::from_ne_bytes(p[0..8].try_into().unwrap()), s.addr);
                    assert_eq!(u32::from_ne_bytes(p[8..12].try_into().unwrap()), s.length);
                    assert_eq!(u32::from_ne_bytes(p[12..16].try_into().unwrap()), s.lkey);
                }
                sges.len() * 16
            };
            assert!(payload[used..].iter().all(|&b| b == canary), "wrote past its data");
        }
    }
});
