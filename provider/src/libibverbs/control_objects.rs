//! The public verbs objects the control-path verbs allocate or read:
//! `ibv_pd`, `ibv_mr` (inside the private `verbs_mr`), `ibv_mw`, `ibv_ah` and
//! its attributes, `ibv_gid`, and `ibv_qp` (multicast reads its handle).
//! Public `verbs.h` ABI, the same from rdma-core v34 to v65; `verbs_mr` is
//! `driver.h`'s, unchanged since v20, its offsets asserted below; the
//! `verbs.h` structs are compared with the headers by `tests/c_layout.rs`.

#![forbid(unsafe_code)]
#![allow(non_camel_case_types)]

use core::ffi::{c_int, c_void};

use super::device_context::ibv_context;

#[repr(C)]
pub struct ibv_pd {
    pub context: *mut ibv_context,
    pub handle: u32,
}

/// `struct ibv_td`: a thread domain.
#[repr(C)]
pub struct ibv_td {
    pub context: *mut ibv_context,
}

/// `struct ibv_td_init_attr`.
#[repr(C)]
pub struct ibv_td_init_attr {
    pub comp_mask: u32,
}

/// `ibv_parent_domain_init_attr.alloc`: memory for a provider resource, or
/// `IBV_ALLOCATOR_USE_DEFAULT`.
pub type pd_alloc_fn = unsafe extern "C" fn(*mut ibv_pd, *mut c_void, usize, usize, u64) -> *mut c_void;
/// `ibv_parent_domain_init_attr.free`.
pub type pd_free_fn = unsafe extern "C" fn(*mut ibv_pd, *mut c_void, *mut c_void, u64);

c_struct! {
    /// `struct ibv_parent_domain_init_attr`.
    pub struct ibv_parent_domain_init_attr [size 48] {
        0 => pub pd: *mut ibv_pd,
        8 => pub td: *mut ibv_td,
        16 => pub comp_mask: u32,
        24 => pub alloc: Option<pd_alloc_fn>,
        32 => pub free: Option<pd_free_fn>,
        40 => pub pd_context: *mut c_void,
    }
}

/// `enum ibv_parent_domain_init_attr_mask`.
pub const IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS: u32 = 1 << 0;
pub const IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT: u32 = 1 << 1;
/// rdma-core 65: allocations visible to a confidential-computing host.
pub const IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC: u32 = 1 << 2;

#[repr(C)]
pub struct ibv_mr {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

/// `enum ibv_mr_type` (driver.h): what `ibv_dereg_mr`/`ibv_rereg_mr` check.
pub const IBV_MR_TYPE_MR: c_int = 0;

c_struct! {
    /// `struct verbs_mr` (driver.h): the provider allocates it; libibverbs reads
    /// `mr_type` and `access` in `ibv_dereg_mr` and `ibv_rereg_mr`.
    pub struct verbs_mr [size 56] {
        0 => pub ibv_mr: ibv_mr,
        /// `enum ibv_mr_type`
        48 => pub mr_type: c_int,
        52 => pub access: c_int,
    }
}

/// `enum ibv_mw_type`
pub const IBV_MW_TYPE_1: c_int = 1;

#[repr(C)]
pub struct ibv_mw {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub rkey: u32,
    pub handle: u32,
    /// `enum ibv_mw_type`
    pub r#type: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_gid_global {
    /// Big-endian.
    pub subnet_prefix: u64,
    /// Big-endian.
    pub interface_id: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_gid {
    pub raw: [u8; 16],
    pub global: ibv_gid_global,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_global_route {
    pub dgid: ibv_gid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_ah_attr {
    pub grh: ibv_global_route,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

#[repr(C)]
pub struct ibv_ah {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub handle: u32,
}

/// `struct ibv_qp`. The CQ and SRQ pointers are opaque here.
#[repr(C)]
pub struct ibv_qp {
    pub context: *mut ibv_context,
    pub qp_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub send_cq: *mut c_void,
    pub recv_cq: *mut c_void,
    pub srq: *mut c_void,
    pub handle: u32,
    pub qp_num: u32,
    /// `enum ibv_qp_state`
    pub state: c_int,
    /// `enum ibv_qp_type`
    pub qp_type: c_int,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub events_completed: u32,
}
