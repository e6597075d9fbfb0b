//! The adapter and its rdma_cm event engine.
//!
//! One event channel per adapter carries the events of every connector and listener on it. Each
//! rdma_cm id's `context` is a token that names its owner in the adapter's registry; the engine
//! copies an event out, acknowledges it at once (so `rdma_destroy_id` never waits on the engine),
//! then hands it to the owner through [`CmEventSink`], the one trait the endpoints implement: the
//! engine knows no connector or listener type. Every call into a sink runs behind a panic
//! boundary ([`deliver`]). The device's async events are drained in the same
//! pass: IBV_EVENT_COMM_EST on a passive QP is forwarded to `rdma_notify` (first data can beat
//! the RTU).
//!
//! Each adapter also keeps an id of its own bound to its address (the watch): rdma_cm's
//! DEVICE_REMOVAL on it is how the shim learns that the device is going away (rxe sends no
//! async event then), and is told to the ND2 objects as the device's failure.
//!
//! Two ways to run it: [`Adapter::open`] starts a thread of the shim's own that processes events
//! and runs completion callbacks; [`Adapter::open_polled`] leaves that to the application, which
//! polls [`Adapter::event_fd`] and calls [`Adapter::process_events`] (and [`crate::Pending::wait`]
//! does so itself while it waits).

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use rdma_mummy_sys as ffi;

use crate::cm_event::{CmEvent, CmEventKind};
use crate::connection_data::{AdapterReadLimits, MAX_CALLEE_DATA, MAX_CALLER_DATA};
use crate::ports::PortSpace;
use crate::status::NdStatus;
use crate::sync::{contain, lock};
pub(crate) use crate::sys::Pd;
use crate::sys::{self, CmId, DeviceList, EventChannel, RawEvent};

/// ND2_ADAPTER_INFO, the parts that the device and RoCE decide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdapterInfo {
    pub vendor_id: u32,
    pub device_id: u32,
    pub max_registration_size: u64,
    pub max_initiator_sge: u32,
    pub max_receive_sge: u32,
    pub max_read_sge: u32,
    pub max_receive_queue_depth: u32,
    pub max_initiator_queue_depth: u32,
    pub max_completion_queue_depth: u32,
    /// A shared receive queue's depth and SGEs (`max_srq_wr`, `max_srq_sge`).
    pub max_srq_depth: u32,
    pub max_srq_sge: u32,
    /// Reads the adapter serves per QP (`max_qp_rd_atom`).
    pub max_inbound_read_limit: u32,
    /// Reads the adapter issues per QP (`max_qp_init_rd_atom`).
    pub max_outbound_read_limit: u32,
    pub max_caller_data: u32,
    pub max_callee_data: u32,
}

impl AdapterInfo {
    pub fn read_limits(&self) -> AdapterReadLimits {
        AdapterReadLimits {
            max_inbound: self.max_inbound_read_limit,
            max_outbound: self.max_outbound_read_limit,
        }
    }
}

/// A hasher for the registry's integer keys (tokens, QP numbers): they come from the shim and
/// the device, not from a peer, so SipHash's flood resistance buys nothing and costs on every
/// register, lookup and unregister (docs/nd-shim-performance.md has the figure).
#[derive(Default)]
struct IntHasher(u64);

impl Hasher for IntHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type IntMap<K, V> = HashMap<K, V, BuildHasherDefault<IntHasher>>;

/// The owner of an rdma_cm id, as the engine sees it: where its events go. The endpoints (the
/// Rust API's connector and listener) implement it; the engine holds owners weakly by token.
pub(crate) trait CmEventSink: Send + Sync {
    /// An event for the owner's own id. `params`: the peer's (responder resources, initiator
    /// depth) from the event's connection parameters.
    fn on_event(&self, event: CmEvent, private_data: &[u8], params: (u8, u8));

    /// A CONNECT_REQUEST on the owner's listening id; `id` is the new connection's and is the
    /// owner's from here on. Only a listener listens: the default drops the id, which rejects.
    fn on_connect_request(&self, id: CmId, private_data: Vec<u8>, params: (u8, u8)) {
        let _ = (private_data, params);
        drop(id);
    }

    /// IBV_EVENT_COMM_EST on a queue pair the owner registered ([`AdapterInner::register_qp`]).
    fn on_comm_established(&self) {}

    /// After one of the calls above panicked: whatever the owner has pending completes with
    /// ND_INTERNAL_ERROR, so no request waits for ever.
    fn fail_internal(&self);
}

pub(crate) type Owner = Weak<dyn CmEventSink>;

/// Runs `call` on `sink` behind a panic boundary: a panic is logged, the calling thread (the
/// event thread, or an application thread in `process_events`) lives on, and the sink fails
/// what it has pending with ND_INTERNAL_ERROR.
pub(crate) fn deliver(what: &str, sink: &dyn CmEventSink, call: impl FnOnce(&dyn CmEventSink)) {
    if contain(what, || call(sink)).is_none() {
        contain("failing the requests of a panicked event handler", || {
            sink.fail_internal()
        });
    }
}

/// What hears a device's async events about its CQs, SRQs and itself (read on the adapter's
/// event thread; `element` is the handle the event names, as an address, or 0).
pub(crate) trait DeviceEvents: Send + Sync {
    fn device_event(&self, event_type: u32, element: usize);
}

pub struct AdapterInner {
    pub(crate) channel: EventChannel,
    pub(crate) ctx: *mut ffi::ibv_context,
    pub(crate) pd: Pd,
    pub(crate) local_ip: IpAddr,
    /// The device port that has `local_ip` (rdma_cm's bind finds it): QPs start on it.
    pub(crate) port_num: u8,
    pub(crate) info: AdapterInfo,
    pub(crate) ports: PortSpace,
    pub(crate) routes: sys::RouteCheck,
    owners: Mutex<IntMap<u64, Owner>>,
    /// QP number -> owning connector's token, for COMM_EST.
    qps: Mutex<IntMap<u32, u64>>,
    next_token: AtomicU64,
    /// Held while a thread processes events: one processor at a time keeps events in order.
    processing: Mutex<()>,
    thread: AtomicBool,
    /// The rdma_cm channel and the device's async fd: readable when there is work.
    epoll: Epoll,
    /// Who hears the device's async events that are not COMM_EST (the ND2 adapter: CQ errors,
    /// SRQ limits, device failures).
    device_events: Mutex<Option<Weak<dyn DeviceEvents>>>,
    /// An id bound to `local_ip` for the adapter's life ([`WATCH_TOKEN`]): rdma_cm tells it of
    /// the device's removal even when no connector or listener exists. Destroyed first in Drop.
    watch: Mutex<Option<CmId>>,
    /// The device was removed (rdma_cm's DEVICE_REMOVAL on the watch id).
    removed: AtomicBool,
    // Dropped last (in Drop): keeps librdmacm's device contexts open.
    devices: Option<DeviceList>,
}

/// Which of the adapter's event sources epoll found ready.
#[derive(Clone, Copy)]
struct Ready {
    cm: bool,
    device: bool,
}

/// One process-wide ND port space: ND applications see one set of ports per address.
fn port_space() -> Result<PortSpace, NdStatus> {
    static PORTS: OnceLock<Result<PortSpace, String>> = OnceLock::new();
    PORTS
        .get_or_init(|| PortSpace::from_env().map_err(|e| e.to_string()))
        .clone()
        .map_err(|e| {
            log::error!("{e}");
            NdStatus::ND_INVALID_PARAMETER
        })
}

/// The watch id's token: no owner is ever registered under it (tokens count up from 1).
const WATCH_TOKEN: u64 = u64::MAX;

impl AdapterInner {
    pub(crate) fn register(&self, owner: Owner) -> u64 {
        let token = self.next_token.fetch_add(1, Ordering::Relaxed);
        lock(&self.owners).insert(token, owner);
        token
    }

    pub(crate) fn unregister(&self, token: u64) {
        lock(&self.owners).remove(&token);
    }

    pub(crate) fn register_qp(&self, qp_num: u32, token: u64) {
        lock(&self.qps).insert(qp_num, token);
    }

    /// Forgets `qp_num` if `token` still owns it (a later connector may have taken the QP over).
    pub(crate) fn unregister_qp(&self, qp_num: u32, token: u64) {
        let mut qps = lock(&self.qps);
        if qps.get(&qp_num) == Some(&token) {
            qps.remove(&qp_num);
        }
    }

    pub(crate) fn has_event_thread(&self) -> bool {
        self.thread.load(Ordering::Acquire)
    }

    /// Waits up to `timeout` for events and processes them; returns at once if another thread
    /// is processing (after a short wait).
    pub(crate) fn drive_for(&self, timeout: Duration) {
        let Ok(_guard) = self.processing.try_lock() else {
            std::thread::sleep(Duration::from_millis(1));
            return;
        };
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        if let Some(ready) = self.wait_ready(ms) {
            self.process_locked(ready);
        }
    }

    /// Waits up to `ms` for the epoll set; which of its fds are ready, or None on a timeout or
    /// an error (a signal: the caller comes back).
    fn wait_ready(&self, ms: i32) -> Option<Ready> {
        let mut evs = [EpollEvent::empty(); 2];
        let n = self
            .epoll
            .wait(&mut evs, EpollTimeout::try_from(ms).unwrap_or(EpollTimeout::NONE))
            .ok()
            .filter(|&n| n > 0)?;
        let channel = self.channel.fd() as u64;
        let mut ready = Ready {
            cm: false,
            device: false,
        };
        for ev in &evs[..n.min(2)] {
            if ev.data() == channel {
                ready.cm = true;
            } else {
                ready.device = true;
            }
        }
        Some(ready)
    }

    fn process(&self) -> usize {
        let _guard = lock(&self.processing);
        self.process_locked(Ready { cm: true, device: true })
    }

    /// Processes the ready sources: only those epoll reported, so a wakeup for a CM event does
    /// not also pay a read of the device's async fd that finds nothing (and the other way).
    fn process_locked(&self, ready: Ready) -> usize {
        let mut handled = if ready.device { self.process_async_events() } else { 0 };
        if !ready.cm {
            return handled;
        }
        loop {
            match self.channel.next_event() {
                Ok(Some(event)) => {
                    handled += 1;
                    self.dispatch(event);
                }
                Ok(None) => return handled,
                Err(status) => {
                    log::error!("rdma_get_cm_event: {status}");
                    return handled;
                }
            }
        }
    }

    fn dispatch(&self, mut event: RawEvent) {
        let Some(kind) = CmEventKind::from_raw(event.kind) else {
            log::debug!("ignoring rdma_cm event {}", event.kind);
            return;
        };
        log::debug!("event {kind:?} status {} for token {}", event.status, event.context);
        if event.context == WATCH_TOKEN {
            if kind == CmEventKind::DeviceRemoval {
                self.device_removed();
            }
            return;
        }
        let params = (event.responder_resources, event.initiator_depth);
        if kind == CmEventKind::ConnectRequest {
            let Some(id) = event.id.take_new_connection() else {
                return;
            };
            match event.listen_context.and_then(|token| self.owner(token)) {
                Some(listener) => deliver("a connection request", listener.as_ref(), |l| {
                    l.on_connect_request(id, event.private_data, params)
                }),
                // The listener is gone: dropping the id rejects the request.
                None => drop(id),
            }
            return;
        }
        match self.owner(event.context) {
            Some(owner) => deliver("an rdma_cm event", owner.as_ref(), |o| {
                o.on_event(CmEvent::new(kind, event.status), &event.private_data, params)
            }),
            None => log::debug!("event {kind:?} for a released object"),
        }
    }

    /// The device is being removed. rxe has no disassociate_ucontext, so the kernel's
    /// ib_unregister_device waits until this process closes the device (docs/porting-nd2.md,
    /// "Device removal"): the device's other users hear it as libibverbs reports a device's
    /// failure, IBV_EVENT_DEVICE_FATAL (their Notify requests complete with ND_DEVICE_REMOVED), so
    /// that the program releases its objects and removal can finish.
    fn device_removed(&self) {
        if self.removed.swap(true, Ordering::SeqCst) {
            return;
        }
        log::warn!("the device of {} is being removed", self.local_ip);
        let sink = lock(&self.device_events).as_ref().and_then(Weak::upgrade);
        if let Some(sink) = sink {
            sink.device_event(ffi::ibv_event_type::IBV_EVENT_DEVICE_FATAL as u32, 0);
        }
    }

    /// Whether the device was removed (or failed): only cleanup succeeds from then on.
    pub(crate) fn is_removed(&self) -> bool {
        self.removed.load(Ordering::SeqCst)
    }

    /// The live owner of `token`, if any.
    fn owner(&self, token: u64) -> Option<Arc<dyn CmEventSink>> {
        lock(&self.owners).get(&token).and_then(Weak::upgrade)
    }

    fn process_async_events(&self) -> usize {
        let mut handled = 0;
        loop {
            let Some(event) = self.next_async_event() else {
                return handled;
            };
            handled += 1;
            log::debug!("async event {}", event.event_type);
            let Some(qp_num) = event.comm_est_qp_num else {
                if event.event_type == ffi::ibv_event_type::IBV_EVENT_DEVICE_FATAL as u32 {
                    self.removed.store(true, Ordering::SeqCst);
                }
                let sink = lock(&self.device_events).as_ref().and_then(Weak::upgrade);
                if let Some(sink) = sink {
                    sink.device_event(event.event_type, event.element);
                }
                continue;
            };
            let token = lock(&self.qps).get(&qp_num).copied();
            if let Some(owner) = token.and_then(|t| self.owner(t)) {
                deliver("a COMM_EST event", owner.as_ref(), |o| o.on_comm_established());
            }
        }
    }
}

impl AdapterInner {
    /// From now on the device's async events other than COMM_EST go to `sink` (while it lives).
    pub(crate) fn set_device_events(&self, sink: Weak<dyn DeviceEvents>) {
        *lock(&self.device_events) = Some(sink);
    }
}

impl Drop for AdapterInner {
    fn drop(&mut self) {
        // Before the channel it is on goes.
        drop(lock(&self.watch).take());
        self.release_pd();
        drop(self.devices.take());
        // librdmacm closes a removed device's context only when it next lists the devices and
        // nothing of its own uses it any more; until then the kernel's removal of an rxe device
        // waits for this process. Listing now lets removal finish while the program lives on.
        if self.is_removed() {
            drop(DeviceList::new());
        }
    }
}

/// An RDMA adapter, found by one of its local addresses.
pub struct Adapter {
    pub(crate) inner: Arc<AdapterInner>,
}

impl Adapter {
    /// Opens the adapter that has `local` and starts the shim's event thread; completion
    /// callbacks run on it. The thread lives as long as the adapter or any object made from it.
    pub fn open(local: IpAddr) -> Result<Adapter, NdStatus> {
        let adapter = Adapter::open_polled(local)?;
        adapter.inner.thread.store(true, Ordering::Release);
        let weak = Arc::downgrade(&adapter.inner);
        // Counted among the shim's threads (DllCanUnloadNow) while it runs.
        let spawned = crate::liveness::spawn("nd-shim-events", move || loop {
            let Some(inner) = weak.upgrade() else { return };
            if let Some(ready) = inner.wait_ready(100) {
                let _guard = lock(&inner.processing);
                inner.process_locked(ready);
            }
        });
        if spawned.is_err() {
            adapter.inner.thread.store(false, Ordering::Release);
            return Err(NdStatus::ND_INSUFFICIENT_RESOURCES);
        }
        Ok(adapter)
    }

    /// Opens the adapter that has `local`; the application drives its events
    /// ([`Adapter::event_fd`], [`Adapter::process_events`]).
    pub fn open_polled(local: IpAddr) -> Result<Adapter, NdStatus> {
        if sys::is_loopback(local) || local.is_unspecified() {
            return Err(NdStatus::ND_INVALID_ADDRESS);
        }
        let ports = port_space()?;
        let devices = DeviceList::new()?;
        let channel = EventChannel::new()?;
        // An id bound to the address finds the device that has it, then stays as the watch:
        // in the UDP port space, so that its port takes none from ND's connections (TCP).
        let watch = channel.create_id_in(WATCH_TOKEN, ffi::rdma_port_space::RDMA_PS_UDP)?;
        watch.bind(SocketAddr::new(local, 0))?;
        let (ctx, port_num) = (watch.verbs(), watch.port_num().max(1));
        if ctx.is_null() || !devices.contains(ctx) {
            return Err(NdStatus::ND_INVALID_ADDRESS);
        }
        // Before the PD, which then goes straight into the adapter, whose Drop releases it.
        let epoll =
            Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).map_err(|error| crate::status::from_errno(error as i32))?;
        let (attr, pd) = sys::open_device(&devices, ctx)?;
        let positive = |v: i32| u32::try_from(v).unwrap_or(0);
        let info = AdapterInfo {
            vendor_id: attr.vendor_id,
            device_id: attr.vendor_part_id,
            max_registration_size: attr.max_mr_size,
            max_initiator_sge: positive(attr.max_sge),
            max_receive_sge: positive(attr.max_sge),
            max_read_sge: positive(attr.max_sge_rd),
            max_receive_queue_depth: positive(attr.max_qp_wr),
            max_srq_depth: positive(attr.max_srq_wr),
            max_srq_sge: positive(attr.max_srq_sge),
            max_initiator_queue_depth: positive(attr.max_qp_wr),
            max_completion_queue_depth: positive(attr.max_cqe),
            max_inbound_read_limit: positive(attr.max_qp_rd_atom),
            max_outbound_read_limit: positive(attr.max_qp_init_rd_atom),
            max_caller_data: MAX_CALLER_DATA as u32,
            max_callee_data: MAX_CALLEE_DATA as u32,
        };
        let inner = Arc::new(AdapterInner {
            channel,
            ctx,
            pd,
            local_ip: local,
            port_num,
            info,
            ports,
            routes: sys::RouteCheck::new(local),
            owners: Mutex::new(IntMap::default()),
            qps: Mutex::new(IntMap::default()),
            next_token: AtomicU64::new(1),
            processing: Mutex::new(()),
            thread: AtomicBool::new(false),
            epoll,
            device_events: Mutex::new(None),
            watch: Mutex::new(Some(watch)),
            removed: AtomicBool::new(false),
            devices: Some(devices),
        });
        // The context's async fd is the shim's alone to read.
        sys::set_nonblocking(inner.async_fd().as_raw_fd())?;
        for fd in [inner.channel.as_fd(), inner.async_fd()] {
            inner
                .epoll
                .add(fd, EpollEvent::new(EpollFlags::EPOLLIN, fd.as_raw_fd() as u64))
                .map_err(|error| crate::status::from_errno(error as i32))?;
        }
        Ok(Adapter { inner })
    }

    /// ND2_ADAPTER_INFO.
    pub fn query(&self) -> AdapterInfo {
        self.inner.info
    }

    pub fn local_address(&self) -> IpAddr {
        self.inner.local_ip
    }

    /// Whether `ctx` (an rdma_cm id's device context) is this adapter's device.
    pub(crate) fn is_device(&self, ctx: *mut ffi::ibv_context) -> bool {
        std::ptr::eq(ctx, self.inner.ctx)
    }

    /// A file descriptor that becomes readable when [`Adapter::process_events`] has work.
    pub fn event_fd(&self) -> i32 {
        self.inner.epoll.0.as_raw_fd()
    }

    /// Processes every event that is ready, without blocking; returns how many.
    pub fn process_events(&self) -> usize {
        self.inner.process()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// A sink whose event handler panics, counting the calls that reach it.
    #[derive(Default)]
    struct Panicking {
        events: AtomicUsize,
        failed: AtomicUsize,
    }

    impl CmEventSink for Panicking {
        fn on_event(&self, _: CmEvent, _: &[u8], _: (u8, u8)) {
            self.events.fetch_add(1, Ordering::Relaxed);
            panic!("a handler bug");
        }

        fn fail_internal(&self) {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_panicking_event_handler_fails_its_requests_and_the_thread_lives_on() {
        let sink = Panicking::default();
        let event = CmEvent::new(CmEventKind::Established, 0);
        // The thread that delivers (here, the test's) survives both panics and goes on.
        deliver("test event", &sink, |s| s.on_event(event, &[], (0, 0)));
        deliver("test event", &sink, |s| s.on_event(event, &[], (0, 0)));
        assert_eq!(sink.events.load(Ordering::Relaxed), 2);
        assert_eq!(sink.failed.load(Ordering::Relaxed), 2);
    }
}
