//! ND2 / NDK connector semantics over rdma_cm.
//!
//! The pure core is testable on a host without an RDMA device; the rdma_cm event engine and the
//! Rust API sit on it, and the NDK-shaped C interface and ND2's COM interfaces share both.
//! The rules come from `docs/nd-semantics.md`; each module says which section.
//!
//! - [`status`]: the ND2 HRESULT / NTSTATUS codes ([`NdStatus`]), and one mapping table per
//!   source of failure: errno, rdma_cm events per side, and work-completion status per request
//!   type.
//! - [`cm_event`]: the rdma_cm event kinds the machines consume.
//! - [`ports`]: the shim's port space: ephemeral allocation, exclusive and shared holders,
//!   the shared-endpoint 4-tuple check, addresses busy until their last holder drops.
//! - [`connection`] and [`listen`]: the state machines (of a connector and of a listener). Each
//!   is an enum of states and one `step(state, input)` that returns the call's inline code, the
//!   pending requests that complete, and the actions the endpoint must carry out.
//! - [`connection_data`]: private data limits, read-limit capping, and the getters' buffer rules.
//!
//! On top, with RDMA hardware (or rxe) and librdmacm/libibverbs loaded at run time:
//! - [`Adapter`]: opened by a local address; its rdma_cm event engine (one event channel for all
//!   its connectors and listeners) runs on a thread of the shim's ([`Adapter::open`]) or is
//!   driven by the application ([`Adapter::open_polled`], [`Adapter::event_fd`],
//!   [`Adapter::process_events`]). [`Adapter::query`] is ND2_ADAPTER_INFO.
//! - [`CompletionQueue`], [`QueuePair`], [`MemoryRegion`]: enough verbs to move data.
//! - [`Connector`], [`Listener`], [`SharedEndpoint`]: ND2's method sets (and NDK's
//!   ConnectWithSharedEndpoint). Calls return `Err(code)` for every inline failure and a
//!   [`Pending`] (wait, poll, cancel, callback) for what completes later; which codes come inline
//!   and which through the completion is in [`connection`]'s module docs.
//!
//! Logging goes through the `log` crate and is silent unless a logger is installed: a Rust
//! application installs its own; for C and C++ programs the first NDK or ND2 entry that opens
//! something installs one on stderr at `ND_SHIM_LOG`'s level (`stderr_log`).
//!
//! [`nd2`] is ND2's COM face: the interfaces of `include/nd2/ndspi.h` and the helpers of
//! `ndsupport.h` over the API above, with the Win32 events and completion ports they drive.
//!
//! [`ndk`] is the NDK face: the C interface of `include/ndk_shim.h`, objects with dispatch
//! tables over the API above.
//!
//! An NDK shared endpoint has no state machine of its own: it is a
//! [`ports::SharedReservation`], and each connector connected through it holds a
//! [`ports::SharedConnection`].

pub mod cm_event;
pub mod connection;
pub mod connection_data;
mod endpoint;
mod engine;
mod exports;
pub mod listen;
mod liveness;
pub mod nd2;
pub mod ndk;
pub mod ports;
mod request;
pub mod status;
pub mod stderr_log;
mod sync;
mod sys;
mod transition;
mod verbs;

pub use cm_event::{CmEvent, CmEventKind, Side};
pub use connection_data::{BufferFill, ReadLimits};
pub use endpoint::{Connector, Listener, SharedEndpoint};
pub use engine::{Adapter, AdapterInfo};
pub use request::Pending;
pub use status::NdStatus;
pub use verbs::{Completion, CompletionQueue, MemoryRegion, QueuePair, Sge, ND_OP_FLAG_SILENT_SUCCESS};
