//! What travels with the handshake: private data limits, read limits, and the buffer rules of
//! the getters (GetPrivateData, GetLocalAddress, GetPeerAddress).
//!
//! Rules from `docs/nd-semantics.md` ("Read limits", "Private data"). The NDK wording of the read-limit
//! caps is that of NDK_FN_CONNECT / NDK_FN_ACCEPT: capped to the adapter's maxima, and to the
//! peer's opposite limit.

#![forbid(unsafe_code)]

use crate::status::NdStatus;

/// Which message private data rides in, and so its limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrivateDataUse {
    /// REQ: 92 bytes on the wire, 36 taken by rdma_cm's header. `MaxCallerData`.
    Connect,
    /// REP: `MaxCalleeData`.
    Accept,
    /// REJ: 148 bytes on the wire.
    Reject,
}

/// `ND2_ADAPTER_INFO.MaxCallerData` on RoCE/IB.
pub const MAX_CALLER_DATA: usize = 56;
/// `ND2_ADAPTER_INFO.MaxCalleeData` on RoCE/IB (REP).
pub const MAX_CALLEE_DATA: usize = 196;
/// Private data a REJ can carry.
pub const MAX_REJECT_DATA: usize = 148;

impl PrivateDataUse {
    /// The most the caller may send in this message. Received events report exactly this many
    /// bytes (the wire size, not what the peer sent): NDK's "RDS".
    pub const fn limit(self) -> usize {
        match self {
            PrivateDataUse::Connect => MAX_CALLER_DATA,
            PrivateDataUse::Accept => MAX_CALLEE_DATA,
            PrivateDataUse::Reject => MAX_REJECT_DATA,
        }
    }

    /// Over the limit is ND_INVALID_BUFFER_SIZE, returned synchronously; the connector is left as
    /// it was and the same call with at most the limit then succeeds.
    pub fn check(self, len: usize) -> Result<(), NdStatus> {
        if len > self.limit() {
            Err(NdStatus::ND_INVALID_BUFFER_SIZE)
        } else {
            Ok(())
        }
    }
}

/// The adapter's read-limit maxima: `ibv_device_attr.max_qp_rd_atom` (reads we can serve, inbound)
/// and `max_qp_init_rd_atom` (reads we can issue, outbound).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdapterReadLimits {
    pub max_inbound: u32,
    pub max_outbound: u32,
}

/// Read limits from one side's point of view, as ND names them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadLimits {
    /// Reads this side will serve: `rdma_conn_param.responder_resources`.
    pub inbound: u32,
    /// Reads this side will issue: `rdma_conn_param.initiator_depth`.
    pub outbound: u32,
}

impl ReadLimits {
    pub const fn new(inbound: u32, outbound: u32) -> Self {
        ReadLimits { inbound, outbound }
    }

    /// What the caller asked for, capped silently to the adapter (Connect, and Accept before the
    /// peer's offer is applied).
    pub fn capped_to(self, adapter: AdapterReadLimits) -> ReadLimits {
        ReadLimits {
            inbound: self.inbound.min(adapter.max_inbound),
            outbound: self.outbound.min(adapter.max_outbound),
        }
    }

    /// The effective limits of a connection, the same rule on both sides (NDK_FN_CONNECT,
    /// NDK_FN_ACCEPT, IND2Connector::Accept): what this side asked for, capped to the adapter and
    /// to the peer's offer: serve no more reads than the peer will issue, issue no more than it
    /// will serve. The passive side applies it to the REQ before its REP, the active side to the
    /// REP before CompleteConnect programs the QP.
    pub fn negotiate(self, adapter: AdapterReadLimits, peer: PeerReadLimits) -> ReadLimits {
        let capped = self.capped_to(adapter);
        ReadLimits {
            inbound: capped.inbound.min(peer.outbound),
            outbound: capped.outbound.min(peer.inbound),
        }
    }

    /// `(responder_resources, initiator_depth)` for `rdma_conn_param`, whose fields are `u8`.
    pub fn to_conn_param(self) -> (u8, u8) {
        let byte = |v: u32| u8::try_from(v).unwrap_or(u8::MAX);
        (byte(self.inbound), byte(self.outbound))
    }
}

/// The limits the peer offered, in the peer's own terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerReadLimits {
    /// Reads the peer will serve.
    pub inbound: u32,
    /// Reads the peer will issue.
    pub outbound: u32,
}

impl PeerReadLimits {
    /// From the `conn` parameters of a CONNECT_REQUEST or CONNECT_RESPONSE event. The kernel's IB
    /// CM has already swapped them into the receiver's terms (`cm_format_req_event` and
    /// `cm_format_rep_event` set `responder_resources` from the message's initiator depth), so
    /// the event's `responder_resources` is what the peer will issue.
    pub fn from_event_param(responder_resources: u8, initiator_depth: u8) -> Self {
        PeerReadLimits {
            inbound: u32::from(initiator_depth),
            outbound: u32::from(responder_resources),
        }
    }

    /// GetReadLimits / NdkGetConnectionData: the peer's view from our side, capped to our
    /// adapter. Our inbound is the peer's outbound, our outbound the peer's inbound.
    pub fn as_seen_locally(self, adapter: AdapterReadLimits) -> ReadLimits {
        ReadLimits {
            inbound: self.outbound,
            outbound: self.inbound,
        }
        .capped_to(adapter)
    }
}

/// The outcome of a getter that fills a caller's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferFill {
    /// ND_SUCCESS or ND_BUFFER_OVERFLOW.
    pub status: NdStatus,
    /// The size the caller needs: what goes into the in/out length argument.
    pub required: usize,
}

/// GetPrivateData / NdkGetConnectionData: copy what fits, report the full size, and
/// ND_BUFFER_OVERFLOW when the buffer was short.
pub fn fill_private_data(data: &[u8], buffer: &mut [u8]) -> BufferFill {
    let n = data.len().min(buffer.len());
    buffer[..n].copy_from_slice(&data[..n]);
    BufferFill {
        status: overflow_if(buffer.len() < data.len()),
        required: data.len(),
    }
}

/// GetLocalAddress / GetPeerAddress with an encoded sockaddr: on a short buffer nothing is
/// written, the size is reported and the status is ND_BUFFER_OVERFLOW (see [`BufferFill::ndk`]).
pub fn fill_address(sockaddr: &[u8], buffer: &mut [u8]) -> BufferFill {
    if buffer.len() >= sockaddr.len() {
        buffer[..sockaddr.len()].copy_from_slice(sockaddr);
    }
    BufferFill {
        status: overflow_if(buffer.len() < sockaddr.len()),
        required: sockaddr.len(),
    }
}

fn overflow_if(short: bool) -> NdStatus {
    if short {
        NdStatus::ND_BUFFER_OVERFLOW
    } else {
        NdStatus::ND_SUCCESS
    }
}

impl BufferFill {
    /// The NDK spelling for the address getters (NdkGetLocalAddress, NdkGetPeerAddress,
    /// NdkGetSharedEndpointLocalAddress): a short buffer is STATUS_BUFFER_TOO_SMALL there.
    pub fn ndk(self) -> NdStatus {
        if self.status == NdStatus::ND_BUFFER_OVERFLOW {
            NdStatus::STATUS_BUFFER_TOO_SMALL
        } else {
            self.status
        }
    }
}

/// What the peer sent in the handshake, kept on the connector for GetReadLimits,
/// GetPrivateData and NdkGetConnectionData.
///
/// The engine records the private data of CONNECT_REQUEST, CONNECT_RESPONSE and REJECTED
/// events as the event reports it: the full wire size (56, 196 or 148 bytes), not what the peer
/// sent, because IB CM carries no length (`docs/nd-semantics.md`, "Private data"). A REJ's data stays
/// readable after the refusal.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeerData {
    private_data: Option<Vec<u8>>,
    read_limits: Option<PeerReadLimits>,
    /// The connection's effective limits once this side has applied the peer's offer.
    negotiated: Option<ReadLimits>,
}

impl PeerData {
    pub fn record_private_data(&mut self, data: &[u8]) {
        self.private_data = Some(data.to_vec());
    }

    pub fn record_read_limits(&mut self, limits: PeerReadLimits) {
        self.read_limits = Some(limits);
    }

    /// GetPrivateData. Before the peer has said anything there is nothing to read:
    /// ND_CONNECTION_INVALID.
    pub fn fill_private_data(&self, buffer: &mut [u8]) -> Result<BufferFill, NdStatus> {
        match &self.private_data {
            Some(data) => Ok(fill_private_data(data, buffer)),
            None => Err(NdStatus::ND_CONNECTION_INVALID),
        }
    }

    /// Applies the peer's offer to what this side asked for ([`ReadLimits::negotiate`]) and
    /// keeps the result for [`PeerData::read_limits`]. Without an offer: the adapter's cap only.
    pub fn negotiate(&mut self, requested: ReadLimits, adapter: AdapterReadLimits) -> ReadLimits {
        let limits = match self.read_limits {
            Some(peer) => requested.negotiate(adapter, peer),
            None => requested.capped_to(adapter),
        };
        self.negotiated = Some(limits);
        limits
    }

    /// GetReadLimits / NdkGetConnectionData: the effective limits once negotiated (the active
    /// side after Connect completed, the passive side after Accept); before that, on the passive
    /// side, the peer's request seen from our side, capped to our adapter.
    pub fn read_limits(&self, adapter: AdapterReadLimits) -> Result<ReadLimits, NdStatus> {
        self.negotiated
            .or_else(|| self.read_limits.map(|peer| peer.as_seen_locally(adapter)))
            .ok_or(NdStatus::ND_CONNECTION_INVALID)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_data_limits() {
        let rows = [
            (PrivateDataUse::Connect, 56),
            (PrivateDataUse::Accept, 196),
            (PrivateDataUse::Reject, 148),
        ];
        for (usage, limit) in rows {
            assert_eq!(usage.limit(), limit);
            assert_eq!(usage.check(0), Ok(()));
            assert_eq!(usage.check(limit), Ok(()), "{usage:?} exactly at the limit");
            assert_eq!(
                usage.check(limit + 1),
                Err(NdStatus::ND_INVALID_BUFFER_SIZE),
                "{usage:?}"
            );
        }
    }

    fn filled(status: NdStatus, required: usize) -> BufferFill {
        BufferFill { status, required }
    }

    fn peer_limits(inbound: u32, outbound: u32) -> PeerReadLimits {
        PeerReadLimits { inbound, outbound }
    }

    const ADAPTER: AdapterReadLimits = AdapterReadLimits {
        max_inbound: 16,
        max_outbound: 8,
    };

    #[test]
    fn read_limits_capped_to_the_adapter() {
        assert_eq!(ReadLimits::new(100, 100).capped_to(ADAPTER), ReadLimits::new(16, 8));
        assert_eq!(ReadLimits::new(4, 2).capped_to(ADAPTER), ReadLimits::new(4, 2));
    }

    #[test]
    fn accept_also_caps_to_the_peer_offer() {
        let peer = peer_limits(3, 5);
        // We serve at most what the peer issues (5), issue at most what it serves (3).
        assert_eq!(
            ReadLimits::new(100, 100).negotiate(ADAPTER, peer),
            ReadLimits::new(5, 3)
        );
        assert_eq!(ReadLimits::new(1, 1).negotiate(ADAPTER, peer), ReadLimits::new(1, 1));
        let generous = peer_limits(100, 100);
        assert_eq!(
            ReadLimits::new(100, 100).negotiate(ADAPTER, generous),
            ReadLimits::new(16, 8)
        );
    }

    #[test]
    fn peer_limits_from_an_event_are_unswapped_then_seen_locally() {
        // Event param already in the receiver's terms: responder_resources = peer's outbound.
        let peer = PeerReadLimits::from_event_param(5, 3);
        assert_eq!(peer, peer_limits(3, 5));
        assert_eq!(peer.as_seen_locally(ADAPTER), ReadLimits::new(5, 3));
        let big = PeerReadLimits::from_event_param(200, 100);
        assert_eq!(big.as_seen_locally(ADAPTER), ReadLimits::new(16, 8));
    }

    #[test]
    fn conn_param_saturates_at_u8() {
        assert_eq!(ReadLimits::new(300, 7).to_conn_param(), (255, 7));
        assert_eq!(ReadLimits::new(16, 8).to_conn_param(), (16, 8));
    }

    #[test]
    fn private_data_short_buffer_copies_what_fits() {
        let data: Vec<u8> = (1..=56).collect();
        let mut short = [0u8; 10];
        let fill = fill_private_data(&data, &mut short);
        assert_eq!(fill, filled(NdStatus::ND_BUFFER_OVERFLOW, 56));
        assert_eq!(short, data[..10]);
        let mut exact = [0u8; 56];
        assert_eq!(fill_private_data(&data, &mut exact).status, NdStatus::ND_SUCCESS);
        assert_eq!(exact[..], data[..]);
        let mut long = [0xAAu8; 60];
        assert_eq!(fill_private_data(&data, &mut long).required, 56);
        assert_eq!(long[56..], [0xAA; 4]);
    }

    #[test]
    fn address_short_buffer_is_left_untouched() {
        let sockaddr_in = [2u8, 0, 0x1B, 0x58, 198, 18, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        let mut short = [0xEEu8; 8];
        let fill = fill_address(&sockaddr_in, &mut short);
        assert_eq!(fill, filled(NdStatus::ND_BUFFER_OVERFLOW, 16));
        assert_eq!(short, [0xEE; 8]);
        assert_eq!(fill.ndk(), NdStatus::STATUS_BUFFER_TOO_SMALL);
        let mut room = [0u8; 28];
        let fill = fill_address(&sockaddr_in, &mut room);
        assert_eq!(fill, filled(NdStatus::ND_SUCCESS, 16));
        assert_eq!(fill.ndk(), NdStatus::ND_SUCCESS);
        assert_eq!(room[..16], sockaddr_in);
    }

    #[test]
    fn peer_data_before_and_after_the_peer_spoke() {
        let mut peer = PeerData::default();
        let mut buffer = [0u8; 8];
        assert_eq!(
            peer.fill_private_data(&mut buffer),
            Err(NdStatus::ND_CONNECTION_INVALID)
        );
        assert_eq!(peer.read_limits(ADAPTER), Err(NdStatus::ND_CONNECTION_INVALID));

        // A REJ: 148 bytes on the wire, whatever the peer passed to Reject.
        let mut rej = [0u8; MAX_REJECT_DATA];
        rej[..3].copy_from_slice(b"no!");
        peer.record_private_data(&rej);
        peer.record_read_limits(PeerReadLimits::from_event_param(4, 2));
        let fill = peer.fill_private_data(&mut buffer).unwrap();
        assert_eq!(fill, filled(NdStatus::ND_BUFFER_OVERFLOW, 148));
        assert_eq!(&buffer[..3], b"no!");
        assert_eq!(peer.read_limits(ADAPTER), Ok(ReadLimits::new(4, 2)));
    }

    #[test]
    fn negotiated_limits_replace_the_peer_offer_in_get_read_limits() {
        // ADAPTER: 16 inbound, 8 outbound. A peer that does not cap itself offers 200 / 100
        // (the event swaps them into our terms: it will issue 200 and serve 100).
        let mut peer = PeerData::default();
        assert_eq!(
            peer.negotiate(ReadLimits::new(4, 2), ADAPTER),
            ReadLimits::new(4, 2),
            "no offer yet: the adapter's cap only"
        );
        let mut peer = PeerData::default();
        peer.record_read_limits(PeerReadLimits::from_event_param(200, 100));
        assert_eq!(peer.read_limits(ADAPTER), Ok(ReadLimits::new(16, 8)));
        // Own request below both: the request.
        assert_eq!(peer.negotiate(ReadLimits::new(4, 2), ADAPTER), ReadLimits::new(4, 2));
        assert_eq!(peer.read_limits(ADAPTER), Ok(ReadLimits::new(4, 2)));
        // Own request above the adapter: the adapter.
        assert_eq!(
            peer.negotiate(ReadLimits::new(1000, 1000), ADAPTER),
            ReadLimits::new(16, 8)
        );
        // A stingy peer (issues 1, serves 3): the peer's offer, crossed.
        let mut stingy = PeerData::default();
        stingy.record_read_limits(PeerReadLimits::from_event_param(1, 3));
        assert_eq!(stingy.negotiate(ReadLimits::new(8, 8), ADAPTER), ReadLimits::new(1, 3));
        assert_eq!(stingy.read_limits(ADAPTER), Ok(ReadLimits::new(1, 3)));
    }
}
