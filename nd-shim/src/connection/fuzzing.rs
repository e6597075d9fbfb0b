//! The fuzz targets' way in (cargo feature `fuzzing`): `drive` with an engine of their own.
//! Not an API.

#![forbid(unsafe_code)]

use super::ConnectorState;

/// The crate's engine trait and its loop over one input, exactly as the library runs it.
pub use super::drive::{drive, Engine};

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
