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
use core::mem::{offset_of, size_of};

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

#[repr(C)]
pub struct verbs_match_ent {
    pub driver_data: *mut c_void,
    pub u: verbs_match_ent_u,
    pub vendor: u16,
    pub device: u16,
    pub kind: u8,
}
const _: () = assert!(size_of::<verbs_match_ent>() == 24);
const _: () = assert!(offset_of!(verbs_match_ent, u) == 8);
const _: () = assert!(offset_of!(verbs_match_ent, vendor) == 16);
const _: () = assert!(offset_of!(verbs_match_ent, kind) == 20);

/// An rdma device libibverbs found in sysfs. Owned by libibverbs; we only read.
#[repr(C)]
pub struct verbs_sysfs_dev {
    pub entry: list_node,
    pub provider_data: *mut c_void,
    pub r#match: *const verbs_match_ent,
    pub flags: c_uint,
    pub sysfs_name: [c_char; IBV_SYSFS_NAME_MAX],
    pub sysfs_cdev: libc::dev_t,
    pub ibdev_name: [c_char; IBV_SYSFS_NAME_MAX],
    pub ibdev_path: [c_char; IBV_SYSFS_PATH_MAX],
    pub modalias: [c_char; 512],
    pub node_guid: u64,
    pub driver_id: u32,
    /// `enum ibv_node_type`
    pub node_type: c_int,
    pub ibdev_idx: c_int,
    /// Since v35.
    pub num_ports: u32,
    pub abi_ver: u32,
    pub time_created: libc::timespec,
}
const _: () = assert!(size_of::<verbs_sysfs_dev>() == 992);
const _: () = assert!(offset_of!(verbs_sysfs_dev, provider_data) == 16);
const _: () = assert!(offset_of!(verbs_sysfs_dev, r#match) == 24);
const _: () = assert!(offset_of!(verbs_sysfs_dev, flags) == 32);
const _: () = assert!(offset_of!(verbs_sysfs_dev, sysfs_name) == 36);
const _: () = assert!(offset_of!(verbs_sysfs_dev, sysfs_cdev) == 104);
const _: () = assert!(offset_of!(verbs_sysfs_dev, ibdev_name) == 112);
const _: () = assert!(offset_of!(verbs_sysfs_dev, ibdev_path) == 176);
const _: () = assert!(offset_of!(verbs_sysfs_dev, modalias) == 432);
const _: () = assert!(offset_of!(verbs_sysfs_dev, node_guid) == 944);
const _: () = assert!(offset_of!(verbs_sysfs_dev, driver_id) == 952);
const _: () = assert!(offset_of!(verbs_sysfs_dev, node_type) == 956);
const _: () = assert!(offset_of!(verbs_sysfs_dev, ibdev_idx) == 960);
const _: () = assert!(offset_of!(verbs_sysfs_dev, num_ports) == 964);
const _: () = assert!(offset_of!(verbs_sysfs_dev, abi_ver) == 968);
const _: () = assert!(offset_of!(verbs_sysfs_dev, time_created) == 976);

pub type match_device_fn = unsafe extern "C" fn(*mut verbs_sysfs_dev) -> bool;
pub type alloc_context_fn = unsafe extern "C" fn(*mut ibv_device, c_int, *mut c_void) -> *mut verbs_context;
pub type import_context_fn = unsafe extern "C" fn(*mut ibv_device, c_int) -> *mut verbs_context;
pub type alloc_device_fn = unsafe extern "C" fn(*mut verbs_sysfs_dev) -> *mut verbs_device;
pub type uninit_device_fn = unsafe extern "C" fn(*mut verbs_device);

/// What a provider registers. libibverbs keeps the pointer for the life of
/// the process, so ours is a `static`.
#[repr(C)]
pub struct verbs_device_ops {
    pub name: *const c_char,
    pub match_min_abi_version: u32,
    pub match_max_abi_version: u32,
    pub match_table: *const verbs_match_ent,
    pub static_providers: *const *const verbs_device_ops,
    pub match_device: Option<match_device_fn>,
    pub alloc_context: Option<alloc_context_fn>,
    pub import_context: Option<import_context_fn>,
    pub alloc_device: Option<alloc_device_fn>,
    pub uninit_device: Option<uninit_device_fn>,
}
const _: () = assert!(size_of::<verbs_device_ops>() == 72);
const _: () = assert!(offset_of!(verbs_device_ops, match_table) == 16);
const _: () = assert!(offset_of!(verbs_device_ops, match_device) == 32);
const _: () = assert!(offset_of!(verbs_device_ops, alloc_context) == 40);
const _: () = assert!(offset_of!(verbs_device_ops, alloc_device) == 56);
const _: () = assert!(offset_of!(verbs_device_ops, uninit_device) == 64);

/// The device object; the provider allocates it (embedded first in its own
/// device struct) and libibverbs fills everything but our extra fields.
#[repr(C)]
pub struct verbs_device {
    pub device: ibv_device,
    pub ops: *const verbs_device_ops,
    /// C11 `atomic_int`, managed by libibverbs.
    pub refcount: core::sync::atomic::AtomicI32,
    pub entry: list_node,
    pub sysfs: *mut verbs_sysfs_dev,
    pub core_support: u64,
}
const _: () = assert!(size_of::<verbs_device>() == 712);
const _: () = assert!(offset_of!(verbs_device, ops) == 664);
const _: () = assert!(offset_of!(verbs_device, refcount) == 672);
const _: () = assert!(offset_of!(verbs_device, entry) == 680);
const _: () = assert!(offset_of!(verbs_device, sysfs) == 696);
const _: () = assert!(offset_of!(verbs_device, core_support) == 704);
