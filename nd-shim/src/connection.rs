//! The connector state machine: every ND2 / NDK connector call and every rdma_cm event, with all
//! transitions in [`step`].
//!
//! Sources: `docs/nd-semantics.md` ("The handshake", "Private data", "Disconnect", the failure table)
//! for the flow and the codes, and the ND2 / NDKPI method references it cites for the codes each
//! call returns (IND2Connector::Connect / CompleteConnect / Accept, NdkReject).
//!
//! The machine is pure. [`step`] says what the call returns, which pending request completes with
//! which code, and which [`Action`]s the rdma_cm event engine must carry out. The engine carries
//! the actions out in order before it lets the call return; when one fails inline it feeds
//! [`ConnectorInput::ActionFailed`] back, and the `returns` of that step replaces the call's.
//!
//! Inline or through the completion (the NDK face: RequestCompletion only after STATUS_PENDING):
//! - inline: every state error (ND_CONNECTION_ACTIVE, ND_CONNECTION_INVALID,
//!   STATUS_ADDRESS_ALREADY_ASSOCIATED, ...), ND_INVALID_BUFFER_SIZE, and failures of the
//!   synchronous part of a call (e.g. `rdma_resolve_addr` failing with ENETUNREACH);
//! - through the completion: everything an rdma_cm event decides (refused, unreachable, timeout,
//!   aborted, device removed) and ND_CANCELED from Cancel or Release.
//!
//! The shim never adds a timeout of its own: only events end Connecting and Accepting.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::cm_event::{CmEvent, CmEventKind, Side};
use crate::connection_data::PrivateDataUse;
use crate::status::{from_cm_event, NdStatus};

/// Where a connector is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectorState {
    /// Created; no address yet.
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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition {
    pub next: ConnectorState,
    /// For a call: what it returns (ND_PENDING when a later `Complete` finishes it).
    /// For an event: `None`.
    pub returns: Option<NdStatus>,
    pub effects: Vec<Effect>,
}

fn returns(next: ConnectorState, status: NdStatus, effects: Vec<Effect>) -> Transition {
    Transition {
        next,
        returns: Some(status),
        effects,
    }
}

fn event(next: ConnectorState, effects: Vec<Effect>) -> Transition {
    Transition {
        next,
        returns: None,
        effects,
    }
}

fn complete(request: Request, status: NdStatus) -> Effect {
    Effect::Complete { request, status }
}

/// Completion of a pending NotifyDisconnect, if there is one.
fn notify(pending: bool, status: NdStatus) -> Option<Effect> {
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

/// What carries out a step's effects: the rdma_cm event engine (`endpoint/connector.rs`), or the fuzz
/// target's fake (`fuzzing`).
pub(crate) trait Engine {
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
pub(crate) fn drive(engine: &mut impl Engine, input: ConnectorInput) -> Option<NdStatus> {
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

/// The fuzz targets' way in (cargo feature `fuzzing`): `drive` with an engine of their own.
/// Not an API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing {
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

#[cfg(test)]
mod tests {
    use super::*;
    use ConnectorInput as I;
    use ConnectorState as S;
    use Effect::Do;
    use NdStatus as St;

    fn ev(kind: CmEventKind, status: i32) -> ConnectorInput {
        I::Event(CmEvent::new(kind, status))
    }

    fn t(next: ConnectorState, returns: Option<NdStatus>, effects: &[Effect]) -> Transition {
        Transition {
            next,
            returns,
            effects: effects.to_vec(),
        }
    }

    /// Runs `inputs` from `state`, checking each step's transition.
    fn walk(mut state: ConnectorState, steps: &[(ConnectorInput, Transition)]) -> ConnectorState {
        for (i, (input, want)) in steps.iter().enumerate() {
            let got = step(state, *input);
            assert_eq!(&got, want, "step {i}: {input:?} in {state:?}");
            state = got.next;
        }
        state
    }

    const CALLS: [ConnectorInput; 10] = [
        I::Bind,
        I::Connect {
            private_data_len: 0,
            qp_in_use: false,
        },
        I::ConnectWithSharedEndpoint {
            private_data_len: 0,
            qp_in_use: false,
        },
        I::CompleteConnect,
        I::Accept {
            private_data_len: 0,
            qp_in_use: false,
        },
        I::Reject { private_data_len: 0 },
        I::Disconnect,
        I::NotifyDisconnect,
        I::Cancel,
        I::Release,
    ];

    /// What every call returns in every state. Columns in the order of `CALLS`.
    #[test]
    fn call_return_matrix() {
        const OK: St = St::ND_SUCCESS;
        const PEND: St = St::ND_PENDING;
        const ASSOC: St = St::STATUS_ADDRESS_ALREADY_ASSOCIATED;
        const ACT: St = St::ND_CONNECTION_ACTIVE;
        const INV: St = St::ND_CONNECTION_INVALID;
        const REQ: St = St::ND_INVALID_DEVICE_REQUEST;
        const ABRT: St = St::ND_CONNECTION_ABORTED;
        const GONE: St = St::ND_DEVICE_REMOVED;
        const HNDL: St = St::ND_INVALID_HANDLE;
        const SHARE: St = St::ND_SHARING_VIOLATION;
        const CANC: St = St::ND_CANCELED;
        let matrix: &[(ConnectorState, [St; 10])] = &[
            (S::Idle, [OK, PEND, PEND, INV, INV, INV, INV, INV, OK, OK]),
            (S::Bound, [ASSOC, PEND, ASSOC, INV, INV, INV, INV, INV, OK, OK]),
            (S::Connecting, [ASSOC, ACT, ACT, INV, INV, INV, INV, INV, OK, OK]),
            (
                S::AwaitingCompleteConnect,
                [ASSOC, ACT, ACT, OK, INV, OK, INV, INV, OK, OK],
            ),
            (S::RequestReceived, [ASSOC, ACT, ACT, INV, PEND, OK, INV, INV, OK, OK]),
            (S::Accepting, [ASSOC, ACT, ACT, INV, ACT, INV, INV, INV, OK, OK]),
            (
                S::Connected { notify_pending: false },
                [ASSOC, ACT, ACT, INV, ACT, INV, PEND, PEND, OK, OK],
            ),
            (
                S::Connected { notify_pending: true },
                [ASSOC, ACT, ACT, INV, ACT, INV, PEND, REQ, OK, OK],
            ),
            (S::PeerDisconnected, [ASSOC, ACT, ACT, INV, ACT, INV, OK, OK, OK, OK]),
            (
                S::Disconnecting { notify_pending: false },
                [ASSOC, ACT, ACT, INV, ACT, INV, INV, PEND, OK, OK],
            ),
            (
                S::Disconnecting { notify_pending: true },
                [ASSOC, ACT, ACT, INV, ACT, INV, INV, REQ, OK, OK],
            ),
            (S::Disconnected, [ASSOC, INV, INV, INV, INV, INV, INV, OK, OK, OK]),
            (S::Rejected, [ASSOC, INV, INV, INV, INV, INV, INV, INV, OK, OK]),
            // No reuse after failure: only Accept / Reject / CompleteConnect report the code.
            (S::Failed(ABRT), [INV, INV, INV, ABRT, ABRT, ABRT, INV, INV, OK, OK]),
            (
                S::Failed(St::ND_SHARING_VIOLATION),
                [INV, INV, INV, INV, SHARE, SHARE, INV, INV, OK, OK],
            ),
            // A cancelled Connect or Accept: Connect again is ND_CONNECTION_ACTIVE (Windows).
            (
                S::Failed(St::ND_CANCELED),
                [INV, ACT, ACT, INV, CANC, CANC, INV, INV, OK, OK],
            ),
            // "The connection attempt may be retried": Connect again, from the same address.
            (
                S::ConnectFailed(St::ND_CONNECTION_REFUSED),
                [ASSOC, PEND, PEND, INV, INV, INV, INV, INV, OK, OK],
            ),
            (
                S::Failed(GONE),
                [GONE, GONE, GONE, GONE, GONE, GONE, GONE, GONE, OK, OK],
            ),
            (S::Closed, [HNDL; 10]),
        ];
        for (state, row) in matrix {
            for (call, want) in CALLS.iter().zip(row) {
                let got = step(*state, *call);
                assert_eq!(got.returns, Some(*want), "{call:?} in {state:?}");
                if !want.is_success() {
                    // A refused call changes nothing.
                    assert_eq!((got.next, got.effects.len()), (*state, 0), "{call:?} in {state:?}");
                }
            }
        }
    }

    #[test]
    fn active_handshake() {
        let end = walk(
            S::Idle,
            &[
                (I::Bind, t(S::Bound, Some(St::ND_SUCCESS), &[Do(Action::BindAddress)])),
                (
                    I::Connect {
                        private_data_len: 56,
                        qp_in_use: false,
                    },
                    t(S::Connecting, Some(St::ND_PENDING), &[Do(Action::StartConnect)]),
                ),
                (
                    ev(CmEventKind::AddrResolved, 0),
                    t(S::Connecting, None, &[Do(Action::ResolveRoute)]),
                ),
                (
                    ev(CmEventKind::RouteResolved, 0),
                    t(S::Connecting, None, &[Do(Action::SendRequest)]),
                ),
                (
                    ev(CmEventKind::ConnectResponse, 0),
                    t(
                        S::AwaitingCompleteConnect,
                        None,
                        &[Effect::Complete {
                            request: Request::Connect,
                            status: St::ND_SUCCESS,
                        }],
                    ),
                ),
                (
                    I::CompleteConnect,
                    t(
                        S::Connected { notify_pending: false },
                        Some(St::ND_SUCCESS),
                        &[Do(Action::Establish)],
                    ),
                ),
            ],
        );
        assert_eq!(end, S::Connected { notify_pending: false });
    }

    #[test]
    fn passive_handshake() {
        walk(
            S::Idle,
            &[
                (ev(CmEventKind::ConnectRequest, 0), t(S::RequestReceived, None, &[])),
                (
                    I::Accept {
                        private_data_len: 196,
                        qp_in_use: false,
                    },
                    t(S::Accepting, Some(St::ND_PENDING), &[Do(Action::AcceptRequest)]),
                ),
                (
                    ev(CmEventKind::Established, 0),
                    t(
                        S::Connected { notify_pending: false },
                        None,
                        &[Effect::Complete {
                            request: Request::Accept,
                            status: St::ND_SUCCESS,
                        }],
                    ),
                ),
            ],
        );
    }

    #[test]
    fn ndk_connect_without_bind_and_shared_endpoint_connect() {
        for call in [
            I::Connect {
                private_data_len: 0,
                qp_in_use: false,
            },
            I::ConnectWithSharedEndpoint {
                private_data_len: 0,
                qp_in_use: false,
            },
        ] {
            assert_eq!(
                step(S::Idle, call),
                t(S::Connecting, Some(St::ND_PENDING), &[Do(Action::StartConnect)])
            );
        }
    }

    /// NdkConnect is one step: Bind and Connect from Idle, Connect past it; its checks come
    /// before anything is touched, and a failed bind does not start the connect.
    #[test]
    fn ndk_connect_binds_and_connects_in_one_step() {
        let call = |private_data_len, qp_in_use| I::BindAndConnect {
            private_data_len,
            qp_in_use,
        };
        assert_eq!(
            step(S::Idle, call(56, false)),
            t(
                S::Connecting,
                Some(St::ND_PENDING),
                &[Do(Action::BindAddress), Do(Action::StartConnect)]
            )
        );
        for state in [S::Idle, S::Bound, S::Connected { notify_pending: false }] {
            assert_eq!(
                step(state, call(57, false)),
                t(state, Some(St::ND_INVALID_BUFFER_SIZE), &[])
            );
            assert_eq!(
                step(state, call(0, true)),
                t(state, Some(St::ND_CONNECTION_ACTIVE), &[])
            );
        }
        let states = [
            S::Bound,
            S::Connecting,
            S::AwaitingCompleteConnect,
            S::RequestReceived,
            S::Accepting,
            S::Connected { notify_pending: true },
            S::PeerDisconnected,
            S::Disconnecting { notify_pending: false },
            S::Disconnected,
            S::Rejected,
            S::ConnectFailed(St::ND_IO_TIMEOUT),
            S::Failed(St::ND_CONNECTION_REFUSED),
            S::Failed(St::ND_DEVICE_REMOVED),
            S::Closed,
        ];
        for state in states {
            assert_eq!(
                step(state, call(3, false)),
                step(
                    state,
                    I::Connect {
                        private_data_len: 3,
                        qp_in_use: false,
                    }
                ),
                "{state:?}"
            );
        }
        let failed = I::ActionFailed {
            action: Action::BindAddress,
            status: St::ND_SHARING_VIOLATION,
        };
        assert_eq!(
            step(S::Connecting, failed),
            t(S::Failed(St::ND_SHARING_VIOLATION), Some(St::ND_SHARING_VIOLATION), &[])
        );
    }

    #[test]
    fn private_data_over_the_limit_is_refused_and_the_connector_stays_usable() {
        let rows = [
            (
                S::Bound,
                I::Connect {
                    private_data_len: 57,
                    qp_in_use: false,
                },
                I::Connect {
                    private_data_len: 56,
                    qp_in_use: false,
                },
            ),
            (
                S::Idle,
                I::ConnectWithSharedEndpoint {
                    private_data_len: 57,
                    qp_in_use: false,
                },
                I::ConnectWithSharedEndpoint {
                    private_data_len: 56,
                    qp_in_use: false,
                },
            ),
            (
                S::RequestReceived,
                I::Accept {
                    private_data_len: 197,
                    qp_in_use: false,
                },
                I::Accept {
                    private_data_len: 196,
                    qp_in_use: false,
                },
            ),
            (
                S::RequestReceived,
                I::Reject { private_data_len: 149 },
                I::Reject { private_data_len: 148 },
            ),
            (
                S::AwaitingCompleteConnect,
                I::Reject { private_data_len: 149 },
                I::Reject { private_data_len: 148 },
            ),
        ];
        for (state, over, exact) in rows {
            assert_eq!(
                step(state, over),
                t(state, Some(St::ND_INVALID_BUFFER_SIZE), &[]),
                "{over:?}"
            );
            assert!(step(state, exact).returns.unwrap().is_success(), "{exact:?}");
        }
    }

    /// docs/nd-semantics.md's failure table, through the machine: Connect completes with the code.
    #[test]
    fn connect_failures_complete_the_pending_connect() {
        use CmEventKind as K;
        // The last column: where the connector is left. The documentation lets the caller retry
        // after refused, unreachable and timeout ("the connection attempt may be retried").
        let rows = [
            (
                K::Rejected,
                8,
                St::ND_CONNECTION_REFUSED,
                S::ConnectFailed(St::ND_CONNECTION_REFUSED),
            ),
            (
                K::Rejected,
                28,
                St::ND_CONNECTION_REFUSED,
                S::ConnectFailed(St::ND_CONNECTION_REFUSED),
            ),
            (
                K::AddrError,
                -libc::ETIMEDOUT,
                St::ND_HOST_UNREACHABLE,
                S::ConnectFailed(St::ND_HOST_UNREACHABLE),
            ),
            (
                K::AddrError,
                -libc::ENETUNREACH,
                St::ND_NETWORK_UNREACHABLE,
                S::ConnectFailed(St::ND_NETWORK_UNREACHABLE),
            ),
            (
                K::RouteError,
                -libc::ETIMEDOUT,
                St::ND_NETWORK_UNREACHABLE,
                S::ConnectFailed(St::ND_NETWORK_UNREACHABLE),
            ),
            (
                K::Unreachable,
                -libc::ETIMEDOUT,
                St::ND_IO_TIMEOUT,
                S::ConnectFailed(St::ND_IO_TIMEOUT),
            ),
            (
                K::ConnectError,
                -libc::EINVAL,
                St::ND_CONNECTION_ABORTED,
                S::Failed(St::ND_CONNECTION_ABORTED),
            ),
            (
                K::DeviceRemoval,
                0,
                St::ND_DEVICE_REMOVED,
                S::Failed(St::ND_DEVICE_REMOVED),
            ),
        ];
        for (kind, status, code, left_in) in rows {
            assert_eq!(
                step(S::Connecting, ev(kind, status)),
                t(
                    left_in,
                    None,
                    &[Effect::Complete {
                        request: Request::Connect,
                        status: code
                    }]
                ),
                "{kind:?} {status}"
            );
        }
    }

    #[test]
    fn accept_fails_refused_or_aborted_as_the_active_side_decides() {
        use CmEventKind as K;
        let rows = [
            // Active side rejected or released after its Connect completed.
            (ev(K::Rejected, 28), St::ND_CONNECTION_REFUSED),
            // Active side abandoned in REQ_SENT.
            (ev(K::Rejected, 4), St::ND_CONNECTION_ABORTED),
            (ev(K::Unreachable, -libc::ETIMEDOUT), St::ND_IO_TIMEOUT),
            (ev(K::DeviceRemoval, 0), St::ND_DEVICE_REMOVED),
        ];
        for (input, code) in rows {
            assert_eq!(
                step(S::Accepting, input),
                t(
                    S::Failed(code),
                    None,
                    &[Effect::Complete {
                        request: Request::Accept,
                        status: code
                    }]
                ),
                "{input:?}"
            );
        }
        assert_eq!(
            step(S::Accepting, ev(K::Disconnected, 0)),
            t(
                S::Failed(St::ND_CONNECTION_ABORTED),
                None,
                &[
                    Effect::Complete {
                        request: Request::Accept,
                        status: St::ND_CONNECTION_ABORTED
                    },
                    Do(Action::FlushQp)
                ],
            )
        );
    }

    #[test]
    fn peer_abandons_before_accept_then_accept_and_reject_report_it() {
        let state = walk(
            S::RequestReceived,
            &[(
                ev(CmEventKind::Rejected, 4),
                t(S::Failed(St::ND_CONNECTION_ABORTED), None, &[]),
            )],
        );
        assert_eq!(
            step(
                state,
                I::Accept {
                    private_data_len: 0,
                    qp_in_use: false
                }
            )
            .returns,
            Some(St::ND_CONNECTION_ABORTED)
        );
        assert_eq!(
            step(state, I::Reject { private_data_len: 0 }).returns,
            Some(St::ND_CONNECTION_ABORTED)
        );
    }

    #[test]
    fn active_reject_after_rep_and_passive_going_away_after_rep() {
        assert_eq!(
            step(S::AwaitingCompleteConnect, I::Reject { private_data_len: 10 }),
            t(S::Rejected, Some(St::ND_SUCCESS), &[Do(Action::RejectPeer)])
        );
        let failed = step(S::AwaitingCompleteConnect, ev(CmEventKind::Rejected, 28));
        assert_eq!(failed, t(S::Failed(St::ND_CONNECTION_ABORTED), None, &[]));
        assert_eq!(
            step(failed.next, I::CompleteConnect).returns,
            Some(St::ND_CONNECTION_ABORTED)
        );
        let removed = step(S::AwaitingCompleteConnect, ev(CmEventKind::DeviceRemoval, 0));
        assert_eq!(removed.next, S::Failed(St::ND_DEVICE_REMOVED));
        assert_eq!(
            step(removed.next, I::CompleteConnect).returns,
            Some(St::ND_DEVICE_REMOVED)
        );
    }

    #[test]
    fn peer_disconnect_flushes_the_qp_and_completes_notify() {
        let state = walk(
            S::Connected { notify_pending: false },
            &[
                (
                    I::NotifyDisconnect,
                    t(S::Connected { notify_pending: true }, Some(St::ND_PENDING), &[]),
                ),
                (
                    ev(CmEventKind::Disconnected, 0),
                    t(
                        S::PeerDisconnected,
                        None,
                        &[
                            Do(Action::FlushQpLater),
                            Effect::PeerDisconnected,
                            Effect::Complete {
                                request: Request::NotifyDisconnect,
                                status: St::ND_SUCCESS,
                            },
                        ],
                    ),
                ),
                (
                    I::Disconnect,
                    t(
                        S::Disconnected,
                        Some(St::ND_SUCCESS),
                        &[Do(Action::SendDisconnect), Do(Action::FlushQp)],
                    ),
                ),
            ],
        );
        assert_eq!(state, S::Disconnected);
        // Without a pending NotifyDisconnect only the NDK DisconnectEvent fires.
        assert_eq!(
            step(S::Connected { notify_pending: false }, ev(CmEventKind::Disconnected, 0)),
            t(
                S::PeerDisconnected,
                None,
                &[Do(Action::FlushQpLater), Effect::PeerDisconnected]
            )
        );
    }

    #[test]
    fn local_disconnect_flushes_the_qp_and_completes_on_disconnected() {
        walk(
            S::Connected { notify_pending: true },
            &[
                (
                    I::Disconnect,
                    t(
                        S::Disconnecting { notify_pending: true },
                        Some(St::ND_PENDING),
                        &[Do(Action::SendDisconnect), Do(Action::FlushQpLater)],
                    ),
                ),
                (
                    ev(CmEventKind::Disconnected, 0),
                    t(
                        S::Disconnected,
                        None,
                        &[
                            Do(Action::FlushQp),
                            Effect::Complete {
                                request: Request::Disconnect,
                                status: St::ND_SUCCESS,
                            },
                            Effect::Complete {
                                request: Request::NotifyDisconnect,
                                status: St::ND_SUCCESS,
                            },
                        ],
                    ),
                ),
                (ev(CmEventKind::TimewaitExit, 0), t(S::Disconnected, None, &[])),
            ],
        );
    }

    #[test]
    fn cancel() {
        let canceled = |request| Effect::Complete {
            request,
            status: St::ND_CANCELED,
        };
        assert_eq!(
            step(S::Connecting, I::Cancel),
            t(
                S::Failed(St::ND_CANCELED),
                Some(St::ND_SUCCESS),
                &[canceled(Request::Connect), Do(Action::DestroyId)],
            )
        );
        assert_eq!(
            step(S::Accepting, I::Cancel),
            t(
                S::Failed(St::ND_CANCELED),
                Some(St::ND_SUCCESS),
                &[canceled(Request::Accept), Do(Action::DestroyId)],
            )
        );
        assert_eq!(
            step(S::Connected { notify_pending: true }, I::Cancel),
            t(
                S::Connected { notify_pending: false },
                Some(St::ND_SUCCESS),
                &[canceled(Request::NotifyDisconnect)]
            )
        );
        assert_eq!(
            step(S::Disconnecting { notify_pending: true }, I::Cancel),
            t(
                S::Disconnecting { notify_pending: false },
                Some(St::ND_SUCCESS),
                &[canceled(Request::NotifyDisconnect)],
            )
        );
        // A cancelled connector reports ND_CANCELED to Accept and Reject from then on, and
        // ND_CONNECTION_ACTIVE to Connect (as Windows providers answer), changing nothing.
        for connect in [
            I::Connect {
                private_data_len: 0,
                qp_in_use: false,
            },
            I::BindAndConnect {
                private_data_len: 0,
                qp_in_use: false,
            },
        ] {
            assert_eq!(
                step(S::Failed(St::ND_CANCELED), connect),
                t(S::Failed(St::ND_CANCELED), Some(St::ND_CONNECTION_ACTIVE), &[])
            );
        }
        assert_eq!(
            step(
                S::Failed(St::ND_CANCELED),
                I::Accept {
                    private_data_len: 0,
                    qp_in_use: false
                }
            )
            .returns,
            Some(St::ND_CANCELED)
        );
        // A late REP for an abandoned attempt changes nothing.
        assert_eq!(
            step(S::Failed(St::ND_CANCELED), ev(CmEventKind::ConnectResponse, 0)),
            t(S::Failed(St::ND_CANCELED), None, &[])
        );
    }

    #[test]
    fn release_cancels_pending_requests_and_disconnects_implicitly() {
        let canceled = |request| Effect::Complete {
            request,
            status: St::ND_CANCELED,
        };
        let destroy = Do(Action::DestroyId);
        let rows: &[(ConnectorState, &[Effect])] = &[
            (S::Idle, &[destroy]),
            (S::Bound, &[destroy]),
            (S::Connecting, &[canceled(Request::Connect), destroy]),
            (S::AwaitingCompleteConnect, &[destroy]),
            (S::RequestReceived, &[destroy]),
            (S::Accepting, &[canceled(Request::Accept), destroy]),
            (
                S::Connected { notify_pending: false },
                &[Do(Action::SendDisconnect), Do(Action::FlushQp), destroy],
            ),
            (
                S::Connected { notify_pending: true },
                &[
                    canceled(Request::NotifyDisconnect),
                    Do(Action::SendDisconnect),
                    Do(Action::FlushQp),
                    destroy,
                ],
            ),
            (
                S::PeerDisconnected,
                &[Do(Action::SendDisconnect), Do(Action::FlushQp), destroy],
            ),
            (
                S::Disconnecting { notify_pending: false },
                &[canceled(Request::Disconnect), Do(Action::FlushQp), destroy],
            ),
            (
                S::Disconnecting { notify_pending: true },
                &[
                    canceled(Request::Disconnect),
                    canceled(Request::NotifyDisconnect),
                    Do(Action::FlushQp),
                    destroy,
                ],
            ),
            (S::Disconnected, &[destroy]),
            (S::Rejected, &[destroy]),
            (S::Failed(St::ND_CONNECTION_REFUSED), &[destroy]),
        ];
        for (state, effects) in rows {
            assert_eq!(
                step(*state, I::Release),
                t(S::Closed, Some(St::ND_SUCCESS), effects),
                "{state:?}"
            );
        }
        assert_eq!(
            step(S::Closed, ev(CmEventKind::Disconnected, 0)),
            t(S::Closed, None, &[])
        );
    }

    #[test]
    fn device_removal_while_connected_or_idle() {
        assert_eq!(
            step(S::Connected { notify_pending: true }, ev(CmEventKind::DeviceRemoval, 0)),
            t(
                S::Failed(St::ND_DEVICE_REMOVED),
                None,
                &[
                    Effect::Complete {
                        request: Request::NotifyDisconnect,
                        status: St::ND_DEVICE_REMOVED
                    },
                    Do(Action::FlushQp)
                ],
            )
        );
        assert_eq!(
            step(
                S::Disconnecting { notify_pending: false },
                ev(CmEventKind::DeviceRemoval, 0)
            ),
            t(
                S::Failed(St::ND_DEVICE_REMOVED),
                None,
                &[Effect::Complete {
                    request: Request::Disconnect,
                    status: St::ND_DEVICE_REMOVED
                }],
            )
        );
        assert_eq!(
            step(S::PeerDisconnected, ev(CmEventKind::DeviceRemoval, 0)),
            t(S::Failed(St::ND_DEVICE_REMOVED), None, &[Do(Action::FlushQp)])
        );
        for state in [
            S::Idle,
            S::Bound,
            S::Disconnected,
            S::Rejected,
            S::ConnectFailed(St::ND_IO_TIMEOUT),
        ] {
            assert_eq!(
                step(state, ev(CmEventKind::DeviceRemoval, 0)),
                t(S::Failed(St::ND_DEVICE_REMOVED), None, &[]),
                "{state:?}"
            );
        }
    }

    #[test]
    fn inline_action_failures() {
        let fail = |action, status| I::ActionFailed { action, status };
        let rows = [
            // Bind: the kernel says EADDRINUSE after the shim's table said yes.
            (
                S::Bound,
                fail(Action::BindAddress, St::ND_SHARING_VIOLATION),
                t(S::Failed(St::ND_SHARING_VIOLATION), Some(St::ND_SHARING_VIOLATION), &[]),
            ),
            // Connect to the unspecified address (Microsoft's ndmemorytest NdInvalidIP).
            (
                S::Connecting,
                fail(Action::StartConnect, St::STATUS_BAD_NETWORK_NAME),
                t(
                    S::Failed(St::STATUS_BAD_NETWORK_NAME),
                    Some(St::STATUS_BAD_NETWORK_NAME),
                    &[],
                ),
            ),
            // docs/nd-semantics.md: no route makes rdma_resolve_addr fail inline with ENETUNREACH.
            (
                S::Connecting,
                fail(Action::StartConnect, St::ND_NETWORK_UNREACHABLE),
                t(
                    S::ConnectFailed(St::ND_NETWORK_UNREACHABLE),
                    Some(St::ND_NETWORK_UNREACHABLE),
                    &[],
                ),
            ),
            (
                S::Connecting,
                fail(Action::ResolveRoute, St::ND_NO_MEMORY),
                t(
                    S::Failed(St::ND_NO_MEMORY),
                    None,
                    &[Effect::Complete {
                        request: Request::Connect,
                        status: St::ND_NO_MEMORY,
                    }],
                ),
            ),
            (
                S::Connecting,
                fail(Action::SendRequest, St::ND_INVALID_PARAMETER),
                t(
                    S::Failed(St::ND_INVALID_PARAMETER),
                    None,
                    &[Effect::Complete {
                        request: Request::Connect,
                        status: St::ND_INVALID_PARAMETER,
                    }],
                ),
            ),
            (
                S::Accepting,
                fail(Action::AcceptRequest, St::ND_INVALID_PARAMETER),
                t(S::Failed(St::ND_INVALID_PARAMETER), Some(St::ND_INVALID_PARAMETER), &[]),
            ),
            (
                S::Connected { notify_pending: false },
                fail(Action::Establish, St::ND_INVALID_PARAMETER),
                t(
                    S::Failed(St::ND_INVALID_PARAMETER),
                    Some(St::ND_INVALID_PARAMETER),
                    &[Do(Action::FlushQp)],
                ),
            ),
            (
                S::Rejected,
                fail(Action::RejectPeer, St::ND_INVALID_PARAMETER),
                t(S::Failed(St::ND_INVALID_PARAMETER), Some(St::ND_INVALID_PARAMETER), &[]),
            ),
            // Nothing to report for a failed teardown step.
            (
                S::Closed,
                fail(Action::DestroyId, St::ND_INVALID_PARAMETER),
                t(S::Closed, None, &[]),
            ),
        ];
        for (state, input, want) in rows {
            assert_eq!(step(state, input), want, "{input:?} in {state:?}");
        }
    }

    #[test]
    fn events_that_do_not_belong_to_the_state_change_nothing() {
        use CmEventKind as K;
        let rows = [
            (S::Idle, K::ConnectResponse),
            (S::Bound, K::Established),
            (S::Connecting, K::Established),
            (S::Connecting, K::Disconnected),
            (S::Connected { notify_pending: false }, K::Established),
            (S::Connected { notify_pending: false }, K::AddrChange),
            (S::RequestReceived, K::ConnectRequest),
            (S::Disconnected, K::Disconnected),
        ];
        for (state, kind) in rows {
            assert_eq!(step(state, ev(kind, 0)), t(state, None, &[]), "{kind:?} in {state:?}");
        }
    }

    #[test]
    fn a_queue_pair_in_use_elsewhere_is_connection_active_and_untouched() {
        let connect = I::Connect {
            private_data_len: 0,
            qp_in_use: true,
        };
        let shared = I::ConnectWithSharedEndpoint {
            private_data_len: 0,
            qp_in_use: true,
        };
        let accept = I::Accept {
            private_data_len: 0,
            qp_in_use: true,
        };
        let rows = [
            (S::Idle, connect),
            (S::Bound, connect),
            (S::Idle, shared),
            (S::ConnectFailed(St::ND_CONNECTION_REFUSED), connect),
            (S::RequestReceived, accept),
        ];
        for (state, input) in rows {
            // No action at all: nothing reaches the queue pair or the other connection.
            assert_eq!(
                step(state, input),
                t(state, Some(St::ND_CONNECTION_ACTIVE), &[]),
                "{input:?} in {state:?}"
            );
        }
        // The QP check comes before the private data check.
        assert_eq!(
            step(
                S::Idle,
                I::Connect {
                    private_data_len: 57,
                    qp_in_use: true
                }
            )
            .returns,
            Some(St::ND_CONNECTION_ACTIVE)
        );
    }

    #[test]
    fn a_refused_call_with_a_second_qp_gives_that_qp_back() {
        let connect = I::Connect {
            private_data_len: 0,
            qp_in_use: false,
        };
        let accept = I::Accept {
            private_data_len: 0,
            qp_in_use: false,
        };
        let (qp0, qp1) = (QpClaim::default(), QpClaim::default());
        // Connector 1 is connected over qp0.
        assert!(qp0.claim(1));
        let connected = S::Connected { notify_pending: false };
        // Connect, then Accept, again on connector 1 with qp1: the claims succeed, the machine
        // refuses, and qp1 goes back (kept, qp1 stayed claimed for good and every other
        // connector's Connect or Accept on it was ND_CONNECTION_ACTIVE; fuzz/
        // nd_connector_states checks the claims against its model).
        for call in [connect, accept] {
            assert!(qp1.claim(1));
            assert_eq!(step(connected, call).returns, Some(St::ND_CONNECTION_ACTIVE));
            settle_claim(&qp1, 1, connected, false);
            assert_eq!(qp1.holder(), 0, "{call:?}");
        }
        assert!(qp1.claim(2));
        qp1.release(2);
        // Its own QP again: the claim stays with the connection.
        assert!(qp0.claim(1));
        settle_claim(&qp0, 1, connected, true);
        assert_eq!(qp0.holder(), 1);
        assert!(!qp0.claim(2));
        // A refused first Connect (private data over the limit) gives its QP back.
        assert!(qp1.claim(3));
        settle_claim(&qp1, 3, S::Idle, true);
        assert_eq!(qp1.holder(), 0);
    }

    #[test]
    fn retry_after_a_retryable_failure_and_never_after_others() {
        for code in [
            St::ND_CONNECTION_REFUSED,
            St::ND_HOST_UNREACHABLE,
            St::ND_NETWORK_UNREACHABLE,
            St::ND_IO_TIMEOUT,
        ] {
            assert!(connect_may_be_retried(code), "{code}");
            assert_eq!(
                step(
                    S::ConnectFailed(code),
                    I::Connect {
                        private_data_len: 0,
                        qp_in_use: false
                    }
                ),
                t(
                    S::Connecting,
                    Some(St::ND_PENDING),
                    &[Do(Action::DestroyId), Do(Action::StartConnect)]
                ),
                "{code}"
            );
        }
        for code in [
            St::ND_SHARING_VIOLATION,
            St::ND_TOO_MANY_ADDRESSES,
            St::ND_INVALID_ADDRESS,
            St::ND_ADDRESS_ALREADY_EXISTS,
            St::ND_CONNECTION_ABORTED,
            St::ND_CANCELED,
        ] {
            assert!(!connect_may_be_retried(code), "{code}");
            let failed = step(
                S::Connecting,
                I::ActionFailed {
                    action: Action::StartConnect,
                    status: code,
                },
            );
            assert_eq!(failed, t(S::Failed(code), Some(code), &[]), "{code}");
            for call in [
                I::Bind,
                I::Connect {
                    private_data_len: 0,
                    qp_in_use: false,
                },
                I::ConnectWithSharedEndpoint {
                    private_data_len: 0,
                    qp_in_use: false,
                },
            ] {
                // Connect after one that ended ND_CANCELED: ND_CONNECTION_ACTIVE (Windows).
                let want = match (code, call) {
                    (St::ND_CANCELED, I::Connect { .. } | I::ConnectWithSharedEndpoint { .. }) => {
                        St::ND_CONNECTION_ACTIVE
                    }
                    _ => St::ND_CONNECTION_INVALID,
                };
                assert_eq!(
                    step(failed.next, call),
                    t(failed.next, Some(want), &[]),
                    "{call:?} after {code}"
                );
            }
        }
    }

    #[test]
    fn a_rej_or_error_after_complete_connect_is_a_disconnect() {
        use CmEventKind as K;
        for kind in [K::Disconnected, K::Rejected, K::ConnectError, K::Unreachable] {
            assert_eq!(
                step(S::Connected { notify_pending: true }, ev(kind, 28)),
                t(
                    S::PeerDisconnected,
                    None,
                    &[
                        Do(Action::FlushQpLater),
                        Effect::PeerDisconnected,
                        Effect::Complete {
                            request: Request::NotifyDisconnect,
                            status: St::ND_SUCCESS
                        }
                    ]
                ),
                "{kind:?}"
            );
            // Exactly once: a second end of the same connection changes nothing.
            assert_eq!(
                step(S::PeerDisconnected, ev(kind, 0)),
                t(S::PeerDisconnected, None, &[]),
                "{kind:?} twice"
            );
        }
    }

    #[test]
    fn a_refused_rdma_disconnect_ends_the_disconnect_inline() {
        // Found by fuzz/ nd_connector_states: the Disconnect stayed pending until Release.
        for notify_pending in [false, true] {
            let fail = I::ActionFailed {
                action: Action::SendDisconnect,
                status: St::ND_INVALID_PARAMETER,
            };
            let mut want = vec![Do(Action::FlushQp)];
            want.extend(notify(notify_pending, St::ND_SUCCESS));
            assert_eq!(
                step(S::Disconnecting { notify_pending }, fail),
                t(S::Disconnected, Some(St::ND_INVALID_PARAMETER), &want),
                "notify_pending {notify_pending}"
            );
        }
        // Driven: the call returns the code, the QP flushed, the grace's flush dropped.
        struct FailingDisconnect {
            state: S,
            acted: Vec<Action>,
        }
        impl super::Engine for FailingDisconnect {
            fn state(&mut self) -> &mut S {
                &mut self.state
            }
            fn act(&mut self, action: Action) -> Result<(), St> {
                self.acted.push(action);
                match action {
                    Action::SendDisconnect => Err(St::ND_INVALID_PARAMETER),
                    _ => Ok(()),
                }
            }
            fn complete(&mut self, request: Request, status: St) {
                panic!("nothing is pending, yet {request:?} completed with {status}");
            }
            fn peer_disconnected(&mut self) {}
        }
        let mut engine = FailingDisconnect {
            state: S::Connected { notify_pending: false },
            acted: vec![],
        };
        assert_eq!(super::drive(&mut engine, I::Disconnect), Some(St::ND_INVALID_PARAMETER));
        assert_eq!(engine.state, S::Disconnected);
        assert_eq!(engine.acted, [Action::SendDisconnect, Action::FlushQp]);
    }

    #[test]
    fn a_rej_crossing_our_dreq_completes_the_disconnect() {
        use CmEventKind as K;
        for kind in [K::Rejected, K::ConnectError, K::Unreachable] {
            let end = walk(
                S::Connected { notify_pending: false },
                &[
                    (
                        I::Disconnect,
                        t(
                            S::Disconnecting { notify_pending: false },
                            Some(St::ND_PENDING),
                            &[Do(Action::SendDisconnect), Do(Action::FlushQpLater)],
                        ),
                    ),
                    (
                        ev(kind, 28),
                        t(
                            S::Disconnected,
                            None,
                            &[
                                Do(Action::FlushQp),
                                Effect::Complete {
                                    request: Request::Disconnect,
                                    status: St::ND_SUCCESS,
                                },
                            ],
                        ),
                    ),
                    // The DREP or DISCONNECTED that may still come completes nothing twice.
                    (ev(K::Disconnected, 0), t(S::Disconnected, None, &[])),
                ],
            );
            assert_eq!(end, S::Disconnected, "{kind:?}");
        }
    }

    #[test]
    fn address_getters_by_state() {
        let rows = [
            (S::Idle, false, false),
            (S::Bound, true, false),
            (S::Connecting, true, false),
            (S::AwaitingCompleteConnect, true, false),
            (S::RequestReceived, true, true),
            (S::Accepting, true, true),
            (S::Connected { notify_pending: false }, true, true),
            (S::PeerDisconnected, true, true),
            (S::Disconnecting { notify_pending: false }, false, false),
            (S::Disconnected, false, false),
            (S::Rejected, false, false),
            (S::ConnectFailed(St::ND_CONNECTION_REFUSED), false, false),
            (S::Failed(St::ND_CONNECTION_ABORTED), false, false),
            (S::Closed, false, false),
        ];
        for (state, local, peer) in rows {
            assert_eq!(
                (state.has_local_address(), state.has_peer_address()),
                (local, peer),
                "{state:?}"
            );
        }
    }
}
