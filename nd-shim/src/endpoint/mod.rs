//! The Rust API's connector, listener and shared endpoint: each owns its rdma_cm id and runs
//! its pure state machine ([`crate::connection`], [`crate::listen`]), carrying out the actions
//! of every step in order, feeding inline failures back as `ActionFailed`, and completing
//! pending requests after its lock is released (so a completion callback may call back in).
//!
//! One room per object: [`connector`] (ND2 IND2Connector / NDK connector), [`listener`]
//! (ND2 IND2Listener) and [`shared`] (NDK shared endpoint); what they share: [`bind`] (an id
//! bound to an address of the adapter), [`handoff`] (completions run after the lock, and
//! the connection request a listener hands to a connector) and [`inner`] (what a connector and a
//! listener keep behind their handle).

#![forbid(unsafe_code)]

mod bind;
mod connector;
mod handoff;
mod inner;
mod listener;
mod shared;

pub use connector::Connector;
pub use listener::Listener;
pub use shared::SharedEndpoint;
