//! IND2Connector over the Rust API's [`Connector`]: its state machine decides every code; this
//! file only turns C arguments into Rust ones and a [`Pending`] into an overlapped completion.
//! CompleteConnect finishes inline in the Rust API; here it is overlapped as ND2 declares it
//! (ND_PENDING with the OVERLAPPED already completed, or the failure inline). Its C entries are
//! `entry_connection.rs`. The body ([`EndpointBody`]) is IND2Listener's too.

#![forbid(unsafe_code)]

use std::sync::Arc;

use super::adapter::AdapterBody;
use super::overlapped::Request;
use super::win32::OverlappedFile;
use super::{code, Class, HResult, Overlapped, ND_PENDING, ND_SUCCESS};
use crate::status::NdStatus;
use crate::{Adapter, Connector, Listener, Pending};

/// IND2Connector's and IND2Listener's body: an endpoint of the Rust API on the adapter, whose
/// requests complete on one of the adapter's overlapped files.
pub(crate) struct EndpointBody<E> {
    _adapter: Arc<AdapterBody>,
    pub(super) file: Arc<OverlappedFile>,
    pub(super) endpoint: E,
}

/// The Rust API's endpoints under an ND2 object: made on an adapter, their pending requests
/// cancelled.
pub(crate) trait Endpoint: Send + Sync + 'static {
    fn new(adapter: &Adapter) -> Self;
    fn cancel(&self);
}

impl<E: Endpoint> EndpointBody<E> {
    pub(super) fn new(adapter: Arc<AdapterBody>, file: Arc<OverlappedFile>) -> EndpointBody<E> {
        let endpoint = E::new(&adapter.adapter);
        EndpointBody {
            _adapter: adapter,
            file,
            endpoint,
        }
    }
}

impl<E: Endpoint> Overlapped for EndpointBody<E>
where
    EndpointBody<E>: Class,
{
    fn cancel(&self) {
        self.endpoint.cancel();
    }
}

pub(crate) type ConnectorBody = EndpointBody<Connector>;

/// Each endpoint's [`Endpoint`]: the Rust API's own `new` and `cancel`.
macro_rules! endpoints {
    ($($endpoint:ident),*) => {
        $(impl Endpoint for $endpoint {
            fn new(adapter: &Adapter) -> $endpoint {
                $endpoint::new(adapter)
            }

            fn cancel(&self) {
                $endpoint::cancel(self);
            }
        })*
    };
}

endpoints!(Connector, Listener);

/// Issues an overlapped request whose OVERLAPPED was checked and marked pending (`request`):
/// `call` runs; its inline failure is returned as is (and left in Internal), its [`Pending`]
/// completes the OVERLAPPED.
pub(super) fn issue(request: Request, call: impl FnOnce() -> Result<Pending, NdStatus>) -> Result<HResult, HResult> {
    let pending = match call() {
        Ok(pending) => pending,
        Err(status) => {
            request.fail(code(status));
            return Err(code(status));
        }
    };
    pending.on_complete(move |status| request.complete(status, 0));
    Ok(ND_PENDING)
}

impl ConnectorBody {
    /// CompleteConnect: inline in the Rust API, overlapped as ND2 declares it (ND_PENDING with
    /// the OVERLAPPED already completed, or the failure inline).
    pub(super) fn complete_connect(&self, request: Request) -> Result<HResult, HResult> {
        if let Err(status) = self.endpoint.complete_connect() {
            request.fail(code(status));
            return Err(code(status));
        }
        request.complete(NdStatus::ND_SUCCESS, 0);
        Ok(ND_PENDING)
    }

    /// GetReadLimits: each out value is `None` when not wanted.
    pub(super) fn get_read_limits(
        &self,
        inbound: Option<&mut u32>,
        outbound: Option<&mut u32>,
    ) -> Result<HResult, HResult> {
        let limits = self.endpoint.get_read_limits().map_err(code)?;
        if let Some(inbound) = inbound {
            *inbound = limits.inbound;
        }
        if let Some(outbound) = outbound {
            *outbound = limits.outbound;
        }
        Ok(ND_SUCCESS)
    }
}
