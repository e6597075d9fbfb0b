//! `ibv_post_recv`'s validation and encoding: too many SGEs for the QP or for the slot, or a
//! total over 4 GiB, is EINVAL and leaves the slot alone; an accepted request is encoded exactly
//! and writes nothing past its SGEs.
#![no_main]

use kernel_abi::rxe_recv_wqe;
use libfuzzer_sys::fuzz_target;
use rxe_rs::errno::Errno;
use rxe_rs::fuzzing::{post_recv, RECV_WQE_HEADER};
use rxe_rs::libibverbs::qp::ibv_sge;
use rxe_rs_fuzz::Input;
use zerocopy::FromZeros;

fuzz_target!(|data: &[u8]| {
    let mut inp = Input::new(data);
    let max_sge = inp.limit40();
    let room = (1usize << (6 + inp.below(6))).saturating_sub(RECV_WQE_HEADER);
    let n = inp.count40();
    let sges: Vec<ibv_sge> = (0..n).map(|_| inp.sge(4)).collect();
    let wr_id = inp.u64();
    let canary = inp.u8() | 1;
    let mut hdr = rxe_recv_wqe::new_zeroed();
    hdr.reserved = u32::from(canary);
    let mut payload = vec![canary; room];
    let total: u64 = sges.iter().map(|s| u64::from(s.length)).sum();
    let model = if n > max_sge as usize || n * 16 > room || total > u64::from(u32::MAX) {
        Err(Errno::EINVAL)
    } else {
        Ok(total as u32)
    };
    let r = post_recv(wr_id, &sges, max_sge, &mut hdr, &mut payload);
    assert_eq!(r, model);
    match r {
        Err(_) => {
            assert_eq!(hdr.reserved, u32::from(canary));
            assert!(payload.iter().all(|&b| b == canary));
        }
        Ok(len) => {
            assert_eq!(
                (hdr.wr_id, hdr.dma.length, hdr.dma.resid, hdr.dma.num_sge),
                (wr_id, len, len, n as u32)
            );
            assert_eq!((hdr.dma.cur_sge, hdr.dma.sge_offset), (0, 0));
            for (i, s) in sges.iter().enumerate() {
                let p = &payload[i * 16..i * 16 + 16];
                assert_eq!(u64::from_ne_bytes(p[0..8].try_into().unwrap()), s.addr);
                assert_eq!(u32::from_ne_bytes(p[8..12].try_into().unwrap()), s.length);
                assert_eq!(u32::from_ne_bytes(p[12..16].try_into().unwrap()), s.lkey);
            }
            assert!(payload[n * 16..].iter().all(|&b| b == canary));
        }
    }
});
