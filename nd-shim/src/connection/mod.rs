//! The connector state machine: every ND2 / NDK connector call and every rdma_cm event, with all
//! transitions in [`step`].
//!
//! Sources: `docs/nd-semantics.md` ("The handshake", "Private data", "Disconnect", the failure table)
//! for the flow and the codes, and the ND2 / NDKPI method references it cites for the codes each
//! call returns (IND2Connector::Connect / CompleteConnect / Accept, NdkReject).
//!
//! The machine is pure. [`step`] says what the call returns, which pending request completes with
//! which code, and which [`Action`]s the rdma_cm event engine must carry out. The engine carries
//! the actions out in order before it lets the call return; when one fails inline it feeds
//! [`ConnectorInput::ActionFailed`] back, and the `returns` of that step replaces the call's.
//!
//! Inline or through the completion (the NDK face: RequestCompletion only after STATUS_PENDING):
//! - inline: every state error (ND_CONNECTION_ACTIVE, ND_CONNECTION_INVALID,
//!   STATUS_ADDRESS_ALREADY_ASSOCIATED, ...), ND_INVALID_BUFFER_SIZE, and failures of the
//!   synchronous part of a call (e.g. `rdma_resolve_addr` failing with ENETUNREACH);
//! - through the completion: everything an rdma_cm event decides (refused, unreachable, timeout,
//!   aborted, device removed) and ND_CANCELED from Cancel or Release.
//!
//! The shim never adds a timeout of its own: only events end Connecting and Accepting.
//!
//! Rooms: `machine` (the states, inputs, actions and [`step`]), `claim` (which connector's
//! connection uses a queue pair), `drive` (an engine's loop over one input) and `fuzzing` (the
//! fuzz targets' way in).

#![forbid(unsafe_code)]

mod claim;
mod drive;
mod machine;

pub(crate) use claim::{settle_claim, QpClaim};
pub(crate) use drive::{drive, Engine};
pub use machine::{connect_may_be_retried, step, Action, ConnectorInput, ConnectorState, Effect, Request, Transition};

/// The fuzz targets' way in (cargo feature `fuzzing`): `drive` with an engine of their own.
/// Not an API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;

#[cfg(test)]
mod tests;
