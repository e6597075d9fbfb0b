//! Entry points for the fuzz targets of `fuzz/` (cargo feature `fuzzing`): the NDK face's
//! argument checks, called exactly as its entries call them. Not an API.

use std::ffi::c_void;
use std::net::SocketAddr;

use super::NtStatus;

/// How the NDK entries read a socket address argument.
///
/// # Safety
/// `addr` is NULL or readable for `len` bytes.
pub unsafe fn read_sockaddr(addr: *const libc::sockaddr, len: u32) -> Result<SocketAddr, NtStatus> {
    // SAFETY: forwarded.
    unsafe { super::boundary::read_sockaddr(addr, len) }
}

/// A byte-buffer argument: NULL only with length 0.
///
/// # Safety
/// `data` is NULL or readable for `len` bytes.
pub unsafe fn bytes<'a>(data: *const c_void, len: u32) -> Result<&'a [u8], NtStatus> {
    // SAFETY: forwarded.
    unsafe { super::boundary::slice(data.cast::<u8>(), len) }
}

/// The address getters' buffer rule over an encoded address.
///
/// # Safety
/// `len` is NULL or valid for a u32; `addr` NULL or writable for `*len` bytes.
pub unsafe fn write_address(addr: *mut libc::sockaddr, len: *mut u32, sockaddr: &[u8]) -> Result<NtStatus, NtStatus> {
    // SAFETY: forwarded.
    unsafe { super::boundary::write_address(addr, len, |b| Ok(crate::connection_data::fill_address(sockaddr, b))) }
}
