//! ND2 / NDK connector semantics over rdma_cm.
//!
//! The pure core, host-testable without an RDMA device: status codes and their mapping from
//! errno and rdma_cm events, the port space, and the connector and listener state machines.
//! The rdma_cm event engine and the NDK (C) and ND2 (COM) faces are built on these.
//! The rules come from `docs/nd-semantics.md`; each module says which part.

pub mod cm_event;
pub mod connection_data;
pub mod connector;
pub mod listener;
pub mod ports;
pub mod status;

pub use cm_event::{CmEvent, CmEventKind, Side};
pub use status::NdStatus;
