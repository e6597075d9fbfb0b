//! ND2 IND2Listener: the listener's rdma_cm id, driven by its state machine ([`crate::listen`]),
//! handing connection requests to connectors.

#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::cm_event::{CmEvent, CmEventKind};
use crate::connection::ConnectorState;
use crate::connection_data::{fill_address, BufferFill};
use crate::engine::{Adapter, CmEventSink};
use crate::listen::{self, ListenerAction, ListenerInput, ListenerState};
use crate::ports::PortReservation;
use crate::request::{Pending, Slot};
use crate::status::NdStatus;
use crate::sync::lock;
use crate::sys::{self, CmId};

use super::bind::{bind_exclusive, local_address};
use super::connector::{ConnInner, Connector};
use super::handoff::{finish, Done, Incoming};
use super::inner::EndpointInner;

/// A listener's state, its requests and its Gets; a new listener's (default) is Idle, with no id
/// or address, no request and no Get.
#[derive(Default)]
pub(super) struct ListenerCore {
    state: ListenerState,
    id: Option<CmId>,
    hold: Option<PortReservation>,
    bind_to: Option<SocketAddr>,
    backlog: u32,
    incoming: VecDeque<Incoming>,
    waiting: VecDeque<(Arc<ConnInner>, Arc<Slot>)>,
    /// Gets whose request was handed over and whose completion comes next.
    handed: VecDeque<Arc<Slot>>,
}

/// The oldest Get: one already handed a request first, then the longest waiting.
fn oldest_get<C, S>(handed: &mut VecDeque<S>, waiting: &mut VecDeque<(C, S)>) -> Option<S> {
    handed.pop_front().or_else(|| waiting.pop_front().map(|(_, slot)| slot))
}

/// One [`ListenerInner::drive`]: the listener's engine for the machine's effects.
struct ListenerRun<'a> {
    listener: &'a ListenerInner,
    core: &'a mut ListenerCore,
    done: &'a mut Done,
}

impl listen::Engine for ListenerRun<'_> {
    fn state(&mut self) -> &mut ListenerState {
        &mut self.core.state
    }

    fn stepped(&mut self, from: ListenerState, input: ListenerInput, t: &listen::ListenerTransition) {
        t.log(module_path!(), "listener", self.listener.token, from, input);
    }

    fn act(&mut self, action: ListenerAction) -> Result<(), NdStatus> {
        self.listener.act(self.core, action)
    }

    fn complete_gets(&mut self, count: u32, status: NdStatus) {
        for _ in 0..count {
            let Some(slot) = oldest_get(&mut self.core.handed, &mut self.core.waiting) else {
                break;
            };
            self.done.push((slot, status));
        }
    }
}

pub(crate) type ListenerInner = EndpointInner<ListenerCore>;

impl ListenerInner {
    /// Runs one input through the machine and its effects ([`listen::drive`]).
    fn drive(&self, core: &mut ListenerCore, input: ListenerInput, done: &mut Done) -> Option<NdStatus> {
        listen::drive(
            &mut ListenerRun {
                listener: self,
                core,
                done,
            },
            input,
        )
    }

    fn act(&self, core: &mut ListenerCore, action: ListenerAction) -> Result<(), NdStatus> {
        match action {
            ListenerAction::BindAddress => {
                let addr = core.bind_to.take().ok_or(NdStatus::ND_INVALID_PARAMETER)?;
                let (id, reservation) = bind_exclusive(&self.adapter, self.token, addr)?;
                core.id = Some(id);
                core.hold = Some(reservation);
                Ok(())
            }
            ListenerAction::Listen => {
                let backlog = i32::try_from(core.backlog).unwrap_or(i32::MAX);
                core.id
                    .as_ref()
                    .ok_or(NdStatus::ND_INVALID_DEVICE_STATE)?
                    .listen(backlog)
            }
            ListenerAction::HandOverRequest => {
                let request = core.incoming.pop_front().ok_or(NdStatus::ND_INTERNAL_ERROR)?;
                let Some((connector, slot)) = core.waiting.pop_front() else {
                    core.incoming.push_front(request);
                    return Err(NdStatus::ND_INTERNAL_ERROR);
                };
                connector.take_request(request, core.hold.clone());
                core.handed.push_back(slot);
                Ok(())
            }
            ListenerAction::RejectRequest => {
                if let Some(request) = core.incoming.pop_back() {
                    request.id.reject(&[])?;
                }
                Ok(())
            }
            ListenerAction::RejectQueued { .. } => {
                for request in core.incoming.drain(..) {
                    if let Err(status) = request.id.reject(&[]) {
                        log::debug!("rejecting a queued request: {status}");
                    }
                }
                Ok(())
            }
            ListenerAction::DestroyId => {
                core.id = None;
                Ok(())
            }
        }
    }

    /// Drops queued requests whose active side abandoned them (no event tells; see
    /// [`CmId::request_alive`]): from the front until a live one when `all` is false, else all.
    fn prune_abandoned(&self, core: &mut ListenerCore, all: bool, done: &mut Done) {
        let mut at = 0;
        while at < core.incoming.len() {
            if core.incoming[at].id.request_alive() {
                if !all {
                    return;
                }
                at += 1;
                continue;
            }
            log::debug!("listener {}: a queued request was abandoned", self.token);
            // Dropping the id destroys it; its CM id is idle already, nothing goes out.
            core.incoming.remove(at);
            self.drive(core, ListenerInput::RequestAbandoned, done);
        }
    }

    /// Ends pending Gets whose connector can no longer take a request: released since
    /// (ND_CANCELED) or used for a connection of its own (ND_CONNECTION_ACTIVE, as
    /// GetConnectionRequest answers for such a connector). Handing one the request would
    /// complete its Get with ND_SUCCESS while the connector ignores the request, and would
    /// replace a connecting connector's rdma_cm id (its Connect then never completing).
    fn prune_gets(&self, core: &mut ListenerCore, done: &mut Done) {
        let mut at = 0;
        while at < core.waiting.len() {
            let state = lock(&core.waiting[at].0.core).state;
            if state == ConnectorState::Idle {
                at += 1;
                continue;
            }
            let Some((_, slot)) = core.waiting.remove(at) else {
                break;
            };
            log::debug!("listener {}: a Get's connector moved on ({state:?})", self.token);
            let status = if state == ConnectorState::Closed {
                NdStatus::ND_CANCELED
            } else {
                NdStatus::ND_CONNECTION_ACTIVE
            };
            done.push((slot, status));
            self.drive(core, ListenerInput::GetAbandoned, done);
        }
    }

    fn on_request(&self, id: CmId, private_data: Vec<u8>, params: (u8, u8)) {
        let mut done = Done::new();
        {
            let mut core = lock(&self.core);
            if let ListenerState::Listening { backlog, queued, .. } = core.state {
                if backlog > 0 && queued >= backlog {
                    self.prune_abandoned(&mut core, true, &mut done);
                }
            }
            self.prune_gets(&mut core, &mut done);
            core.incoming.push_back(Incoming {
                id,
                private_data,
                params,
            });
            let event = CmEvent::new(CmEventKind::ConnectRequest, 0);
            self.drive(&mut core, ListenerInput::Event(event), &mut done);
        }
        finish(done);
    }

    fn cancel(&self) {
        let mut done = Done::new();
        self.drive(&mut lock(&self.core), ListenerInput::Cancel, &mut done);
        finish(done);
    }
}

impl CmEventSink for ListenerInner {
    fn on_event(&self, event: CmEvent, _private_data: &[u8], _params: (u8, u8)) {
        let mut done = Done::new();
        self.drive(&mut lock(&self.core), ListenerInput::Event(event), &mut done);
        finish(done);
    }

    fn on_connect_request(&self, id: CmId, private_data: Vec<u8>, params: (u8, u8)) {
        self.on_request(id, private_data, params);
    }

    /// After a panic while handling this listener's event: every GetConnectionRequest pending
    /// completes with ND_INTERNAL_ERROR, and so does every later call but Cancel and Release.
    fn fail_internal(&self) {
        let mut done = Done::new();
        {
            let mut core = lock(&self.core);
            core.state = ListenerState::Failed(NdStatus::ND_INTERNAL_ERROR);
            let handed = std::mem::take(&mut core.handed);
            let waiting = std::mem::take(&mut core.waiting);
            done.extend(handed.into_iter().map(|slot| (slot, NdStatus::ND_INTERNAL_ERROR)));
            done.extend(waiting.into_iter().map(|(_, slot)| (slot, NdStatus::ND_INTERNAL_ERROR)));
        }
        finish(done);
    }
}

/// ND2 IND2Listener.
pub struct Listener {
    inner: Arc<ListenerInner>,
}

impl Listener {
    pub fn new(adapter: &Adapter) -> Listener {
        Listener {
            inner: ListenerInner::new(adapter),
        }
    }

    fn call(&self, input: ListenerInput, setup: impl FnOnce(&mut ListenerCore)) -> Result<(), NdStatus> {
        let mut done = Done::new();
        let returns = {
            let mut core = lock(&self.inner.core);
            setup(&mut core);
            self.inner.drive(&mut core, input, &mut done)
        };
        finish(done);
        match returns {
            Some(status) if status.is_error() => Err(status),
            _ => Ok(()),
        }
    }

    pub fn bind(&self, addr: SocketAddr) -> Result<(), NdStatus> {
        self.call(ListenerInput::Bind, |core| {
            if core.state == ListenerState::Idle {
                core.bind_to = Some(addr);
            }
        })
    }

    pub fn listen(&self, backlog: u32) -> Result<(), NdStatus> {
        self.call(ListenerInput::Listen { backlog }, |core| {
            if core.state == ListenerState::Bound {
                core.backlog = backlog;
            }
        })
    }

    pub fn local_address(&self) -> Option<SocketAddr> {
        let core = lock(&self.inner.core);
        local_address(core.id.as_ref(), core.hold.as_ref().map(PortReservation::addr))
    }

    pub fn get_local_address(&self, buffer: &mut [u8]) -> Result<BufferFill, NdStatus> {
        let addr = self.local_address().ok_or(NdStatus::ND_INVALID_DEVICE_STATE)?;
        Ok(fill_address(&sys::sockaddr_bytes(addr), buffer))
    }

    /// ND2 GetConnectionRequest: hands the next incoming request to `connector`.
    pub fn get_connection_request(&self, connector: &Connector) -> Result<Pending, NdStatus> {
        if lock(&connector.inner.core).state != ConnectorState::Idle {
            return Err(NdStatus::ND_CONNECTION_ACTIVE);
        }
        let slot = Slot::new();
        let mut done = Done::new();
        let returns = {
            let mut core = lock(&self.inner.core);
            self.inner.prune_abandoned(&mut core, false, &mut done);
            core.waiting
                .push_back((Arc::clone(&connector.inner), Arc::clone(&slot)));
            let returns = self
                .inner
                .drive(&mut core, ListenerInput::GetConnectionRequest, &mut done);
            match returns {
                Some(NdStatus::ND_PENDING) => {}
                Some(NdStatus::ND_SUCCESS) => {
                    core.handed.retain(|s| !Arc::ptr_eq(s, &slot));
                    done.push((Arc::clone(&slot), NdStatus::ND_SUCCESS));
                }
                _ => core.waiting.retain(|(_, s)| !Arc::ptr_eq(s, &slot)),
            }
            returns
        };
        finish(done);
        match returns {
            Some(status) if status.is_error() => Err(status),
            _ => {
                let weak = Arc::downgrade(&self.inner);
                Ok(Pending::new(
                    slot,
                    &self.inner.adapter,
                    Box::new(move || {
                        if let Some(inner) = weak.upgrade() {
                            inner.cancel();
                        }
                    }),
                ))
            }
        }
    }

    pub fn cancel(&self) {
        self.inner.cancel();
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.call(ListenerInput::Release, |_| {});
        self.inner.adapter.unregister(self.inner.token);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The listener's part of [`listen::drive`] on the host: its state and its queue of handed
    /// Gets, as [`ListenerRun`] keeps them; each action succeeds unless it is `fail`'s (no
    /// rdma_cm: the actions are only recorded).
    struct Machine {
        core: ListenerCore,
        acted: Vec<ListenerAction>,
        fail: Option<ListenerAction>,
        done: Done,
    }

    impl Machine {
        fn new() -> Machine {
            Machine {
                core: ListenerCore::default(),
                acted: Vec::new(),
                fail: None,
                done: Done::new(),
            }
        }

        fn call(&mut self, input: ListenerInput) -> NdStatus {
            listen::drive(self, input).unwrap_or(NdStatus::ND_SUCCESS)
        }
    }

    impl listen::Engine for Machine {
        fn state(&mut self) -> &mut ListenerState {
            &mut self.core.state
        }

        fn act(&mut self, action: ListenerAction) -> Result<(), NdStatus> {
            self.acted.push(action);
            if self.fail == Some(action) {
                return Err(NdStatus::ND_UNSUCCESSFUL);
            }
            Ok(())
        }

        fn complete_gets(&mut self, count: u32, status: NdStatus) {
            for _ in 0..count {
                let Some(slot) = oldest_get(&mut self.core.handed, &mut self.core.waiting) else {
                    break;
                };
                self.done.push((slot, status));
            }
        }
    }

    #[test]
    fn a_new_listener_is_idle_and_holds_nothing() {
        let core = ListenerCore::default();
        assert_eq!(core.state, ListenerState::Idle);
        assert!(core.id.is_none() && core.hold.is_none() && core.bind_to.is_none());
        assert!(core.incoming.is_empty() && core.waiting.is_empty() && core.handed.is_empty());
    }

    #[test]
    fn bind_then_listen_binds_and_listens_once_each() {
        let mut m = Machine::new();
        assert_eq!(m.call(ListenerInput::Bind), NdStatus::ND_SUCCESS);
        assert_eq!(m.core.state, ListenerState::Bound);
        assert_eq!(m.call(ListenerInput::Listen { backlog: 4 }), NdStatus::ND_SUCCESS);
        assert_eq!(
            m.core.state,
            ListenerState::Listening {
                backlog: 4,
                waiting: 0,
                queued: 0
            }
        );
        assert_eq!(m.acted, [ListenerAction::BindAddress, ListenerAction::Listen]);
        assert!(m.done.is_empty());
    }

    #[test]
    fn a_failed_bind_returns_the_failure_and_leaves_the_listener_unbound() {
        let mut m = Machine::new();
        m.fail = Some(ListenerAction::BindAddress);
        assert!(m.call(ListenerInput::Bind).is_error());
        assert_ne!(m.core.state, ListenerState::Bound);
        assert!(
            m.call(ListenerInput::Listen { backlog: 0 }).is_error(),
            "Listen needs a bound address"
        );
    }

    #[test]
    fn a_get_pends_and_its_cancel_completes_the_oldest_get() {
        let mut m = Machine::new();
        m.call(ListenerInput::Bind);
        m.call(ListenerInput::Listen { backlog: 0 });
        assert_eq!(m.call(ListenerInput::GetConnectionRequest), NdStatus::ND_PENDING);
        // The Get's slot, as the engine queues it once a request was handed to its connector.
        let get = Slot::new();
        m.core.handed.push_back(Arc::clone(&get));
        m.call(ListenerInput::Cancel);
        assert_eq!(m.done.len(), 1);
        assert!(Arc::ptr_eq(&m.done[0].0, &get));
        assert_eq!(m.done[0].1, NdStatus::ND_CANCELED);
        assert!(matches!(m.core.state, ListenerState::Listening { waiting: 0, .. }));
    }

    #[test]
    fn the_oldest_get_is_a_handed_one_then_the_longest_waiting() {
        let mut handed: VecDeque<u32> = VecDeque::from([1, 2]);
        let mut waiting: VecDeque<((), u32)> = VecDeque::from([((), 3), ((), 4)]);
        let order: Vec<u32> = std::iter::from_fn(|| oldest_get(&mut handed, &mut waiting)).collect();
        assert_eq!(order, [1, 2, 3, 4]);
    }
}
