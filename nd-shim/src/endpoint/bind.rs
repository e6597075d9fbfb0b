//! An rdma_cm id bound to an address of the adapter, exclusively or shared, with the port space's
//! reservation ([`crate::ports`]) that goes with it.

#![forbid(unsafe_code)]

use std::net::{IpAddr, SocketAddr};

use crate::engine::AdapterInner;
use crate::ports::{PortReservation, Refusal, SharedReservation};
use crate::status::{from_errno, NdStatus};
use crate::sys::{self, CmId};

/// `addr` as the adapter binds it: an unspecified address is the adapter's; a loopback address
/// is ND_INVALID_ADDRESS.
pub(super) fn adapter_addr(adapter: &AdapterInner, addr: SocketAddr) -> Result<SocketAddr, NdStatus> {
    bind_address(adapter.local_ip, addr)
}

/// An endpoint's local address: its id's once bound, else the one it reserved.
pub(super) fn local_address(id: Option<&CmId>, reserved: Option<SocketAddr>) -> Option<SocketAddr> {
    id.and_then(CmId::local_addr).or(reserved)
}

/// [`adapter_addr`] for an adapter whose address is `local_ip`.
fn bind_address(local_ip: IpAddr, addr: SocketAddr) -> Result<SocketAddr, NdStatus> {
    let addr = if addr.ip().is_unspecified() {
        SocketAddr::new(local_ip, addr.port())
    } else {
        addr
    };
    if sys::is_loopback(addr.ip()) {
        return Err(NdStatus::ND_INVALID_ADDRESS);
    }
    Ok(addr)
}

/// A new cm id for `token` bound by the kernel to `candidate` (REUSEADDR first when `shared`):
/// the port space's [`Refusal`] when the kernel says no. EADDRINUSE is a holder the kernel can
/// see; so is EADDRNOTAVAIL when the address itself binds (`cma_check_port` reports a wildcard
/// holder that way), which a second id with port 0 finds out.
pub(super) fn kernel_bind(
    adapter: &AdapterInner,
    token: u64,
    candidate: SocketAddr,
    shared: bool,
) -> Result<CmId, Refusal> {
    let id = adapter.channel.create_id(token).map_err(Refusal::Failed)?;
    if shared {
        id.set_reuseaddr().map_err(Refusal::Failed)?;
    }
    match id.try_bind(candidate) {
        Ok(()) if id.verbs() != adapter.ctx => Err(Refusal::Failed(NdStatus::ND_INVALID_ADDRESS)),
        Ok(()) => Ok(id),
        Err(libc::EADDRINUSE) => Err(Refusal::HeldElsewhere),
        Err(libc::EADDRNOTAVAIL) => {
            drop(id);
            let probe = adapter.channel.create_id(token).map_err(Refusal::Failed)?;
            match probe.try_bind(SocketAddr::new(candidate.ip(), 0)) {
                Ok(()) => Err(Refusal::HeldElsewhere),
                Err(errno) => Err(Refusal::Failed(from_errno(errno))),
            }
        }
        Err(errno) => Err(Refusal::Failed(from_errno(errno))),
    }
}

/// A new cm id for `token`, bound to `addr` of this adapter (port 0 takes one from the ND range
/// that no process holds), which it holds exclusively. A loopback address, or one that resolves
/// to another device, is ND_INVALID_ADDRESS.
pub(super) fn bind_exclusive(
    adapter: &AdapterInner,
    token: u64,
    addr: SocketAddr,
) -> Result<(CmId, PortReservation), NdStatus> {
    let addr = adapter_addr(adapter, addr)?;
    let (reservation, id) = adapter
        .ports
        .bind_exclusive(addr, |candidate| kernel_bind(adapter, token, candidate, false))?;
    Ok((id, reservation))
}

/// A new cm id for `token`, bound to `addr` of this adapter, which it shares with other ND2
/// connectors that used Bind and with NDK shared endpoints (RDMA_OPTION_ID_REUSEADDR, so the
/// kernel lets their ids share the port and still refuses it to a listener in any process). Port 0 takes a port of the ND range
/// that no process holds: the kernel binds it without REUSEADDR first (refused wherever anyone
/// holds it), and the option is set once it is bound.
pub(super) fn bind_connector(
    adapter: &AdapterInner,
    token: u64,
    addr: SocketAddr,
) -> Result<(CmId, SharedReservation), NdStatus> {
    let addr = adapter_addr(adapter, addr)?;
    let explicit = addr.port() != 0;
    let (reservation, id) = adapter.ports.bind_shared(addr, |candidate| {
        let id = kernel_bind(adapter, token, candidate, explicit)?;
        if !explicit {
            id.set_reuseaddr().map_err(Refusal::Failed)?;
        }
        Ok(id)
    })?;
    Ok((id, reservation))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn an_unspecified_address_binds_the_adapters_with_the_port_asked() {
        let local: IpAddr = "198.18.0.1".parse().unwrap();
        assert_eq!(bind_address(local, addr("0.0.0.0:5000")), Ok(addr("198.18.0.1:5000")));
        assert_eq!(bind_address(local, addr("0.0.0.0:0")), Ok(addr("198.18.0.1:0")));
        let local6: IpAddr = "fd00::1".parse().unwrap();
        assert_eq!(bind_address(local6, addr("[::]:7")), Ok(addr("[fd00::1]:7")));
    }

    #[test]
    fn an_explicit_address_is_kept_and_a_loopback_one_refused() {
        let local: IpAddr = "198.18.0.1".parse().unwrap();
        assert_eq!(bind_address(local, addr("198.18.0.2:9")), Ok(addr("198.18.0.2:9")));
        assert_eq!(
            bind_address(local, addr("127.0.0.1:9")),
            Err(NdStatus::ND_INVALID_ADDRESS)
        );
        assert_eq!(bind_address(local, addr("[::1]:9")), Err(NdStatus::ND_INVALID_ADDRESS));
    }
}
