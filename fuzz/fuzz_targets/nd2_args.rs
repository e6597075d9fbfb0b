//! The ND2 and NDK faces' argument checks, against models written from the ND2 / NDK
//! documentation: socket-address arguments (NULL, lengths, families, any bytes; both faces
//! decode the same address), byte-buffer arguments (NULL with a length), the buffer-filling
//! getters (GetPrivateData, GetLocalAddress / GetPeerAddress, NDK's address getters: the size
//! out, what is copied, nothing written past the caller's length), Register's checks, and the
//! SGE arrays of the data-path methods.
#![no_main]

use std::ffi::c_void;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use libfuzzer_sys::fuzz_target;
use nd_shim::nd2::fuzzing as nd2;
use nd_shim::ndk::fuzzing as ndk;
use nd_shim::NdStatus;
use rxe_rs_fuzz::Input;

const INVALID_PARAMETER: i32 = NdStatus::ND_INVALID_PARAMETER.raw();
const INVALID_ADDRESS: i32 = NdStatus::ND_INVALID_ADDRESS.raw();

fn model_sockaddr(b: Option<&[u8]>) -> Result<SocketAddr, i32> {
    let b = b.ok_or(INVALID_PARAMETER)?;
    if b.len() < 2 {
        return Err(INVALID_ADDRESS);
    }
    let family = i32::from(u16::from_ne_bytes([b[0], b[1]]));
    let port = |b: &[u8]| u16::from_be_bytes([b[2], b[3]]);
    let u32_at = |at: usize| u32::from_ne_bytes(b[at..at + 4].try_into().unwrap());
    match family {
        libc::AF_INET if b.len() >= 16 => {
            let ip: [u8; 4] = b[4..8].try_into().unwrap();
            Ok(SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(ip), port(b))))
        }
        libc::AF_INET6 if b.len() >= 28 => {
            let ip: [u8; 16] = b[8..24].try_into().unwrap();
            Ok(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(ip),
                port(b),
                u32_at(4),
                u32_at(24),
            )))
        }
        _ => Err(INVALID_ADDRESS),
    }
}

/// A getter's outcome past its refusals: `Ok(status)`, `len` the data's size, the data's first
/// `copied` bytes at the start of `buffer` and nothing written after them.
fn expect_copied(r: Result<i32, i32>, status: NdStatus, len: u32, data: &[u8], buffer: &[u8], copied: usize) {
    assert_eq!(r, Ok(status.raw()));
    assert_eq!(len as usize, data.len());
    assert_eq!(&buffer[..copied], &data[..copied]);
    assert!(buffer[copied..].iter().all(|&b| b == 0xee), "wrote past what it copied");
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input::new(data);
    while !inp.is_empty() {
        match inp.u8() % 6 {
            0 => {
                // A socket address: exactly `len` readable bytes, at any alignment, or NULL.
                let null = inp.u8() % 8 == 0;
                let len = usize::from(inp.u8() % 40);
                let shift = usize::from(inp.u8() % 8);
                let mut raw = vec![0u8; shift + len];
                let family = match inp.u8() % 4 {
                    0 => libc::AF_INET as u16,
                    1 => libc::AF_INET6 as u16,
                    _ => inp.u16(),
                };
                let body = inp.bytes(len).to_vec();
                raw[shift..shift + body.len()].copy_from_slice(&body);
                if len >= 2 {
                    raw[shift..shift + 2].copy_from_slice(&family.to_ne_bytes());
                }
                let bytes = &raw[shift..];
                let p = if null {
                    std::ptr::null()
                } else {
                    bytes.as_ptr().cast::<libc::sockaddr>()
                };
                let model = model_sockaddr((!null).then_some(bytes));
                // SAFETY: NULL or `len` readable bytes.
                assert_eq!(unsafe { nd2::read_sockaddr(p, len) }, model);
                // SAFETY: as above.
                assert_eq!(unsafe { ndk::read_sockaddr(p, len as u32) }, model);
            }
            1 => {
                let null = inp.bool();
                let len = if inp.bool() { inp.u32() } else { u32::from(inp.u8() % 4) };
                let buf = [7u8; 4];
                let p: *const c_void = if null { std::ptr::null() } else { buf.as_ptr().cast() };
                if !null && len > 4 {
                    continue;
                }
                let model = match (null, len) {
                    (_, 0) => Ok(0),
                    (true, _) => Err(INVALID_PARAMETER),
                    (false, n) => Ok(n as usize),
                };
                // SAFETY: NULL or `len` readable bytes.
                assert_eq!(unsafe { nd2::bytes(p, len as usize) }.map(|b| b.len()), model);
                // SAFETY: as above.
                assert_eq!(unsafe { ndk::bytes(p, len) }.map(|b| b.len()), model);
            }
            2 => {
                // A getter's buffer: `*len` in, the size out, copies per the rule, nothing past.
                let data_len = usize::from(inp.u8() % 200);
                let data = inp.bytes(data_len).to_vec();
                let have = u32::from(inp.u8() % 220);
                let null_buffer = inp.u8() % 4 == 0;
                let null_len = inp.u8() % 8 == 0;
                let address = inp.bool();
                let mut buffer = vec![0xeeu8; have as usize + 8];
                let mut len = have;
                let bp: *mut c_void = if null_buffer {
                    std::ptr::null_mut()
                } else {
                    buffer.as_mut_ptr().cast()
                };
                let lp: *mut u32 = if null_len { std::ptr::null_mut() } else { &mut len };
                // SAFETY: NULL or writable for `have` bytes; len NULL or a u32.
                let r = unsafe { nd2::fill_out(bp, lp, &data, address) };
                let room = if null_buffer { 0 } else { have as usize };
                if null_len {
                    assert_eq!(r, Err(INVALID_PARAMETER));
                    assert!(buffer.iter().all(|&b| b == 0xee));
                    continue;
                }
                let short = room < data.len();
                let status = if short {
                    NdStatus::ND_BUFFER_OVERFLOW
                } else {
                    NdStatus::ND_SUCCESS
                };
                let copied = if address && short { 0 } else { data.len().min(room) };
                expect_copied(r, status, len, &data, &buffer, copied);

                // NDK's address getters: a short buffer is untouched and STATUS_BUFFER_TOO_SMALL.
                let mut buffer = vec![0xeeu8; have as usize + 8];
                let mut len = have;
                let bp: *mut libc::sockaddr = if null_buffer {
                    std::ptr::null_mut()
                } else {
                    buffer.as_mut_ptr().cast()
                };
                // SAFETY: as above.
                let r = unsafe { ndk::write_address(bp, &mut len, &data) };
                if null_buffer && have != 0 {
                    assert_eq!(r, Err(INVALID_PARAMETER));
                    continue;
                }
                let short = (have as usize) < data.len();
                let status = if short {
                    NdStatus::STATUS_BUFFER_TOO_SMALL
                } else {
                    NdStatus::ND_SUCCESS
                };
                let copied = if short { 0 } else { data.len() };
                expect_copied(r, status, len, &data, &buffer, copied);
            }
            3 => {
                let null = inp.u8() % 4 == 0;
                let len = if inp.bool() {
                    inp.u64() as usize
                } else {
                    usize::from(inp.u16())
                };
                let flags = if inp.bool() {
                    inp.u32()
                } else {
                    u32::from(inp.u8() & 0xf) | (u32::from(inp.bool()) << 31)
                };
                let max = if inp.bool() {
                    inp.u64() as usize
                } else {
                    usize::from(inp.u16())
                };
                let p: *const c_void = if null { std::ptr::null() } else { 8 as *const c_void };
                let known = 0x1 | 0x2 | 0x5 | 0x8 | 0x8000_0000u32;
                let model = if null || flags & !known != 0 {
                    Err(NdStatus::ND_INVALID_PARAMETER)
                } else if len == 0 {
                    Err(NdStatus::ND_INVALID_BUFFER_SIZE)
                } else if len > max {
                    Err(NdStatus::ND_INVALID_PARAMETER)
                } else {
                    Ok(())
                };
                assert_eq!(nd2::check_register(p, len, flags, max), model);
            }
            _ => {
                let null = inp.bool();
                let n = if inp.bool() { inp.u32() } else { u32::from(inp.u8() % 8) };
                let sges = [0u64; 2 * 8];
                if !null && n > 8 {
                    continue;
                }
                let p: *const c_void = if null { std::ptr::null() } else { sges.as_ptr().cast() };
                let model = match (null, n) {
                    (_, 0) => Ok(0),
                    (true, _) => Err(INVALID_PARAMETER),
                    (false, n) => Ok(n as usize),
                };
                // SAFETY: NULL or n readable entries.
                assert_eq!(unsafe { nd2::sge_list(p, n) }, model);
            }
        }
    }
});
