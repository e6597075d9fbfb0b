//! Entry points for the fuzz targets of `fuzz/` (cargo feature `fuzzing`): the ND2 face's
//! argument checks, called exactly as the COM methods call them. Not an API.

use std::ffi::c_void;
use std::net::SocketAddr;

use super::HResult;

/// How the COM methods read a socket address argument (NULL, length, family).
///
/// # Safety
/// `addr` is NULL or readable for `len` bytes.
pub unsafe fn read_sockaddr(addr: *const libc::sockaddr, len: usize) -> Result<SocketAddr, HResult> {
    // SAFETY: forwarded.
    unsafe { super::read_sockaddr(addr, len) }
}

/// A byte-buffer argument (private data): NULL only with length 0.
///
/// # Safety
/// `data` is NULL or readable for `len` bytes.
pub unsafe fn bytes<'a>(data: *const c_void, len: usize) -> Result<&'a [u8], HResult> {
    // SAFETY: forwarded.
    unsafe { super::bytes(data, len) }
}

/// GetPrivateData's buffer rule over `data` (`address`: GetLocalAddress / GetPeerAddress's).
///
/// # Safety
/// `len` is NULL or valid for a u32; `buffer` is NULL or writable for `*len` bytes.
pub unsafe fn fill_out(buffer: *mut c_void, len: *mut u32, data: &[u8], address: bool) -> Result<HResult, HResult> {
    // SAFETY: forwarded.
    unsafe {
        super::fill_out(buffer, len, |b| {
            Ok(if address {
                crate::connection_data::fill_address(data, b)
            } else {
                crate::connection_data::fill_private_data(data, b)
            })
        })
    }
}

/// IND2MemoryRegion::Register's argument checks.
pub fn check_register(buffer: *const c_void, len: usize, flags: u32, max_len: usize) -> Result<(), crate::NdStatus> {
    super::mr::check_register(buffer, len, flags, max_len)
}

/// The SGE-array argument of Send / Receive / Read / Write: its length as verbs SGEs.
///
/// # Safety
/// `sge` is NULL or readable for `n` entries.
pub unsafe fn sge_list(sge: *const c_void, n: u32) -> Result<usize, HResult> {
    // SAFETY: forwarded.
    unsafe { super::data_verbs::sge_list(sge.cast(), n) }.map(|l| l.len())
}
