//! What passes between the endpoints' rooms: the completions a call gathers under its object's
//! lock and runs after it ([`finish`]), and a connection request a listener hands to a connector.

#![forbid(unsafe_code)]

use std::sync::Arc;

use crate::request::Slot;
use crate::status::NdStatus;
use crate::sys::CmId;

pub(super) type Done = Vec<(Arc<Slot>, NdStatus)>;

pub(super) fn finish(done: Done) {
    for (slot, status) in done {
        slot.complete(status);
    }
}

/// A connection request the listener holds until a GetConnectionRequest takes it.
pub(super) struct Incoming {
    pub(super) id: CmId,
    pub(super) private_data: Vec<u8>,
    pub(super) params: (u8, u8),
}
