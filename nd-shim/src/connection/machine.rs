//! The connector state machine's states, inputs and actions, and [`step`]: every transition.

#![forbid(unsafe_code)]

use crate::cm_event::{CmEvent, CmEventKind, Side};
use crate::connection_data::PrivateDataUse;
use crate::status::{from_cm_event, NdStatus};
use crate::transition::{event, returns};

/// Where a connector is in its life.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConnectorState {
    /// Created; no address yet.
    #[default]
    Idle,
    /// ND2 Bind done: holds its local address (shared with other connectors that used Bind;
    /// see `ports`).
    Bound,
    /// Active: Connect pending through address and route resolution and REQ, until REP.
    Connecting,
    /// Active: REP received and Connect completed; the application inspects read limits and
    /// private data, then calls CompleteConnect (RTU) or Reject.
    AwaitingCompleteConnect,
    /// Passive: handed a CONNECT_REQUEST by a listener; Accept or Reject next.
    RequestReceived,
    /// Passive: Accept pending (REP sent) until ESTABLISHED (RTU).
    Accepting,
    /// Established. `notify_pending`: an ND2 NotifyDisconnect is waiting.
    Connected { notify_pending: bool },
    /// The peer disconnected (DISCONNECTED while connected); the QP goes to error (flushed)
    /// after a short grace ([`Action::FlushQpLater`]) or at the application's Disconnect or
    /// Release, which sends the DREP.
    PeerDisconnected,
    /// Local Disconnect pending until DISCONNECTED (DREP or DREQ timeout); the QP goes to error
    /// after a short grace ([`Action::FlushQpLater`]), at the latest when the Disconnect completes.
    Disconnecting { notify_pending: bool },
    /// Both directions done.
    Disconnected,
    /// This side sent a REJ (passive Reject, or active Reject after REP).
    Rejected,
    /// Connect failed with a code after which the documentation lets the same connector try
    /// again ("the connection attempt may be retried": refused, host or network unreachable, I/O
    /// timeout). Connect and ConnectWithSharedEndpoint start over from the same local address.
    ConnectFailed(NdStatus),
    /// The attempt or the connection ended with this code, for good: "errors do not allow the
    /// connector to be used to retry the connection attempt". Accept, Reject and CompleteConnect
    /// report the code; the other connection calls ND_CONNECTION_INVALID.
    Failed(NdStatus),
    /// Released. No call is valid any more.
    Closed,
}

/// A call on the connector, or an event for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectorInput {
    Bind,
    /// `qp_in_use`: the queue pair is connected or connecting through another connector.
    Connect {
        private_data_len: usize,
        qp_in_use: bool,
    },
    ConnectWithSharedEndpoint {
        private_data_len: usize,
        qp_in_use: bool,
    },
    /// NdkConnect: ND2's Bind (to the caller's source address) and Connect in one step. Past
    /// Idle the connector has its address and this is Connect.
    BindAndConnect {
        private_data_len: usize,
        qp_in_use: bool,
    },
    CompleteConnect,
    Accept {
        private_data_len: usize,
        qp_in_use: bool,
    },
    Reject {
        private_data_len: usize,
    },
    Disconnect,
    NotifyDisconnect,
    /// IND2Overlapped::CancelOverlappedRequests.
    Cancel,
    /// The last reference went away (IUnknown::Release, NdkCloseConnector).
    Release,
    Event(CmEvent),
    /// An action of the previous step failed inline; `status` is already mapped from errno.
    ActionFailed {
        action: Action,
        status: NdStatus,
    },
}

/// Work for the rdma_cm event engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// `rdma_bind_addr` to the reserved address.
    BindAddress,
    /// Bind if not yet bound (REUSEADDR for a shared endpoint), then `rdma_resolve_addr`.
    StartConnect,
    /// `rdma_resolve_route`.
    ResolveRoute,
    /// `rdma_connect`: the REQ, with the caller's private data and capped read limits.
    SendRequest,
    /// QP to RTR, then `rdma_accept`: the REP.
    AcceptRequest,
    /// QP to RTR and RTS, then `rdma_establish`: the RTU.
    Establish,
    /// `rdma_reject`: the REJ, with the caller's private data.
    RejectPeer,
    /// `rdma_disconnect`: DREQ, or DREP when the peer disconnected first.
    SendDisconnect,
    /// QP to ERR: every outstanding request completes with ND_CANCELED. `rdma_disconnect` only
    /// does this for QPs rdma_cm created, and ours are not.
    FlushQp,
    /// FlushQp after a short grace, unless something flushes first: for a disconnect (ours or
    /// the peer's), so that what is already on the wire (the ACK of a message a side received)
    /// is not dropped by the error state. `verbs::QpInner::flush_later` says why.
    FlushQpLater,
    /// `rdma_destroy_id` if the id still exists (idempotent). Mid-handshake it sends the REJ
    /// that tells the peer: reason 4 in REQ_SENT, 28 in REP_RCVD / REQ_RCVD. Before a retried
    /// Connect it clears the failed attempt's id; the local address stays held.
    DestroyId,
}

/// A call that returned ND_PENDING and completes later.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    Connect,
    Accept,
    Disconnect,
    NotifyDisconnect,
}

/// One consequence of a step, in the order the engine must apply them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    Do(Action),
    Complete {
        request: Request,
        status: NdStatus,
    },
    /// The peer disconnected: the NDK face calls its DisconnectEvent callback.
    PeerDisconnected,
}

/// The result of one [`step`].
pub type Transition = crate::transition::Transition<ConnectorState, Effect>;

pub(super) fn complete(request: Request, status: NdStatus) -> Effect {
    Effect::Complete { request, status }
}

/// Completion of a pending NotifyDisconnect, if there is one.
pub(super) fn notify(pending: bool, status: NdStatus) -> Option<Effect> {
    pending.then_some(complete(Request::NotifyDisconnect, status))
}

/// Codes after which IND2Connector::Connect and NdkConnect say "the connection attempt may be
/// retried".
pub fn connect_may_be_retried(code: NdStatus) -> bool {
    matches!(
        code,
        NdStatus::ND_CONNECTION_REFUSED
            | NdStatus::ND_HOST_UNREACHABLE
            | NdStatus::ND_NETWORK_UNREACHABLE
            | NdStatus::ND_IO_TIMEOUT
    )
}

/// Where a failed Connect leaves the connector.
fn connect_failed(code: NdStatus) -> ConnectorState {
    if connect_may_be_retried(code) {
        ConnectorState::ConnectFailed(code)
    } else {
        ConnectorState::Failed(code)
    }
}

impl ConnectorState {
    /// A connection in progress or up: its queue pair belongs to this connector, and a new
    /// connection cannot start on it.
    pub fn engaged(self) -> bool {
        use ConnectorState as S;
        matches!(
            self,
            S::Connecting
                | S::AwaitingCompleteConnect
                | S::RequestReceived
                | S::Accepting
                | S::Connected { .. }
                | S::PeerDisconnected
                | S::Disconnecting { .. }
        )
    }

    /// IND2Connector::GetLocalAddress: "the connector must be connected or in the process of
    /// connecting"; Windows providers also answer after Bind, before Connect, with the bound
    /// address, and programs read the port Bind picked that way.
    pub fn has_local_address(self) -> bool {
        use ConnectorState as S;
        matches!(
            self,
            S::Bound
                | S::Connecting
                | S::AwaitingCompleteConnect
                | S::RequestReceived
                | S::Accepting
                | S::Connected { .. }
                | S::PeerDisconnected
        )
    }

    /// IND2Connector::GetPeerAddress: "the queue pair must be connected": from CompleteConnect
    /// (active) or Accept's completion (passive) until the application disconnects. The passive
    /// side also answers from GetConnectionRequest on (the address the request carries):
    /// Microsoft's ndmpic reads it before Accept to decide which of two crossing connections
    /// wins, and Windows providers answer it there.
    pub fn has_peer_address(self) -> bool {
        matches!(
            self,
            ConnectorState::RequestReceived
                | ConnectorState::Accepting
                | ConnectorState::Connected { .. }
                | ConnectorState::PeerDisconnected
        )
    }
}

/// Every transition of a connector.
pub fn step(state: ConnectorState, input: ConnectorInput) -> Transition {
    use ConnectorInput as I;
    use ConnectorState as S;
    use Effect::Do;
    use NdStatus as St;

    let is_call = !matches!(input, I::Event(_) | I::ActionFailed { .. });
    let unchanged = |status| returns(state, status, vec![]);

    // Rules that hold whatever the call.
    if is_call {
        match state {
            S::Closed => return unchanged(St::ND_INVALID_HANDLE),
            S::Failed(St::ND_DEVICE_REMOVED) if !matches!(input, I::Cancel | I::Release) => {
                return unchanged(St::ND_DEVICE_REMOVED)
            }
            _ => {}
        }
    }

    // A connection in progress or up: a new one cannot start on this connector.
    let engaged = state.engaged();

    match input {
        I::Bind => match state {
            S::Idle => returns(S::Bound, St::ND_SUCCESS, vec![Do(Action::BindAddress)]),
            // IND2Connector::Bind: errors do not allow the connector to be used again.
            S::Failed(_) => unchanged(St::ND_CONNECTION_INVALID),
            // docs/nd-semantics.md "Ports": binding a bound or connected connector again.
            _ => unchanged(St::STATUS_ADDRESS_ALREADY_ASSOCIATED),
        },

        I::Connect {
            private_data_len,
            qp_in_use,
        }
        | I::ConnectWithSharedEndpoint {
            private_data_len,
            qp_in_use,
        } => {
            let shared = matches!(input, I::ConnectWithSharedEndpoint { .. });
            match state {
                // A shared endpoint brings its own address; this connector already has one.
                S::Bound if shared => unchanged(St::STATUS_ADDRESS_ALREADY_ASSOCIATED),
                // IND2Connector::Connect: "this queue pair is already connected to another
                // peer". Refused before anything touches the queue pair.
                S::Idle | S::Bound | S::ConnectFailed(_) if qp_in_use => unchanged(St::ND_CONNECTION_ACTIVE),
                S::Idle | S::Bound => match PrivateDataUse::Connect.check(private_data_len) {
                    Err(code) => unchanged(code),
                    Ok(()) => returns(S::Connecting, St::ND_PENDING, vec![Do(Action::StartConnect)]),
                },
                // "The connection attempt may be retried": a fresh id from the same address.
                S::ConnectFailed(_) => match PrivateDataUse::Connect.check(private_data_len) {
                    Err(code) => unchanged(code),
                    Ok(()) => returns(
                        S::Connecting,
                        St::ND_PENDING,
                        vec![Do(Action::DestroyId), Do(Action::StartConnect)],
                    ),
                },
                // docs/nd-semantics.md failure table: a connect on a QP that already has a connection.
                _ if engaged => unchanged(St::ND_CONNECTION_ACTIVE),
                // After a cancelled Connect (or Accept): ND_CONNECTION_ACTIVE, from Connect's
                // documented codes, as programs written for Windows providers expect
                // (ND_CONNECTION_INVALID is not among them).
                S::Failed(St::ND_CANCELED) => unchanged(St::ND_CONNECTION_ACTIVE),
                _ => unchanged(St::ND_CONNECTION_INVALID),
            }
        }

        I::BindAndConnect {
            private_data_len,
            qp_in_use,
        } => match PrivateDataUse::Connect.check(private_data_len) {
            // NdkConnect: private data over the limit is refused before anything else, so the
            // connector is untouched and usable.
            Err(code) => unchanged(code),
            Ok(()) if state == S::Idle && !qp_in_use => returns(
                S::Connecting,
                St::ND_PENDING,
                vec![Do(Action::BindAddress), Do(Action::StartConnect)],
            ),
            Ok(()) if state == S::Idle => unchanged(St::ND_CONNECTION_ACTIVE),
            Ok(()) => step(
                state,
                I::Connect {
                    private_data_len,
                    qp_in_use,
                },
            ),
        },

        I::CompleteConnect => match state {
            S::AwaitingCompleteConnect => returns(
                S::Connected { notify_pending: false },
                St::ND_SUCCESS,
                vec![Do(Action::Establish)],
            ),
            // NdkCompleteConnect: the passive side abandoned after its REP (its REJ failed the
            // attempt with ND_CONNECTION_ABORTED).
            S::Failed(St::ND_CONNECTION_ABORTED) => unchanged(St::ND_CONNECTION_ABORTED),
            // IND2Connector::CompleteConnect: "the endpoint is not connected".
            _ => unchanged(St::ND_CONNECTION_INVALID),
        },

        I::Accept {
            private_data_len,
            qp_in_use,
        } => match state {
            // IND2Connector::Accept: "the specified queue pair is already connected".
            S::RequestReceived if qp_in_use => unchanged(St::ND_CONNECTION_ACTIVE),
            S::RequestReceived => match PrivateDataUse::Accept.check(private_data_len) {
                Err(code) => unchanged(code),
                Ok(()) => returns(S::Accepting, St::ND_PENDING, vec![Do(Action::AcceptRequest)]),
            },
            // The peer already gave up: ND_CONNECTION_ABORTED / ND_CONNECTION_REFUSED.
            S::Failed(code) => unchanged(code),
            S::Accepting | S::Connected { .. } | S::PeerDisconnected | S::Disconnecting { .. } => {
                unchanged(St::ND_CONNECTION_ACTIVE)
            }
            _ => unchanged(St::ND_CONNECTION_INVALID),
        },

        I::Reject { private_data_len } => match state {
            S::RequestReceived | S::AwaitingCompleteConnect => match PrivateDataUse::Reject.check(private_data_len) {
                Err(code) => unchanged(code),
                Ok(()) => returns(S::Rejected, St::ND_SUCCESS, vec![Do(Action::RejectPeer)]),
            },
            // NdkReject: STATUS_CONNECTION_ABORTED when the peer abandoned first.
            S::Failed(code) => unchanged(code),
            _ => unchanged(St::ND_CONNECTION_INVALID),
        },

        I::Disconnect => match state {
            S::Connected { notify_pending } => returns(
                S::Disconnecting { notify_pending },
                St::ND_PENDING,
                vec![Do(Action::SendDisconnect), Do(Action::FlushQpLater)],
            ),
            S::PeerDisconnected => returns(
                S::Disconnected,
                St::ND_SUCCESS,
                vec![Do(Action::SendDisconnect), Do(Action::FlushQp)],
            ),
            _ => unchanged(St::ND_CONNECTION_INVALID),
        },

        I::NotifyDisconnect => match state {
            S::Connected { notify_pending: false } => {
                returns(S::Connected { notify_pending: true }, St::ND_PENDING, vec![])
            }
            S::Disconnecting { notify_pending: false } => {
                returns(S::Disconnecting { notify_pending: true }, St::ND_PENDING, vec![])
            }
            // One NotifyDisconnect at a time.
            S::Connected { notify_pending: true } | S::Disconnecting { notify_pending: true } => {
                unchanged(St::ND_INVALID_DEVICE_REQUEST)
            }
            // It already happened.
            S::PeerDisconnected | S::Disconnected => unchanged(St::ND_SUCCESS),
            _ => unchanged(St::ND_CONNECTION_INVALID),
        },

        // docs/nd-semantics.md "Disconnect": cancel abandons a pending Connect and completes
        // NotifyDisconnect with ND_CANCELED. A pending Accept is abandoned the same way.
        I::Cancel => match state {
            S::Connecting => returns(
                S::Failed(St::ND_CANCELED),
                St::ND_SUCCESS,
                vec![complete(Request::Connect, St::ND_CANCELED), Do(Action::DestroyId)],
            ),
            S::Accepting => returns(
                S::Failed(St::ND_CANCELED),
                St::ND_SUCCESS,
                vec![complete(Request::Accept, St::ND_CANCELED), Do(Action::DestroyId)],
            ),
            S::Connected { notify_pending: true } => returns(
                S::Connected { notify_pending: false },
                St::ND_SUCCESS,
                vec![complete(Request::NotifyDisconnect, St::ND_CANCELED)],
            ),
            S::Disconnecting { notify_pending: true } => returns(
                S::Disconnecting { notify_pending: false },
                St::ND_SUCCESS,
                vec![complete(Request::NotifyDisconnect, St::ND_CANCELED)],
            ),
            _ => unchanged(St::ND_SUCCESS),
        },

        // Release completes whatever is pending with ND_CANCELED, and a connected connector
        // disconnects implicitly (docs/nd-semantics.md "Disconnect").
        I::Release => {
            let mut effects = match state {
                S::Connecting => vec![complete(Request::Connect, St::ND_CANCELED)],
                S::Accepting => vec![complete(Request::Accept, St::ND_CANCELED)],
                S::Connected { notify_pending } => notify(notify_pending, St::ND_CANCELED)
                    .into_iter()
                    .chain([Do(Action::SendDisconnect), Do(Action::FlushQp)])
                    .collect(),
                S::PeerDisconnected => vec![Do(Action::SendDisconnect), Do(Action::FlushQp)],
                S::Disconnecting { notify_pending } => std::iter::once(complete(Request::Disconnect, St::ND_CANCELED))
                    .chain(notify(notify_pending, St::ND_CANCELED))
                    .chain([Do(Action::FlushQp)])
                    .collect(),
                _ => vec![],
            };
            effects.push(Do(Action::DestroyId));
            returns(S::Closed, St::ND_SUCCESS, effects)
        }

        I::Event(ev) => on_event(state, ev),

        I::ActionFailed { action, status } => match (state, action) {
            // "Errors do not allow the connector to be used to retry".
            (S::Bound, Action::BindAddress) => returns(S::Failed(status), status, vec![]),
            // NdkConnect's bind: the same, and Connect does not start.
            (S::Connecting, Action::BindAddress) => returns(S::Failed(status), status, vec![]),
            // The synchronous part of Connect failed: Connect returns the code inline.
            (S::Connecting, Action::StartConnect) => returns(connect_failed(status), status, vec![]),
            // Steps driven by events: the pending Connect completes with the code.
            (S::Connecting, Action::ResolveRoute | Action::SendRequest) => {
                event(connect_failed(status), vec![complete(Request::Connect, status)])
            }
            (S::Accepting, Action::AcceptRequest) => returns(S::Failed(status), status, vec![]),
            (S::Connected { .. }, Action::Establish) => returns(S::Failed(status), status, vec![Do(Action::FlushQp)]),
            (S::Rejected, Action::RejectPeer) => returns(S::Failed(status), status, vec![]),
            // rdma_disconnect refused: no DREP or DREQ timeout will end the Disconnect, so it
            // returns the code instead of pending. The connection is over here all the same: the
            // QP to error now, a pending NotifyDisconnect completes; the peer learns when the id
            // is destroyed (the IB CM sends its DREQ then), at Release.
            (S::Disconnecting { notify_pending }, Action::SendDisconnect) => returns(
                S::Disconnected,
                status,
                std::iter::once(Do(Action::FlushQp))
                    .chain(notify(notify_pending, St::ND_SUCCESS))
                    .collect(),
            ),
            // A Disconnect after the peer's, Release's disconnect, flush and destroy leave
            // nothing for the application to act on.
            _ => event(state, vec![]),
        },
    }
}

fn on_event(state: ConnectorState, ev: CmEvent) -> Transition {
    use CmEventKind as K;
    use ConnectorState as S;
    use Effect::Do;
    use NdStatus as St;

    let active = |ev: CmEvent| from_cm_event(Side::Active, ev.kind, ev.status);
    let passive = |ev: CmEvent| from_cm_event(Side::Passive, ev.kind, ev.status);
    let unchanged = event(state, vec![]);

    match (state, ev.kind) {
        // Late events after release, and events that change nothing for ND.
        (S::Closed, _) | (_, K::TimewaitExit | K::AddrChange) => unchanged,

        // The listener hands this connector a request (GetConnectionRequest completes).
        (S::Idle, K::ConnectRequest) => event(S::RequestReceived, vec![]),

        (S::Connecting, K::AddrResolved) => event(state, vec![Do(Action::ResolveRoute)]),
        (S::Connecting, K::RouteResolved) => event(state, vec![Do(Action::SendRequest)]),
        // REP: Connect completes; the RTU waits for CompleteConnect (docs/nd-semantics.md).
        (S::Connecting, K::ConnectResponse) => event(
            S::AwaitingCompleteConnect,
            vec![complete(Request::Connect, St::ND_SUCCESS)],
        ),
        // The failure table: REJECTED, ADDR_ERROR, ROUTE_ERROR, UNREACHABLE, ...
        (S::Connecting, kind) if kind.is_failure() => {
            let code = active(ev);
            event(connect_failed(code), vec![complete(Request::Connect, code)])
        }

        // The passive side went away after its REP: nothing is pending; CompleteConnect will
        // find the connector failed, Reject reports the abort.
        (S::AwaitingCompleteConnect, K::DeviceRemoval) => event(S::Failed(St::ND_DEVICE_REMOVED), vec![]),
        (S::AwaitingCompleteConnect, kind) if kind.is_failure() => event(S::Failed(St::ND_CONNECTION_ABORTED), vec![]),

        // The active side abandoned before we answered: Accept and Reject will report it.
        (S::RequestReceived, kind) if kind.is_failure() => event(S::Failed(passive(ev)), vec![]),

        // RTU (or the first data, through rdma_notify): Accept completes.
        (S::Accepting, K::Established) => event(
            S::Connected { notify_pending: false },
            vec![complete(Request::Accept, St::ND_SUCCESS)],
        ),
        // REJECTED 28: the active side rejected or released after its Connect completed;
        // REJECTED 4: it abandoned earlier (docs/nd-semantics.md "The handshake").
        (S::Accepting, kind) if kind.is_failure() => {
            let code = passive(ev);
            event(S::Failed(code), vec![complete(Request::Accept, code)])
        }
        // A DREQ before we saw the RTU: the connecting peer is gone again.
        (S::Accepting, K::Disconnected) => event(
            S::Failed(St::ND_CONNECTION_ABORTED),
            vec![
                complete(Request::Accept, St::ND_CONNECTION_ABORTED),
                Do(Action::FlushQp),
            ],
        ),

        // docs/nd-semantics.md "Disconnect": DISCONNECTED moves the QP to ERR, so outstanding
        // requests complete with ND_CANCELED once the disconnect is seen (Windows providers do;
        // Microsoft's ndmemorytest NdReceiveConnClosed), and completes NotifyDisconnect. A REJ
        // (the passive side gave up before our RTU reached it) or any other end of the
        // connection after CompleteConnect succeeded is a disconnect too, never dropped.
        // The move waits a short grace: an ACK that arrived with or just before the DREQ still
        // completes our Send (Microsoft's ndconn; IND2Connector::NotifyDisconnect: a disconnect
        // received does not cancel outstanding requests).
        (S::Connected { notify_pending }, K::Disconnected | K::Rejected | K::ConnectError | K::Unreachable) => event(
            S::PeerDisconnected,
            [Do(Action::FlushQpLater), Effect::PeerDisconnected]
                .into_iter()
                .chain(notify(notify_pending, St::ND_SUCCESS))
                .collect(),
        ),
        (S::Connected { notify_pending }, K::DeviceRemoval) => event(
            S::Failed(St::ND_DEVICE_REMOVED),
            notify(notify_pending, St::ND_DEVICE_REMOVED)
                .into_iter()
                .chain([Do(Action::FlushQp)])
                .collect(),
        ),

        // DREP, or the DREQ timed out: our Disconnect completes. A REJ that crosses our DREQ
        // (the passive side gave up before our RTU reached it, and its REJ was still on the
        // way when we disconnected) ends the connection too: the IB CM cancels the DREQ and
        // enters timewait, so no DREP or DREQ timeout follows and only this completes it.
        // The QP is in ERR before the Disconnect completes (if the grace has not run out yet):
        // IND2Connector::Disconnect flushes.
        (S::Disconnecting { notify_pending }, K::Disconnected | K::Rejected | K::ConnectError | K::Unreachable) => {
            event(
                S::Disconnected,
                [Do(Action::FlushQp), complete(Request::Disconnect, St::ND_SUCCESS)]
                    .into_iter()
                    .chain(notify(notify_pending, St::ND_SUCCESS))
                    .collect(),
            )
        }
        (S::Disconnecting { notify_pending }, K::DeviceRemoval) => event(
            S::Failed(St::ND_DEVICE_REMOVED),
            std::iter::once(complete(Request::Disconnect, St::ND_DEVICE_REMOVED))
                .chain(notify(notify_pending, St::ND_DEVICE_REMOVED))
                .collect(),
        ),
        (S::PeerDisconnected, K::DeviceRemoval) => event(S::Failed(St::ND_DEVICE_REMOVED), vec![Do(Action::FlushQp)]),

        (S::Idle | S::Bound | S::Disconnected | S::Rejected | S::ConnectFailed(_), K::DeviceRemoval) => {
            event(S::Failed(St::ND_DEVICE_REMOVED), vec![])
        }

        // Anything else is not for this state (a duplicate, or a race with a call that already
        // moved the connector on); the engine logs it.
        _ => unchanged,
    }
}
