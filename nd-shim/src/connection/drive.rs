//! An engine's loop over one input: [`drive`] runs it through [`step`] and carries out the effects.

#![forbid(unsafe_code)]

use super::machine::{step, Action, ConnectorInput, ConnectorState, Effect, Request, Transition};
use crate::status::NdStatus;

/// What carries out a step's effects: the rdma_cm event engine (`endpoint/connector.rs`), or the fuzz
/// target's fake (`fuzzing`, which makes this trait and [`drive`] public).
pub trait Engine {
    /// The connector's state, which [`drive`] moves on.
    fn state(&mut self) -> &mut ConnectorState;
    /// Once, when a step turns out to have effects, before the first: a call stores its
    /// arguments for the actions (a refused call stores nothing).
    fn prepare(&mut self) {}
    /// After each step (the engine logs it).
    fn stepped(&mut self, _from: ConnectorState, _input: ConnectorInput, _t: &Transition) {}
    fn act(&mut self, action: Action) -> Result<(), NdStatus>;
    /// The pending `request` completes (if it is pending: the engine keeps the slots).
    fn complete(&mut self, request: Request, status: NdStatus);
    fn peer_disconnected(&mut self);
}

/// Runs one input through [`step`] and carries out its effects in order; an action that fails
/// inline is fed back as [`ConnectorInput::ActionFailed`], whose `returns` (if any) replaces the
/// call's, and when that moves the state the step's remaining effects are dropped. Returns the
/// call's code (`None` for an event).
pub fn drive(engine: &mut impl Engine, input: ConnectorInput) -> Option<NdStatus> {
    let from = *engine.state();
    let t = step(from, input);
    engine.stepped(from, input, &t);
    *engine.state() = t.next;
    if !t.effects.is_empty() {
        engine.prepare();
    }
    let mut returns = t.returns;
    for effect in t.effects {
        match effect {
            Effect::Do(action) => {
                if let Err(status) = engine.act(action) {
                    let before = *engine.state();
                    let back = drive(engine, ConnectorInput::ActionFailed { action, status });
                    if back.is_some() {
                        returns = back;
                    }
                    if *engine.state() != before {
                        break;
                    }
                }
            }
            Effect::Complete { request, status } => engine.complete(request, status),
            Effect::PeerDisconnected => engine.peer_disconnected(),
        }
    }
    returns
}
