//! The `ibv_wr_*` builders' WQE writers: a header for any opcode, then any sequence of data
//! setters (`ibv_wr_set_sge_list`, `ibv_wr_set_inline_data_list`), each checked against a model
//! of its limits (the QP's `max_sge` / `max_inline_data` and the slot's room): a refused setter
//! leaves the slot as it was, an accepted one writes exactly its data and nothing past it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rxe_rs::errno::Errno;
use rxe_rs::fuzzing::{wr_header, wr_set_inline, wr_set_sges, SendLimits, SEND_WQE_HEADER};
use rxe_rs::libibverbs::qp::*;
use rxe_rs_fuzz::{bytes_of, garbage_send_slot, Input};

/// Readable bytes the SGEs and inline data point into.
static SOURCE: [u8; 8192] = rxe_rs_fuzz::pattern(13, 5);

fuzz_target!(|data: &[u8]| {
    let mut inp = Input::new(data);
    let qp_type = [IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD][inp.below(3) as usize];
    let max_sge = inp.limit40();
    let max_inline = inp.len32();
    let payload_room = (1usize << (8 + inp.below(5))) - SEND_WQE_HEADER;
    let lim = SendLimits::new(qp_type, max_sge, max_inline, payload_room);

    let canary = inp.u8() | 1;
    let (mut hdr, mut payload) = garbage_send_slot(canary, payload_room);

    let opcode = i32::from(inp.u8() % 17);
    let (wr_id, flags, imm, raddr, rkey, ca, sw) = (
        inp.u64(),
        inp.u32(),
        inp.u32(),
        inp.u64(),
        inp.u32(),
        inp.u64(),
        inp.u64(),
    );
    let bind = inp.bool().then(|| inp.mw_bind());
    wr_header(&mut hdr, wr_id, opcode, flags, imm, raddr, rkey, ca, sw, bind);
    let w = &hdr.wr;
    assert_eq!((w.wr_id, w.opcode, w.send_flags), (wr_id, opcode as u32, flags));
    assert_eq!((hdr.dma.length, hdr.dma.num_sge, hdr.dma.resid), (0, 0, 0));
    // SAFETY: plain data union arms.
    unsafe {
        match opcode {
            IBV_WR_RDMA_WRITE | IBV_WR_RDMA_WRITE_WITH_IMM | IBV_WR_RDMA_READ | IBV_WR_ATOMIC_WRITE => {
                assert_eq!((w.wr.rdma.remote_addr, w.wr.rdma.rkey, hdr.iova), (raddr, rkey, raddr));
            }
            IBV_WR_ATOMIC_CMP_AND_SWP | IBV_WR_ATOMIC_FETCH_AND_ADD => {
                let a = &w.wr.atomic;
                assert_eq!(
                    (a.remote_addr, a.rkey, a.compare_add, a.swap, hdr.iova),
                    (raddr, rkey, ca, sw, raddr)
                );
            }
            IBV_WR_BIND_MW => {
                if let Some(b) = bind {
                    let m = &w.wr.mw;
                    assert_eq!(
                        (m.addr, m.length, m.mr_lkey, m.mw_rkey, m.rkey, m.access),
                        (b.addr, b.length, b.mr_lkey, b.mw_rkey, b.new_rkey, b.access)
                    );
                }
            }
            _ => assert_eq!(hdr.iova, 0),
        }
    }
    let mut high = 0usize; // the most any setter wrote

    for _ in 0..inp.below(4) + 1 {
        let before_hdr = bytes_of(&hdr).to_vec();
        let before_payload = payload.clone();
        let n = inp.count40();
        let accepted = if inp.bool() {
            let sges: Vec<ibv_sge> = (0..n).map(|_| inp.sge(8)).collect();
            let total: u64 = sges.iter().map(|s| u64::from(s.length)).sum();
            let r = wr_set_sges(&mut hdr, &mut payload, &sges, &lim);
            let model = if n > max_sge as usize || n * 16 > payload_room {
                Err(Errno::ENOSPC)
            } else if total > u64::from(u32::MAX) {
                Err(Errno::EINVAL)
            } else {
                Ok(())
            };
            assert_eq!(r, model);
            if r.is_ok() {
                assert_eq!(
                    (hdr.dma.length as u64, hdr.dma.resid as u64, hdr.dma.num_sge as usize),
                    (total, total, n)
                );
                assert_eq!(hdr.wr.send_flags & IBV_SEND_INLINE, 0);
                for (i, s) in sges.iter().enumerate() {
                    let p = &payload[i * 16..i * 16 + 16];
                    assert_eq!(u64::from_ne_bytes(p[0..8].try_into().unwrap()), s.addr);
                    assert_eq!(u32::from_ne_bytes(p[8..12].try_into().unwrap()), s.length);
                    assert_eq!(u32::from_ne_bytes(p[12..16].try_into().unwrap()), s.lkey);
                }
                high = high.max(n * 16);
            }
            r.is_ok()
        } else {
            let mut spans = Vec::new();
            let bufs: Vec<ibv_data_buf> = (0..n)
                .map(|_| {
                    let off = usize::from(inp.u16()) % SOURCE.len();
                    let len = match inp.u8() % 8 {
                        0 => usize::MAX - usize::from(inp.u8()),
                        1 => inp.u32() as usize,
                        _ => usize::from(inp.u16()) % 700,
                    };
                    spans.push((off, len));
                    ibv_data_buf {
                        addr: SOURCE[off..].as_ptr() as *mut _,
                        length: len,
                    }
                })
                .collect();
            let room = (max_inline as usize).min(payload_room);
            let mut total = 0u128;
            for &(_, len) in &spans {
                total += len as u128;
            }
            let model = if total > room as u128 {
                Err(Errno::ENOSPC)
            } else {
                Ok(())
            };
            // Only what the model accepts must be readable; a bug accepting more faults here.
            if model.is_ok() && spans.iter().any(|&(off, len)| off + len > SOURCE.len()) {
                continue;
            }
            // SAFETY: every buffer the model accepts lies inside SOURCE (checked above).
            let r = unsafe { wr_set_inline(&mut hdr, &mut payload, &bufs, &lim) };
            assert_eq!(r, model);
            if r.is_ok() {
                let total = total as usize;
                assert_eq!((hdr.dma.length as usize, hdr.dma.num_sge), (total, 0));
                assert_ne!(hdr.wr.send_flags & IBV_SEND_INLINE, 0);
                let mut at = 0;
                for &(off, len) in &spans {
                    assert_eq!(&payload[at..at + len], &SOURCE[off..off + len]);
                    at += len;
                }
                high = high.max(total);
            }
            r.is_ok()
        };
        if !accepted {
            assert_eq!(bytes_of(&hdr), &before_hdr[..], "a refused setter touched the header");
            assert_eq!(payload, before_payload, "a refused setter touched the payload");
        }
    }
    assert!(
        payload[high..].iter().all(|&b| b == canary),
        "a setter wrote past its data"
    );
});
