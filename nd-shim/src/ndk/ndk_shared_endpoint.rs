//! NDK_SHARED_ENDPOINT: NdkGetSharedEndpointLocalAddress and close, over the Rust API's
//! [`SharedEndpoint`]; connectors connect through it with NdkConnectWithSharedEndpoint.

use std::net::SocketAddr;
use std::sync::Arc;

use super::boundary::{code, handle, status_boundary, take_handle, write_address, Handle, NtStatus, STATUS_SUCCESS};
use super::ndk_verbs::AdapterShared;
use crate::connection_data::fill_address;
use crate::{sys, SharedEndpoint};

#[repr(C)]
pub struct NdkSharedEndpoint {
    dispatch: *const NdkSharedEndpointDispatch,
    pub(super) endpoint: SharedEndpoint,
}

#[repr(C)]
pub struct NdkSharedEndpointDispatch {
    pub close: unsafe extern "C" fn(*mut NdkSharedEndpoint) -> NtStatus,
    pub get_local_address: unsafe extern "C" fn(*mut NdkSharedEndpoint, *mut libc::sockaddr, *mut u32) -> NtStatus,
}

static SHARED_ENDPOINT_DISPATCH: NdkSharedEndpointDispatch = NdkSharedEndpointDispatch {
    close: close_shared_endpoint,
    get_local_address: shared_endpoint_local_address,
};

impl Handle for NdkSharedEndpoint {
    type Dispatch = NdkSharedEndpointDispatch;
    const DISPATCH: &'static NdkSharedEndpointDispatch = &SHARED_ENDPOINT_DISPATCH;
}

impl NdkSharedEndpoint {
    pub(super) fn new(adapter: &Arc<AdapterShared>, address: SocketAddr) -> Result<NdkSharedEndpoint, NtStatus> {
        Ok(NdkSharedEndpoint {
            dispatch: &SHARED_ENDPOINT_DISPATCH,
            endpoint: SharedEndpoint::new(&adapter.adapter, address).map_err(code)?,
        })
    }
}

/// NdkCloseSharedEndpoint: the address stays busy until every connector connected through the
/// endpoint is closed too.
unsafe extern "C" fn close_shared_endpoint(endpoint: *mut NdkSharedEndpoint) -> NtStatus {
    status_boundary("NdkCloseSharedEndpoint", || {
        // SAFETY: the caller gives up its handle.
        drop(unsafe { take_handle(endpoint)? });
        Ok(STATUS_SUCCESS)
    })
}

unsafe extern "C" fn shared_endpoint_local_address(
    endpoint: *mut NdkSharedEndpoint,
    address: *mut libc::sockaddr,
    length: *mut u32,
) -> NtStatus {
    status_boundary("NdkGetSharedEndpointLocalAddress", || {
        // SAFETY: the caller's handle, buffer and length.
        unsafe {
            let e = handle(endpoint)?;
            let local = sys::sockaddr_bytes(e.endpoint.local_address());
            write_address(address, length, |b| Ok(fill_address(&local, b)))
        }
    })
}
