//! ND2_SGE and what posting to a QP and to an SRQ shares: the caller's SGE array as verbs SGEs,
//! and verbs' post return as an HRESULT.
//!
//! ND2_SGE { Buffer, BufferLength, MemoryRegionToken } has the layout of `struct ibv_sge`
//! { addr, length, lkey } on LP64, so the caller's array is handed to verbs as it is. SGEs are
//! not checked against their region here: the device checks them, and one outside its region
//! completes with ND_ACCESS_VIOLATION (IBV_WC_LOC_PROT_ERR), as on Windows.
//!
//! The array's conversion (`sge_list`) is `data_verbs`'.
#![forbid(unsafe_code)]

use std::ffi::c_void;

use rdma_mummy_sys as ffi;

use super::{code, HResult, ND_SUCCESS};

/// ND2_SGE.
#[repr(C)]
pub struct Nd2Sge {
    pub buffer: *mut c_void,
    pub buffer_length: u32,
    pub memory_region_token: u32,
}

const _: () = assert!(std::mem::size_of::<Nd2Sge>() == std::mem::size_of::<ffi::ibv_sge>());
const _: () = assert!(std::mem::offset_of!(Nd2Sge, buffer) == std::mem::offset_of!(ffi::ibv_sge, addr));
const _: () = assert!(std::mem::offset_of!(Nd2Sge, buffer_length) == std::mem::offset_of!(ffi::ibv_sge, length));
const _: () = assert!(std::mem::offset_of!(Nd2Sge, memory_region_token) == std::mem::offset_of!(ffi::ibv_sge, lkey));

/// A verbs post's return as the entry's result: 0 is ND_SUCCESS; a positive errno or, for a
/// negative return, errno itself, is that error's code.
pub(super) fn post_result(ret: i32) -> Result<HResult, HResult> {
    match ret {
        0 => Ok(ND_SUCCESS),
        e if e > 0 => Err(code(crate::status::from_errno(e))),
        _ => Err(code(crate::sys::last_error())),
    }
}
