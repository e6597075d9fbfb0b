//! The public queue-pair structs of `<infiniband/verbs.h>` (`ibv_qp_init_attr`
//! and `_ex`, `ibv_qp_attr`, `ibv_send_wr`, `ibv_recv_wr`, `ibv_sge`,
//! `ibv_mw_bind`) and the release-dependent `verbs_qp` of `driver.h`.
//!
//! Everything but `ibv_qp_ex` is the same from rdma-core v34 to v65;
//! `tests/c_layout.rs` compares each with the headers of every Debian line,
//! field by field. `ibv_qp_ex` grew `wr_atomic_write` in v44 and `wr_flush` in v45,
//! which moves `verbs_qp.comp_mask` (read by libibverbs' `ibv_qp_to_qp_ex`)
//! and `verbs_qp.xrcd`: [`VerbsQp`] reserves room for the largest layout and
//! [`QpExLayout`] says where those two fields are for the running release.

#![forbid(unsafe_code)]
#![allow(non_camel_case_types)]

use core::ffi::{c_int, c_uint, c_void};
use core::mem::size_of;

use super::MUTEX_GROWTH;

use super::control_objects::{ibv_ah, ibv_ah_attr, ibv_mr, ibv_mw, ibv_pd, ibv_qp};
use super::cq::ibv_cq;
use super::device_context::{ibv_context, opaque_fn};

/// `enum ibv_qp_type`
pub const IBV_QPT_RC: c_int = 2;
pub const IBV_QPT_UC: c_int = 3;
pub const IBV_QPT_UD: c_int = 4;

/// `enum ibv_qp_state`
pub const IBV_QPS_RESET: c_int = 0;
pub const IBV_QPS_INIT: c_int = 1;
pub const IBV_QPS_RTR: c_int = 2;
pub const IBV_QPS_RTS: c_int = 3;

/// `enum ibv_qp_attr_mask`: the bits the provider reads.
pub const IBV_QP_STATE: c_int = 1 << 0;
pub const IBV_QP_CUR_STATE: c_int = 1 << 1;
pub const IBV_QP_EN_SQD_ASYNC_NOTIFY: c_int = 1 << 2;
pub const IBV_QP_ACCESS_FLAGS: c_int = 1 << 3;
pub const IBV_QP_PKEY_INDEX: c_int = 1 << 4;
pub const IBV_QP_PORT: c_int = 1 << 5;
pub const IBV_QP_QKEY: c_int = 1 << 6;
pub const IBV_QP_AV: c_int = 1 << 7;
pub const IBV_QP_PATH_MTU: c_int = 1 << 8;
pub const IBV_QP_TIMEOUT: c_int = 1 << 9;
pub const IBV_QP_RETRY_CNT: c_int = 1 << 10;
pub const IBV_QP_RNR_RETRY: c_int = 1 << 11;
pub const IBV_QP_RQ_PSN: c_int = 1 << 12;
pub const IBV_QP_MAX_QP_RD_ATOMIC: c_int = 1 << 13;
pub const IBV_QP_ALT_PATH: c_int = 1 << 14;
pub const IBV_QP_MIN_RNR_TIMER: c_int = 1 << 15;
pub const IBV_QP_SQ_PSN: c_int = 1 << 16;
pub const IBV_QP_MAX_DEST_RD_ATOMIC: c_int = 1 << 17;
pub const IBV_QP_PATH_MIG_STATE: c_int = 1 << 18;
pub const IBV_QP_DEST_QPN: c_int = 1 << 20;
/// The first bit only the extended (`_ex`) interface carries.
pub const IBV_QP_RATE_LIMIT: c_int = 1 << 25;

/// `enum ibv_qp_init_attr_mask`
pub const IBV_QP_INIT_ATTR_PD: u32 = 1 << 0;
pub const IBV_QP_INIT_ATTR_XRCD: u32 = 1 << 1;
pub const IBV_QP_INIT_ATTR_CREATE_FLAGS: u32 = 1 << 2;
pub const IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: u32 = 1 << 6;

/// `enum ibv_wr_opcode`
pub const IBV_WR_RDMA_WRITE: c_int = 0;
pub const IBV_WR_RDMA_WRITE_WITH_IMM: c_int = 1;
pub const IBV_WR_SEND: c_int = 2;
pub const IBV_WR_SEND_WITH_IMM: c_int = 3;
pub const IBV_WR_RDMA_READ: c_int = 4;
pub const IBV_WR_ATOMIC_CMP_AND_SWP: c_int = 5;
pub const IBV_WR_ATOMIC_FETCH_AND_ADD: c_int = 6;
pub const IBV_WR_LOCAL_INV: c_int = 7;
pub const IBV_WR_BIND_MW: c_int = 8;
pub const IBV_WR_SEND_WITH_INV: c_int = 9;
/// rdma-core v44+; only through `ibv_wr_atomic_write`.
pub const IBV_WR_FLUSH: c_int = 14;
pub const IBV_WR_ATOMIC_WRITE: c_int = 15;

/// `enum ibv_qp_create_send_ops_flags`
pub const IBV_QP_EX_WITH_RDMA_WRITE: u64 = 1 << 0;
pub const IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM: u64 = 1 << 1;
pub const IBV_QP_EX_WITH_SEND: u64 = 1 << 2;
pub const IBV_QP_EX_WITH_SEND_WITH_IMM: u64 = 1 << 3;
pub const IBV_QP_EX_WITH_RDMA_READ: u64 = 1 << 4;
pub const IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP: u64 = 1 << 5;
pub const IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD: u64 = 1 << 6;
pub const IBV_QP_EX_WITH_LOCAL_INV: u64 = 1 << 7;
pub const IBV_QP_EX_WITH_BIND_MW: u64 = 1 << 8;
pub const IBV_QP_EX_WITH_SEND_WITH_INV: u64 = 1 << 9;
pub const IBV_QP_EX_WITH_TSO: u64 = 1 << 10;
pub const IBV_QP_EX_WITH_FLUSH: u64 = 1 << 11;
pub const IBV_QP_EX_WITH_ATOMIC_WRITE: u64 = 1 << 12;

/// `enum ibv_send_flags`
pub const IBV_SEND_SIGNALED: c_uint = 1 << 1;
pub const IBV_SEND_INLINE: c_uint = 1 << 3;

/// `enum ibv_access_flags`: the bit `bind_mw` refuses for type 1 windows.
pub const IBV_ACCESS_ZERO_BASED: c_uint = 1 << 5;

/// The `verbs_qp.comp_mask` bit (driver.h) the provider sets.
pub const VERBS_QP_EX: u32 = 1 << 1;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_qp_cap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

#[repr(C)]
pub struct ibv_qp_init_attr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut c_void,
    pub cap: ibv_qp_cap,
    /// `enum ibv_qp_type`
    pub qp_type: c_int,
    pub sq_sig_all: c_int,
}

#[repr(C)]
pub struct ibv_rx_hash_conf {
    pub rx_hash_function: u8,
    pub rx_hash_key_len: u8,
    pub rx_hash_key: *mut u8,
    pub rx_hash_fields_mask: u64,
}

/// `struct ibv_qp_init_attr_ex`: `ibv_qp_init_attr`'s fields, then these.
#[repr(C)]
pub struct ibv_qp_init_attr_ex {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut c_void,
    pub cap: ibv_qp_cap,
    pub qp_type: c_int,
    pub sq_sig_all: c_int,
    /// `enum ibv_qp_init_attr_mask`
    pub comp_mask: u32,
    pub pd: *mut ibv_pd,
    pub xrcd: *mut c_void,
    pub create_flags: u32,
    pub max_tso_header: u16,
    pub rwq_ind_tbl: *mut c_void,
    pub rx_hash_conf: ibv_rx_hash_conf,
    pub source_qpn: u32,
    pub send_ops_flags: u64,
}

#[repr(C)]
pub struct ibv_qp_attr {
    pub qp_state: c_int,
    pub cur_qp_state: c_int,
    pub path_mtu: c_int,
    pub path_mig_state: c_int,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: c_uint,
    pub cap: ibv_qp_cap,
    pub ah_attr: ibv_ah_attr,
    pub alt_ah_attr: ibv_ah_attr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_rdma {
    pub remote_addr: u64,
    pub rkey: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_atomic {
    pub remote_addr: u64,
    pub compare_add: u64,
    pub swap: u64,
    pub rkey: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_ud {
    pub ah: *mut ibv_ah,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_wr {
    pub rdma: ibv_send_wr_rdma,
    pub atomic: ibv_send_wr_atomic,
    pub ud: ibv_send_wr_ud,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_mw_bind_info {
    pub mr: *mut ibv_mr,
    pub addr: u64,
    pub length: u64,
    /// `enum ibv_access_flags`
    pub mw_access_flags: c_uint,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_bind_mw {
    pub mw: *mut ibv_mw,
    pub rkey: u32,
    pub bind_info: ibv_mw_bind_info,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_tso {
    pub hdr: *mut c_void,
    pub hdr_sz: u16,
    pub mss: u16,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_ext {
    pub bind_mw: ibv_send_wr_bind_mw,
    pub tso: ibv_send_wr_tso,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr {
    pub wr_id: u64,
    pub next: *mut ibv_send_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
    /// `enum ibv_wr_opcode`
    pub opcode: c_int,
    pub send_flags: c_uint,
    /// Immediate data (big-endian) or, for the `*_INV` opcodes, the rkey to
    /// invalidate.
    pub imm_data: u32,
    pub wr: ibv_send_wr_wr,
    /// `qp_type.xrc.remote_srqn`
    pub remote_srqn: u32,
    pub ext: ibv_send_wr_ext,
}

/// `struct ibv_data_buf`: one buffer of `ibv_wr_set_inline_data_list`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_data_buf {
    pub addr: *mut c_void,
    pub length: usize,
}

#[repr(C)]
pub struct ibv_recv_wr {
    pub wr_id: u64,
    pub next: *mut ibv_recv_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
}

#[repr(C)]
pub struct ibv_mw_bind {
    pub wr_id: u64,
    pub send_flags: c_uint,
    pub bind_info: ibv_mw_bind_info,
}

/// `struct ibv_qp_ex` up to `wr_abort`, the part every release since v27
/// shares. `wr_atomic_write` (v44) and `wr_flush` (v45) follow in
/// [`VerbsQp::tail`] where the release has them.
#[repr(C)]
pub struct ibv_qp_ex_base {
    pub qp_base: ibv_qp,
    pub comp_mask: u64,
    pub wr_id: u64,
    pub wr_flags: c_uint,
    /// `wr_atomic_cmp_swp` .. `wr_abort`: 20 callbacks in declaration
    /// order, filled by the `ibv_qp_ex` step.
    pub wr_ops: [opaque_fn; 20],
}

/// Indices into [`ibv_qp_ex_base::wr_ops`], in `struct ibv_qp_ex` order.
pub mod wr_op {
    pub const ATOMIC_CMP_SWP: usize = 0;
    pub const ATOMIC_FETCH_ADD: usize = 1;
    pub const BIND_MW: usize = 2;
    pub const LOCAL_INV: usize = 3;
    pub const RDMA_READ: usize = 4;
    pub const RDMA_WRITE: usize = 5;
    pub const RDMA_WRITE_IMM: usize = 6;
    pub const SEND: usize = 7;
    pub const SEND_IMM: usize = 8;
    pub const SEND_INV: usize = 9;
    pub const SEND_TSO: usize = 10;
    pub const SET_UD_ADDR: usize = 11;
    pub const SET_XRC_SRQN: usize = 12;
    pub const SET_INLINE_DATA: usize = 13;
    pub const SET_INLINE_DATA_LIST: usize = 14;
    pub const SET_SGE: usize = 15;
    pub const SET_SGE_LIST: usize = 16;
    pub const START: usize = 17;
    pub const COMPLETE: usize = 18;
    pub const ABORT: usize = 19;
}

/// Room for `struct verbs_qp` of any release: `ibv_qp_ex` (at most 360
/// bytes on x86_64, 368 on aarch64, v45+), then `comp_mask` and `xrcd`. Which words of `tail` are
/// what depends on the release ([`QpExLayout`]).
#[repr(C)]
pub struct VerbsQp {
    pub qp_ex: ibv_qp_ex_base,
    pub tail: [u64; 4],
}
const _: () = assert!(size_of::<VerbsQp>() == 376 + MUTEX_GROWTH);

pub type create_qp_fn = unsafe extern "C" fn(*mut ibv_pd, *mut ibv_qp_init_attr) -> *mut ibv_qp;
pub type create_qp_ex_fn = unsafe extern "C" fn(*mut ibv_context, *mut ibv_qp_init_attr_ex) -> *mut ibv_qp;
pub type query_qp_fn = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_qp_attr, c_int, *mut ibv_qp_init_attr) -> c_int;
pub type modify_qp_fn = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_qp_attr, c_int) -> c_int;
pub type destroy_qp_fn = unsafe extern "C" fn(*mut ibv_qp) -> c_int;
pub type post_send_fn = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int;
pub type post_recv_fn = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;
pub type bind_mw_fn = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_mw, *mut ibv_mw_bind) -> c_int;

/// Where the release-dependent fields of `verbs_qp` are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpExLayout {
    /// `sizeof(struct ibv_qp_ex)`: 344 before v44, 352 in v44, 360 from v45 (x86_64; 8 more
    /// on aarch64, [`MUTEX_GROWTH`]): [`ibv_qp_ex_base`], then no, one or two callbacks.
    pub qp_ex_size: usize,
}

impl QpExLayout {
    /// The three layouts, by how many callbacks follow [`ibv_qp_ex_base`]:
    /// none (v36 to v43), `wr_atomic_write` (v44), and `wr_flush` (v45 on).
    pub const ALL: [QpExLayout; 3] = [
        Self::with_callbacks(0),
        Self::with_callbacks(1),
        Self::with_callbacks(2),
    ];

    const fn with_callbacks(callbacks: usize) -> QpExLayout {
        QpExLayout {
            qp_ex_size: size_of::<ibv_qp_ex_base>() + callbacks * size_of::<opaque_fn>(),
        }
    }

    /// The layout of a tagged rdma-core release: for tests and for the
    /// cross-check of a library whose file name carries its release (the
    /// running library's is probed, [`super::layout::qp_ex_from_answers`]).
    pub fn for_release(release: u32) -> QpExLayout {
        Self::ALL[match release {
            ..=43 => 0,
            44 => 1,
            _ => 2,
        }]
    }

    /// Whether `ibv_qp_ex` has `wr_atomic_write` (v44+), in `VerbsQp::tail[0]`.
    pub fn has_atomic_write(self) -> bool {
        self.qp_ex_size > size_of::<ibv_qp_ex_base>()
    }

    /// Whether `ibv_qp_ex` has `wr_flush` (v45+), in `VerbsQp::tail[1]`.
    pub fn has_flush(self) -> bool {
        self.qp_ex_size > size_of::<ibv_qp_ex_base>() + size_of::<opaque_fn>()
    }

    /// Offset of `verbs_qp.comp_mask` (a u32).
    pub fn comp_mask_offset(self) -> usize {
        self.qp_ex_size
    }

    /// Offset of `verbs_qp.xrcd` (a pointer, 8-aligned after comp_mask).
    pub fn xrcd_offset(self) -> usize {
        self.qp_ex_size + 8
    }
}

impl VerbsQp {
    /// Sets `wr_atomic_write` where this release has it (else nothing: the
    /// slot is `comp_mask` there).
    pub fn set_wr_atomic_write(&mut self, layout: QpExLayout, f: opaque_fn) {
        if layout.has_atomic_write() {
            // The word right after wr_abort (offset 344 on x86_64).
            self.tail[0] = f.map_or(0, |f| f as usize as u64);
        }
    }

    /// Sets `wr_flush` where this release has it (else nothing).
    pub fn set_wr_flush(&mut self, layout: QpExLayout, f: opaque_fn) {
        if layout.has_flush() {
            // The word after wr_atomic_write (offset 352 on x86_64).
            self.tail[1] = f.map_or(0, |f| f as usize as u64);
        }
    }

    /// Sets `verbs_qp.comp_mask` where this release has it.
    pub fn set_comp_mask(&mut self, layout: QpExLayout, value: u32) {
        let word = (layout.comp_mask_offset() - size_of::<ibv_qp_ex_base>()) / 8;
        // comp_mask is the low-addressed u32 of its 8-byte word (x86_64, aarch64 and
        // every other little-endian target; the upper half is padding).
        self.tail[word] = u64::from(value.to_le());
    }

    /// Reads `verbs_qp.comp_mask` back (tests, and `ibv_qp_ex` users).
    pub fn comp_mask(&self, layout: QpExLayout) -> u32 {
        let word = (layout.comp_mask_offset() - size_of::<ibv_qp_ex_base>()) / 8;
        u32::from_le(self.tail[word] as u32)
    }
}

// The two tail fields fit the reserved room for every release.
const _: () = assert!(360 + MUTEX_GROWTH + 16 == size_of::<VerbsQp>());
const _: () = assert!(size_of::<*mut ibv_cq>() == 8);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_qp_comp_mask_moves_with_the_release() {
        // x86_64's offsets; aarch64's are MUTEX_GROWTH further.
        let m = MUTEX_GROWTH;
        assert_eq!(QpExLayout::for_release(36).comp_mask_offset(), 344 + m);
        assert_eq!(QpExLayout::for_release(43).comp_mask_offset(), 344 + m);
        assert_eq!(QpExLayout::for_release(44).comp_mask_offset(), 352 + m);
        assert_eq!(QpExLayout::for_release(44).xrcd_offset(), 360 + m);
        assert_eq!(QpExLayout::for_release(45).comp_mask_offset(), 360 + m);
        assert_eq!(QpExLayout::for_release(56).xrcd_offset(), 368 + m);
        for release in [36, 44, 45, 56] {
            let l = QpExLayout::for_release(release);
            assert!(l.xrcd_offset() + 8 <= size_of::<VerbsQp>());
        }
    }
}
