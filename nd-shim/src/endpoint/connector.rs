//! ND2 IND2Connector / NDK connector: its rdma_cm id, driven by [`crate::connection`]'s machine.

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::sync::Arc;

use rdma_mummy_sys as ffi;

use crate::cm_event::{CmEvent, CmEventKind};
use crate::connection::{self, Action, ConnectorInput, ConnectorState, Request};
use crate::connection_data::{fill_address, BufferFill, PeerData, PeerReadLimits, ReadLimits};
use crate::engine::{Adapter, CmEventSink};
use crate::ports::{PortReservation, Refusal, SharedConnection, SharedReservation};
use crate::request::{Pending, Slot};
use crate::status::{from_errno, NdStatus};
use crate::sync::lock;
use crate::sys::{self, CmId, ConnParam};
use crate::verbs::{QpInner, QueuePair};

use super::bind::{bind_connector, bind_exclusive, kernel_bind, local_address};
use super::handoff::{finish, Done, Incoming};
use super::inner::EndpointInner;
use super::shared::SharedEndpoint;

/// rdma_cm's address and route resolution timeout (the handshake has no timeout of the shim's).
const RESOLVE_TIMEOUT_MS: i32 = 2000;

enum Hold {
    Exclusive(PortReservation),
    /// A connection through an NDK shared endpoint.
    Shared(SharedConnection),
    /// ND2 Bind's address, which other connectors may share, and its connection's 4-tuple.
    Connector {
        address: SharedReservation,
        connection: Option<SharedConnection>,
    },
}

impl Hold {
    fn addr(&self) -> SocketAddr {
        match self {
            Hold::Exclusive(r) => r.addr(),
            Hold::Shared(c) => c.local_addr(),
            Hold::Connector { address, .. } => address.addr(),
        }
    }
}

/// How a connector's bind holds its address.
#[derive(Clone, Copy)]
enum BindAs {
    /// NdkConnect: exclusively.
    Exclusive,
    /// ND2 Bind: shared with other connectors that used Bind (and NDK shared endpoints).
    Connector,
}

#[derive(Default)]
struct Slots([Option<Arc<Slot>>; 4]);

fn slot_index(request: Request) -> usize {
    match request {
        Request::Connect => 0,
        Request::Accept => 1,
        Request::Disconnect => 2,
        Request::NotifyDisconnect => 3,
    }
}

/// A connector's state and what its actions need; a new connector's (default) is Idle, with no
/// id, address or queue pair, and nothing pending.
#[derive(Default)]
pub(super) struct Core {
    pub(super) state: ConnectorState,
    id: Option<CmId>,
    qp: Option<Arc<QpInner>>,
    hold: Option<Hold>,
    bind_to: Option<(SocketAddr, BindAs)>,
    shared: Option<Arc<SharedReservation>>,
    remote: Option<SocketAddr>,
    /// Private data for the REQ, REP or REJ being sent.
    outgoing: Vec<u8>,
    /// What the caller asked for in Connect / Accept.
    requested: ReadLimits,
    peer: PeerData,
    slots: Slots,
    /// NDK's DisconnectEvent ([`Connector::on_peer_disconnect`]): completed by the machine's
    /// [`connection::Effect::PeerDisconnected`], dropped unrun on release.
    peer_disconnect: Option<Arc<Slot>>,
}

impl Core {
    /// A call that returned ND_PENDING: the slot its completion goes to.
    fn pend(&mut self, request: Request) -> Arc<Slot> {
        let slot = Slot::new();
        self.slots.0[slot_index(request)] = Some(Arc::clone(&slot));
        slot
    }

    /// The machine completes `request`: its slot, if it is pending.
    fn take_slot(&mut self, request: Request) -> Option<Arc<Slot>> {
        self.slots.0[slot_index(request)].take()
    }
}

/// One [`ConnInner::drive`]: the connector's engine for the machine's effects.
struct Run<'a, 's> {
    conn: &'a ConnInner,
    core: &'a mut Core,
    setup: Setup<'s>,
    done: &'a mut Done,
}

impl connection::Engine for Run<'_, '_> {
    fn state(&mut self) -> &mut ConnectorState {
        &mut self.core.state
    }

    fn prepare(&mut self) {
        if let Some(setup) = self.setup.take() {
            setup(self.core);
        }
    }

    fn stepped(&mut self, from: ConnectorState, input: ConnectorInput, t: &connection::Transition) {
        t.log(module_path!(), "connector", self.conn.token, from, input);
    }

    fn act(&mut self, action: Action) -> Result<(), NdStatus> {
        self.conn.act(self.core, action).inspect_err(|status| {
            log::debug!("connector {}: {action:?} failed: {status}", self.conn.token);
        })
    }

    fn complete(&mut self, request: Request, status: NdStatus) {
        if let Some(slot) = self.core.take_slot(request) {
            self.done.push((slot, status));
        }
    }

    fn peer_disconnected(&mut self) {
        log::debug!("connector {}: peer disconnected", self.conn.token);
        if let Some(slot) = self.core.peer_disconnect.take() {
            self.done.push((slot, NdStatus::ND_SUCCESS));
        }
    }
}

pub(crate) type ConnInner = EndpointInner<Core>;

/// What a call sets up for its actions; applied only when the step has actions to carry out.
type Setup<'a> = Option<Box<dyn FnOnce(&mut Core) + 'a>>;

impl ConnInner {
    /// Runs one input through the machine and its effects ([`connection::drive`]). Returns the
    /// call's code.
    fn drive(&self, core: &mut Core, input: ConnectorInput, setup: Setup<'_>, done: &mut Done) -> Option<NdStatus> {
        let returns = connection::drive(
            &mut Run {
                conn: self,
                core,
                setup,
                done,
            },
            input,
        );
        if !core.state.engaged() {
            if let Some(qp) = &core.qp {
                qp.release(self.token);
            }
        }
        returns
    }

    fn id(core: &Core) -> Result<&CmId, NdStatus> {
        core.id.as_ref().ok_or(NdStatus::ND_CONNECTION_INVALID)
    }

    fn qp(core: &Core) -> Result<&Arc<QpInner>, NdStatus> {
        core.qp.as_ref().ok_or(NdStatus::ND_INVALID_PARAMETER)
    }

    /// Creates the id, reserves `addr` (port 0: from the ND range) and binds it there.
    fn bind_exclusive(&self, core: &mut Core, addr: SocketAddr) -> Result<(), NdStatus> {
        let (id, reservation) = bind_exclusive(&self.adapter, self.token, addr)?;
        core.id = Some(id);
        core.hold = Some(Hold::Exclusive(reservation));
        Ok(())
    }

    fn act(&self, core: &mut Core, action: Action) -> Result<(), NdStatus> {
        match action {
            Action::BindAddress => match core.bind_to.take().ok_or(NdStatus::ND_INVALID_PARAMETER)? {
                (addr, BindAs::Exclusive) => self.bind_exclusive(core, addr),
                (addr, BindAs::Connector) => {
                    let (id, address) = bind_connector(&self.adapter, self.token, addr)?;
                    core.id = Some(id);
                    core.hold = Some(Hold::Connector {
                        address,
                        connection: None,
                    });
                    Ok(())
                }
            },
            Action::StartConnect => {
                let remote = core.remote.ok_or(NdStatus::ND_INVALID_PARAMETER)?;
                // The unspecified address names no peer: STATUS_BAD_NETWORK_NAME inline, as
                // Microsoft's ndmemorytest NdInvalidIP expects for a destination of 0.0.0.0
                // (rdma_resolve_addr would take it for loopback and the REQ would go
                // unanswered for about 100 s). docs/nd-semantics.md failure table.
                if remote.ip().is_unspecified() {
                    return Err(NdStatus::STATUS_BAD_NETWORK_NAME);
                }
                // No route: ND_NETWORK_UNREACHABLE inline (docs/nd-semantics.md failure table).
                self.adapter.routes.check(remote)?;
                if let Some(endpoint) = core.shared.clone() {
                    // A retry gives up the failed attempt's 4-tuple first.
                    core.hold = None;
                    let connection = endpoint.connect(remote)?;
                    let id = self.adapter.channel.create_id(self.token)?;
                    id.set_reuseaddr()?;
                    id.bind(connection.local_addr())?;
                    core.id = Some(id);
                    core.hold = Some(Hold::Shared(connection));
                } else {
                    if let Some(Hold::Connector { address, connection }) = &mut core.hold {
                        // The 4-tuple, unique among the connectors sharing the address; a retry
                        // gives up the failed attempt's first.
                        *connection = None;
                        *connection = Some(address.connect(remote)?);
                    }
                    if core.id.is_none() {
                        // A retry after a failed attempt: a fresh id on the address still held.
                        let held = match &core.hold {
                            Some(Hold::Exclusive(held)) => Some((held.addr(), false)),
                            Some(Hold::Connector { address, .. }) => Some((address.addr(), true)),
                            _ => None,
                        };
                        match held {
                            Some((addr, shared)) => {
                                let id = kernel_bind(&self.adapter, self.token, addr, shared).map_err(|refusal| {
                                    match refusal {
                                        Refusal::HeldElsewhere => NdStatus::ND_SHARING_VIOLATION,
                                        Refusal::Failed(status) => status,
                                    }
                                })?;
                                core.id = Some(id);
                            }
                            None => self.bind_exclusive(core, SocketAddr::new(self.adapter.local_ip, 0))?,
                        }
                    }
                }
                Self::id(core)?.resolve_addr(remote, RESOLVE_TIMEOUT_MS)
            }
            Action::ResolveRoute => Self::id(core)?.resolve_route(RESOLVE_TIMEOUT_MS),
            Action::SendRequest => {
                let limits = core.requested.capped_to(self.adapter.info.read_limits());
                let (responder_resources, initiator_depth) = limits.to_conn_param();
                let qp_num = Self::qp(core)?.qp_num();
                Self::id(core)?.connect(&ConnParam {
                    private_data: &core.outgoing,
                    responder_resources,
                    initiator_depth,
                    qp_num,
                })
            }
            Action::AcceptRequest => {
                let requested = core.requested;
                let limits = core.peer.negotiate(requested, self.adapter.info.read_limits());
                let (responder_resources, initiator_depth) = limits.to_conn_param();
                let id = Self::id(core)?;
                let qp = Self::qp(core)?;
                // QP to RTR (and RTS, which the CM allows before the REP) before rdma_accept.
                for state in [ffi::ibv_qp_state::IBV_QPS_RTR, ffi::ibv_qp_state::IBV_QPS_RTS] {
                    // EINVAL: the CM left REQ_RCVD, the active side abandoned its Connect
                    // (docs/nd-semantics.md: REQ_SENT abandon, ND_CONNECTION_ABORTED). See
                    // CmId::request_alive for why no event says so.
                    let (mut attr, mask) = id.qp_attr(state).map_err(|s| {
                        if s == from_errno(libc::EINVAL) {
                            NdStatus::ND_CONNECTION_ABORTED
                        } else {
                            s
                        }
                    })?;
                    attr.max_dest_rd_atomic = responder_resources;
                    attr.max_rd_atomic = initiator_depth;
                    qp.modify(&mut attr, mask)?;
                }
                self.adapter.register_qp(qp.qp_num(), self.token);
                id.accept(&ConnParam {
                    private_data: &core.outgoing,
                    responder_resources,
                    initiator_depth,
                    qp_num: qp.qp_num(),
                })
            }
            Action::Establish => {
                // The CM's attributes carry the peer's REP offer uncapped; the QP gets the
                // effective limits negotiated when Connect completed (IND2Connector: "the limit
                // values in its queue pair are updated with the new limits").
                let limits = core.peer.read_limits(self.adapter.info.read_limits())?;
                let (responder_resources, initiator_depth) = limits.to_conn_param();
                let id = Self::id(core)?;
                let qp = Self::qp(core)?;
                for state in [ffi::ibv_qp_state::IBV_QPS_RTR, ffi::ibv_qp_state::IBV_QPS_RTS] {
                    let (mut attr, mask) = id.qp_attr(state)?;
                    attr.max_dest_rd_atomic = responder_resources;
                    attr.max_rd_atomic = initiator_depth;
                    qp.modify(&mut attr, mask)?;
                }
                id.establish()
            }
            // EINVAL: the CM left REQ_RCVD / REP_RCVD, the peer abandoned first (NdkReject,
            // IND2Connector::Reject: ND_CONNECTION_ABORTED); as in AcceptRequest.
            Action::RejectPeer => Self::id(core)?.reject(&core.outgoing).map_err(|s| {
                if s == from_errno(libc::EINVAL) {
                    NdStatus::ND_CONNECTION_ABORTED
                } else {
                    s
                }
            }),
            Action::SendDisconnect => Self::id(core)?.disconnect(),
            Action::FlushQp => match &core.qp {
                Some(qp) => qp.flush(),
                None => Ok(()),
            },
            Action::FlushQpLater => {
                if let Some(qp) = &core.qp {
                    qp.flush_later(self.token);
                }
                Ok(())
            }
            Action::DestroyId => {
                core.id = None;
                Ok(())
            }
        }
    }

    /// A call: `setup` stores its arguments for the actions; `pending` is the request that
    /// completes later when the call returns ND_PENDING.
    fn call(
        &self,
        input: ConnectorInput,
        setup: Setup<'_>,
        pending: Option<Request>,
    ) -> Result<Option<Arc<Slot>>, NdStatus> {
        let mut done = Done::new();
        let result = {
            let mut core = lock(&self.core);
            let returns = self
                .drive(&mut core, input, setup, &mut done)
                .unwrap_or(NdStatus::ND_SUCCESS);
            match (returns, pending) {
                (NdStatus::ND_PENDING, Some(request)) => Ok(Some(core.pend(request))),
                (status, _) if status.is_error() => Err(status),
                _ => Ok(None),
            }
        };
        finish(done);
        result
    }

    fn on_cm_event(&self, event: CmEvent, private_data: &[u8], params: (u8, u8)) {
        let mut done = Done::new();
        {
            let mut core = lock(&self.core);
            match event.kind {
                CmEventKind::ConnectResponse if core.state == ConnectorState::Connecting => {
                    core.peer.record_private_data(private_data);
                    core.peer
                        .record_read_limits(PeerReadLimits::from_event_param(params.0, params.1));
                    let requested = core.requested;
                    core.peer.negotiate(requested, self.adapter.info.read_limits());
                }
                CmEventKind::Rejected if !private_data.is_empty() => core.peer.record_private_data(private_data),
                _ => {}
            }
            self.drive(&mut core, ConnectorInput::Event(event), None, &mut done);
        }
        finish(done);
    }

    /// A listener hands this connector a CONNECT_REQUEST.
    pub(super) fn take_request(&self, request: Incoming, listener_hold: Option<PortReservation>) {
        let mut done = Done::new();
        {
            let mut core = lock(&self.core);
            request.id.set_context(self.token);
            core.id = Some(request.id);
            core.hold = listener_hold.map(Hold::Exclusive);
            core.peer.record_private_data(&request.private_data);
            core.peer
                .record_read_limits(PeerReadLimits::from_event_param(request.params.0, request.params.1));
            let event = CmEvent::new(CmEventKind::ConnectRequest, 0);
            self.drive(&mut core, ConnectorInput::Event(event), None, &mut done);
        }
        finish(done);
    }

    /// IBV_EVENT_COMM_EST: data arrived before the RTU; tell rdma_cm so Accept completes.
    fn comm_established(&self) {
        let core = lock(&self.core);
        if core.state == ConnectorState::Accepting {
            if let Some(id) = &core.id {
                if let Err(status) = id.notify() {
                    log::warn!("rdma_notify: {status}");
                }
            }
        }
    }

    /// After a panic while handling this connector's event: whatever it has pending completes
    /// with ND_INTERNAL_ERROR and the connector is failed, so no request pends forever.
    fn fail_all_internal(&self) {
        let mut done = Done::new();
        {
            let mut core = lock(&self.core);
            core.state = ConnectorState::Failed(NdStatus::ND_INTERNAL_ERROR);
            for slot in core.slots.0.iter_mut().filter_map(Option::take) {
                done.push((slot, NdStatus::ND_INTERNAL_ERROR));
            }
            if let Some(qp) = &core.qp {
                qp.release(self.token);
            }
        }
        finish(done);
    }

    /// Gives back a claim on `qp` that a refused or failed call took: the queue pair stays with
    /// a connector only while that connector's connection on it is in progress or up.
    fn release_unless_engaged(&self, qp: &Arc<QpInner>) {
        let core = lock(&self.core);
        let its_qp = core.qp.as_ref().is_some_and(|ours| Arc::ptr_eq(ours, qp));
        qp.settle_claim(self.token, core.state, its_qp);
    }

    fn cancel(&self) {
        // Cancel always returns ND_SUCCESS.
        let _ = self.call(ConnectorInput::Cancel, None, None);
    }
}

impl CmEventSink for ConnInner {
    fn on_event(&self, event: CmEvent, private_data: &[u8], params: (u8, u8)) {
        self.on_cm_event(event, private_data, params);
    }

    fn on_comm_established(&self) {
        self.comm_established();
    }

    fn fail_internal(&self) {
        self.fail_all_internal();
    }
}

/// Where a Connect's local address comes from.
enum ConnectFrom {
    /// ND2 Connect: the address Bind took, else one of the ND range.
    Bound,
    /// NdkConnect: this address, bound in the same step when the connector has none.
    Address(SocketAddr),
    /// NdkConnectWithSharedEndpoint: the shared endpoint's.
    Shared(Arc<SharedReservation>),
}

/// ND2 IND2Connector / NDK connector.
pub struct Connector {
    pub(super) inner: Arc<ConnInner>,
}

impl Connector {
    pub fn new(adapter: &Adapter) -> Connector {
        Connector {
            inner: ConnInner::new(adapter),
        }
    }

    fn pending(&self, slot: Arc<Slot>) -> Pending {
        let weak = Arc::downgrade(&self.inner);
        Pending::new(
            slot,
            &self.inner.adapter,
            Box::new(move || {
                if let Some(inner) = weak.upgrade() {
                    inner.cancel();
                }
            }),
        )
    }

    fn pending_or_done(&self, slot: Option<Arc<Slot>>) -> Pending {
        let slot = slot.unwrap_or_else(|| {
            let slot = Slot::new();
            slot.complete(NdStatus::ND_SUCCESS);
            slot
        });
        self.pending(slot)
    }

    /// ND2 Bind. Port 0 picks a free port of the ND range. Other connectors may Bind the same
    /// address (as on Windows providers); a listener's may not, nor may a listener take this one.
    pub fn bind(&self, addr: SocketAddr) -> Result<(), NdStatus> {
        let setup: Setup<'_> = Some(Box::new(move |core: &mut Core| {
            core.bind_to = Some((addr, BindAs::Connector))
        }));
        self.inner.call(ConnectorInput::Bind, setup, None).map(drop)
    }

    /// ND2 Connect: `inbound_read_limit` reads this side serves, `outbound_read_limit` reads it
    /// issues. Completes at the peer's Accept (REP) or with the failure.
    pub fn connect(
        &self,
        qp: &QueuePair,
        remote: SocketAddr,
        inbound_read_limit: u32,
        outbound_read_limit: u32,
        private_data: &[u8],
    ) -> Result<Pending, NdStatus> {
        self.start_connect(
            qp,
            ConnectFrom::Bound,
            remote,
            ReadLimits::new(inbound_read_limit, outbound_read_limit),
            private_data,
        )
    }

    /// NDK NdkConnect: Bind to `local` (when the connector has no address yet) and Connect, in
    /// one step of the state machine.
    pub fn bind_and_connect(
        &self,
        qp: &QueuePair,
        local: SocketAddr,
        remote: SocketAddr,
        inbound_read_limit: u32,
        outbound_read_limit: u32,
        private_data: &[u8],
    ) -> Result<Pending, NdStatus> {
        self.start_connect(
            qp,
            ConnectFrom::Address(local),
            remote,
            ReadLimits::new(inbound_read_limit, outbound_read_limit),
            private_data,
        )
    }

    /// NDK NdkConnectWithSharedEndpoint.
    pub fn connect_with_shared_endpoint(
        &self,
        qp: &QueuePair,
        endpoint: &SharedEndpoint,
        remote: SocketAddr,
        inbound_read_limit: u32,
        outbound_read_limit: u32,
        private_data: &[u8],
    ) -> Result<Pending, NdStatus> {
        self.start_connect(
            qp,
            ConnectFrom::Shared(Arc::clone(&endpoint.reservation)),
            remote,
            ReadLimits::new(inbound_read_limit, outbound_read_limit),
            private_data,
        )
    }

    fn start_connect(
        &self,
        qp: &QueuePair,
        from: ConnectFrom,
        remote: SocketAddr,
        requested: ReadLimits,
        private_data: &[u8],
    ) -> Result<Pending, NdStatus> {
        let qp = Arc::clone(&qp.inner);
        let qp_in_use = !qp.claim(self.inner.token);
        let private_data_len = private_data.len();
        let (input, bind_to, shared) = match from {
            ConnectFrom::Bound => (
                ConnectorInput::Connect {
                    private_data_len,
                    qp_in_use,
                },
                None,
                None,
            ),
            ConnectFrom::Address(local) => (
                ConnectorInput::BindAndConnect {
                    private_data_len,
                    qp_in_use,
                },
                Some((local, BindAs::Exclusive)),
                None,
            ),
            ConnectFrom::Shared(endpoint) => (
                ConnectorInput::ConnectWithSharedEndpoint {
                    private_data_len,
                    qp_in_use,
                },
                None,
                Some(endpoint),
            ),
        };
        let claimed = Arc::clone(&qp);
        let setup: Setup<'_> = Some(Box::new(move |core: &mut Core| {
            core.qp = Some(qp);
            core.remote = Some(remote);
            core.outgoing = private_data.to_vec();
            core.requested = requested;
            core.shared = shared;
            core.bind_to = bind_to;
            core.peer = PeerData::default();
        }));
        let slot = self.inner.call(input, setup, Some(Request::Connect));
        self.inner.release_unless_engaged(&claimed);
        Ok(self.pending_or_done(slot?))
    }

    /// ND2 CompleteConnect: QP to RTR/RTS and the RTU.
    pub fn complete_connect(&self) -> Result<(), NdStatus> {
        self.inner.call(ConnectorInput::CompleteConnect, None, None).map(drop)
    }

    /// ND2 Accept. Completes when the connection is established (the peer's RTU).
    pub fn accept(
        &self,
        qp: &QueuePair,
        inbound_read_limit: u32,
        outbound_read_limit: u32,
        private_data: &[u8],
    ) -> Result<Pending, NdStatus> {
        let qp = Arc::clone(&qp.inner);
        let qp_in_use = !qp.claim(self.inner.token);
        let claimed = Arc::clone(&qp);
        let setup: Setup<'_> = Some(Box::new(move |core: &mut Core| {
            core.qp = Some(qp);
            core.outgoing = private_data.to_vec();
            core.requested = ReadLimits::new(inbound_read_limit, outbound_read_limit);
        }));
        let input = ConnectorInput::Accept {
            private_data_len: private_data.len(),
            qp_in_use,
        };
        let slot = self.inner.call(input, setup, Some(Request::Accept));
        self.inner.release_unless_engaged(&claimed);
        Ok(self.pending_or_done(slot?))
    }

    /// ND2 Reject: passive before Accept, or active after Connect completed.
    pub fn reject(&self, private_data: &[u8]) -> Result<(), NdStatus> {
        let setup: Setup<'_> = Some(Box::new(move |core: &mut Core| core.outgoing = private_data.to_vec()));
        let input = ConnectorInput::Reject {
            private_data_len: private_data.len(),
        };
        self.inner.call(input, setup, None).map(drop)
    }

    /// ND2 GetReadLimits: the connection's effective limits once negotiated (after Connect
    /// completed, after Accept); before Accept, the peer's request from this side's view, capped
    /// to the adapter.
    pub fn get_read_limits(&self) -> Result<ReadLimits, NdStatus> {
        lock(&self.inner.core)
            .peer
            .read_limits(self.inner.adapter.info.read_limits())
    }

    /// ND2 GetPrivateData: the peer's private data as the event reported it (wire size).
    pub fn get_private_data(&self, buffer: &mut [u8]) -> Result<BufferFill, NdStatus> {
        lock(&self.inner.core).peer.fill_private_data(buffer)
    }

    pub fn local_address(&self) -> Option<SocketAddr> {
        let core = lock(&self.inner.core);
        local_address(core.id.as_ref(), core.hold.as_ref().map(Hold::addr))
    }

    pub fn peer_address(&self) -> Option<SocketAddr> {
        let core = lock(&self.inner.core);
        core.id.as_ref().and_then(CmId::peer_addr).or(core.remote)
    }

    /// ND2 GetLocalAddress into an encoded sockaddr buffer: once bound, while connecting or
    /// connected ([`ConnectorState::has_local_address`]), else ND_CONNECTION_INVALID.
    pub fn get_local_address(&self, buffer: &mut [u8]) -> Result<BufferFill, NdStatus> {
        if !self.state().has_local_address() {
            return Err(NdStatus::ND_CONNECTION_INVALID);
        }
        let addr = self.local_address().ok_or(NdStatus::ND_CONNECTION_INVALID)?;
        Ok(fill_address(&sys::sockaddr_bytes(addr), buffer))
    }

    /// ND2 GetPeerAddress into an encoded sockaddr buffer: while connected, and on the passive
    /// side from the request on ([`ConnectorState::has_peer_address`]), else
    /// ND_CONNECTION_INVALID.
    pub fn get_peer_address(&self, buffer: &mut [u8]) -> Result<BufferFill, NdStatus> {
        if !self.state().has_peer_address() {
            return Err(NdStatus::ND_CONNECTION_INVALID);
        }
        let addr = self.peer_address().ok_or(NdStatus::ND_CONNECTION_INVALID)?;
        Ok(fill_address(&sys::sockaddr_bytes(addr), buffer))
    }

    /// ND2 NotifyDisconnect: completes when the peer disconnects.
    pub fn notify_disconnect(&self) -> Result<Pending, NdStatus> {
        let slot = self
            .inner
            .call(ConnectorInput::NotifyDisconnect, None, Some(Request::NotifyDisconnect))?;
        Ok(self.pending_or_done(slot))
    }

    /// NDK's DisconnectEvent: `callback` runs once when the peer ends the connection (the
    /// machine's [`connection::Effect::PeerDisconnected`]; at once if it already has), never after this
    /// side's Disconnect nor after release. A later call replaces an earlier one's callback.
    pub fn on_peer_disconnect(&self, callback: impl FnOnce() + Send + 'static) {
        let slot = Slot::new();
        let already = {
            let mut core = lock(&self.inner.core);
            core.peer_disconnect = Some(Arc::clone(&slot));
            core.state == ConnectorState::PeerDisconnected
        };
        if already {
            slot.complete(NdStatus::ND_SUCCESS);
        }
        self.pending(slot).on_complete(move |_| callback());
    }

    /// ND2 Disconnect: DREQ, and the QP to ERR (outstanding requests complete ND_CANCELED).
    pub fn disconnect(&self) -> Result<Pending, NdStatus> {
        let slot = self
            .inner
            .call(ConnectorInput::Disconnect, None, Some(Request::Disconnect))?;
        Ok(self.pending_or_done(slot))
    }

    /// IND2Overlapped::CancelOverlappedRequests.
    pub fn cancel(&self) {
        self.inner.cancel();
    }

    pub fn state(&self) -> ConnectorState {
        lock(&self.inner.core).state
    }

    /// The connector's Release now, ahead of its drop: whatever is pending completes
    /// ND_CANCELED (a Disconnect too, which a cancel lets go on), a connection still up is
    /// disconnected, the rdma_cm id destroyed; later calls get ND_INVALID_HANDLE. ND2's last
    /// Release calls it, so that no request of the object completes after that Release
    /// returned, even while another call still holds the object (the drop comes later then).
    pub fn release(&self) {
        let _ = self.inner.call(ConnectorInput::Release, None, None);
    }
}

impl Drop for Connector {
    fn drop(&mut self) {
        // Closed already when ND2's Release came first: nothing happens twice.
        self.release();
        lock(&self.inner.core).peer_disconnect = None;
        if let Some(qp) = lock(&self.inner.core).qp.take() {
            qp.release(self.inner.token);
            self.inner.adapter.unregister_qp(qp.qp_num(), self.inner.token);
        }
        self.inner.adapter.unregister(self.inner.token);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The connector's part of [`connection::drive`] on the host: its [`Core`] and the slots of
    /// its pending requests, as [`Run`] keeps them; each action succeeds unless it is `fail`'s
    /// (no rdma_cm: the actions are only recorded).
    struct Machine {
        core: Core,
        acted: Vec<Action>,
        fail: Option<(Action, NdStatus)>,
        done: Done,
    }

    impl Machine {
        fn new() -> Machine {
            Machine {
                core: Core::default(),
                acted: Vec::new(),
                fail: None,
                done: Done::new(),
            }
        }

        /// One call, as [`ConnInner::call`] makes it: a pending `request` gets its slot.
        fn call(&mut self, input: ConnectorInput, request: Option<Request>) -> (NdStatus, Option<Arc<Slot>>) {
            let returns = connection::drive(self, input).unwrap_or(NdStatus::ND_SUCCESS);
            let slot = match (returns, request) {
                (NdStatus::ND_PENDING, Some(request)) => Some(self.core.pend(request)),
                _ => None,
            };
            (returns, slot)
        }
    }

    impl connection::Engine for Machine {
        fn state(&mut self) -> &mut ConnectorState {
            &mut self.core.state
        }

        fn act(&mut self, action: Action) -> Result<(), NdStatus> {
            self.acted.push(action);
            match self.fail {
                Some((failing, status)) if failing == action => Err(status),
                _ => Ok(()),
            }
        }

        fn complete(&mut self, request: Request, status: NdStatus) {
            if let Some(slot) = self.core.take_slot(request) {
                self.done.push((slot, status));
            }
        }

        fn peer_disconnected(&mut self) {}
    }

    const CONNECT: ConnectorInput = ConnectorInput::Connect {
        private_data_len: 0,
        qp_in_use: false,
    };

    #[test]
    fn a_new_connector_is_idle_and_holds_nothing() {
        let core = Core::default();
        assert_eq!(core.state, ConnectorState::Idle);
        assert!(core.id.is_none() && core.qp.is_none() && core.hold.is_none() && core.shared.is_none());
        assert!(core.slots.0.iter().all(Option::is_none) && core.peer_disconnect.is_none());
    }

    #[test]
    fn each_request_pends_in_a_slot_of_its_own() {
        let requests = [
            Request::Connect,
            Request::Accept,
            Request::Disconnect,
            Request::NotifyDisconnect,
        ];
        let mut core = Core::default();
        let slots: Vec<Arc<Slot>> = requests.iter().map(|&r| core.pend(r)).collect();
        for (i, &request) in requests.iter().enumerate() {
            let taken = core.take_slot(request).expect("pending");
            assert!(
                Arc::ptr_eq(&taken, &slots[i]),
                "{request:?} took another request's slot"
            );
            assert!(core.take_slot(request).is_none(), "{request:?} completes once");
            let still: usize = core.slots.0.iter().filter(|s| s.is_some()).count();
            assert_eq!(still, requests.len() - i - 1);
        }
    }

    #[test]
    fn a_connect_pends_through_resolution_and_its_cancel_completes_only_its_slot() {
        let mut m = Machine::new();
        assert_eq!(m.call(ConnectorInput::Bind, None).0, NdStatus::ND_SUCCESS);
        assert_eq!(m.core.state, ConnectorState::Bound);
        let (returns, slot) = m.call(CONNECT, Some(Request::Connect));
        assert_eq!(returns, NdStatus::ND_PENDING);
        assert_eq!(m.core.state, ConnectorState::Connecting);
        assert_eq!(m.acted.last(), Some(&Action::StartConnect));
        let slot = slot.expect("Connect pends");
        let notify = m.core.pend(Request::NotifyDisconnect);

        m.call(ConnectorInput::Cancel, None);
        assert_eq!(m.done.len(), 1, "one completion: {:?}", m.core.state);
        assert!(Arc::ptr_eq(&m.done[0].0, &slot));
        assert_eq!(m.done[0].1, NdStatus::ND_CANCELED);
        assert!(m.core.take_slot(Request::Connect).is_none());
        assert!(Arc::ptr_eq(
            &m.core.take_slot(Request::NotifyDisconnect).unwrap(),
            &notify
        ));
    }

    #[test]
    fn a_connect_whose_first_action_fails_returns_the_failure_and_pends_nothing() {
        let mut m = Machine::new();
        m.call(ConnectorInput::Bind, None);
        m.fail = Some((Action::StartConnect, NdStatus::ND_UNSUCCESSFUL));
        let (returns, slot) = m.call(CONNECT, Some(Request::Connect));
        assert!(returns.is_error(), "{returns}");
        assert!(slot.is_none() && m.core.slots.0.iter().all(Option::is_none));
        assert_ne!(m.core.state, ConnectorState::Connecting);
        assert!(m.done.is_empty());
    }

    #[test]
    fn release_of_an_idle_connector_completes_nothing_and_ends_it() {
        let mut m = Machine::new();
        m.call(ConnectorInput::Release, None);
        assert!(m.done.is_empty());
        assert_ne!(m.core.state, ConnectorState::Idle);
        let (returns, _) = m.call(CONNECT, Some(Request::Connect));
        assert!(returns.is_error(), "a released connector refuses Connect: {returns}");
        assert!(m.core.slots.0.iter().all(Option::is_none));
    }
}
