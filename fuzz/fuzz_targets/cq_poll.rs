//! CQE translation and the CQ's consumer: the kernel's completions (any bytes) reach the
//! application unchanged and in order through `ibv_poll_cq` and through `ibv_start_poll` /
//! `next_poll` / `end_poll`, across ring wraps, with the purge of a QP's completions (QP reset
//! or destroy) interleaved; checked against a queue model, including the consumer index the
//! kernel sees (never past what was handed out).
#![no_main]

use std::collections::VecDeque;

use kernel_abi::ib_uverbs_wc;
use libfuzzer_sys::fuzz_target;
use rxe_rs::errno::Errno;
use rxe_rs::fuzzing::Cq;
use rxe_rs::libibverbs::cq::ibv_wc;
use rxe_rs_fuzz::Input;
use zerocopy::FromBytes;

fn wc_bytes(w: &ibv_wc) -> &[u8] {
    const _: () = assert!(size_of::<ibv_wc>() == size_of::<ib_uverbs_wc>());
    // SAFETY: ibv_wc is plain integers, fully written by the poll (same size as ib_uverbs_wc).
    unsafe { core::slice::from_raw_parts((w as *const ibv_wc).cast::<u8>(), size_of::<ibv_wc>()) }
}

fn bytes(w: &ib_uverbs_wc) -> &[u8] {
    // SAFETY: plain integers, initialised.
    unsafe { core::slice::from_raw_parts((w as *const ib_uverbs_wc).cast::<u8>(), size_of::<ib_uverbs_wc>()) }
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input::new(data);
    let log2 = inp.below(5);
    let capacity = (1usize << log2) - 1;
    let mut cq = Cq::new(log2);
    let mut model: VecDeque<ib_uverbs_wc> = VecDeque::new();
    // During an ex poll: how many of the model's front entries were handed out.
    let mut open: Option<usize> = None;
    let mut serial = 0u64;
    let mut refused = 0usize;
    while !inp.is_empty() {
        match inp.u8() % 8 {
            0 | 1 => {
                // The kernel completes: any bytes, a small qp_num so purges hit.
                let mut raw = [0u8; size_of::<ib_uverbs_wc>()];
                let take = raw.len().min(usize::from(inp.u8()));
                let b = inp.bytes(take);
                raw[..b.len()].copy_from_slice(b);
                let mut wc = ib_uverbs_wc::read_from_bytes(&raw).unwrap();
                wc.qp_num %= 4;
                wc.wr_id = serial;
                serial += 1;
                let ok = cq.produce(&wc);
                assert_eq!(ok, model.len() < capacity);
                if ok {
                    model.push_back(wc);
                } else {
                    refused += 1;
                }
            }
            2 | 3 if open.is_none() => {
                let ne = usize::from(inp.u8() % 10);
                let got = cq.poll(ne).unwrap();
                assert_eq!(got.len(), ne.min(model.len()));
                for w in &got {
                    let m = model.pop_front().unwrap();
                    assert_eq!(wc_bytes(w), bytes(&m), "a CQE changed on its way out");
                }
            }
            4 if open.is_none() => match cq.start_poll() {
                Ok(wc) => {
                    assert_eq!(bytes(&wc), bytes(model.front().expect("start_poll on an empty CQ")));
                    open = Some(1);
                }
                Err(e) => {
                    assert_eq!(e, Errno::ENOENT);
                    assert!(model.is_empty());
                }
            },
            5 if open.is_some() => {
                let k = open.unwrap();
                match cq.next_poll() {
                    Ok(wc) => {
                        assert_eq!(bytes(&wc), bytes(model.get(k).expect("next_poll past the end")));
                        open = Some(k + 1);
                    }
                    Err(e) => {
                        assert_eq!(e, Errno::ENOENT);
                        assert_eq!(k, model.len());
                    }
                }
            }
            6 if open.is_some() => {
                cq.end_poll();
                for _ in 0..open.take().unwrap() {
                    model.pop_front();
                }
            }
            7 if open.is_none() => {
                let qp = u32::from(inp.u8() % 4);
                let keep = inp.bool();
                let dropped = cq.purge(qp, keep);
                let before = model.len();
                model.retain(|w| !(w.qp_num == qp && !(keep && w.opcode & 0x80 != 0)));
                assert_eq!(dropped as usize, before - model.len());
            }
            _ => {}
        }
        if open.is_none() {
            // Everything taken out of the model has been released to the kernel, nothing more.
            let consumed = serial as usize - model.len() - refused;
            assert_eq!(cq.kernel_consumer() as usize, consumed & capacity, "consumer index");
        }
    }
    // Drain: what is left comes out in order.
    if open.is_some() {
        cq.end_poll();
        for _ in 0..open.take().unwrap() {
            model.pop_front();
        }
    }
    let rest = cq.poll(64).unwrap();
    assert_eq!(rest.len(), model.len());
    for (w, m) in rest.iter().zip(&model) {
        assert_eq!(wc_bytes(w), bytes(m));
    }
});
