//! The public completion-queue structs of `<infiniband/verbs.h>`: `ibv_cq`,
//! `ibv_cq_ex` (with its poll and read callbacks), `ibv_wc`,
//! `ibv_cq_init_attr_ex`, `ibv_comp_channel`. All of them are identical from
//! rdma-core v36 to v65 (checked against the tags); `tests/c_layout.rs`
//! compares each with the headers of every Debian line, field by field.
//!
//! `struct verbs_cq` (driver.h) is `union { struct ibv_cq cq; struct
//! ibv_cq_ex cq_ex; }`; `ibv_cq_ex` starts with the fields of `ibv_cq`, so a
//! provider's CQ that begins with an `ibv_cq_ex` serves both views.

#![forbid(unsafe_code)]
#![allow(non_camel_case_types)]

use core::ffi::{c_int, c_uint, c_void};

use zerocopy::FromBytes;

use super::device_context::{ibv_context, opaque_fn};

/// `enum ibv_create_cq_wc_flags`: what `ibv_cq_init_attr_ex.wc_flags` asks
/// the `read_*` callbacks for.
pub const IBV_WC_EX_WITH_BYTE_LEN: u64 = 1 << 0;
pub const IBV_WC_EX_WITH_IMM: u64 = 1 << 1;
pub const IBV_WC_EX_WITH_QP_NUM: u64 = 1 << 2;
pub const IBV_WC_EX_WITH_SRC_QP: u64 = 1 << 3;
pub const IBV_WC_EX_WITH_SLID: u64 = 1 << 4;
pub const IBV_WC_EX_WITH_SL: u64 = 1 << 5;
pub const IBV_WC_EX_WITH_DLID_PATH_BITS: u64 = 1 << 6;
pub const IBV_WC_EX_WITH_COMPLETION_TIMESTAMP: u64 = 1 << 7;
pub const IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK: u64 = 1 << 11;

/// `enum ibv_cq_init_attr_mask`
pub const IBV_CQ_INIT_ATTR_MASK_FLAGS: u32 = 1 << 0;
pub const IBV_CQ_INIT_ATTR_MASK_PD: u32 = 1 << 1;

/// `enum ibv_create_cq_attr_flags`
pub const IBV_CREATE_CQ_ATTR_SINGLE_THREADED: u32 = 1 << 0;
pub const IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN: u32 = 1 << 1;

#[repr(C)]
pub struct ibv_comp_channel {
    pub context: *mut ibv_context,
    pub fd: c_int,
    pub refcnt: c_int,
}

/// Declares a struct that begins with the fields of `struct ibv_cq`, as `ibv_cq` itself and
/// `ibv_cq_ex` do (C's `verbs_cq` overlays the two), followed by the fields given.
macro_rules! with_ibv_cq_fields {
    ($(#[$attr:meta])* pub struct $name:ident { $($tail:tt)* }) => {
        $(#[$attr])*
        #[repr(C)]
        pub struct $name {
            pub context: *mut ibv_context,
            pub channel: *mut ibv_comp_channel,
            pub cq_context: *mut c_void,
            pub handle: u32,
            pub cqe: c_int,
            pub mutex: libc::pthread_mutex_t,
            pub cond: libc::pthread_cond_t,
            pub comp_events_completed: u32,
            pub async_events_completed: u32,
            $($tail)*
        }
    };
}

with_ibv_cq_fields! {
    pub struct ibv_cq {}
}

#[repr(C)]
pub struct ibv_poll_cq_attr {
    pub comp_mask: u32,
}

/// The unnamed union of `ibv_wc`: immediate data (network byte order) when
/// `wc_flags` has `IBV_WC_WITH_IMM`, the invalidated rkey with `IBV_WC_WITH_INV`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes)]
pub union ibv_wc_ex {
    pub imm_data: u32,
    pub invalidated_rkey: u32,
}

#[repr(C)]
#[derive(Clone, Copy, FromBytes)]
pub struct ibv_wc {
    pub wr_id: u64,
    /// `enum ibv_wc_status`
    pub status: c_int,
    /// `enum ibv_wc_opcode`
    pub opcode: c_int,
    pub vendor_err: u32,
    pub byte_len: u32,
    pub ex: ibv_wc_ex,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: c_uint,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

pub type start_poll_fn = unsafe extern "C" fn(*mut ibv_cq_ex, *mut ibv_poll_cq_attr) -> c_int;
pub type next_poll_fn = unsafe extern "C" fn(*mut ibv_cq_ex) -> c_int;
pub type end_poll_fn = unsafe extern "C" fn(*mut ibv_cq_ex);
pub type read_u32_fn = unsafe extern "C" fn(*mut ibv_cq_ex) -> u32;
pub type read_u8_fn = unsafe extern "C" fn(*mut ibv_cq_ex) -> u8;
/// `read_opcode` returns `enum ibv_wc_opcode`.
pub type read_opcode_fn = unsafe extern "C" fn(*mut ibv_cq_ex) -> c_int;
/// `read_wc_flags` returns `unsigned int`.
pub type read_wc_flags_fn = unsafe extern "C" fn(*mut ibv_cq_ex) -> c_uint;

with_ibv_cq_fields! {
    /// `struct ibv_cq_ex`: `ibv_cq`'s fields, then the extended poll state and
    /// callbacks. libibverbs' inline `ibv_start_poll` & co. call these directly;
    /// `status` and `wr_id` are read by the application after each successful
    /// `start_poll`/`next_poll`. A `read_*` the CQ was not created for stays NULL.
    pub struct ibv_cq_ex {
        pub comp_mask: u32,
        /// `enum ibv_wc_status`
        pub status: c_int,
        pub wr_id: u64,
        pub start_poll: Option<start_poll_fn>,
        pub next_poll: Option<next_poll_fn>,
        pub end_poll: Option<end_poll_fn>,
        pub read_opcode: Option<read_opcode_fn>,
        pub read_vendor_err: Option<read_u32_fn>,
        pub read_byte_len: Option<read_u32_fn>,
        /// Returns `__be32`.
        pub read_imm_data: Option<read_u32_fn>,
        pub read_qp_num: Option<read_u32_fn>,
        pub read_src_qp: Option<read_u32_fn>,
        pub read_wc_flags: Option<read_wc_flags_fn>,
        pub read_slid: Option<read_u32_fn>,
        pub read_sl: Option<read_u8_fn>,
        pub read_dlid_path_bits: Option<read_u8_fn>,
        pub read_completion_ts: opaque_fn,
        pub read_cvlan: opaque_fn,
        pub read_flow_tag: opaque_fn,
        pub read_tm_info: opaque_fn,
        pub read_completion_wallclock_ns: opaque_fn,
    }
}

#[repr(C)]
pub struct ibv_cq_init_attr_ex {
    pub cqe: u32,
    pub cq_context: *mut c_void,
    pub channel: *mut ibv_comp_channel,
    pub comp_vector: u32,
    pub wc_flags: u64,
    pub comp_mask: u32,
    pub flags: u32,
    /// `struct ibv_pd *`, valid with `IBV_CQ_INIT_ATTR_MASK_PD`.
    pub parent_domain: *mut c_void,
}

/// The ops-table signatures (`struct verbs_context_ops`) of the CQ verbs.
pub type create_cq_fn = unsafe extern "C" fn(*mut ibv_context, c_int, *mut ibv_comp_channel, c_int) -> *mut ibv_cq;
pub type create_cq_ex_fn = unsafe extern "C" fn(*mut ibv_context, *mut ibv_cq_init_attr_ex) -> *mut ibv_cq_ex;
pub type destroy_cq_fn = unsafe extern "C" fn(*mut ibv_cq) -> c_int;
pub type poll_cq_fn = unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int;
pub type req_notify_cq_fn = unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int;
pub type resize_cq_fn = unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int;
