//! The fuzz targets' way in (cargo feature `fuzzing`): `drive` with an engine of their own.
//! Not an API.

#![forbid(unsafe_code)]

use super::{Action, ConnectorInput, ConnectorState, Request, Transition};
use crate::status::NdStatus;

/// As the crate's `Engine`.
pub trait Engine {
    fn state(&mut self) -> &mut ConnectorState;
    fn prepare(&mut self) {}
    fn stepped(&mut self, _from: ConnectorState, _input: ConnectorInput, _t: &Transition) {}
    fn act(&mut self, action: Action) -> Result<(), NdStatus>;
    fn complete(&mut self, request: Request, status: NdStatus);
    fn peer_disconnected(&mut self);
}

struct Wrap<'a, E>(&'a mut E);

impl<E: Engine> super::Engine for Wrap<'_, E> {
    fn state(&mut self) -> &mut ConnectorState {
        self.0.state()
    }
    fn prepare(&mut self) {
        self.0.prepare();
    }
    fn stepped(&mut self, from: ConnectorState, input: ConnectorInput, t: &Transition) {
        self.0.stepped(from, input, t);
    }
    fn act(&mut self, action: Action) -> Result<(), NdStatus> {
        self.0.act(action)
    }
    fn complete(&mut self, request: Request, status: NdStatus) {
        self.0.complete(request, status);
    }
    fn peer_disconnected(&mut self) {
        self.0.peer_disconnected();
    }
}

/// The engine's loop over one input, exactly as the library runs it.
pub fn drive<E: Engine>(engine: &mut E, input: ConnectorInput) -> Option<NdStatus> {
    super::drive(&mut Wrap(engine), input)
}

/// A queue pair's claim (`QpClaim`), as Connect and Accept take it.
#[derive(Debug, Default)]
pub struct Claim(super::QpClaim);

impl Claim {
    pub fn claim(&self, token: u64) -> bool {
        self.0.claim(token)
    }
    pub fn release(&self, token: u64) {
        self.0.release(token);
    }
    pub fn holder(&self) -> u64 {
        self.0.holder()
    }
}

/// What Connect and Accept do with their claim after the step (`settle_claim`).
pub fn settle_claim(claim: &Claim, token: u64, state: ConnectorState, its_qp: bool) {
    super::settle_claim(&claim.0, token, state, its_qp);
}
