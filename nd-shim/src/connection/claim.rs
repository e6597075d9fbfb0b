//! Which connector's connection uses a queue pair.

#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};

use super::machine::ConnectorState;

/// Which connector's connection uses a queue pair: its token, 0 for none. ND's
/// ND_CONNECTION_ACTIVE is decided here, before anything touches the QP: Connect and Accept claim
/// the QP first (`qp_in_use` is a failed claim), then [`settle_claim`] after the step.
#[derive(Debug, Default)]
pub(crate) struct QpClaim(AtomicU64);

impl QpClaim {
    /// Claims the QP for the connector `token`: false when another connector's connection (or
    /// attempt) holds it. AcqRel: a claim is a handover between connectors on any thread.
    pub(crate) fn claim(&self, token: u64) -> bool {
        match self.0.compare_exchange(0, token, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => true,
            Err(holder) => holder == token,
        }
    }

    /// Gives up `token`'s claim, if it holds one.
    pub(crate) fn release(&self, token: u64) {
        let _ = self.0.compare_exchange(token, 0, Ordering::AcqRel, Ordering::Acquire);
    }

    /// The holder's token, 0 for none.
    pub(crate) fn holder(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

/// After a Connect or Accept that claimed a queue pair for the connector `token` (in `state`
/// now; `its_qp`: the QP is the one the connector's connection uses): the claim stays only while
/// that connection is in progress or up. A call refused on a connector engaged with another QP
/// (Connect or Accept again, with a second QP) gives the second one back: kept, it stayed claimed
/// for good, every later connection on it refused with ND_CONNECTION_ACTIVE.
pub(crate) fn settle_claim(claim: &QpClaim, token: u64, state: ConnectorState, its_qp: bool) {
    if !(its_qp && state.engaged()) {
        claim.release(token);
    }
}
