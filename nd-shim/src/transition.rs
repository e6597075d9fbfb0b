//! What the connector and listener state machines ([`crate::connection`], [`crate::listen`])
//! share: the result of one step.

#![forbid(unsafe_code)]

use std::fmt::Debug;

use crate::status::NdStatus;

/// The result of one step of a state machine: where it goes, what a call returns, and the
/// effects, in the order the engine must apply them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition<State, Effect> {
    pub next: State,
    /// For a call: what it returns (ND_PENDING when a later completion finishes it).
    /// For an event: `None`.
    pub returns: Option<NdStatus>,
    pub effects: Vec<Effect>,
}

/// A call's step: it returns `status`.
pub(crate) fn returns<State, Effect>(next: State, status: NdStatus, effects: Vec<Effect>) -> Transition<State, Effect> {
    Transition {
        next,
        returns: Some(status),
        effects,
    }
}

/// An event's step: there is no caller to return to.
pub(crate) fn event<State, Effect>(next: State, effects: Vec<Effect>) -> Transition<State, Effect> {
    Transition {
        next,
        returns: None,
        effects,
    }
}

impl<State: Debug, Effect> Transition<State, Effect> {
    /// The engines' debug line for this step of `object` `token` from `from` on `input`, logged
    /// under the engine's `target` (its module path).
    pub(crate) fn log(&self, target: &str, object: &str, token: u64, from: State, input: impl Debug) {
        log::debug!(target: target, "{object} {token}: {from:?} + {input:?} -> {:?} {:?}", self.next, self.returns);
    }
}
