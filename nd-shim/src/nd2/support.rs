//! `ndsupport.h`: NdStartup, NdCleanup, NdFlushProviders, NdQueryAddressList, NdResolveAddress,
//! NdCheckAddress, NdOpenAdapter. The shim is the only provider; an address is RDMA-capable when
//! rdma_cm can bind an id to it on an RDMA device (what NdOpenAdapter then opens).

use std::ffi::c_void;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};

use super::adapter::write_address_list;
use super::ind2_adapter;
use super::{
    guid, hr_boundary, out_bytes, read_sockaddr, Guid, HResult, ND_BUFFER_OVERFLOW, ND_INVALID_ADDRESS,
    ND_INVALID_PARAMETER, ND_SUCCESS,
};
use crate::status::NdStatus;
use crate::sys;

/// NdStartup calls not yet matched by NdCleanup.
static STARTED: AtomicU32 = AtomicU32::new(0);

/// `ndsupport.h`'s NdQueryAddressList flag ND_QUERY_EXCLUDE_NDv2_ADDRESSES. The shim is one
/// NDv2 provider and no emulator: this flag leaves nothing; the other two
/// (ND_QUERY_EXCLUDE_EMULATOR_ADDRESSES 0x1, ND_QUERY_EXCLUDE_NDv1_ADDRESSES 0x2) leave
/// everything.
const ND_QUERY_EXCLUDE_NDV2_ADDRESSES: u32 = 0x4;

/// The local addresses of RDMA devices, in interface order.
pub(super) fn rdma_addresses() -> Vec<SocketAddr> {
    super::adapter::rdma_addresses_where(|_| true)
}

/// The local address the routing table picks for `remote` (a UDP socket's connect sends nothing).
fn route_source(remote: SocketAddr) -> Result<IpAddr, HResult> {
    let any: SocketAddr = if remote.is_ipv4() {
        SocketAddr::from(([0, 0, 0, 0], 0))
    } else {
        SocketAddr::from(([0u16; 8], 0))
    };
    let failed = |e: std::io::Error| super::code(crate::status::from_errno(e.raw_os_error().unwrap_or(libc::EINVAL)));
    let socket = std::net::UdpSocket::bind(any).map_err(failed)?;
    socket.connect(remote).map_err(failed)?;
    Ok(socket.local_addr().map_err(failed)?.ip())
}

#[no_mangle]
pub extern "C" fn NdStartup() -> HResult {
    hr_boundary("NdStartup", || {
        crate::stderr_log::init_from_env();
        STARTED.fetch_add(1, Ordering::AcqRel);
        Ok(ND_SUCCESS)
    })
}

#[no_mangle]
pub extern "C" fn NdCleanup() -> HResult {
    hr_boundary("NdCleanup", || {
        // A compare-exchange loop, not fetch_update (deprecated on nightly, where Miri runs).
        let mut started = STARTED.load(Ordering::Acquire);
        loop {
            // Cleanup without Startup.
            let Some(left) = started.checked_sub(1) else {
                return Err(NdStatus::ND_INVALID_DEVICE_STATE.0);
            };
            match STARTED.compare_exchange_weak(started, left, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Ok(ND_SUCCESS),
                Err(now) => started = now,
            }
        }
    })
}

#[no_mangle]
pub extern "C" fn NdFlushProviders() {
    super::boundary("NdFlushProviders", (), || {});
}

/// A caller's buffer and its SIZE_T size (`*len` bytes in): `None` when `len` is NULL.
///
/// # Safety
/// `len` is NULL or valid for a SIZE_T; `buffer` NULL or writable for `*len` bytes; neither is
/// reached otherwise for the returned lifetime.
unsafe fn sized_buffer<'a>(buffer: *mut c_void, len: *mut usize) -> Option<(&'a mut usize, &'a mut [u8])> {
    // SAFETY: the caller's promises.
    unsafe {
        let len = len.as_mut()?;
        let buffer = out_bytes(buffer, *len);
        Some((len, buffer))
    }
}

/// # Safety
/// `len` is NULL or valid for a SIZE_T; `list` is NULL or writable for `*len` bytes.
#[no_mangle]
pub unsafe extern "C" fn NdQueryAddressList(flags: u32, list: *mut c_void, len: *mut usize) -> HResult {
    hr_boundary("NdQueryAddressList", || {
        crate::stderr_log::init_from_env();
        // SAFETY: the caller's buffer and size.
        let (len, list) = unsafe { sized_buffer(list, len) }.ok_or(ND_INVALID_PARAMETER)?;
        if flags & ND_QUERY_EXCLUDE_NDV2_ADDRESSES != 0 {
            // No address left: Microsoft's framework (ndutil's Framework::QueryAddressList)
            // then sets the size to 0 and succeeds, the buffer untouched.
            *len = 0;
            return Ok(ND_SUCCESS);
        }
        let (need, hr) = write_address_list(&rdma_addresses(), list);
        *len = need;
        Ok(hr)
    })
}

/// # Safety
/// `remote` is NULL or readable for `remote_len` bytes; `local_len` NULL or valid for a SIZE_T;
/// `local` NULL or writable for `*local_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn NdResolveAddress(
    remote: *const libc::sockaddr,
    remote_len: usize,
    local: *mut libc::sockaddr,
    local_len: *mut usize,
) -> HResult {
    hr_boundary("NdResolveAddress", || {
        // SAFETY: the caller's address, and its buffer and size.
        let (remote, local) = unsafe {
            (
                read_sockaddr(remote, remote_len)?,
                sized_buffer(local.cast(), local_len),
            )
        };
        let (local_len, local) = local.ok_or(ND_INVALID_PARAMETER)?;
        let source = route_source(remote)?;
        if !rdma_addresses().iter().any(|a| a.ip() == source) {
            return Err(ND_INVALID_ADDRESS);
        }
        let bytes = sys::sockaddr_bytes(SocketAddr::new(source, 0));
        *local_len = bytes.len();
        let Some(local) = local.get_mut(..bytes.len()) else {
            return Ok(ND_BUFFER_OVERFLOW);
        };
        local.copy_from_slice(&bytes);
        Ok(ND_SUCCESS)
    })
}

/// # Safety
/// `addr` is NULL or readable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn NdCheckAddress(addr: *const libc::sockaddr, len: usize) -> HResult {
    hr_boundary("NdCheckAddress", || {
        // SAFETY: the caller's address.
        let ip = unsafe { read_sockaddr(addr, len)? }.ip();
        if rdma_addresses().iter().any(|a| a.ip() == ip) {
            Ok(ND_SUCCESS)
        } else {
            Err(ND_INVALID_ADDRESS)
        }
    })
}

/// # Safety
/// `iid` is NULL or a GUID; `addr` NULL or readable for `len` bytes; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn NdOpenAdapter(
    iid: *const Guid,
    addr: *const libc::sockaddr,
    len: usize,
    out: *mut *mut c_void,
) -> HResult {
    hr_boundary("NdOpenAdapter", || {
        crate::stderr_log::init_from_env();
        // SAFETY: the caller's address, IID and out pointer (NULL, or a GUID and writable).
        let (addr, iid, out) = unsafe { (read_sockaddr(addr, len)?, guid(iid), out.as_mut()) };
        if iid == Some(super::iids::IID_INDAdapter) {
            // ND1: no ND1 provider owns the address (ndutil's answer).
            return Err(ND_INVALID_ADDRESS);
        }
        ind2_adapter::new_object(iid, addr.ip(), out)
    })
}

/// ND1's open: there is no ND1 provider, so a valid address is ND_INVALID_ADDRESS, as Microsoft's
/// ndutil answers when no ND1 provider owns it; `*out` is NULL.
///
/// # Safety
/// `addr` is NULL or readable for `len` bytes; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn NdOpenV1Adapter(addr: *const libc::sockaddr, len: usize, out: *mut *mut c_void) -> HResult {
    hr_boundary("NdOpenV1Adapter", || {
        // SAFETY: the caller's out pointer (NULL or writable) and address.
        let (out, addr) = unsafe { (out.as_mut(), read_sockaddr(addr, len)) };
        if let Some(out) = out {
            *out = std::ptr::null_mut();
        }
        addr?;
        Err(ND_INVALID_ADDRESS)
    })
}

// The exports above, at the version node ND_SHIM_0 (crate::exports).
crate::exports::version_node!(
    "NdStartup",
    "NdCleanup",
    "NdFlushProviders",
    "NdQueryAddressList",
    "NdResolveAddress",
    "NdCheckAddress",
    "NdOpenAdapter",
    "NdOpenV1Adapter",
);
