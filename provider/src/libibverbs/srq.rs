//! The public SRQ structs of `<infiniband/verbs.h>` (`ibv_srq`,
//! `ibv_srq_attr`, `ibv_srq_init_attr` and `_ex`) and `driver.h`'s
//! `verbs_srq`. The same from rdma-core v34 to v65; `tests/c_layout.rs`
//! compares the `verbs.h` structs with the headers of every Debian line, and
//! `verbs_srq`'s offsets are asserted below.

#![forbid(unsafe_code)]
#![allow(non_camel_case_types)]

use core::ffi::{c_int, c_void};

use super::MUTEX_GROWTH;

use super::control_objects::ibv_pd;
use super::cq::ibv_cq;
use super::device_context::ibv_context;
use super::qp::ibv_recv_wr;

/// `enum ibv_srq_type`
pub const IBV_SRQT_BASIC: u32 = 0;

/// `enum ibv_srq_attr_mask`
pub const IBV_SRQ_MAX_WR: c_int = 1 << 0;
pub const IBV_SRQ_LIMIT: c_int = 1 << 1;

/// `enum ibv_srq_init_attr_mask`
pub const IBV_SRQ_INIT_ATTR_TYPE: u32 = 1 << 0;
pub const IBV_SRQ_INIT_ATTR_PD: u32 = 1 << 1;
pub const IBV_SRQ_INIT_ATTR_XRCD: u32 = 1 << 2;
pub const IBV_SRQ_INIT_ATTR_CQ: u32 = 1 << 3;
pub const IBV_SRQ_INIT_ATTR_TM: u32 = 1 << 4;
pub const IBV_SRQ_INIT_ATTR_RESERVED: u32 = 1 << 5;

#[repr(C)]
pub struct ibv_srq {
    pub context: *mut ibv_context,
    pub srq_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub handle: u32,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub events_completed: u32,
}

c_struct! {
    /// `struct verbs_srq` (driver.h): `ibv_cmd_create_srq_ex` fills the fields
    /// after `srq`, and libibverbs' `ibv_get_srq_num` path reads them.
    pub struct verbs_srq [size 160 + MUTEX_GROWTH] {
        0 => pub srq: ibv_srq,
        /// `enum ibv_srq_type`
        128 + MUTEX_GROWTH => pub srq_type: u32,
        136 + MUTEX_GROWTH => pub xrcd: *mut c_void,
        144 + MUTEX_GROWTH => pub cq: *mut ibv_cq,
        152 + MUTEX_GROWTH => pub srq_num: u32,
    }
}

impl Default for verbs_srq {
    /// A `verbs_srq` as calloc leaves it: NULL pointers, zero integers, and a mutex and cond
    /// as their static initializers make them.
    fn default() -> verbs_srq {
        verbs_srq {
            srq: ibv_srq {
                context: core::ptr::null_mut(),
                srq_context: core::ptr::null_mut(),
                pd: core::ptr::null_mut(),
                handle: 0,
                mutex: libc::PTHREAD_MUTEX_INITIALIZER,
                cond: libc::PTHREAD_COND_INITIALIZER,
                events_completed: 0,
            },
            srq_type: 0,
            xrcd: core::ptr::null_mut(),
            cq: core::ptr::null_mut(),
            srq_num: 0,
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_srq_attr {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}

#[repr(C)]
pub struct ibv_srq_init_attr {
    pub srq_context: *mut c_void,
    pub attr: ibv_srq_attr,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_tm_cap {
    pub max_num_tags: u32,
    pub max_ops: u32,
}

/// `struct ibv_srq_init_attr_ex`: `ibv_srq_init_attr`'s fields, then these.
#[repr(C)]
pub struct ibv_srq_init_attr_ex {
    pub srq_context: *mut c_void,
    pub attr: ibv_srq_attr,
    /// `enum ibv_srq_init_attr_mask`
    pub comp_mask: u32,
    /// `enum ibv_srq_type`
    pub srq_type: u32,
    pub pd: *mut ibv_pd,
    pub xrcd: *mut c_void,
    pub cq: *mut ibv_cq,
    pub tm_cap: ibv_tm_cap,
}

pub type create_srq_fn = unsafe extern "C" fn(*mut ibv_pd, *mut ibv_srq_init_attr) -> *mut ibv_srq;
pub type create_srq_ex_fn = unsafe extern "C" fn(*mut ibv_context, *mut ibv_srq_init_attr_ex) -> *mut ibv_srq;
pub type modify_srq_fn = unsafe extern "C" fn(*mut ibv_srq, *mut ibv_srq_attr, c_int) -> c_int;
pub type query_srq_fn = unsafe extern "C" fn(*mut ibv_srq, *mut ibv_srq_attr) -> c_int;
pub type destroy_srq_fn = unsafe extern "C" fn(*mut ibv_srq) -> c_int;
pub type post_srq_recv_fn = unsafe extern "C" fn(*mut ibv_srq, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;
