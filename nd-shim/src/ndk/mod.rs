//! The NDK face: a C interface shaped like NDKPI over the Rust API (`include/ndk_shim.h`).
//!
//! Every object the C side sees (adapter, CQ, QP, MR, connector, listener, shared endpoint) is a
//! `#[repr(C)]` struct whose first member points to a static, const dispatch table of
//! `extern "C"` functions, as NDKPI's objects do. The C side only ever holds pointers to them:
//! each is created by the adapter (or, for a connector handed over by a listener, by the shim)
//! and owned by the C caller until its `Close` entry, which frees it. A handle's dispatch
//! pointer is checked on every call, so a NULL or wrong-kind handle is STATUS_INVALID_HANDLE
//! instead of a crash.
//!
//! Every entry point (`entry`: the dispatch tables, their functions and NdkOpenAdapter) runs
//! its body inside `boundary`: no unwinding crosses `extern "C"`; a panic is logged and becomes
//! STATUS_INTERNAL_ERROR (or the entry's neutral value). Raw pointers from C are turned into
//! references, slices, out-parameter writers and callable callbacks once, at the top of each
//! entry; the objects' modules, which decide every code, hold no unsafe code.
//!
//! Inline or through the completion: `RequestCompletion(ctx, status)` runs only when the call
//! returned STATUS_PENDING (possibly before the call returns, on the thread that processes the
//! adapter's events). A call that finishes before it returns reports its final code inline and
//! never calls `RequestCompletion`. Which codes come which way is in the header and in
//! `docs/nd-conformance.md`.

mod boundary;
mod entry;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod ndk_adapter;
mod ndk_connector;
mod ndk_listener;
mod ndk_shared_endpoint;
mod ndk_verbs;

pub use boundary::{CreateCompletion, DisconnectEvent, NtStatus, RequestCompletion};
pub use entry::NdkOpenAdapter;
pub use ndk_adapter::{NdkAdapter, NdkAdapterDispatch, NdkAdapterInfo, NDK_SHIM_ADAPTER_POLLED};
pub use ndk_connector::{NdkConnector, NdkConnectorDispatch};
pub use ndk_listener::{ConnectEvent, NdkListener, NdkListenerDispatch};
pub use ndk_shared_endpoint::{NdkSharedEndpoint, NdkSharedEndpointDispatch};
pub use ndk_verbs::{NdkCq, NdkCqDispatch, NdkMr, NdkMrDispatch, NdkQp, NdkQpDispatch, NdkResult, NdkSge};
