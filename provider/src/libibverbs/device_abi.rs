//! Mirrors of libibverbs' private device-level structs (`driver.h`):
//! `verbs_match_ent`, `verbs_sysfs_dev`, `verbs_device_ops`, `verbs_device`.
//!
//! Checked against rdma-core's history: these four are byte-for-byte the same
//! from v35 to v65 (PABI 34, 57, 59, 64 and 65). v34 lacked
//! `verbs_sysfs_dev.num_ports` (added in v35, before `abi_ver`), one reason
//! the runtime refuses rdma-core older than v36 (see [`super::layout`]).

#![forbid(unsafe_code)]
#![allow(non_camel_case_types)]

use core::ffi::{c_char, c_int, c_uint, c_void};

use super::device_context::{ibv_device, IBV_SYSFS_NAME_MAX, IBV_SYSFS_PATH_MAX};
use super::private_context::verbs_context;

/// `VERBS_MATCH_SENTINEL`: ends a match table.
pub const VERBS_MATCH_SENTINEL: u8 = 0;
/// `VERBS_MATCH_MODALIAS`: `u.modalias` is an fnmatch(3) pattern.
pub const VERBS_MATCH_MODALIAS: u8 = 2;
/// `VERBS_MATCH_DRIVER_ID`: `u.driver_id` is a kernel `enum rdma_driver_id`.
pub const VERBS_MATCH_DRIVER_ID: u8 = 3;

/// ccan's `struct list_node`.
#[repr(C)]
pub struct list_node {
    pub next: *mut list_node,
    pub prev: *mut list_node,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union verbs_match_ent_u {
    pub modalias: *const c_char,
    pub driver_id: u64,
}

c_struct! {
    pub struct verbs_match_ent [size 24] {
        0 => pub driver_data: *mut c_void,
        8 => pub u: verbs_match_ent_u,
        16 => pub vendor: u16,
        18 => pub device: u16,
        20 => pub kind: u8,
    }
}

c_struct! {
    /// An rdma device libibverbs found in sysfs. Owned by libibverbs; we only read.
    pub struct verbs_sysfs_dev [size 992] {
        0 => pub entry: list_node,
        16 => pub provider_data: *mut c_void,
        24 => pub r#match: *const verbs_match_ent,
        32 => pub flags: c_uint,
        36 => pub sysfs_name: [c_char; IBV_SYSFS_NAME_MAX],
        104 => pub sysfs_cdev: libc::dev_t,
        112 => pub ibdev_name: [c_char; IBV_SYSFS_NAME_MAX],
        176 => pub ibdev_path: [c_char; IBV_SYSFS_PATH_MAX],
        432 => pub modalias: [c_char; 512],
        944 => pub node_guid: u64,
        952 => pub driver_id: u32,
        /// `enum ibv_node_type`
        956 => pub node_type: c_int,
        960 => pub ibdev_idx: c_int,
        /// Since v35.
        964 => pub num_ports: u32,
        968 => pub abi_ver: u32,
        976 => pub time_created: libc::timespec,
    }
}

pub type match_device_fn = unsafe extern "C" fn(*mut verbs_sysfs_dev) -> bool;
pub type alloc_context_fn = unsafe extern "C" fn(*mut ibv_device, c_int, *mut c_void) -> *mut verbs_context;
pub type import_context_fn = unsafe extern "C" fn(*mut ibv_device, c_int) -> *mut verbs_context;
pub type alloc_device_fn = unsafe extern "C" fn(*mut verbs_sysfs_dev) -> *mut verbs_device;
pub type uninit_device_fn = unsafe extern "C" fn(*mut verbs_device);

c_struct! {
    /// What a provider registers. libibverbs keeps the pointer for the life of
    /// the process, so ours is a `static`.
    pub struct verbs_device_ops [size 72] {
        0 => pub name: *const c_char,
        8 => pub match_min_abi_version: u32,
        12 => pub match_max_abi_version: u32,
        16 => pub match_table: *const verbs_match_ent,
        24 => pub static_providers: *const *const verbs_device_ops,
        32 => pub match_device: Option<match_device_fn>,
        40 => pub alloc_context: Option<alloc_context_fn>,
        48 => pub import_context: Option<import_context_fn>,
        56 => pub alloc_device: Option<alloc_device_fn>,
        64 => pub uninit_device: Option<uninit_device_fn>,
    }
}

c_struct! {
    /// The device object; the provider allocates it (embedded first in its own
    /// device struct) and libibverbs fills everything but our extra fields.
    pub struct verbs_device [size 712] {
        0 => pub device: ibv_device,
        664 => pub ops: *const verbs_device_ops,
        /// C11 `atomic_int`, managed by libibverbs.
        672 => pub refcount: core::sync::atomic::AtomicI32,
        680 => pub entry: list_node,
        696 => pub sysfs: *mut verbs_sysfs_dev,
        704 => pub core_support: u64,
    }
}
