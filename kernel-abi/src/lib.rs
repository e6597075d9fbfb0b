//! The kernel uverbs ABI and the rdma_rxe ABI as Rust types.
//!
//! One module per kernel UAPI header, types and constants named exactly as in C and all
//! re-exported here, so `kernel_abi::ib_uverbs_get_context` is `struct ib_uverbs_get_context`.
//! Only what the provider uses is declared, each record whole (every field the header has).
//! The layouts follow the Linux 6.1 headers plus the two later additions to `rdma_user_rxe.h`
//! that a provider needs (the `flush` arm of `rxe_send_wr.wr` and `rxe_dma_info.atomic_wr`).
//!
//! Conventions:
//! - `__aligned_u64` and `__u64` are `u64`; both are 8-aligned on every target we build for
//!   (asserted below), which is what the kernel's `__aligned_u64` guarantees on all targets.
//! - `__be16`/`__be32`/`__be64` are `u16`/`u32`/`u64` holding big-endian bytes, marked in the
//!   field's documentation.
//! - A C flexible array member `T name[]` is `name: [T; 0]`: it adds no size but keeps C's
//!   offset and alignment.
//! - A C enum is one `pub const` per enumerator, of the enum's integer type, under a comment
//!   naming the enum.
//! - A C anonymous struct or union becomes a named Rust type (`Origin::Anonymous` in the
//!   layout table) held in a field of the parent; an unnamed type behind a named member is
//!   called `<parent>_<member>`.
//!
//! Every type is declared through one macro (see [`layout`]) that asserts its size and field
//! offsets at compile time and publishes its layout in [`LAYOUTS`], which the `c_layout` test
//! compares against the C compiler's view of the headers; constants go through
//! `abi_consts!`, whose [`CONSTS`] table the same test checks against the headers' values.
#![no_std]
#![allow(non_camel_case_types, non_upper_case_globals)]

pub mod layout;

pub mod ib_user_ioctl_cmds;
pub mod ib_user_ioctl_verbs;
pub mod ib_user_verbs;
pub mod linux_in;
pub mod rdma_user_ioctl_cmds;
pub mod rdma_user_rxe;

pub use ib_user_ioctl_cmds::*;
pub use ib_user_ioctl_verbs::*;
pub use ib_user_verbs::*;
pub use linux_in::*;
pub use rdma_user_ioctl_cmds::*;
pub use rdma_user_rxe::*;

// `__aligned_u64` is 8-aligned everywhere; plain Rust `u64` must be too for the layouts above
// (it is only 4-aligned on i386, which we do not build for).
const _: () = assert!(core::mem::align_of::<u64>() == 8);

/// The Rust layout of every ABI type in this crate, module by module.
pub const LAYOUTS: &[&[layout::TypeLayout]] = &[
    ib_user_ioctl_verbs::LAYOUTS,
    ib_user_verbs::LAYOUTS,
    linux_in::LAYOUTS,
    rdma_user_ioctl_cmds::LAYOUTS,
    rdma_user_rxe::LAYOUTS,
];

/// Every constant of this crate with its value, module by module.
pub const CONSTS: &[&[(&str, i128)]] = &[
    ib_user_ioctl_cmds::CONSTS,
    ib_user_ioctl_verbs::CONSTS,
    ib_user_verbs::CONSTS,
    rdma_user_ioctl_cmds::CONSTS,
    rdma_user_rxe::CONSTS,
];
