//! The listener state machine: Bind, Listen(backlog), GetConnectionRequest, cancel, release and
//! the rdma_cm events a listening id receives, with all transitions in [`step`].
//!
//! Sources: `docs/nd-semantics.md` ("The handshake": GetConnectionRequest completes on
//! CONNECT_REQUEST; "Ports": a listener needs exclusive use of its port, and `rdma_listen`
//! re-checks it) and IND2Listener's method set (Bind, Listen, GetLocalAddress,
//! GetConnectionRequest). As with connectors, the machine is pure and the event engine carries out
//! the [`ListenerAction`]s; see [`crate::connection`] for the `ActionFailed` convention.
//!
//! Requests and GetConnectionRequest calls meet in arrival order: a request that finds a pending
//! Get is handed to that Get's connector at once; otherwise it is queued, up to the backlog, and
//! the next Get takes the oldest one inline. A request beyond the backlog is rejected, which the
//! active side sees as REJECTED reason 28 (ND_CONNECTION_REFUSED). A queued request whose active
//! side abandoned its Connect (its REJ, reason 4, reaches the CM but ucma reports no event of a
//! request before rdma_accept, so the engine checks the queue when a Get takes from it and when
//! the backlog is full) leaves the queue ([`ListenerInput::RequestAbandoned`]); no Get sees it.
//! Likewise a pending Get whose connector can no longer take a request (the application released
//! it, or used it for a connection of its own, while the Get was pending) leaves the queue when a
//! request arrives, before the request is handed over ([`ListenerInput::GetAbandoned`]): the
//! engine completes it with ND_CANCELED (released) or ND_CONNECTION_ACTIVE, and the request goes
//! to the next Get. Handing it over would complete the Get with ND_SUCCESS for a connector that
//! ignores the request (and, for one that is connecting, replace its rdma_cm id).

#![forbid(unsafe_code)]

use crate::cm_event::{CmEvent, CmEventKind};
use crate::status::NdStatus;
use crate::transition::{event, returns};

/// Where a listener is in its life.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ListenerState {
    #[default]
    Idle,
    Bound,
    /// `backlog` 0 means the shim adds no limit of its own (the kernel's still applies).
    /// `waiting`: GetConnectionRequest calls pending. `queued`: requests no Get has taken yet.
    /// At most one of the two is non-zero.
    Listening {
        backlog: u32,
        waiting: u32,
        queued: u32,
    },
    /// The device went away; every call but Cancel and Release reports this.
    Failed(NdStatus),
    Closed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListenerInput {
    Bind,
    Listen {
        backlog: u32,
    },
    GetConnectionRequest,
    Cancel,
    Release,
    Event(CmEvent),
    /// The active side of a queued request is gone; the engine has taken the request out of
    /// the queue.
    RequestAbandoned,
    /// A pending Get's connector cannot take a request any more; the engine has taken the Get
    /// out of the queue and completes it.
    GetAbandoned,
    ActionFailed {
        action: ListenerAction,
        status: NdStatus,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListenerAction {
    /// `rdma_bind_addr` to the reserved (exclusive) address.
    BindAddress,
    /// `rdma_listen`.
    Listen,
    /// Give the oldest unclaimed request to the connector of the oldest pending Get (or of the
    /// Get being called): that connector receives `Event(ConnectRequest)`.
    HandOverRequest,
    /// `rdma_reject` the request that just arrived: the backlog is full.
    RejectRequest,
    /// `rdma_reject` every queued request: the listener is going away.
    RejectQueued { count: u32 },
    /// `rdma_destroy_id` of the listening id.
    DestroyId,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListenerEffect {
    Do(ListenerAction),
    /// The oldest `count` pending GetConnectionRequest calls complete with `status`.
    CompleteGets {
        count: u32,
        status: NdStatus,
    },
}

/// The result of one [`step`].
pub type ListenerTransition = crate::transition::Transition<ListenerState, ListenerEffect>;

/// Pending Gets complete with `status`, if there are any.
fn complete_gets(count: u32, status: NdStatus) -> Option<ListenerEffect> {
    (count > 0).then_some(ListenerEffect::CompleteGets { count, status })
}

/// Every transition of a listener.
pub fn step(state: ListenerState, input: ListenerInput) -> ListenerTransition {
    use ListenerAction as A;
    use ListenerEffect::Do;
    use ListenerInput as I;
    use ListenerState as S;
    use NdStatus as St;

    let unchanged = |status| returns(state, status, vec![]);
    let is_call = !matches!(
        input,
        I::Event(_) | I::RequestAbandoned | I::GetAbandoned | I::ActionFailed { .. }
    );
    if is_call {
        match state {
            S::Closed => return unchanged(St::ND_INVALID_HANDLE),
            S::Failed(code) if !matches!(input, I::Cancel | I::Release) => return unchanged(code),
            _ => {}
        }
    }

    match (state, input) {
        (S::Idle, I::Bind) => returns(S::Bound, St::ND_SUCCESS, vec![Do(A::BindAddress)]),
        (_, I::Bind) => unchanged(St::STATUS_ADDRESS_ALREADY_ASSOCIATED),

        (S::Bound, I::Listen { backlog }) => returns(
            S::Listening {
                backlog,
                waiting: 0,
                queued: 0,
            },
            St::ND_SUCCESS,
            vec![Do(A::Listen)],
        ),
        // Listen before Bind, or twice.
        (_, I::Listen { .. }) => unchanged(St::ND_INVALID_DEVICE_STATE),

        (
            S::Listening {
                backlog,
                waiting,
                queued,
            },
            I::GetConnectionRequest,
        ) => {
            if queued > 0 {
                returns(
                    S::Listening {
                        backlog,
                        waiting,
                        queued: queued - 1,
                    },
                    St::ND_SUCCESS,
                    vec![Do(A::HandOverRequest)],
                )
            } else {
                returns(
                    S::Listening {
                        backlog,
                        waiting: waiting + 1,
                        queued,
                    },
                    St::ND_PENDING,
                    vec![],
                )
            }
        }
        (_, I::GetConnectionRequest) => unchanged(St::ND_INVALID_DEVICE_STATE),

        (
            S::Listening {
                backlog,
                waiting,
                queued,
            },
            I::Cancel,
        ) => returns(
            S::Listening {
                backlog,
                waiting: 0,
                queued,
            },
            St::ND_SUCCESS,
            complete_gets(waiting, St::ND_CANCELED).into_iter().collect(),
        ),
        (_, I::Cancel) => unchanged(St::ND_SUCCESS),

        (_, I::Release) => {
            let mut effects = Vec::new();
            if let S::Listening { waiting, queued, .. } = state {
                effects.extend(complete_gets(waiting, St::ND_CANCELED));
                if queued > 0 {
                    effects.push(Do(A::RejectQueued { count: queued }));
                }
            }
            effects.push(Do(A::DestroyId));
            returns(S::Closed, St::ND_SUCCESS, effects)
        }

        (
            S::Listening {
                backlog,
                waiting,
                queued,
            },
            I::Event(ev),
        ) => match ev.kind {
            CmEventKind::ConnectRequest if waiting > 0 => event(
                S::Listening {
                    backlog,
                    waiting: waiting - 1,
                    queued,
                },
                vec![
                    Do(A::HandOverRequest),
                    ListenerEffect::CompleteGets {
                        count: 1,
                        status: St::ND_SUCCESS,
                    },
                ],
            ),
            CmEventKind::ConnectRequest if backlog == 0 || queued < backlog => event(
                S::Listening {
                    backlog,
                    waiting,
                    queued: queued + 1,
                },
                vec![],
            ),
            CmEventKind::ConnectRequest => event(state, vec![Do(A::RejectRequest)]),
            CmEventKind::DeviceRemoval => event(
                S::Failed(St::ND_DEVICE_REMOVED),
                complete_gets(waiting, St::ND_DEVICE_REMOVED).into_iter().collect(),
            ),
            _ => event(state, vec![]),
        },
        (
            S::Listening {
                backlog,
                waiting,
                queued,
            },
            I::RequestAbandoned,
        ) if queued > 0 => event(
            S::Listening {
                backlog,
                waiting,
                queued: queued - 1,
            },
            vec![],
        ),
        (_, I::RequestAbandoned) => event(state, vec![]),
        (
            S::Listening {
                backlog,
                waiting,
                queued,
            },
            I::GetAbandoned,
        ) if waiting > 0 => event(
            S::Listening {
                backlog,
                waiting: waiting - 1,
                queued,
            },
            vec![],
        ),
        (_, I::GetAbandoned) => event(state, vec![]),

        (S::Idle | S::Bound, I::Event(ev)) if ev.kind == CmEventKind::DeviceRemoval => {
            event(S::Failed(St::ND_DEVICE_REMOVED), vec![])
        }
        (_, I::Event(_)) => event(state, vec![]),

        // The kernel's own check can still refuse: EADDRINUSE from rdma_bind_addr or
        // rdma_listen is ND_SHARING_VIOLATION, returned by the call.
        (
            S::Bound,
            I::ActionFailed {
                action: A::BindAddress,
                status,
            },
        ) => returns(S::Idle, status, vec![]),
        (
            S::Listening { .. },
            I::ActionFailed {
                action: A::Listen,
                status,
            },
        ) => returns(S::Bound, status, vec![]),
        (_, I::ActionFailed { .. }) => event(state, vec![]),
    }
}

/// The engine side of the listener: [`Engine`] and [`drive`] (in a module of their own so that
/// `fuzzing` can make them public).
mod driver {
    use crate::listen::{step, ListenerAction, ListenerEffect, ListenerInput, ListenerState, ListenerTransition};
    use crate::status::NdStatus;

    /// What carries out a step's effects: the rdma_cm event engine (`endpoint/listener.rs`), or the fuzz
    /// target's fake (`fuzzing`, which makes this trait and [`drive`] public).
    pub trait Engine {
        /// The listener's state, which [`drive`] moves on.
        fn state(&mut self) -> &mut ListenerState;
        /// After each step (the engine logs it).
        fn stepped(&mut self, _from: ListenerState, _input: ListenerInput, _t: &ListenerTransition) {}
        fn act(&mut self, action: ListenerAction) -> Result<(), NdStatus>;
        /// [`ListenerEffect::CompleteGets`]: the oldest `count` Gets (those handed a request first).
        fn complete_gets(&mut self, count: u32, status: NdStatus);
    }

    /// Runs one input through [`step`] and carries out its effects in order, as
    /// [`crate::connection::drive`] does for a connector. Returns the call's code.
    pub fn drive(engine: &mut impl Engine, input: ListenerInput) -> Option<NdStatus> {
        let from = *engine.state();
        let t = step(from, input);
        engine.stepped(from, input, &t);
        *engine.state() = t.next;
        let mut returns = t.returns;
        for effect in t.effects {
            match effect {
                ListenerEffect::Do(action) => {
                    if let Err(status) = engine.act(action) {
                        let before = *engine.state();
                        let back = drive(engine, ListenerInput::ActionFailed { action, status });
                        if back.is_some() {
                            returns = back;
                        }
                        if *engine.state() != before {
                            break;
                        }
                    }
                }
                ListenerEffect::CompleteGets { count, status } => engine.complete_gets(count, status),
            }
        }
        returns
    }
}
pub(crate) use driver::{drive, Engine};

/// The fuzz targets' way in (cargo feature `fuzzing`): `drive` with an engine of their own.
/// Not an API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing {
    /// The crate's engine trait and its loop over one input, exactly as the library runs it.
    pub use super::driver::{drive, Engine};
}

#[cfg(test)]
mod tests {
    use super::*;
    use ListenerAction as A;
    use ListenerEffect::Do;
    use ListenerInput as I;
    use ListenerState as S;
    use NdStatus as St;

    fn request() -> ListenerInput {
        I::Event(CmEvent::new(CmEventKind::ConnectRequest, 0))
    }

    fn removal() -> ListenerInput {
        I::Event(CmEvent::new(CmEventKind::DeviceRemoval, 0))
    }

    fn t(next: ListenerState, returns: Option<NdStatus>, effects: &[ListenerEffect]) -> ListenerTransition {
        ListenerTransition {
            next,
            returns,
            effects: effects.to_vec(),
        }
    }

    fn listening(backlog: u32, waiting: u32, queued: u32) -> ListenerState {
        S::Listening {
            backlog,
            waiting,
            queued,
        }
    }

    fn gets_complete(count: u32, status: NdStatus) -> ListenerEffect {
        ListenerEffect::CompleteGets { count, status }
    }

    #[test]
    fn bind_listen_get() {
        let rows = [
            (
                S::Idle,
                I::Bind,
                t(S::Bound, Some(St::ND_SUCCESS), &[Do(A::BindAddress)]),
            ),
            (
                S::Bound,
                I::Listen { backlog: 2 },
                t(listening(2, 0, 0), Some(St::ND_SUCCESS), &[Do(A::Listen)]),
            ),
            (
                listening(2, 0, 0),
                I::GetConnectionRequest,
                t(listening(2, 1, 0), Some(St::ND_PENDING), &[]),
            ),
            (
                listening(2, 1, 0),
                I::GetConnectionRequest,
                t(listening(2, 2, 0), Some(St::ND_PENDING), &[]),
            ),
            (
                listening(2, 2, 0),
                request(),
                t(
                    listening(2, 1, 0),
                    None,
                    &[Do(A::HandOverRequest), gets_complete(1, St::ND_SUCCESS)],
                ),
            ),
        ];
        for (state, input, want) in rows {
            assert_eq!(step(state, input), want, "{input:?} in {state:?}");
        }
    }

    #[test]
    fn requests_queue_up_to_the_backlog_then_are_rejected() {
        let rows = [
            (listening(2, 0, 0), request(), t(listening(2, 0, 1), None, &[])),
            (listening(2, 0, 1), request(), t(listening(2, 0, 2), None, &[])),
            (
                listening(2, 0, 2),
                request(),
                t(listening(2, 0, 2), None, &[Do(A::RejectRequest)]),
            ),
            // Backlog 0: no limit of the shim's own.
            (listening(0, 0, 1000), request(), t(listening(0, 0, 1001), None, &[])),
            // A Get takes the oldest queued request inline.
            (
                listening(2, 0, 2),
                I::GetConnectionRequest,
                t(listening(2, 0, 1), Some(St::ND_SUCCESS), &[Do(A::HandOverRequest)]),
            ),
        ];
        for (state, input, want) in rows {
            assert_eq!(step(state, input), want, "{input:?} in {state:?}");
        }
    }

    #[test]
    fn an_abandoned_request_leaves_the_queue() {
        let rows = [
            (listening(2, 0, 2), t(listening(2, 0, 1), None, &[])),
            // The Get that took it already holds it: its connector sees the event instead.
            (listening(2, 1, 0), t(listening(2, 1, 0), None, &[])),
            (S::Closed, t(S::Closed, None, &[])),
        ];
        for (state, want) in rows {
            assert_eq!(step(state, I::RequestAbandoned), want, "in {state:?}");
        }
        // Room again: the next request is queued, not rejected.
        assert_eq!(step(listening(2, 0, 1), request()), t(listening(2, 0, 2), None, &[]));
    }

    #[test]
    fn a_get_whose_connector_moved_on_leaves_the_queue_and_the_request_goes_to_the_next() {
        // Two Gets pending; the first one's connector was released meanwhile. The engine takes
        // that Get out (GetAbandoned) before the request is handed over: the request then goes
        // to the second Get, not to the released connector (found by fuzz/ nd_connector_states).
        let rows = [
            (listening(0, 2, 0), I::GetAbandoned, t(listening(0, 1, 0), None, &[])),
            (
                listening(0, 1, 0),
                request(),
                t(
                    listening(0, 0, 0),
                    None,
                    &[Do(A::HandOverRequest), gets_complete(1, St::ND_SUCCESS)],
                ),
            ),
            // The only Get gone: the request is queued for the next Get.
            (listening(0, 1, 0), I::GetAbandoned, t(listening(0, 0, 0), None, &[])),
            (listening(0, 0, 0), request(), t(listening(0, 0, 1), None, &[])),
            // Nothing pending: nothing changes.
            (listening(1, 0, 1), I::GetAbandoned, t(listening(1, 0, 1), None, &[])),
            (S::Closed, I::GetAbandoned, t(S::Closed, None, &[])),
        ];
        for (state, input, want) in rows {
            assert_eq!(step(state, input), want, "{input:?} in {state:?}");
        }
    }

    #[test]
    fn calls_in_the_wrong_state() {
        let rows = [
            (S::Bound, I::Bind, St::STATUS_ADDRESS_ALREADY_ASSOCIATED),
            (listening(1, 0, 0), I::Bind, St::STATUS_ADDRESS_ALREADY_ASSOCIATED),
            (S::Idle, I::Listen { backlog: 1 }, St::ND_INVALID_DEVICE_STATE),
            (
                listening(1, 0, 0),
                I::Listen { backlog: 1 },
                St::ND_INVALID_DEVICE_STATE,
            ),
            (S::Idle, I::GetConnectionRequest, St::ND_INVALID_DEVICE_STATE),
            (S::Bound, I::GetConnectionRequest, St::ND_INVALID_DEVICE_STATE),
            (
                S::Failed(St::ND_DEVICE_REMOVED),
                I::GetConnectionRequest,
                St::ND_DEVICE_REMOVED,
            ),
            (
                S::Failed(St::ND_DEVICE_REMOVED),
                I::Listen { backlog: 1 },
                St::ND_DEVICE_REMOVED,
            ),
            (S::Closed, I::GetConnectionRequest, St::ND_INVALID_HANDLE),
            (S::Closed, I::Release, St::ND_INVALID_HANDLE),
        ];
        for (state, input, code) in rows {
            assert_eq!(step(state, input), t(state, Some(code), &[]), "{input:?} in {state:?}");
        }
    }

    #[test]
    fn cancel_completes_pending_gets_and_keeps_queued_requests() {
        assert_eq!(
            step(listening(4, 3, 0), I::Cancel),
            t(
                listening(4, 0, 0),
                Some(St::ND_SUCCESS),
                &[gets_complete(3, St::ND_CANCELED)],
            )
        );
        assert_eq!(
            step(listening(4, 0, 2), I::Cancel),
            t(listening(4, 0, 2), Some(St::ND_SUCCESS), &[])
        );
        assert_eq!(step(S::Bound, I::Cancel), t(S::Bound, Some(St::ND_SUCCESS), &[]));
    }

    #[test]
    fn release() {
        let rows: [(ListenerState, &[ListenerEffect]); 5] = [
            (S::Idle, &[Do(A::DestroyId)]),
            (S::Bound, &[Do(A::DestroyId)]),
            (
                listening(4, 2, 0),
                &[gets_complete(2, St::ND_CANCELED), Do(A::DestroyId)],
            ),
            (
                listening(4, 0, 3),
                &[Do(A::RejectQueued { count: 3 }), Do(A::DestroyId)],
            ),
            (S::Failed(St::ND_DEVICE_REMOVED), &[Do(A::DestroyId)]),
        ];
        for (state, effects) in rows {
            assert_eq!(
                step(state, I::Release),
                t(S::Closed, Some(St::ND_SUCCESS), effects),
                "{state:?}"
            );
        }
        assert_eq!(step(S::Closed, request()), t(S::Closed, None, &[]));
    }

    #[test]
    fn device_removal() {
        assert_eq!(
            step(listening(4, 2, 0), removal()),
            t(
                S::Failed(St::ND_DEVICE_REMOVED),
                None,
                &[gets_complete(2, St::ND_DEVICE_REMOVED)],
            )
        );
        assert_eq!(
            step(listening(4, 0, 1), removal()),
            t(S::Failed(St::ND_DEVICE_REMOVED), None, &[])
        );
        assert_eq!(
            step(S::Bound, removal()),
            t(S::Failed(St::ND_DEVICE_REMOVED), None, &[])
        );
        // Other events on a listening id change nothing.
        let established = I::Event(CmEvent::new(CmEventKind::Established, 0));
        assert_eq!(step(listening(4, 1, 0), established), t(listening(4, 1, 0), None, &[]));
    }

    #[test]
    fn kernel_refusals_after_the_table_said_yes() {
        let fail = |action, status| I::ActionFailed { action, status };
        assert_eq!(
            step(S::Bound, fail(A::BindAddress, St::ND_SHARING_VIOLATION)),
            t(S::Idle, Some(St::ND_SHARING_VIOLATION), &[])
        );
        assert_eq!(
            step(listening(4, 0, 0), fail(A::Listen, St::ND_SHARING_VIOLATION)),
            t(S::Bound, Some(St::ND_SHARING_VIOLATION), &[])
        );
        assert_eq!(
            step(S::Closed, fail(A::DestroyId, St::ND_INVALID_PARAMETER)),
            t(S::Closed, None, &[])
        );
    }
}
