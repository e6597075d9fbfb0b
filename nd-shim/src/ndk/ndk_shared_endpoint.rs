//! NDK_SHARED_ENDPOINT: NdkGetSharedEndpointLocalAddress and close, over the Rust API's
//! [`SharedEndpoint`]; connectors connect through it with NdkConnectWithSharedEndpoint. Its C
//! entries are in `entry.rs`.

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::sync::Arc;

use super::boundary::{code, BufferOut, Handle, NtStatus};
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

impl NdkSharedEndpoint {
    pub(super) fn new(adapter: &Arc<AdapterShared>, address: SocketAddr) -> Result<NdkSharedEndpoint, NtStatus> {
        Ok(NdkSharedEndpoint {
            dispatch: <NdkSharedEndpoint as Handle>::DISPATCH,
            endpoint: SharedEndpoint::new(&adapter.adapter, address).map_err(code)?,
        })
    }

    pub(super) fn get_local_address(&self, out: BufferOut<'_>) -> Result<NtStatus, NtStatus> {
        let local = sys::sockaddr_bytes(self.endpoint.local_address());
        out.fill(|b| Ok(fill_address(&local, b)))
    }
}
