//! nd-shim's connector and listener state machines (`nd-shim/src/connection/`,
//! `nd-shim/src/listen.rs`), run exactly as the library runs them: each input goes through the
//! machine's `step` and the engine's loop over its effects (`connection::fuzzing::drive`,
//! `listen::fuzzing::drive`: the library's own `drive`), with a fake engine in place of rdma_cm
//! that can make any action fail inline.
//!
//! The input is a program of calls and events on three connectors, two queue pairs and one
//! listener: Bind, Connect, ConnectWithSharedEndpoint, NdkConnect (Bind and Connect in one step),
//! CompleteConnect, Accept, Reject, Disconnect, NotifyDisconnect, GetLocalAddress /
//! GetPeerAddress, CancelOverlappedRequests and Release on a connector; Bind, Listen,
//! GetConnectionRequest, cancel and Release on the listener; the rdma_cm events a connector's id
//! can receive (ADDR_RESOLVED ... ESTABLISHED, REJECTED, UNREACHABLE, DISCONNECTED,
//! TIMEWAIT_EXIT, DEVICE_REMOVAL, with IB CM reasons and errnos), incoming requests, abandoned
//! queued requests, and the listener's DEVICE_REMOVAL. Each step is checked against a model
//! written here from the rules (`docs/nd-semantics.md` "The connector state machine", "The
//! handshake", "Disconnect", "Failures seen on the active side"; `docs/nd-conformance.md`; the
//! IND2Connector / IND2Listener documents): what the call returns, the state it leaves, which
//! pending request completes with which code, and what the engine is told to do (REQ, REP, RTU,
//! REJ, DREQ, QP flush, id destruction), in order. Invariants checked besides the model: every
//! pending request completes exactly once (never a completion for a request not pending, never a
//! second ND_PENDING for a request still pending), nothing pending survives Release and nothing
//! happens on a released object, a queue pair is never engaged by two connectors at once and its
//! claim (`connection::fuzzing::Claim`, taken and settled as Connect and Accept do) says "in use"
//! exactly when the model does, no GetConnectionRequest completes twice, and one that succeeds
//! leaves its connector holding the request.
#![no_main]

use std::collections::VecDeque;

use libfuzzer_sys::fuzz_target;
use nd_shim::cm_event::{CmEvent, CmEventKind as K};
use nd_shim::connection::{fuzzing as conn, Action, ConnectorInput as I, ConnectorState as S, Request};
use nd_shim::listen::{fuzzing as lis, ListenerAction as LA, ListenerInput as LI, ListenerState as LS};
use nd_shim::NdStatus as St;
use rxe_rs_fuzz::Input;

const CONNECTORS: usize = 3;
const QPS: usize = 2;

/// What a step did, in order: an action for rdma_cm or the QP, a pending request completing, the
/// NDK DisconnectEvent callback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Out {
    Act(Action),
    Done(Request, St),
    PeerGone,
}

const ACTIONS: [Action; 11] = [
    Action::BindAddress,
    Action::StartConnect,
    Action::ResolveRoute,
    Action::SendRequest,
    Action::AcceptRequest,
    Action::Establish,
    Action::RejectPeer,
    Action::SendDisconnect,
    Action::FlushQp,
    Action::FlushQpLater,
    Action::DestroyId,
];

/// Codes an action can fail with inline (errno already mapped).
const FAILURES: [St; 11] = [
    St::ND_SHARING_VIOLATION,
    St::ND_NETWORK_UNREACHABLE,
    St::ND_HOST_UNREACHABLE,
    St::ND_CONNECTION_REFUSED,
    St::ND_IO_TIMEOUT,
    St::ND_INVALID_ADDRESS,
    St::ND_TOO_MANY_ADDRESSES,
    St::ND_CONNECTION_ABORTED,
    St::ND_NO_MEMORY,
    St::ND_INVALID_PARAMETER,
    St::STATUS_BAD_NETWORK_NAME,
];

/// The first action of this kind fails with this code (one per step, like a real failure).
type Fail = Option<(Action, St)>;

fn fail_spec(inp: &mut Input) -> Fail {
    let b = inp.u8();
    if b & 0x80 == 0 {
        return None;
    }
    Some((
        ACTIONS[usize::from(b & 0x7f) % ACTIONS.len()],
        FAILURES[usize::from(inp.u8()) % FAILURES.len()],
    ))
}

// ---------------------------------------------------------------------------------------------
// The fake engines.

struct ConnEngine<'a> {
    state: &'a mut S,
    fail: Fail,
    trace: Vec<Out>,
    prepared: bool,
}

impl conn::Engine for ConnEngine<'_> {
    fn state(&mut self) -> &mut S {
        self.state
    }
    fn prepare(&mut self) {
        // Again for an ActionFailed step with effects; the engine stores a call's arguments once.
        self.prepared = true;
    }
    fn act(&mut self, action: Action) -> Result<(), St> {
        act(&mut self.trace, &mut self.fail, action)
    }
    fn complete(&mut self, request: Request, status: St) {
        self.trace.push(Out::Done(request, status));
    }
    fn peer_disconnected(&mut self) {
        self.trace.push(Out::PeerGone);
    }
}

/// What the listener's step did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LOut {
    Act(LA),
    /// The Get of this connector completed.
    GetDone(usize, St),
}

// ---------------------------------------------------------------------------------------------
// The model, from the rules.

/// A connector's state as `docs/nd-semantics.md` ("The connector state machine") names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum M {
    Idle,
    Bound,
    Connecting,
    AwaitingCompleteConnect,
    RequestReceived,
    Accepting,
    Connected,
    PeerDisconnected,
    Disconnecting,
    Disconnected,
    Rejected,
    /// "The connection attempt may be retried".
    Retryable(St),
    /// No reuse after failure.
    Failed(St),
    Closed,
}

impl M {
    /// The connector's connection (in progress or up) holds its queue pair.
    fn holds_qp(self) -> bool {
        matches!(
            self,
            M::Connecting
                | M::AwaitingCompleteConnect
                | M::Accepting
                | M::Connected
                | M::PeerDisconnected
                | M::Disconnecting
        )
    }

    /// A connection in progress or up (a request taken counts).
    fn engaged(self) -> bool {
        self.holds_qp() || self == M::RequestReceived
    }
}

/// The same state in the library's terms (with NotifyDisconnect pending or not).
fn lib_state(m: M, notify: bool) -> S {
    match m {
        M::Idle => S::Idle,
        M::Bound => S::Bound,
        M::Connecting => S::Connecting,
        M::AwaitingCompleteConnect => S::AwaitingCompleteConnect,
        M::RequestReceived => S::RequestReceived,
        M::Accepting => S::Accepting,
        M::Connected => S::Connected { notify_pending: notify },
        M::PeerDisconnected => S::PeerDisconnected,
        M::Disconnecting => S::Disconnecting { notify_pending: notify },
        M::Disconnected => S::Disconnected,
        M::Rejected => S::Rejected,
        M::Retryable(c) => S::ConnectFailed(c),
        M::Failed(c) => S::Failed(c),
        M::Closed => S::Closed,
    }
}

/// IND2Connector::Connect, NdkConnect: codes after which "the connection attempt may be retried".
fn after_failed_connect(code: St) -> M {
    if [
        St::ND_CONNECTION_REFUSED,
        St::ND_HOST_UNREACHABLE,
        St::ND_NETWORK_UNREACHABLE,
        St::ND_IO_TIMEOUT,
    ]
    .contains(&code)
    {
        M::Retryable(code)
    } else {
        M::Failed(code)
    }
}

/// `docs/nd-semantics.md` "Failures seen on the active side" and "The handshake" (the passive
/// side: REJECTED 28 is a refusal, any other reason the peer aborting).
fn event_code(passive: bool, kind: K, status: i32) -> St {
    match kind {
        K::Rejected if passive && status == 28 => St::ND_CONNECTION_REFUSED,
        K::Rejected if passive => St::ND_CONNECTION_ABORTED,
        K::Rejected => St::ND_CONNECTION_REFUSED,
        K::AddrError if status == -libc::ENETUNREACH => St::ND_NETWORK_UNREACHABLE,
        K::AddrError => St::ND_HOST_UNREACHABLE,
        K::RouteError => St::ND_NETWORK_UNREACHABLE,
        K::Unreachable => St::ND_IO_TIMEOUT,
        K::ConnectError => St::ND_CONNECTION_ABORTED,
        K::DeviceRemoval => St::ND_DEVICE_REMOVED,
        _ => unreachable!("{kind:?} is no failure"),
    }
}

fn ends_attempt(kind: K) -> bool {
    matches!(
        kind,
        K::AddrError | K::RouteError | K::ConnectError | K::Unreachable | K::Rejected | K::DeviceRemoval
    )
}

/// The model's view of one connector.
#[derive(Clone, Copy, Debug)]
struct Model {
    m: M,
    /// NotifyDisconnect pending.
    notify: bool,
    /// The queue pair its connection uses.
    qp: Option<usize>,
}

/// The model's prediction for one step.
struct Want {
    returns: Option<St>,
    next: Model,
    trace: Vec<Out>,
}

/// `action` recorded in `trace`; it fails, once, when `fail` names it.
fn act(trace: &mut Vec<Out>, fail: &mut Fail, action: Action) -> Result<(), St> {
    trace.push(Out::Act(action));
    match *fail {
        Some((a, code)) if a == action => {
            *fail = None;
            Err(code)
        }
        _ => Ok(()),
    }
}

/// Actions as the model expects them, failing as the fake engine will.
struct Acts {
    fail: Fail,
    trace: Vec<Out>,
}

impl Acts {
    fn act(&mut self, action: Action) -> Result<(), St> {
        act(&mut self.trace, &mut self.fail, action)
    }
    /// An action whose failure changes nothing for the application (teardown steps).
    fn quiet(&mut self, action: Action) {
        let _ = self.act(action);
    }
    fn done(&mut self, request: Request, status: St) {
        self.trace.push(Out::Done(request, status));
    }
    /// A call's `action`: taken, the connector goes to `then` and the call returns `status`;
    /// failed, the connector is failed with the code, which the call returns.
    fn then(&mut self, next: &mut Model, action: Action, then: M, status: St) -> St {
        match self.act(action) {
            Ok(()) => {
                next.m = then;
                status
            }
            Err(code) => {
                next.m = M::Failed(code);
                code
            }
        }
    }
}

/// A call on a connector, as the model sees it.
#[derive(Clone, Copy, Debug)]
enum Call {
    Bind,
    Connect { pd: usize, qp: usize },
    ConnectShared { pd: usize, qp: usize },
    NdkConnect { pd: usize, qp: usize },
    CompleteConnect,
    Accept { pd: usize, qp: usize },
    Reject { pd: usize },
    Disconnect,
    NotifyDisconnect,
    Cancel,
    Release,
}

const MAX_CALLER_DATA: usize = 56;
const MAX_CALLEE_DATA: usize = 196;
const MAX_REJECT_DATA: usize = 148;

/// What `call` does to a connector in `from`; `qp_busy`: the call's queue pair is engaged by
/// another connector.
fn model_call(from: Model, call: Call, qp_busy: bool, fail: Fail) -> Want {
    use Action as A;
    let mut acts = Acts { fail, trace: vec![] };
    let mut next = from;
    let returns;
    let refuse = |code| Want {
        returns: Some(code),
        next: from,
        trace: vec![],
    };
    // Every call on a released connector: the handle is gone.
    if from.m == M::Closed {
        return refuse(St::ND_INVALID_HANDLE);
    }
    // A removed device: every call but cancel and release reports it.
    if from.m == M::Failed(St::ND_DEVICE_REMOVED) && !matches!(call, Call::Cancel | Call::Release) {
        return refuse(St::ND_DEVICE_REMOVED);
    }
    let m = from.m;
    match call {
        Call::Bind => match m {
            // IND2Connector::Bind: errors do not allow the connector to be used again.
            M::Idle => returns = acts.then(&mut next, A::BindAddress, M::Bound, St::ND_SUCCESS),
            M::Failed(_) => return refuse(St::ND_CONNECTION_INVALID),
            // nd-semantics.md "Ports": binding a bound or connected connector again.
            _ => return refuse(St::STATUS_ADDRESS_ALREADY_ASSOCIATED),
        },
        Call::Connect { pd, qp } | Call::ConnectShared { pd, qp } | Call::NdkConnect { pd, qp } => {
            let shared = matches!(call, Call::ConnectShared { .. });
            let ndk = matches!(call, Call::NdkConnect { .. });
            // NdkConnect: private data over the limit before anything else.
            if ndk && pd > MAX_CALLER_DATA {
                return refuse(St::ND_INVALID_BUFFER_SIZE);
            }
            match m {
                // A shared endpoint brings its own address.
                M::Bound if shared => return refuse(St::STATUS_ADDRESS_ALREADY_ASSOCIATED),
                M::Idle | M::Bound | M::Retryable(_) => {
                    // The QP is connected (or connecting) through another connector; untouched.
                    if qp_busy {
                        return refuse(St::ND_CONNECTION_ACTIVE);
                    }
                    if pd > MAX_CALLER_DATA {
                        return refuse(St::ND_INVALID_BUFFER_SIZE);
                    }
                    next.qp = Some(qp);
                    next.notify = false;
                    let bound = if ndk && m == M::Idle {
                        acts.act(A::BindAddress)
                    } else {
                        Ok(())
                    };
                    if let Err(code) = bound {
                        next.m = M::Failed(code);
                        returns = code;
                    } else {
                        if matches!(m, M::Retryable(_)) {
                            // A fresh id on the same address.
                            acts.quiet(A::DestroyId);
                        }
                        match acts.act(A::StartConnect) {
                            Ok(()) => {
                                next.m = M::Connecting;
                                returns = St::ND_PENDING;
                            }
                            // The synchronous part failed: inline.
                            Err(code) => {
                                next.m = after_failed_connect(code);
                                returns = code;
                            }
                        }
                    }
                }
                // A connection on this connector already.
                _ if m.engaged() => return refuse(St::ND_CONNECTION_ACTIVE),
                // A cancelled attempt: Connect's ND_CONNECTION_ACTIVE, as on Windows providers.
                M::Failed(St::ND_CANCELED) => return refuse(St::ND_CONNECTION_ACTIVE),
                _ => return refuse(St::ND_CONNECTION_INVALID),
            }
        }
        Call::CompleteConnect => match m {
            M::AwaitingCompleteConnect => match acts.act(A::Establish) {
                Ok(()) => {
                    next.m = M::Connected;
                    next.notify = false;
                    returns = St::ND_SUCCESS;
                }
                Err(code) => {
                    acts.quiet(A::FlushQp);
                    next.m = M::Failed(code);
                    returns = code;
                }
            },
            // NdkCompleteConnect: the passive side abandoned after its REP.
            M::Failed(St::ND_CONNECTION_ABORTED) => return refuse(St::ND_CONNECTION_ABORTED),
            // IND2Connector::CompleteConnect: not connecting.
            _ => return refuse(St::ND_CONNECTION_INVALID),
        },
        Call::Accept { pd, qp } => match m {
            M::RequestReceived => {
                if qp_busy {
                    return refuse(St::ND_CONNECTION_ACTIVE);
                }
                if pd > MAX_CALLEE_DATA {
                    return refuse(St::ND_INVALID_BUFFER_SIZE);
                }
                next.qp = Some(qp);
                returns = acts.then(&mut next, A::AcceptRequest, M::Accepting, St::ND_PENDING);
            }
            // The failure's code (the peer gave up first: ND_CONNECTION_ABORTED, ...).
            M::Failed(code) => return refuse(code),
            M::Accepting | M::Connected | M::PeerDisconnected | M::Disconnecting => {
                return refuse(St::ND_CONNECTION_ACTIVE)
            }
            _ => return refuse(St::ND_CONNECTION_INVALID),
        },
        Call::Reject { pd } => match m {
            M::RequestReceived | M::AwaitingCompleteConnect => {
                if pd > MAX_REJECT_DATA {
                    return refuse(St::ND_INVALID_BUFFER_SIZE);
                }
                returns = acts.then(&mut next, A::RejectPeer, M::Rejected, St::ND_SUCCESS);
            }
            M::Failed(code) => return refuse(code),
            _ => return refuse(St::ND_CONNECTION_INVALID),
        },
        Call::Disconnect => match m {
            // DREQ; the QP to error after the grace, at the latest when the DREP comes.
            M::Connected => match acts.act(A::SendDisconnect) {
                Ok(()) => {
                    acts.quiet(A::FlushQpLater);
                    next.m = M::Disconnecting;
                    returns = St::ND_PENDING;
                }
                // rdma_disconnect refused: nothing would end a pending Disconnect, so it returns
                // the code; the connection is over here (the QP to error, NotifyDisconnect done).
                Err(code) => {
                    acts.quiet(A::FlushQp);
                    if from.notify {
                        acts.done(Request::NotifyDisconnect, St::ND_SUCCESS);
                        next.notify = false;
                    }
                    next.m = M::Disconnected;
                    returns = code;
                }
            },
            // The peer went first: our DREP, and the QP to error now.
            M::PeerDisconnected => {
                acts.quiet(A::SendDisconnect);
                acts.quiet(A::FlushQp);
                next.m = M::Disconnected;
                returns = St::ND_SUCCESS;
            }
            _ => return refuse(St::ND_CONNECTION_INVALID),
        },
        Call::NotifyDisconnect => match m {
            M::Connected | M::Disconnecting if from.notify => return refuse(St::ND_INVALID_DEVICE_REQUEST),
            M::Connected | M::Disconnecting => {
                next.notify = true;
                returns = St::ND_PENDING;
            }
            // It already happened.
            M::PeerDisconnected | M::Disconnected => return refuse(St::ND_SUCCESS),
            _ => return refuse(St::ND_CONNECTION_INVALID),
        },
        Call::Cancel => {
            match m {
                // Cancel abandons a pending Connect or Accept: that connector is spent.
                M::Connecting => {
                    acts.done(Request::Connect, St::ND_CANCELED);
                    acts.quiet(A::DestroyId);
                    next.m = M::Failed(St::ND_CANCELED);
                }
                M::Accepting => {
                    acts.done(Request::Accept, St::ND_CANCELED);
                    acts.quiet(A::DestroyId);
                    next.m = M::Failed(St::ND_CANCELED);
                }
                // NotifyDisconnect completes ND_CANCELED; a Disconnect in progress goes on.
                M::Connected | M::Disconnecting if from.notify => {
                    acts.done(Request::NotifyDisconnect, St::ND_CANCELED);
                    next.notify = false;
                }
                _ => {}
            }
            returns = St::ND_SUCCESS;
        }
        Call::Release => {
            // Everything pending completes ND_CANCELED; a connection still up is disconnected.
            match m {
                M::Connecting => acts.done(Request::Connect, St::ND_CANCELED),
                M::Accepting => acts.done(Request::Accept, St::ND_CANCELED),
                M::Connected => {
                    if from.notify {
                        acts.done(Request::NotifyDisconnect, St::ND_CANCELED);
                    }
                    acts.quiet(A::SendDisconnect);
                    acts.quiet(A::FlushQp);
                }
                M::PeerDisconnected => {
                    acts.quiet(A::SendDisconnect);
                    acts.quiet(A::FlushQp);
                }
                M::Disconnecting => {
                    acts.done(Request::Disconnect, St::ND_CANCELED);
                    if from.notify {
                        acts.done(Request::NotifyDisconnect, St::ND_CANCELED);
                    }
                    acts.quiet(A::FlushQp);
                }
                _ => {}
            }
            acts.quiet(A::DestroyId);
            next.m = M::Closed;
            next.notify = false;
            returns = St::ND_SUCCESS;
        }
    }
    Want {
        returns: Some(returns),
        next,
        trace: acts.trace,
    }
}

/// What an rdma_cm event does to a connector in `from`.
fn model_event(from: Model, kind: K, status: i32, fail: Fail) -> Want {
    use Action as A;
    let mut acts = Acts { fail, trace: vec![] };
    let mut next = from;
    let m = from.m;
    let notify_done = |acts: &mut Acts, status| {
        if from.notify {
            acts.done(Request::NotifyDisconnect, status);
        }
    };
    match (m, kind) {
        // Released: nothing. TIMEWAIT_EXIT and ADDR_CHANGE mean nothing to ND.
        (M::Closed, _) | (_, K::TimewaitExit | K::AddrChange) => {}
        (M::Idle, K::ConnectRequest) => next.m = M::RequestReceived,
        // Resolution goes on; a step that fails inline fails the Connect through its completion.
        (M::Connecting, K::AddrResolved | K::RouteResolved) => {
            let action = if kind == K::AddrResolved {
                A::ResolveRoute
            } else {
                A::SendRequest
            };
            if let Err(code) = acts.act(action) {
                acts.done(Request::Connect, code);
                next.m = after_failed_connect(code);
            }
        }
        // REP: Connect completes; the RTU waits for CompleteConnect.
        (M::Connecting, K::ConnectResponse) => {
            acts.done(Request::Connect, St::ND_SUCCESS);
            next.m = M::AwaitingCompleteConnect;
        }
        (M::Connecting, _) if ends_attempt(kind) => {
            let code = event_code(false, kind, status);
            acts.done(Request::Connect, code);
            next.m = after_failed_connect(code);
        }
        // The passive side went away after its REP: CompleteConnect reports the abort.
        (M::AwaitingCompleteConnect, K::DeviceRemoval) => next.m = M::Failed(St::ND_DEVICE_REMOVED),
        (M::AwaitingCompleteConnect, _) if ends_attempt(kind) => next.m = M::Failed(St::ND_CONNECTION_ABORTED),
        // The active side abandoned before the answer: Accept and Reject report it.
        (M::RequestReceived, _) if ends_attempt(kind) => next.m = M::Failed(event_code(true, kind, status)),
        // RTU: Accept completes.
        (M::Accepting, K::Established) => {
            acts.done(Request::Accept, St::ND_SUCCESS);
            next.m = M::Connected;
            next.notify = false;
        }
        (M::Accepting, _) if ends_attempt(kind) => {
            let code = event_code(true, kind, status);
            acts.done(Request::Accept, code);
            next.m = M::Failed(code);
        }
        // A DREQ before the RTU: the connecting peer is gone again.
        (M::Accepting, K::Disconnected) => {
            acts.done(Request::Accept, St::ND_CONNECTION_ABORTED);
            acts.quiet(A::FlushQp);
            next.m = M::Failed(St::ND_CONNECTION_ABORTED);
        }
        // The peer ended the connection (DREQ, or a REJ / error after CompleteConnect):
        // NotifyDisconnect and the DisconnectEvent; the QP to error after the grace.
        (M::Connected, K::Disconnected | K::Rejected | K::ConnectError | K::Unreachable) => {
            acts.quiet(A::FlushQpLater);
            acts.trace.push(Out::PeerGone);
            notify_done(&mut acts, St::ND_SUCCESS);
            next.m = M::PeerDisconnected;
            next.notify = false;
        }
        (M::Connected, K::DeviceRemoval) => {
            notify_done(&mut acts, St::ND_DEVICE_REMOVED);
            acts.quiet(A::FlushQp);
            next.m = M::Failed(St::ND_DEVICE_REMOVED);
            next.notify = false;
        }
        // DREP, DREQ timeout, or a REJ crossing our DREQ: Disconnect completes, the QP is in
        // error before it does.
        (M::Disconnecting, K::Disconnected | K::Rejected | K::ConnectError | K::Unreachable) => {
            acts.quiet(A::FlushQp);
            acts.done(Request::Disconnect, St::ND_SUCCESS);
            notify_done(&mut acts, St::ND_SUCCESS);
            next.m = M::Disconnected;
            next.notify = false;
        }
        (M::Disconnecting, K::DeviceRemoval) => {
            acts.done(Request::Disconnect, St::ND_DEVICE_REMOVED);
            notify_done(&mut acts, St::ND_DEVICE_REMOVED);
            next.m = M::Failed(St::ND_DEVICE_REMOVED);
            next.notify = false;
        }
        (M::PeerDisconnected, K::DeviceRemoval) => {
            acts.quiet(A::FlushQp);
            next.m = M::Failed(St::ND_DEVICE_REMOVED);
        }
        (M::Idle | M::Bound | M::Disconnected | M::Rejected | M::Retryable(_), K::DeviceRemoval) => {
            next.m = M::Failed(St::ND_DEVICE_REMOVED)
        }
        // Anything else belongs to no state here (a duplicate, or late): nothing changes.
        _ => {}
    }
    Want {
        returns: None,
        next,
        trace: acts.trace,
    }
}

/// IND2Connector::GetLocalAddress: once bound (Windows providers), while connecting or
/// connected. GetPeerAddress: while connected, and on the passive side from the request on
/// (Microsoft's ndmpic).
fn model_addresses(m: M) -> (bool, bool) {
    let local = matches!(
        m,
        M::Bound
            | M::Connecting
            | M::AwaitingCompleteConnect
            | M::RequestReceived
            | M::Accepting
            | M::Connected
            | M::PeerDisconnected
    );
    let peer = matches!(
        m,
        M::RequestReceived | M::Accepting | M::Connected | M::PeerDisconnected
    );
    (local, peer)
}

// ---------------------------------------------------------------------------------------------
// The listener's model.

#[derive(Clone, Debug, PartialEq, Eq)]
enum L {
    Idle,
    Bound,
    /// `waiting`: the connectors of pending Gets, oldest first; `queued`: requests no Get took.
    Listening {
        backlog: u32,
        waiting: VecDeque<usize>,
        queued: u32,
    },
    Failed(St),
    Closed,
}

impl L {
    fn lib(&self) -> LS {
        match self {
            L::Idle => LS::Idle,
            L::Bound => LS::Bound,
            L::Listening {
                backlog,
                waiting,
                queued,
            } => LS::Listening {
                backlog: *backlog,
                waiting: waiting.len() as u32,
                queued: *queued,
            },
            L::Failed(c) => LS::Failed(*c),
            L::Closed => LS::Closed,
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum LCall {
    Bind,
    Listen(u32),
    Get(usize),
    Cancel,
    Release,
    /// A CONNECT_REQUEST arrives on the listening id.
    Request,
    /// A queued request's active side is gone (the engine found out).
    Abandoned,
    /// Another event on the listening id.
    Event(K),
}

struct LWant {
    returns: Option<St>,
    next: L,
    trace: Vec<LOut>,
}

/// `moved_on[k]`: connector k can no longer take a request (released: ND_CANCELED; used for a
/// connection of its own: ND_CONNECTION_ACTIVE, GetConnectionRequest's code for such a connector).
fn model_listener(from: &L, call: LCall, fail: Option<(LA, St)>, moved_on: &[Option<St>]) -> LWant {
    let is_call = matches!(
        call,
        LCall::Bind | LCall::Listen(_) | LCall::Get(_) | LCall::Cancel | LCall::Release
    );
    let refuse = |code| LWant {
        returns: Some(code),
        next: from.clone(),
        trace: vec![],
    };
    let quiet = |next: L, trace: Vec<LOut>| LWant {
        returns: None,
        next,
        trace,
    };
    let fails = |action: LA| match fail {
        Some((a, code)) if a == action => Some(code),
        _ => None,
    };
    if is_call {
        match from {
            L::Closed => return refuse(St::ND_INVALID_HANDLE),
            L::Failed(code) if !matches!(call, LCall::Cancel | LCall::Release) => return refuse(*code),
            _ => {}
        }
    }
    let ok = |next: L, trace: Vec<LOut>| LWant {
        returns: Some(St::ND_SUCCESS),
        next,
        trace,
    };
    match (from, call) {
        (L::Idle, LCall::Bind) => match fails(LA::BindAddress) {
            // The kernel refused the address: the listener may bind again.
            Some(code) => LWant {
                returns: Some(code),
                next: L::Idle,
                trace: vec![LOut::Act(LA::BindAddress)],
            },
            None => ok(L::Bound, vec![LOut::Act(LA::BindAddress)]),
        },
        (_, LCall::Bind) => refuse(St::STATUS_ADDRESS_ALREADY_ASSOCIATED),
        (L::Bound, LCall::Listen(backlog)) => match fails(LA::Listen) {
            Some(code) => LWant {
                returns: Some(code),
                next: L::Bound,
                trace: vec![LOut::Act(LA::Listen)],
            },
            None => ok(
                L::Listening {
                    backlog,
                    waiting: VecDeque::new(),
                    queued: 0,
                },
                vec![LOut::Act(LA::Listen)],
            ),
        },
        // Listen before Bind, or twice.
        (_, LCall::Listen(_)) => refuse(St::ND_INVALID_DEVICE_STATE),
        (
            L::Listening {
                backlog,
                waiting,
                queued,
            },
            LCall::Get(k),
        ) => {
            if *queued > 0 {
                // The oldest queued request, inline.
                ok(
                    L::Listening {
                        backlog: *backlog,
                        waiting: waiting.clone(),
                        queued: queued - 1,
                    },
                    vec![LOut::Act(LA::HandOverRequest)],
                )
            } else {
                let mut waiting = waiting.clone();
                waiting.push_back(k);
                LWant {
                    returns: Some(St::ND_PENDING),
                    next: L::Listening {
                        backlog: *backlog,
                        waiting,
                        queued: 0,
                    },
                    trace: vec![],
                }
            }
        }
        (_, LCall::Get(_)) => refuse(St::ND_INVALID_DEVICE_STATE),
        (
            L::Listening {
                backlog,
                waiting,
                queued,
            },
            LCall::Cancel,
        ) => ok(
            L::Listening {
                backlog: *backlog,
                waiting: VecDeque::new(),
                queued: *queued,
            },
            waiting.iter().map(|&k| LOut::GetDone(k, St::ND_CANCELED)).collect(),
        ),
        (_, LCall::Cancel) => ok(from.clone(), vec![]),
        (_, LCall::Release) => {
            let mut trace = vec![];
            if let L::Listening { waiting, queued, .. } = from {
                trace.extend(waiting.iter().map(|&k| LOut::GetDone(k, St::ND_CANCELED)));
                if *queued > 0 {
                    trace.push(LOut::Act(LA::RejectQueued { count: *queued }));
                }
            }
            trace.push(LOut::Act(LA::DestroyId));
            ok(L::Closed, trace)
        }
        (
            L::Listening {
                backlog,
                waiting,
                queued,
            },
            LCall::Request,
        ) => {
            // A Get whose connector moved on ends first, with its code; the request goes to the
            // oldest Get whose connector can take it.
            let mut trace = vec![];
            let mut waiting = waiting.clone();
            waiting.retain(|&k| match moved_on[k] {
                Some(code) => {
                    trace.push(LOut::GetDone(k, code));
                    false
                }
                None => true,
            });
            let mut want = if let Some(&k) = waiting.front() {
                // The oldest pending Get takes it.
                let mut waiting = waiting.clone();
                waiting.pop_front();
                quiet(
                    L::Listening {
                        backlog: *backlog,
                        waiting,
                        queued: *queued,
                    },
                    vec![LOut::Act(LA::HandOverRequest), LOut::GetDone(k, St::ND_SUCCESS)],
                )
            } else if *backlog == 0 || *queued < *backlog {
                quiet(
                    L::Listening {
                        backlog: *backlog,
                        waiting: waiting.clone(),
                        queued: queued + 1,
                    },
                    vec![],
                )
            } else {
                // Over the backlog: the active side sees a refusal.
                quiet(
                    L::Listening {
                        backlog: *backlog,
                        waiting: waiting.clone(),
                        queued: *queued,
                    },
                    vec![LOut::Act(LA::RejectRequest)],
                )
            };
            trace.append(&mut want.trace);
            want.trace = trace;
            want
        }
        (
            L::Listening {
                backlog,
                waiting,
                queued,
            },
            LCall::Abandoned,
        ) if *queued > 0 => quiet(
            L::Listening {
                backlog: *backlog,
                waiting: waiting.clone(),
                queued: queued - 1,
            },
            vec![],
        ),
        (L::Listening { waiting, .. }, LCall::Event(K::DeviceRemoval)) => quiet(
            L::Failed(St::ND_DEVICE_REMOVED),
            waiting
                .iter()
                .map(|&k| LOut::GetDone(k, St::ND_DEVICE_REMOVED))
                .collect(),
        ),
        (L::Idle | L::Bound, LCall::Event(K::DeviceRemoval)) => quiet(L::Failed(St::ND_DEVICE_REMOVED), vec![]),
        _ => quiet(from.clone(), vec![]),
    }
}

// ---------------------------------------------------------------------------------------------
// The world: the library's objects beside the model's.

struct Connector {
    /// The engine's token for it (a queue pair's claim names it).
    token: u64,
    lib: S,
    model: Model,
    /// The harness's ledger: requests that returned ND_PENDING and have not completed.
    pending: [bool; 4],
    /// The QP the library's connector was given (its last Connect / Accept that got as far as
    /// its actions).
    lib_qp: Option<usize>,
    /// GetConnectionRequests naming this connector that have not completed.
    get_pending: u32,
}

impl Connector {
    fn new(token: u64) -> Connector {
        Connector {
            token,
            lib: S::Idle,
            model: Model {
                m: M::Idle,
                notify: false,
                qp: None,
            },
            pending: [false; 4],
            lib_qp: None,
            get_pending: 0,
        }
    }
}

fn slot(request: Request) -> usize {
    match request {
        Request::Connect => 0,
        Request::Accept => 1,
        Request::Disconnect => 2,
        Request::NotifyDisconnect => 3,
    }
}

struct World {
    conns: Vec<Connector>,
    /// The queue pairs' claims, as the library keeps them.
    claims: Vec<conn::Claim>,
    tokens: u64,
    lstate: LS,
    lmodel: L,
    /// The fake engine's side of the listener (endpoint/listener.rs keeps the same two queues): Gets not
    /// yet handed a request, and Gets handed one whose completion is next.
    lwaiting: VecDeque<usize>,
    lhanded: VecDeque<usize>,
    step: usize,
}

struct LEngine<'a> {
    world: &'a mut World,
    fail: Option<(LA, St)>,
    trace: Vec<LOut>,
}

impl lis::Engine for LEngine<'_> {
    fn state(&mut self) -> &mut LS {
        &mut self.world.lstate
    }
    fn act(&mut self, action: LA) -> Result<(), St> {
        self.trace.push(LOut::Act(action));
        if let Some((a, code)) = self.fail {
            if a == action {
                self.fail = None;
                return Err(code);
            }
        }
        if action == LA::HandOverRequest {
            // The connector of the oldest Get receives the request.
            let k = self
                .world
                .lwaiting
                .pop_front()
                .expect("a request handed over with no Get waiting");
            self.world.hand_over(k);
            self.world.lhanded.push_back(k);
        }
        Ok(())
    }
    fn complete_gets(&mut self, count: u32, status: St) {
        for _ in 0..count {
            let k = self
                .world
                .lhanded
                .pop_front()
                .or_else(|| self.world.lwaiting.pop_front())
                .expect("more Gets completed than pending");
            self.trace.push(LOut::GetDone(k, status));
        }
    }
}

impl World {
    fn qp_busy(&self, me: usize, qp: usize) -> bool {
        self.conns
            .iter()
            .enumerate()
            .any(|(i, c)| i != me && c.model.qp == Some(qp) && c.model.m.holds_qp())
    }

    /// Runs `input` on connector `k` through the library and checks it against `want`.
    fn run_connector(
        &mut self,
        k: usize,
        input: I,
        want: Want,
        fail: Fail,
        pending: Option<Request>,
        qp: Option<usize>,
    ) {
        let step = self.step;
        let c = &mut self.conns[k];
        let before = c.lib;
        let mut engine = ConnEngine {
            state: &mut c.lib,
            fail,
            trace: vec![],
            prepared: false,
        };
        let returns = conn::drive(&mut engine, input);
        let ConnEngine { trace, prepared, .. } = engine;
        let ctx = || format!("step {step}: connector {k}: {input:?} in {before:?} (fail {fail:?})");
        assert_eq!(returns, want.returns, "returns; {}", ctx());
        assert_eq!(trace, want.trace, "effects; {}", ctx());
        assert_eq!(c.lib, lib_state(want.next.m, want.next.notify), "state; {}", ctx());
        if prepared {
            if let Some(qp) = qp {
                c.lib_qp = Some(qp);
            }
        }
        // ConnInner::drive: a connector that leaves its connection gives its QP back.
        if !c.lib.engaged() {
            if let Some(q) = c.lib_qp {
                self.claims[q].release(c.token);
            }
        }
        // The ledger: each completion ends a pending request, exactly once.
        for out in &trace {
            if let Out::Done(request, _) = *out {
                assert!(
                    c.pending[slot(request)],
                    "{request:?} completed but not pending; {}",
                    ctx()
                );
                c.pending[slot(request)] = false;
            }
        }
        if returns == Some(St::ND_PENDING) {
            let request = pending.expect("ND_PENDING from a call that never pends");
            assert!(!c.pending[slot(request)], "{request:?} pending twice; {}", ctx());
            c.pending[slot(request)] = true;
        }
        if before == S::Closed {
            assert!(
                trace.is_empty(),
                "something happened on a released connector; {}",
                ctx()
            );
        }
        if c.lib == S::Closed {
            assert_eq!(c.pending, [false; 4], "a request outlives Release; {}", ctx());
        }
        c.model = want.next;
        self.check_qps();
    }

    /// No queue pair is engaged by two connectors.
    fn check_qps(&self) {
        for qp in 0..QPS {
            let holders = self
                .conns
                .iter()
                .filter(|c| c.lib_qp == Some(qp) && c.lib.engaged() && c.lib != S::RequestReceived)
                .count();
            assert!(
                holders <= 1,
                "step {}: QP {qp} engaged by {holders} connectors",
                self.step
            );
        }
    }

    /// The listener hands connector `k` a request (`ConnInner::take_request`).
    fn hand_over(&mut self, k: usize) {
        let c = &self.conns[k];
        assert!(c.get_pending > 0, "connector {k} handed a request with no Get");
        let want = model_event(c.model, K::ConnectRequest, 0, None);
        self.run_connector(k, I::Event(CmEvent::new(K::ConnectRequest, 0)), want, None, None, None);
    }

    fn call(&mut self, k: usize, call: Call, fail: Fail) {
        let token = self.conns[k].token;
        // Connect and Accept claim their QP first; a failed claim is `qp_in_use`, which must be
        // exactly the model's "another connector's connection uses it".
        let call_qp = match call {
            Call::Connect { qp, .. }
            | Call::ConnectShared { qp, .. }
            | Call::NdkConnect { qp, .. }
            | Call::Accept { qp, .. } => Some(qp),
            _ => None,
        };
        let busy = call_qp.is_some_and(|qp| {
            let in_use = !self.claims[qp].claim(token);
            assert_eq!(
                in_use,
                self.qp_busy(k, qp),
                "step {}: connector {k}: QP {qp}'s claim (holder {}) against the model",
                self.step,
                self.claims[qp].holder()
            );
            in_use
        });
        let input = match call {
            Call::Bind => I::Bind,
            Call::Connect { pd, .. } => I::Connect {
                private_data_len: pd,
                qp_in_use: busy,
            },
            Call::ConnectShared { pd, .. } => I::ConnectWithSharedEndpoint {
                private_data_len: pd,
                qp_in_use: busy,
            },
            Call::NdkConnect { pd, .. } => I::BindAndConnect {
                private_data_len: pd,
                qp_in_use: busy,
            },
            Call::CompleteConnect => I::CompleteConnect,
            Call::Accept { pd, .. } => I::Accept {
                private_data_len: pd,
                qp_in_use: busy,
            },
            Call::Reject { pd } => I::Reject { private_data_len: pd },
            Call::Disconnect => I::Disconnect,
            Call::NotifyDisconnect => I::NotifyDisconnect,
            Call::Cancel => I::Cancel,
            Call::Release => I::Release,
        };
        // The request the call leaves pending (its completion awaited).
        let pending = match call {
            Call::Connect { .. } | Call::ConnectShared { .. } | Call::NdkConnect { .. } => Some(Request::Connect),
            Call::Accept { .. } => Some(Request::Accept),
            Call::Disconnect => Some(Request::Disconnect),
            Call::NotifyDisconnect => Some(Request::NotifyDisconnect),
            _ => None,
        };
        let want = model_call(self.conns[k].model, call, busy, fail);
        // The QP the call names: its claim's (call_qp).
        self.run_connector(k, input, want, fail, pending, call_qp);
        // Connector::connect / accept: the call's claim stays only with the connection.
        if let Some(qp) = call_qp {
            let c = &self.conns[k];
            conn::settle_claim(&self.claims[qp], token, c.lib, c.lib_qp == Some(qp));
        }
    }

    fn event(&mut self, k: usize, kind: K, status: i32, fail: Fail) {
        let want = model_event(self.conns[k].model, kind, status, fail);
        self.run_connector(k, I::Event(CmEvent::new(kind, status)), want, fail, None, None);
    }

    fn listener(&mut self, call: LCall, fail: Option<(LA, St)>) {
        let step = self.step;
        let input = match call {
            LCall::Bind => LI::Bind,
            LCall::Listen(backlog) => LI::Listen { backlog },
            LCall::Get(_) => LI::GetConnectionRequest,
            LCall::Cancel => LI::Cancel,
            LCall::Release => LI::Release,
            LCall::Request => LI::Event(CmEvent::new(K::ConnectRequest, 0)),
            LCall::Abandoned => LI::RequestAbandoned,
            LCall::Event(kind) => LI::Event(CmEvent::new(kind, 0)),
        };
        let moved_on: Vec<Option<St>> = self
            .conns
            .iter()
            .map(|c| match c.model.m {
                M::Idle => None,
                M::Closed => Some(St::ND_CANCELED),
                _ => Some(St::ND_CONNECTION_ACTIVE),
            })
            .collect();
        let want = model_listener(&self.lmodel, call, fail, &moved_on);
        let before = self.lstate;
        let mut pruned = vec![];
        if let LCall::Request = call {
            // As Listener::on_request: Gets whose connector moved on leave the queue first.
            let mut at = 0;
            while at < self.lwaiting.len() {
                let k = self.lwaiting[at];
                let state = self.conns[k].lib;
                if state == S::Idle {
                    at += 1;
                    continue;
                }
                self.lwaiting.remove(at);
                let code = if state == S::Closed {
                    St::ND_CANCELED
                } else {
                    St::ND_CONNECTION_ACTIVE
                };
                pruned.push(LOut::GetDone(k, code));
                let mut engine = LEngine {
                    world: self,
                    fail: None,
                    trace: vec![],
                };
                let r = lis::drive(&mut engine, LI::GetAbandoned);
                assert!(
                    r.is_none() && engine.trace.is_empty(),
                    "step {step}: GetAbandoned did something"
                );
            }
        }
        if let LCall::Get(k) = call {
            // As Listener::get_connection_request: the Get joins the queue first.
            self.lwaiting.push_back(k);
            self.conns[k].get_pending += 1;
        }
        let mut engine = LEngine {
            world: self,
            fail,
            trace: vec![],
        };
        let returns = lis::drive(&mut engine, input);
        let LEngine { trace, .. } = engine;
        let mut ltrace = pruned;
        ltrace.extend(trace);
        let ctx = || format!("step {step}: listener: {call:?} in {before:?} (fail {fail:?})");
        if let LCall::Get(k) = call {
            match returns {
                Some(St::ND_PENDING) => {}
                Some(St::ND_SUCCESS) => {
                    // Taken inline: this Get completes now.
                    let at = self.lhanded.iter().rposition(|&x| x == k).expect("handed");
                    self.lhanded.remove(at);
                    ltrace.push(LOut::GetDone(k, St::ND_SUCCESS));
                }
                _ => {
                    let at = self.lwaiting.iter().rposition(|&x| x == k).expect("waiting");
                    self.lwaiting.remove(at);
                    self.conns[k].get_pending -= 1;
                }
            }
        }
        let mut want_trace = want.trace.clone();
        if let (LCall::Get(k), Some(St::ND_SUCCESS)) = (call, want.returns) {
            want_trace.push(LOut::GetDone(k, St::ND_SUCCESS));
        }
        assert_eq!(returns, want.returns, "returns; {}", ctx());
        assert_eq!(ltrace, want_trace, "effects; {}", ctx());
        assert_eq!(self.lstate, want.next.lib(), "state; {}", ctx());
        if before == LS::Closed {
            assert!(
                ltrace.is_empty(),
                "something happened on a released listener; {}",
                ctx()
            );
        }
        for out in &ltrace {
            if let LOut::GetDone(k, status) = *out {
                let c = &mut self.conns[k];
                assert!(c.get_pending > 0, "a Get of connector {k} completed twice; {}", ctx());
                c.get_pending -= 1;
                if status == St::ND_SUCCESS {
                    // A Get that succeeds leaves its connector holding the request.
                    assert_eq!(
                        c.lib,
                        S::RequestReceived,
                        "Get completed but connector {k} holds no request; {}",
                        ctx()
                    );
                }
            }
        }
        self.lmodel = want.next;
        if self.lstate == LS::Closed {
            assert!(
                self.lwaiting.is_empty() && self.lhanded.is_empty(),
                "a Get outlives Release; {}",
                ctx()
            );
        }
    }
}

const EVENTS: [K; 13] = [
    K::AddrResolved,
    K::AddrError,
    K::RouteResolved,
    K::RouteError,
    K::ConnectResponse,
    K::ConnectError,
    K::Unreachable,
    K::Rejected,
    K::Established,
    K::Disconnected,
    K::DeviceRemoval,
    K::AddrChange,
    K::TimewaitExit,
];

/// `rdma_cm_event.status`: IB CM reject reasons (4 timeout, 8 invalid service id, 28 consumer)
/// and negative errnos.
const STATUSES: [i32; 8] = [
    0,
    4,
    8,
    28,
    -libc::ETIMEDOUT,
    -libc::ENETUNREACH,
    -libc::EHOSTUNREACH,
    1,
];

fn private_data(inp: &mut Input, limit: usize) -> usize {
    match inp.u8() % 4 {
        0 => 0,
        1 => limit,
        2 => limit + 1,
        _ => usize::from(inp.u8()),
    }
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input::new(data);
    let mut world = World {
        conns: (1..=CONNECTORS as u64).map(Connector::new).collect(),
        claims: (0..QPS).map(|_| conn::Claim::default()).collect(),
        tokens: CONNECTORS as u64,
        lstate: LS::Idle,
        lmodel: L::Idle,
        lwaiting: VecDeque::new(),
        lhanded: VecDeque::new(),
        step: 0,
    };
    let mut steps = 0;
    while !inp.is_empty() && steps < 256 {
        steps += 1;
        world.step = steps;
        let op = inp.u8();
        let k = usize::from(op >> 5) % CONNECTORS;
        match op & 0x1f {
            0 => world.call(k, Call::Bind, fail_spec(&mut inp)),
            1..=3 => {
                let qp = usize::from(inp.u8()) % QPS;
                let pd = private_data(&mut inp, MAX_CALLER_DATA);
                let call = match op & 0x1f {
                    1 => Call::Connect { pd, qp },
                    2 => Call::ConnectShared { pd, qp },
                    _ => Call::NdkConnect { pd, qp },
                };
                world.call(k, call, fail_spec(&mut inp));
            }
            4 => world.call(k, Call::CompleteConnect, fail_spec(&mut inp)),
            5 => {
                let qp = usize::from(inp.u8()) % QPS;
                let pd = private_data(&mut inp, MAX_CALLEE_DATA);
                world.call(k, Call::Accept { pd, qp }, fail_spec(&mut inp));
            }
            6 => {
                let pd = private_data(&mut inp, MAX_REJECT_DATA);
                world.call(k, Call::Reject { pd }, fail_spec(&mut inp));
            }
            7 => world.call(k, Call::Disconnect, fail_spec(&mut inp)),
            8 => world.call(k, Call::NotifyDisconnect, None),
            9 => world.call(k, Call::Cancel, fail_spec(&mut inp)),
            10 => world.call(k, Call::Release, fail_spec(&mut inp)),
            11 => {
                let c = &world.conns[k];
                let (local, peer) = model_addresses(c.model.m);
                assert_eq!(
                    (c.lib.has_local_address(), c.lib.has_peer_address()),
                    (local, peer),
                    "step {steps}: address getters in {:?}",
                    c.lib
                );
            }
            12..=17 => {
                let kind = EVENTS[usize::from(inp.u8()) % EVENTS.len()];
                let status = STATUSES[usize::from(inp.u8()) % STATUSES.len()];
                world.event(k, kind, status, fail_spec(&mut inp));
            }
            18 => {
                let fail = fail_spec(&mut inp).map(|(_, code)| (LA::BindAddress, code));
                world.listener(LCall::Bind, fail);
            }
            19 => {
                let backlog = u32::from(inp.u8() % 4);
                let fail = fail_spec(&mut inp).map(|(_, code)| (LA::Listen, code));
                world.listener(LCall::Listen(backlog), fail);
            }
            20 | 21 => {
                // GetConnectionRequest takes an idle connector (the library refuses any other
                // before the listener's machine sees the call); two Gets may name the same one.
                let c = &world.conns[k];
                if c.lib == S::Idle {
                    world.listener(LCall::Get(k), None);
                }
            }
            22 => world.listener(LCall::Cancel, None),
            23 => {
                if world.lstate == LS::Closed {
                    // A new listener.
                    world.lstate = LS::Idle;
                    world.lmodel = L::Idle;
                } else {
                    world.listener(LCall::Release, None);
                }
            }
            24..=26 => world.listener(LCall::Request, None),
            27 => {
                // The engine only reports an abandoned request that is queued.
                if matches!(world.lmodel, L::Listening { queued, .. } if queued > 0) {
                    world.listener(LCall::Abandoned, None);
                }
            }
            28 => {
                let kind = EVENTS[usize::from(inp.u8()) % EVENTS.len()];
                world.listener(LCall::Event(kind), None);
            }
            29 => {
                // A released connector's slot takes a new connector.
                if world.conns[k].lib == S::Closed && world.conns[k].get_pending == 0 {
                    world.tokens += 1;
                    world.conns[k] = Connector::new(world.tokens);
                }
            }
            _ => world.call(k, Call::Cancel, None),
        }
    }
});
