//! rxe_rs: a libibverbs provider for the kernel's Soft-RoCE device (rdma_rxe).

mod ffi;
pub mod libibverbs;
mod logger;

/// The name under which the provider registers with libibverbs.
pub const PROVIDER_NAME: &str = "rxe_rs";
