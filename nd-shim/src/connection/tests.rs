#![forbid(unsafe_code)]
use super::machine::*;
use super::*;
use crate::cm_event::{CmEvent, CmEventKind};
use crate::status::NdStatus;
use ConnectorInput as I;
use ConnectorState as S;
use Effect::Do;
use NdStatus as St;

fn ev(kind: CmEventKind, status: i32) -> ConnectorInput {
    I::Event(CmEvent::new(kind, status))
}

/// The calls that carry private data and a queue pair, as `connect(private_data_len, qp_in_use)`.
macro_rules! calls_with_a_qp {
    ($($name:ident: $variant:ident),*) => {$(
        const fn $name(private_data_len: usize, qp_in_use: bool) -> ConnectorInput {
            I::$variant { private_data_len, qp_in_use }
        }
    )*};
}
calls_with_a_qp!(connect: Connect, connect_shared: ConnectWithSharedEndpoint, accept: Accept, bind_and_connect: BindAndConnect);

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
    connect(0, false),
    connect_shared(0, false),
    I::CompleteConnect,
    accept(0, false),
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
                connect(56, false),
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
                    &[complete(Request::Connect, St::ND_SUCCESS)],
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
                accept(196, false),
                t(S::Accepting, Some(St::ND_PENDING), &[Do(Action::AcceptRequest)]),
            ),
            (
                ev(CmEventKind::Established, 0),
                t(
                    S::Connected { notify_pending: false },
                    None,
                    &[complete(Request::Accept, St::ND_SUCCESS)],
                ),
            ),
        ],
    );
}

#[test]
fn ndk_connect_without_bind_and_shared_endpoint_connect() {
    for call in [connect(0, false), connect_shared(0, false)] {
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
    assert_eq!(
        step(S::Idle, bind_and_connect(56, false)),
        t(
            S::Connecting,
            Some(St::ND_PENDING),
            &[Do(Action::BindAddress), Do(Action::StartConnect)]
        )
    );
    for state in [S::Idle, S::Bound, S::Connected { notify_pending: false }] {
        assert_eq!(
            step(state, bind_and_connect(57, false)),
            t(state, Some(St::ND_INVALID_BUFFER_SIZE), &[])
        );
        assert_eq!(
            step(state, bind_and_connect(0, true)),
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
            step(state, bind_and_connect(3, false)),
            step(state, connect(3, false)),
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
        (S::Bound, connect(57, false), connect(56, false)),
        (S::Idle, connect_shared(57, false), connect_shared(56, false)),
        (S::RequestReceived, accept(197, false), accept(196, false)),
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
    // The last column: where the connector is left (retry: ConnectFailed, fail: Failed). The
    // documentation lets the caller retry after refused, unreachable and timeout ("the
    // connection attempt may be retried").
    let retry: fn(St) -> S = S::ConnectFailed;
    let fail: fn(St) -> S = S::Failed;
    let rows = [
        (K::Rejected, 8, St::ND_CONNECTION_REFUSED, retry),
        (K::Rejected, 28, St::ND_CONNECTION_REFUSED, retry),
        (K::AddrError, -libc::ETIMEDOUT, St::ND_HOST_UNREACHABLE, retry),
        (K::AddrError, -libc::ENETUNREACH, St::ND_NETWORK_UNREACHABLE, retry),
        (K::RouteError, -libc::ETIMEDOUT, St::ND_NETWORK_UNREACHABLE, retry),
        (K::Unreachable, -libc::ETIMEDOUT, St::ND_IO_TIMEOUT, retry),
        (K::ConnectError, -libc::EINVAL, St::ND_CONNECTION_ABORTED, fail),
        (K::DeviceRemoval, 0, St::ND_DEVICE_REMOVED, fail),
    ];
    for (kind, status, code, left_in) in rows {
        assert_eq!(
            step(S::Connecting, ev(kind, status)),
            t(left_in(code), None, &[complete(Request::Connect, code)]),
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
            t(S::Failed(code), None, &[complete(Request::Accept, code)]),
            "{input:?}"
        );
    }
    assert_eq!(
        step(S::Accepting, ev(K::Disconnected, 0)),
        t(
            S::Failed(St::ND_CONNECTION_ABORTED),
            None,
            &[
                complete(Request::Accept, St::ND_CONNECTION_ABORTED),
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
    assert_eq!(step(state, accept(0, false)).returns, Some(St::ND_CONNECTION_ABORTED));
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
                        complete(Request::NotifyDisconnect, St::ND_SUCCESS),
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
                        complete(Request::Disconnect, St::ND_SUCCESS),
                        complete(Request::NotifyDisconnect, St::ND_SUCCESS),
                    ],
                ),
            ),
            (ev(CmEventKind::TimewaitExit, 0), t(S::Disconnected, None, &[])),
        ],
    );
}

#[test]
fn cancel() {
    let canceled = |request| complete(request, St::ND_CANCELED);
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
    for connect in [connect(0, false), bind_and_connect(0, false)] {
        assert_eq!(
            step(S::Failed(St::ND_CANCELED), connect),
            t(S::Failed(St::ND_CANCELED), Some(St::ND_CONNECTION_ACTIVE), &[])
        );
    }
    assert_eq!(
        step(S::Failed(St::ND_CANCELED), accept(0, false)).returns,
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
    let canceled = |request| complete(request, St::ND_CANCELED);
    let (destroy, send, flush) = (Do(Action::DestroyId), Do(Action::SendDisconnect), Do(Action::FlushQp));
    let (cancel_disconnect, cancel_notify) = (canceled(Request::Disconnect), canceled(Request::NotifyDisconnect));
    let rows: &[(ConnectorState, &[Effect])] = &[
        (S::Idle, &[destroy]),
        (S::Bound, &[destroy]),
        (S::Connecting, &[canceled(Request::Connect), destroy]),
        (S::AwaitingCompleteConnect, &[destroy]),
        (S::RequestReceived, &[destroy]),
        (S::Accepting, &[canceled(Request::Accept), destroy]),
        (S::Connected { notify_pending: false }, &[send, flush, destroy]),
        (
            S::Connected { notify_pending: true },
            &[cancel_notify, send, flush, destroy],
        ),
        (S::PeerDisconnected, &[send, flush, destroy]),
        (
            S::Disconnecting { notify_pending: false },
            &[cancel_disconnect, flush, destroy],
        ),
        (
            S::Disconnecting { notify_pending: true },
            &[cancel_disconnect, cancel_notify, flush, destroy],
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
                complete(Request::NotifyDisconnect, St::ND_DEVICE_REMOVED),
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
            &[complete(Request::Disconnect, St::ND_DEVICE_REMOVED)],
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
                &[complete(Request::Connect, St::ND_NO_MEMORY)],
            ),
        ),
        (
            S::Connecting,
            fail(Action::SendRequest, St::ND_INVALID_PARAMETER),
            t(
                S::Failed(St::ND_INVALID_PARAMETER),
                None,
                &[complete(Request::Connect, St::ND_INVALID_PARAMETER)],
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
    let rows = [
        (S::Idle, connect(0, true)),
        (S::Bound, connect(0, true)),
        (S::Idle, connect_shared(0, true)),
        (S::ConnectFailed(St::ND_CONNECTION_REFUSED), connect(0, true)),
        (S::RequestReceived, accept(0, true)),
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
    assert_eq!(step(S::Idle, connect(57, true)).returns, Some(St::ND_CONNECTION_ACTIVE));
}

#[test]
fn a_refused_call_with_a_second_qp_gives_that_qp_back() {
    let (qp0, qp1) = (QpClaim::default(), QpClaim::default());
    // Connector 1 is connected over qp0.
    assert!(qp0.claim(1));
    let connected = S::Connected { notify_pending: false };
    // Connect, then Accept, again on connector 1 with qp1: the claims succeed, the machine
    // refuses, and qp1 goes back (kept, qp1 would stay claimed for good and every other
    // connector's Connect or Accept on it be ND_CONNECTION_ACTIVE; fuzz/
    // nd_connector_states checks the claims against its model).
    for call in [connect(0, false), accept(0, false)] {
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
            step(S::ConnectFailed(code), connect(0, false)),
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
        for call in [I::Bind, connect(0, false), connect_shared(0, false)] {
            // Connect after one that ended ND_CANCELED: ND_CONNECTION_ACTIVE (Windows).
            let want = match (code, call) {
                (St::ND_CANCELED, I::Connect { .. } | I::ConnectWithSharedEndpoint { .. }) => St::ND_CONNECTION_ACTIVE,
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
                    complete(Request::NotifyDisconnect, St::ND_SUCCESS)
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
                        &[Do(Action::FlushQp), complete(Request::Disconnect, St::ND_SUCCESS)],
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
