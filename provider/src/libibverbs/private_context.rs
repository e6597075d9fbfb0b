//! Mirrors of libibverbs' private context structs as they are in rdma-core
//! v36 to v58: `struct verbs_context` (public header, but its layout is
//! private ABI) and `struct verbs_context_ops` (`driver.h`).
//!
//! History, checked against rdma-core's tags:
//! - v34 had 73 ops, v35 75 (import_dm, unimport_dm), v36 added
//!   `query_qp_data_in_order`: inside PABI 34 the table moved twice, and since
//!   `verbs_set_ops` copies by the library's own field order (no size is
//!   passed), a table for the wrong release silently lands ops in wrong slots.
//! - v36..v58: 76 ops, alphabetical; `verbs_context` unchanged. PABI 57
//!   (v57, v58) changed `ibv_cmd_*` signatures only, so these mirrors serve
//!   it as they are.
//! - v59 (PABI 59) added 3 ops and grew `verbs_context`; v62 inserted 2 more
//!   ops and more `verbs_context` fields *without* a PABI bump; v64 (PABI 64)
//!   2 more ops, v65 (PABI 65) 10. [`super::private_context_releases`] describes those
//!   as additions to these structs.

#![forbid(unsafe_code)]
#![allow(non_camel_case_types, non_snake_case)]

use core::ffi::{c_int, c_void};
use core::mem::{offset_of, size_of};

use super::control_objects::{
    ibv_ah, ibv_ah_attr, ibv_gid, ibv_mr, ibv_mw, ibv_parent_domain_init_attr, ibv_pd, ibv_qp, ibv_td,
    ibv_td_init_attr, verbs_mr,
};
use super::cq;
use super::device_context::{ibv_context, ibv_device_attr_ex, ibv_port_attr, ibv_query_device_ex_input, opaque_fn};
use super::qp::{self, ibv_sge};
use super::srq;

pub type free_context_fn = unsafe extern "C" fn(*mut ibv_context);
pub type query_device_ex_fn =
    unsafe extern "C" fn(*mut ibv_context, *const ibv_query_device_ex_input, *mut ibv_device_attr_ex, usize) -> c_int;
pub type query_port_fn = unsafe extern "C" fn(*mut ibv_context, u8, *mut ibv_port_attr) -> c_int;
pub type alloc_pd_fn = unsafe extern "C" fn(*mut ibv_context) -> *mut ibv_pd;
pub type dealloc_pd_fn = unsafe extern "C" fn(*mut ibv_pd) -> c_int;
pub type alloc_td_fn = unsafe extern "C" fn(*mut ibv_context, *mut ibv_td_init_attr) -> *mut ibv_td;
pub type dealloc_td_fn = unsafe extern "C" fn(*mut ibv_td) -> c_int;
pub type alloc_parent_domain_fn =
    unsafe extern "C" fn(*mut ibv_context, *mut ibv_parent_domain_init_attr) -> *mut ibv_pd;
pub type reg_mr_fn = unsafe extern "C" fn(*mut ibv_pd, *mut c_void, usize, u64, c_int) -> *mut ibv_mr;
pub type rereg_mr_fn = unsafe extern "C" fn(*mut verbs_mr, c_int, *mut ibv_pd, *mut c_void, usize, c_int) -> c_int;
pub type dereg_mr_fn = unsafe extern "C" fn(*mut verbs_mr) -> c_int;
pub type alloc_mw_fn = unsafe extern "C" fn(*mut ibv_pd, c_int) -> *mut ibv_mw;
pub type dealloc_mw_fn = unsafe extern "C" fn(*mut ibv_mw) -> c_int;
pub type create_ah_fn = unsafe extern "C" fn(*mut ibv_pd, *mut ibv_ah_attr) -> *mut ibv_ah;
pub type destroy_ah_fn = unsafe extern "C" fn(*mut ibv_ah) -> c_int;
pub type mcast_fn = unsafe extern "C" fn(*mut ibv_qp, *const ibv_gid, u16) -> c_int;
/// `advise_mr(pd, enum ibv_advise_mr_advice, flags, sg_list, num_sge)`; the
/// enum is C's `unsigned int` (its values are all non-negative).
pub type advise_mr_fn = unsafe extern "C" fn(*mut ibv_pd, u32, u32, *mut ibv_sge, u32) -> c_int;

/// `struct verbs_context`: grows *downwards*, so `context` is always last and
/// the fields before it are what changes between releases.
#[repr(C)]
pub struct verbs_context {
    pub query_port: opaque_fn,
    pub advise_mr: opaque_fn,
    pub alloc_null_mr: opaque_fn,
    pub read_counters: opaque_fn,
    pub attach_counters_point_flow: opaque_fn,
    pub create_counters: opaque_fn,
    pub destroy_counters: opaque_fn,
    pub reg_dm_mr: opaque_fn,
    pub alloc_dm: opaque_fn,
    pub free_dm: opaque_fn,
    pub modify_flow_action_esp: opaque_fn,
    pub destroy_flow_action: opaque_fn,
    pub create_flow_action_esp: opaque_fn,
    pub modify_qp_rate_limit: opaque_fn,
    pub alloc_parent_domain: opaque_fn,
    pub dealloc_td: opaque_fn,
    pub alloc_td: opaque_fn,
    pub modify_cq: opaque_fn,
    pub post_srq_ops: opaque_fn,
    pub destroy_rwq_ind_table: opaque_fn,
    pub create_rwq_ind_table: opaque_fn,
    pub destroy_wq: opaque_fn,
    pub modify_wq: opaque_fn,
    pub create_wq: opaque_fn,
    pub query_rt_values: opaque_fn,
    pub create_cq_ex: opaque_fn,
    pub priv_: *mut c_void,
    pub query_device_ex: opaque_fn,
    pub ibv_destroy_flow: opaque_fn,
    pub ABI_placeholder2: opaque_fn,
    pub ibv_create_flow: opaque_fn,
    pub ABI_placeholder1: opaque_fn,
    pub open_qp: opaque_fn,
    pub create_qp_ex: opaque_fn,
    pub get_srq_num: opaque_fn,
    pub create_srq_ex: opaque_fn,
    pub open_xrcd: opaque_fn,
    pub close_xrcd: opaque_fn,
    pub _ABI_placeholder3: u64,
    /// Set by libibverbs to its own `sizeof(struct verbs_context)`.
    pub sz: usize,
    pub context: ibv_context,
}

/// Declares `struct verbs_context_ops` from its fields in declaration order,
/// with [`verbs_context_ops::EMPTY`] and the field names in that order
/// ([`verbs_context_ops::NAMES`]), so the names cannot drift from the struct.
macro_rules! verbs_context_ops {
    ($($op:ident: $ty:ty,)*) => {
        /// `struct verbs_context_ops`, v36..v58: every op a provider can offer.
        /// Slots left `None` keep libibverbs' dummy op, which fails with EOPNOTSUPP.
        #[repr(C)]
        pub struct verbs_context_ops {
            $(pub $op: $ty,)*
        }

        impl verbs_context_ops {
            /// A table with every op unset.
            pub const EMPTY: Self = Self { $($op: None,)* };
            /// The ops in declaration order (alphabetical, as rdma-core keeps them).
            pub const NAMES: &'static [&'static str] = &[$(stringify!($op)),*];
        }
    };
}

verbs_context_ops! {
    advise_mr: Option<advise_mr_fn>,
    alloc_dm: opaque_fn,
    alloc_mw: Option<alloc_mw_fn>,
    alloc_null_mr: opaque_fn,
    alloc_parent_domain: Option<alloc_parent_domain_fn>,
    alloc_pd: Option<alloc_pd_fn>,
    alloc_td: Option<alloc_td_fn>,
    async_event: opaque_fn,
    attach_counters_point_flow: opaque_fn,
    attach_mcast: Option<mcast_fn>,
    bind_mw: Option<qp::bind_mw_fn>,
    close_xrcd: opaque_fn,
    cq_event: opaque_fn,
    create_ah: Option<create_ah_fn>,
    create_counters: opaque_fn,
    create_cq: Option<cq::create_cq_fn>,
    create_cq_ex: Option<cq::create_cq_ex_fn>,
    create_flow: opaque_fn,
    create_flow_action_esp: opaque_fn,
    create_qp: Option<qp::create_qp_fn>,
    create_qp_ex: Option<qp::create_qp_ex_fn>,
    create_rwq_ind_table: opaque_fn,
    create_srq: Option<srq::create_srq_fn>,
    create_srq_ex: Option<srq::create_srq_ex_fn>,
    create_wq: opaque_fn,
    dealloc_mw: Option<dealloc_mw_fn>,
    dealloc_pd: Option<dealloc_pd_fn>,
    dealloc_td: Option<dealloc_td_fn>,
    dereg_mr: Option<dereg_mr_fn>,
    destroy_ah: Option<destroy_ah_fn>,
    destroy_counters: opaque_fn,
    destroy_cq: Option<cq::destroy_cq_fn>,
    destroy_flow: opaque_fn,
    destroy_flow_action: opaque_fn,
    destroy_qp: Option<qp::destroy_qp_fn>,
    destroy_rwq_ind_table: opaque_fn,
    destroy_srq: Option<srq::destroy_srq_fn>,
    destroy_wq: opaque_fn,
    detach_mcast: Option<mcast_fn>,
    free_context: Option<free_context_fn>,
    free_dm: opaque_fn,
    get_srq_num: opaque_fn,
    import_dm: opaque_fn,
    import_mr: opaque_fn,
    import_pd: opaque_fn,
    modify_cq: opaque_fn,
    modify_flow_action_esp: opaque_fn,
    modify_qp: Option<qp::modify_qp_fn>,
    modify_qp_rate_limit: opaque_fn,
    modify_srq: Option<srq::modify_srq_fn>,
    modify_wq: opaque_fn,
    open_qp: opaque_fn,
    open_xrcd: opaque_fn,
    poll_cq: Option<cq::poll_cq_fn>,
    post_recv: Option<qp::post_recv_fn>,
    post_send: Option<qp::post_send_fn>,
    post_srq_ops: opaque_fn,
    post_srq_recv: Option<srq::post_srq_recv_fn>,
    query_device_ex: Option<query_device_ex_fn>,
    query_ece: opaque_fn,
    query_port: Option<query_port_fn>,
    query_qp: Option<qp::query_qp_fn>,
    query_qp_data_in_order: opaque_fn,
    query_rt_values: opaque_fn,
    query_srq: Option<srq::query_srq_fn>,
    read_counters: opaque_fn,
    reg_dm_mr: opaque_fn,
    reg_dmabuf_mr: opaque_fn,
    reg_mr: Option<reg_mr_fn>,
    req_notify_cq: Option<cq::req_notify_cq_fn>,
    rereg_mr: Option<rereg_mr_fn>,
    resize_cq: Option<cq::resize_cq_fn>,
    set_ece: opaque_fn,
    unimport_dm: opaque_fn,
    unimport_mr: opaque_fn,
    unimport_pd: opaque_fn,
}
const _: () = assert!(size_of::<verbs_context_ops>() == 76 * 8);
const _: () = assert!(offset_of!(verbs_context_ops, free_context) == 312);
const _: () = assert!(offset_of!(verbs_context_ops, query_device_ex) == 464);
const _: () = assert!(offset_of!(verbs_context_ops, query_port) == 480);
const _: () = assert!(verbs_context_ops::NAMES.len() == 76);
