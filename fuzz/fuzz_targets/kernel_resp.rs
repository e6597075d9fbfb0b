//! What the provider reads from the kernel: the (extended) query_device response with any
//! `response_length` (only the valid bytes are used: the result does not depend on the rest),
//! the ring geometry of an mmap'd queue (every slot of an accepted geometry lies inside the
//! mapping, and exactly the sane ones are accepted), the ring index arithmetic, sysfs GIDs (eight
//! groups of four hex digits, nothing else), the firmware version string, and the framing of
//! uverbs write() commands (the header's word counts, never a byte past the buffer).
#![no_main]

use kernel_abi::{ib_uverbs_cmd_hdr, ib_uverbs_ex_cmd_hdr, ib_uverbs_ex_query_device_resp, rxe_queue_buf};
use libfuzzer_sys::fuzz_target;
use rxe_rs::command::{frame_write, frame_write_ex_drv};
use rxe_rs::errno::Errno;
use rxe_rs::fuzzing::{device_attr, device_attr_legacy, format_fw_ver, parse_sysfs_gid};
use rxe_rs::ring::{Geometry, Indices};
use rxe_rs_fuzz::{bytes_of, Input};
use zerocopy::FromBytes;

const RESP: usize = size_of::<ib_uverbs_ex_query_device_resp>();
const LEGACY: usize = size_of::<kernel_abi::ib_uverbs_query_device_resp>();

fn model_gid(text: &str) -> Option<[u8; 16]> {
    let groups: Vec<&str> = text.trim().split(':').collect();
    if groups.len() != 8
        || !groups
            .iter()
            .all(|g| g.len() == 4 && g.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return None;
    }
    let mut gid = [0u8; 16];
    for (i, g) in groups.iter().enumerate() {
        let v = u16::from_str_radix(g, 16).unwrap();
        gid[2 * i..2 * i + 2].copy_from_slice(&v.to_be_bytes());
    }
    Some(gid)
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input::new(data);
    match inp.u8() % 5 {
        0 => {
            // query_device: the response, a response_length, and garbage past the valid part.
            let mut raw = [0u8; RESP];
            let b = inp.bytes(RESP);
            raw[..b.len()].copy_from_slice(b);
            let response_length = inp.len32();
            let num_ports = inp.u32() % 4;
            let resp = ib_uverbs_ex_query_device_resp::read_from_bytes(&raw).unwrap();
            let a = device_attr(&resp, response_length, num_ports);
            let min = core::mem::offset_of!(ib_uverbs_ex_query_device_resp, response_length) + 4;
            assert_eq!(a.is_some(), response_length as usize >= min);
            let legacy = device_attr_legacy(&resp, num_ports);
            let valid = (response_length as usize).min(RESP);
            let noise = inp.u8() | 1;
            let mut other = raw;
            for (i, x) in other.iter_mut().enumerate().skip(valid) {
                *x ^= noise.wrapping_add(i as u8) | 1;
            }
            let resp2 = ib_uverbs_ex_query_device_resp::read_from_bytes(&other).unwrap();
            if let (Some(a), Some(a2)) = (a, device_attr(&resp2, response_length, num_ports)) {
                assert_eq!(bytes_of(&a), bytes_of(&a2), "a field past response_length was used");
            }
            let mut other = raw;
            for x in other.iter_mut().skip(LEGACY) {
                *x = x.wrapping_add(noise);
            }
            let resp3 = ib_uverbs_ex_query_device_resp::read_from_bytes(&other).unwrap();
            assert_eq!(bytes_of(&legacy), bytes_of(&device_attr_legacy(&resp3, num_ports)));
        }
        1 => {
            // An mmap'd queue's header against the mapping's length.
            let log2 = if inp.bool() {
                inp.u32()
            } else {
                u32::from(inp.u8() % 20)
            };
            let mask = match inp.u8() % 3 {
                0 => inp.u32(),
                1 => (1u32 << inp.below(32)).wrapping_sub(1),
                _ => (1u32 << inp.below(32)).wrapping_sub(1) ^ u32::from(inp.u8() & 1),
            };
            let map_len = if inp.bool() {
                inp.u64() as usize
            } else {
                (inp.u32() as usize) << inp.below(12)
            };
            let min_elem = usize::from(inp.u16());
            let g = Geometry::check(log2, mask, map_len, min_elem);
            // A u32 index must be able to name every slot: 2^32 slots are refused.
            let slots = u128::from(mask) + 1;
            let model = log2 <= 16
                && (1u128 << log2.min(100)) >= min_elem as u128
                && slots.is_power_of_two()
                && slots <= u128::from(u32::MAX)
                && size_of::<rxe_queue_buf>() as u128 + (slots << log2.min(100)) <= map_len as u128;
            assert_eq!(g.is_ok(), model, "geometry {log2} {mask:#x} {map_len:#x} {min_elem}");
            if let Ok(g) = g {
                assert!(g.elem_size() >= min_elem);
                for i in [0, mask, inp.u32(), u32::MAX] {
                    assert!(g.slot_offset(i) + g.elem_size() <= map_len);
                    assert!(g.slot_offset(i) >= size_of::<rxe_queue_buf>());
                }
                let q = g.indices;
                let (p, c) = (inp.u32(), inp.u32());
                assert_eq!(q.used(p, c) + q.free(p, c), q.capacity());
                assert!(q.wrap(p) <= mask && q.next(p) <= mask);
                assert_eq!(q.is_full(p, c), q.free(p, c) == 0);
                assert_eq!(Indices::new(mask), Some(q));
            }
        }
        2 => {
            // A sysfs GID: any text, or a mutated well-formed one.
            let text = if inp.bool() {
                String::from_utf8_lossy(inp.rest()).into_owned()
            } else {
                let mut t = String::new();
                for i in 0..8 {
                    if i > 0 {
                        t.push(':');
                    }
                    t.push_str(&format!("{:04x}", inp.u16()));
                }
                let at = inp.below(t.len() as u32) as usize;
                let c = inp.u8();
                if c.is_ascii() && inp.bool() {
                    t.replace_range(at..at + 1, &(c as char).to_string());
                }
                t
            };
            assert_eq!(parse_sysfs_gid(&text), model_gid(&text), "GID {text:?}");
        }
        3 => {
            let raw = inp.u64();
            let mut out = [1 as core::ffi::c_char; 64];
            format_fw_ver(raw, &mut out);
            let text = format!("{}.{}.{}", (raw >> 32) & 0xffff, (raw >> 16) & 0xffff, raw & 0xffff);
            let got: Vec<u8> = out.iter().map(|&c| c as u8).take_while(|&c| c != 0).collect();
            assert_eq!(got, text.as_bytes());
            assert!(out[text.len()..].iter().all(|&c| c == 0));
        }
        _ => {
            // Command framing into a buffer of any size.
            let out_len = usize::from(inp.u16() % 512);
            let id = inp.u32();
            let body_len = usize::from(inp.u16() % 600);
            let body = inp.bytes(body_len).to_vec();
            let resp_len = if inp.bool() {
                inp.u64() as usize
            } else {
                usize::from(inp.u16())
            };
            let drv_len = if inp.bool() {
                inp.u64() as usize
            } else {
                usize::from(inp.u8()) * 8
            };
            let mut out = vec![0xa5u8; out_len];
            if inp.bool() {
                let r = frame_write(&mut out, id, &body, resp_len);
                let total = size_of::<ib_uverbs_cmd_hdr>() + body.len();
                let ok = total % 4 == 0
                    && total / 4 <= 0xffff
                    && resp_len % 4 == 0
                    && resp_len / 4 <= 0xffff
                    && total <= out_len;
                assert_eq!(r.is_ok(), ok);
                if let Ok(n) = r {
                    assert_eq!(n, total);
                    let h = ib_uverbs_cmd_hdr::read_from_bytes(&out[..8]).unwrap();
                    assert_eq!(
                        (h.command, h.in_words as usize, h.out_words as usize),
                        (id, total / 4, resp_len / 4)
                    );
                    assert_eq!(&out[8..n], &body[..]);
                } else {
                    assert_eq!(r, Err(Errno::EINVAL));
                }
            } else {
                let response = inp.u64();
                let r = frame_write_ex_drv(&mut out, id, &body, response, resp_len, drv_len);
                let head = size_of::<ib_uverbs_cmd_hdr>() + size_of::<ib_uverbs_ex_cmd_hdr>();
                let w = |n: usize| n % 8 == 0 && n / 8 <= 0xffff;
                let ok = w(body.len()) && w(resp_len) && w(drv_len) && head + body.len() <= out_len;
                assert_eq!(r.is_ok(), ok);
                if let Ok(n) = r {
                    assert_eq!(n, head + body.len());
                    assert_eq!(&out[head..n], &body[..]);
                }
            }
            assert!(out.len() == out_len);
        }
    }
});
