//! NDK shared endpoint: one local address that many outgoing connections share.

#![forbid(unsafe_code)]

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use crate::engine::{Adapter, AdapterInner};
use crate::ports::SharedReservation;
use crate::status::NdStatus;
use crate::sys::CmId;

use super::bind::{adapter_addr, kernel_bind};

/// NDK shared endpoint: one local ip:port for many outgoing connections to distinct
/// destinations. Every connection's id sets RDMA_OPTION_ID_REUSEADDR and binds the port
/// explicitly; the shim checks the 4-tuple itself (the kernel does not, with REUSEADDR). The
/// endpoint keeps an id of its own bound there (REUSEADDR too), so that the kernel refuses the
/// port to exclusive users in every process while the endpoint lives.
pub struct SharedEndpoint {
    /// Dropped first: the kernel frees the port before this process's table does, so nothing
    /// here is told the port is free while the kernel still holds it. Declared before
    /// `_adapter`: the id goes before the event channel it was made on.
    _holder: CmId,
    pub(super) reservation: Arc<SharedReservation>,
    _adapter: Arc<AdapterInner>,
}

/// The address a shared endpoint takes, from the adapter's binding of the one asked
/// ([`adapter_addr`]): only the adapter's own address (another local one is ND_INVALID_ADDRESS).
fn endpoint_address(local_ip: IpAddr, bound: Result<SocketAddr, NdStatus>) -> Result<SocketAddr, NdStatus> {
    let addr = bound?;
    if addr.ip() != local_ip {
        return Err(NdStatus::ND_INVALID_ADDRESS);
    }
    Ok(addr)
}

impl SharedEndpoint {
    /// NdkCreateSharedEndpoint. Port 0 picks a port of the ND range that no process holds
    /// exclusively.
    pub fn new(adapter: &Adapter, addr: SocketAddr) -> Result<SharedEndpoint, NdStatus> {
        let inner = &adapter.inner;
        let addr = endpoint_address(inner.local_ip, adapter_addr(inner, addr))?;
        // Token 0 belongs to no object: events for the holder (none are expected) are dropped.
        let (reservation, holder) = inner
            .ports
            .bind_shared(addr, |candidate| kernel_bind(inner, 0, candidate, true))?;
        Ok(SharedEndpoint {
            _holder: holder,
            reservation: Arc::new(reservation),
            _adapter: Arc::clone(inner),
        })
    }

    /// NdkGetSharedEndpointLocalAddress.
    pub fn local_address(&self) -> SocketAddr {
        self.reservation.addr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_endpoint_takes_only_the_adapters_own_address() {
        let local: IpAddr = "198.18.0.1".parse().unwrap();
        let ours: SocketAddr = "198.18.0.1:6000".parse().unwrap();
        let other: SocketAddr = "198.18.0.2:6000".parse().unwrap();
        assert_eq!(endpoint_address(local, Ok(ours)), Ok(ours));
        assert_eq!(endpoint_address(local, Ok(other)), Err(NdStatus::ND_INVALID_ADDRESS));
        assert_eq!(
            endpoint_address(local, Err(NdStatus::ND_INVALID_ADDRESS)),
            Err(NdStatus::ND_INVALID_ADDRESS)
        );
    }
}
