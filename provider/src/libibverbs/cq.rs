//! The public completion-queue structs of `<infiniband/verbs.h>`: `ibv_cq`,
//! `ibv_cq_ex` (with its poll and read callbacks), `ibv_wc`,
//! `ibv_cq_init_attr_ex`, `ibv_comp_channel`. All of them are identical from
//! rdma-core v36 to v65 (checked against the tags); offsets were taken from
//! the v44 header and are asserted below.
//!
//! `struct verbs_cq` (driver.h) is `union { struct ibv_cq cq; struct
//! ibv_cq_ex cq_ex; }`; `ibv_cq_ex` starts with the fields of `ibv_cq`, so a
//! provider's CQ that begins with an `ibv_cq_ex` serves both views.

#![forbid(unsafe_code)]
#![allow(non_camel_case_types)]

use core::ffi::{c_int, c_uint, c_void};
use core::mem::{offset_of, size_of};

use zerocopy::FromBytes;

use super::MUTEX_GROWTH;

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
const _: () = assert!(size_of::<ibv_comp_channel>() == 16);
const _: () = assert!(offset_of!(ibv_comp_channel, fd) == 8);

#[repr(C)]
pub struct ibv_cq {
    pub context: *mut ibv_context,
    pub channel: *mut ibv_comp_channel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
}
const _: () = assert!(size_of::<ibv_cq>() == 128 + MUTEX_GROWTH);
const _: () = assert!(offset_of!(ibv_cq, handle) == 24);
const _: () = assert!(offset_of!(ibv_cq, cqe) == 28);
const _: () = assert!(offset_of!(ibv_cq, mutex) == 32);
const _: () = assert!(offset_of!(ibv_cq, cond) == 72 + MUTEX_GROWTH);
const _: () = assert!(offset_of!(ibv_cq, comp_events_completed) == 120 + MUTEX_GROWTH);
const _: () = assert!(offset_of!(ibv_cq, async_events_completed) == 124 + MUTEX_GROWTH);

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
const _: () = assert!(size_of::<ibv_wc>() == 48);
const _: () = assert!(offset_of!(ibv_wc, status) == 8);
const _: () = assert!(offset_of!(ibv_wc, opcode) == 12);
const _: () = assert!(offset_of!(ibv_wc, vendor_err) == 16);
const _: () = assert!(offset_of!(ibv_wc, byte_len) == 20);
const _: () = assert!(offset_of!(ibv_wc, ex) == 24);
const _: () = assert!(offset_of!(ibv_wc, qp_num) == 28);
const _: () = assert!(offset_of!(ibv_wc, src_qp) == 32);
const _: () = assert!(offset_of!(ibv_wc, wc_flags) == 36);
const _: () = assert!(offset_of!(ibv_wc, pkey_index) == 40);
const _: () = assert!(offset_of!(ibv_wc, slid) == 42);
const _: () = assert!(offset_of!(ibv_wc, sl) == 44);
const _: () = assert!(offset_of!(ibv_wc, dlid_path_bits) == 45);

pub type start_poll_fn = unsafe extern "C" fn(*mut ibv_cq_ex, *mut ibv_poll_cq_attr) -> c_int;
pub type next_poll_fn = unsafe extern "C" fn(*mut ibv_cq_ex) -> c_int;
pub type end_poll_fn = unsafe extern "C" fn(*mut ibv_cq_ex);
pub type read_u32_fn = unsafe extern "C" fn(*mut ibv_cq_ex) -> u32;
pub type read_u8_fn = unsafe extern "C" fn(*mut ibv_cq_ex) -> u8;
/// `read_opcode` returns `enum ibv_wc_opcode`.
pub type read_opcode_fn = unsafe extern "C" fn(*mut ibv_cq_ex) -> c_int;
/// `read_wc_flags` returns `unsigned int`.
pub type read_wc_flags_fn = unsafe extern "C" fn(*mut ibv_cq_ex) -> c_uint;

/// `struct ibv_cq_ex`: `ibv_cq`'s fields, then the extended poll state and
/// callbacks. libibverbs' inline `ibv_start_poll` & co. call these directly;
/// `status` and `wr_id` are read by the application after each successful
/// `start_poll`/`next_poll`. A `read_*` the CQ was not created for stays NULL.
#[repr(C)]
pub struct ibv_cq_ex {
    pub context: *mut ibv_context,
    pub channel: *mut ibv_comp_channel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,

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
const _: () = assert!(size_of::<ibv_cq_ex>() == 288 + MUTEX_GROWTH);
const _: () = assert!(offset_of!(ibv_cq_ex, handle) == offset_of!(ibv_cq, handle));
const _: () = assert!(offset_of!(ibv_cq_ex, cqe) == offset_of!(ibv_cq, cqe));
const _: () = assert!(offset_of!(ibv_cq_ex, mutex) == offset_of!(ibv_cq, mutex));
const _: () = assert!(offset_of!(ibv_cq_ex, cond) == offset_of!(ibv_cq, cond));
const _: () = assert!(offset_of!(ibv_cq_ex, async_events_completed) == offset_of!(ibv_cq, async_events_completed));
const _: () = assert!(offset_of!(ibv_cq_ex, comp_mask) == 128 + MUTEX_GROWTH);
const _: () = assert!(offset_of!(ibv_cq_ex, status) == 132 + MUTEX_GROWTH);
const _: () = assert!(offset_of!(ibv_cq_ex, wr_id) == 136 + MUTEX_GROWTH);
const _: () = assert!(offset_of!(ibv_cq_ex, start_poll) == 144 + MUTEX_GROWTH);
const _: () = assert!(offset_of!(ibv_cq_ex, next_poll) == 152 + MUTEX_GROWTH);
const _: () = assert!(offset_of!(ibv_cq_ex, end_poll) == 160 + MUTEX_GROWTH);
const _: () = assert!(offset_of!(ibv_cq_ex, read_opcode) == 168 + MUTEX_GROWTH);
const _: () = assert!(offset_of!(ibv_cq_ex, read_vendor_err) == 176 + MUTEX_GROWTH);
const _: () = assert!(offset_of!(ibv_cq_ex, read_byte_len) == 184 + MUTEX_GROWTH);
const _: () = assert!(offset_of!(ibv_cq_ex, read_imm_data) == 192 + MUTEX_GROWTH);
const _: () = assert!(offset_of!(ibv_cq_ex, read_qp_num) == 200 + MUTEX_GROWTH);
const _: () = assert!(offset_of!(ibv_cq_ex, read_src_qp) == 208 + MUTEX_GROWTH);
const _: () = assert!(offset_of!(ibv_cq_ex, read_wc_flags) == 216 + MUTEX_GROWTH);
const _: () = assert!(offset_of!(ibv_cq_ex, read_slid) == 224 + MUTEX_GROWTH);
const _: () = assert!(offset_of!(ibv_cq_ex, read_sl) == 232 + MUTEX_GROWTH);
const _: () = assert!(offset_of!(ibv_cq_ex, read_dlid_path_bits) == 240 + MUTEX_GROWTH);
const _: () = assert!(offset_of!(ibv_cq_ex, read_completion_ts) == 248 + MUTEX_GROWTH);
const _: () = assert!(offset_of!(ibv_cq_ex, read_completion_wallclock_ns) == 280 + MUTEX_GROWTH);

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
const _: () = assert!(size_of::<ibv_cq_init_attr_ex>() == 56);
const _: () = assert!(offset_of!(ibv_cq_init_attr_ex, cq_context) == 8);
const _: () = assert!(offset_of!(ibv_cq_init_attr_ex, channel) == 16);
const _: () = assert!(offset_of!(ibv_cq_init_attr_ex, comp_vector) == 24);
const _: () = assert!(offset_of!(ibv_cq_init_attr_ex, wc_flags) == 32);
const _: () = assert!(offset_of!(ibv_cq_init_attr_ex, comp_mask) == 40);
const _: () = assert!(offset_of!(ibv_cq_init_attr_ex, flags) == 44);
const _: () = assert!(offset_of!(ibv_cq_init_attr_ex, parent_domain) == 48);

/// The ops-table signatures (`struct verbs_context_ops`) of the CQ verbs.
pub type create_cq_fn = unsafe extern "C" fn(*mut ibv_context, c_int, *mut ibv_comp_channel, c_int) -> *mut ibv_cq;
pub type create_cq_ex_fn = unsafe extern "C" fn(*mut ibv_context, *mut ibv_cq_init_attr_ex) -> *mut ibv_cq_ex;
pub type destroy_cq_fn = unsafe extern "C" fn(*mut ibv_cq) -> c_int;
pub type poll_cq_fn = unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int;
pub type req_notify_cq_fn = unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int;
pub type resize_cq_fn = unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int;
