//! The adapter's completion channel: one channel per adapter serves every CQ's notifications.
//! The channel knows no CQ type: a CQ armed for a notification registers itself under its verbs
//! handle as a [`Notified`], so the adapter that holds the channel, and which every CQ holds,
//! does not depend on the CQ.
//!
//! Who reads the channel is the [`pump`](super::pump)'s business: the application thread that
//! waits in the shim (the leader) when there is one, so that a CQ event wakes one thread; else
//! the adapter's relay thread started here.
//!
//! The verbs channel and its events are `data_verbs`' ([`CompChannel`],
//! [`CqEvents`]).
#![forbid(unsafe_code)]

use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use rdma_mummy_sys as ffi;

use super::data_verbs::{CompChannel, CqEvents};
use super::doorbell::Doorbell;
use super::int_map::IntMap;
use super::pump::{self, Drain, Registration};
use super::{code, HResult};
use crate::engine::DeviceEvents;
use crate::status::NdStatus;
use crate::sys::{set_nonblocking, set_nonblocking_to};
use crate::Adapter;

/// What the channel's thread calls when the channel reports a CQ's event (or, for an SRQ, the
/// device reports its limit event).
pub(crate) trait Notified: Send + Sync {
    fn notified(&self);
    /// The device reported the object unusable (a CQ overrun, the device's failure): `status`
    /// says which. Read on the adapter's event thread.
    fn failed(&self, _status: NdStatus) {}
}

/// Events read from the channel are acknowledged this many at a time, per CQ: an
/// acknowledgement is a mutex and a condition signal in libibverbs (about 95 instructions), and
/// ibv_ack_cq_events(3) recommends acknowledging several at once. The rest are acknowledged when
/// the CQ leaves the channel, before anything can destroy it (ibv_destroy_cq waits for them).
const ACK_BATCH: u32 = 64;

/// Where a CQ's events go, and those of them read but not yet acknowledged.
struct Route {
    target: Weak<dyn Notified>,
    unacked: Option<CqEvents>,
}

/// The adapter's completion channel and the CQs it reports for.
pub(crate) struct NotifyChannel {
    /// Destroyed after the doorbell (taken in the drop) and every CQ on it (which hold it).
    channel: CompChannel,
    /// CQ handle -> its route (parking_lot's: looked up on every event).
    cqs: Mutex<IntMap<usize, Route>>,
    /// The channel's place in the pump's epoll set (set once, right after creation).
    registration: Mutex<Option<Registration>>,
    /// What ends another thread's blocking read of the channel; without one the channel is never
    /// blocking. Taken (destroyed) before the channel is.
    doorbell: Option<Doorbell>,
    /// The channel is in blocking mode (the pump's relay is parked).
    blocking: AtomicBool,
    /// Held by every read that must not block (the drains, which then look first whether an
    /// event is there when the channel is blocking) and by turning blocking mode on, so that no
    /// drain reads a channel that turned blocking after it looked.
    reader: Mutex<()>,
    /// Threads in a blocking read of the channel (release_readers rings them out).
    reading: AtomicUsize,
    /// SRQ handle -> the SRQ that waits for its limit event (IBV_EVENT_SRQ_LIMIT_REACHED).
    srqs: Mutex<IntMap<usize, Weak<dyn Notified>>>,
}

impl NotifyChannel {
    /// The channel, and its thread: it lives while anything holds the channel.
    pub(crate) fn new(adapter: &Adapter) -> Result<Arc<NotifyChannel>, HResult> {
        let raw = CompChannel::create(adapter).map_err(code)?;
        let doorbell = Doorbell::new(&adapter.inner, &raw);
        let fd = raw.fd();
        let channel = Arc::new(NotifyChannel {
            channel: raw,
            cqs: Mutex::new(IntMap::default()),
            registration: Mutex::new(None),
            doorbell,
            blocking: AtomicBool::new(false),
            reader: Mutex::new(()),
            reading: AtomicUsize::new(0),
            srqs: Mutex::new(IntMap::default()),
        });
        let events: Weak<dyn DeviceEvents> = Arc::downgrade(&channel) as Weak<NotifyChannel>;
        adapter.inner.set_device_events(events);
        set_nonblocking(fd).map_err(code)?;
        let weak = Arc::downgrade(&channel);
        let source: Weak<dyn Drain> = weak.clone();
        *channel.registration.lock() = Some(pump::register(channel.fd(), source).map_err(code)?);
        crate::liveness::spawn("nd2-cq-notify", move || {
            // A panic here must not unwind into the runtime's thread start (foreign edge:
            // nothing calls back into the application from this thread, but stay fenced).
            super::boundary("nd2-cq-notify", (), || {
                let mut relay = pump::Relay::new();
                loop {
                    // Holds no reference while it sleeps: the adapter's last Release ends it
                    // within one turn.
                    if weak.strong_count() == 0 {
                        return;
                    }
                    relay.turn(100);
                }
            })
        })
        .map_err(|_| NdStatus::ND_INSUFFICIENT_RESOURCES.0)?;
        Ok(channel)
    }

    /// The verbs channel, to create a CQ on.
    pub(crate) fn raw(&self) -> *mut ffi::ibv_comp_channel {
        self.channel.raw()
    }

    /// From now on, the events of verbs CQ `cq` go to `target` (while it lives).
    pub(crate) fn register(&self, cq: *mut ffi::ibv_cq, target: Weak<dyn Notified>) {
        let mut cqs = self.cqs.lock();
        match cqs.get_mut(&(cq as usize)) {
            // Keeps the count: those events still need their acknowledgement.
            Some(route) => route.target = target,
            None => {
                cqs.insert(cq as usize, Route { target, unacked: None });
            }
        }
    }

    /// The events of verbs CQ `cq` go nowhere, and those read are all acknowledged. The caller
    /// keeps `cq` alive until this returns.
    pub(crate) fn unregister(&self, cq: *mut ffi::ibv_cq) {
        let route = self.cqs.lock().remove(&(cq as usize));
        // Its unacknowledged events are acknowledged (their drop), outside the lock.
        drop(route);
    }

    /// From now on the limit event of verbs SRQ `srq` goes to `target` (while it lives).
    pub(crate) fn register_srq(&self, srq: *mut ffi::ibv_srq, target: Weak<dyn Notified>) {
        self.srqs.lock().insert(srq as usize, target);
    }

    /// The limit event of verbs SRQ `srq` goes nowhere.
    pub(crate) fn unregister_srq(&self, srq: *mut ffi::ibv_srq) {
        self.srqs.lock().remove(&(srq as usize));
    }

    fn fd(&self) -> i32 {
        self.channel.fd()
    }

    /// Rings a thread out of a direct read of the channel, if one is in it (the adapter is going:
    /// that thread holds the channel while it reads, and lets it go when it wakes).
    pub(crate) fn release_readers(&self) {
        if self.reading.load(Ordering::SeqCst) > 0 {
            self.ring();
        }
    }

    /// An event read from the channel for verbs CQ `cq`: the doorbell's is answered; another is
    /// counted for acknowledgement and told to its CQ.
    fn handle(&self, event: CqEvents) {
        let cq = event.cq();
        if let Some(doorbell) = self.doorbell.as_ref().filter(|d| d.cq() == cq) {
            // The doorbell's CQ lives while the doorbell does, until the channel's drop, which no
            // reader outlives.
            drop(event);
            doorbell.answer();
            return;
        }
        // Counted on the CQ's route and acknowledged ACK_BATCH at a time (unregister acknowledges
        // the rest); an event of a CQ with no route, at once. Either way before ibv_destroy_cq
        // returns: it waits for every event read from the CQ to be acknowledged.
        let (target, ack) = match self.cqs.lock().get_mut(&(cq as usize)) {
            Some(route) => {
                let unacked = match route.unacked.take() {
                    Some(mut unacked) => {
                        unacked.add(event);
                        unacked
                    }
                    None => event,
                };
                let ack = if unacked.count() >= ACK_BATCH {
                    Some(unacked)
                } else {
                    route.unacked = Some(unacked);
                    None
                };
                (route.target.upgrade(), ack)
            }
            None => (None, Some(event)),
        };
        // Acknowledged here, outside the lock.
        drop(ack);
        if let Some(target) = target {
            target.notified();
        }
    }

    /// One event of the channel: None if there was none (EAGAIN, EINTR).
    fn read_event(&self) -> Option<CqEvents> {
        self.channel.read_event()
    }
}

impl DeviceEvents for NotifyChannel {
    /// A CQ's error (rxe reports a CQ overrun so) fails that CQ's waiting Notify requests; the
    /// device's failure (rxe reports its removal so), every CQ's; an SRQ's limit event completes
    /// its Notify requests. The others are not an ND2 object's business.
    fn device_event(&self, event_type: u32, element: usize) {
        use ffi::ibv_event_type as E;
        if event_type == E::IBV_EVENT_CQ_ERR as u32 {
            let target = self.cqs.lock().get(&element).and_then(|route| route.target.upgrade());
            if let Some(target) = target {
                target.failed(NdStatus::ND_BUFFER_OVERFLOW);
            }
        } else if event_type == E::IBV_EVENT_DEVICE_FATAL as u32 {
            let targets: Vec<_> = self.cqs.lock().values().filter_map(|r| r.target.upgrade()).collect();
            let srqs: Vec<_> = self.srqs.lock().values().filter_map(Weak::upgrade).collect();
            for target in targets.into_iter().chain(srqs) {
                target.failed(NdStatus::ND_DEVICE_REMOVED);
            }
        } else if event_type == E::IBV_EVENT_SRQ_LIMIT_REACHED as u32 {
            let target = self.srqs.lock().get(&element).and_then(Weak::upgrade);
            if let Some(target) = target {
                target.notified();
            }
        }
    }
}

impl Drain for NotifyChannel {
    /// One event of the channel, told to its CQ. One read, not a loop to EAGAIN: the pump's
    /// sets are level-triggered and report a channel with more again.
    /// Never blocks: on a blocking channel (the relay parked: a leader with a deadline reads it
    /// here) it reads only an event it saw there, under the reader lock.
    ///
    /// While a thread is in the direct read (`reading`), a drain reads nothing: the kernel
    /// wakes that reader for the same event, and the event may be the doorbell's ring that is
    /// there to end its read (an unpark rings it out while the relay, back in its set, is woken
    /// too). A drain that took the ring left the reader blocked for good, its own completion
    /// already handled: a ping-pong whose both ends then waited for ever (seen across two
    /// guests and on Debian 13's kernel). The set reports the event again until the reader has
    /// it: the yield lets it run.
    fn drain(&self) {
        if self.reading.load(Ordering::SeqCst) > 0 {
            std::thread::yield_now();
            return;
        }
        let read = {
            let _reader = self.reader.lock();
            if !self.blocking.load(Ordering::SeqCst) || readable(self.fd()) {
                self.read_event()
            } else {
                None
            }
        };
        if let Some(event) = read {
            self.handle(event);
        }
    }

    fn drain_blocking(&self, awake: &dyn Fn()) -> Result<(), ()> {
        if !self.blocking.load(Ordering::SeqCst) {
            return Err(());
        }
        self.reading.fetch_add(1, Ordering::SeqCst);
        // libibverbs' read: a cancellation point, as ibv_get_cq_event is in a verbs program.
        let read = self.read_event();
        let error = if read.is_some() { 0 } else { crate::sys::errno() };
        self.reading.fetch_sub(1, Ordering::SeqCst);
        awake();
        if let Some(event) = read {
            self.handle(event);
            Ok(())
        } else if error == libc::EINTR {
            // A signal: the caller looks again.
            Ok(())
        } else {
            // EAGAIN: made non-blocking meanwhile (the relay unparked); or the channel failed:
            // the caller waits in its epoll set this turn instead.
            Err(())
        }
    }

    fn ring(&self) {
        if let Some(doorbell) = &self.doorbell {
            doorbell.ring();
        }
    }

    /// Off: the flag is cleared first (a direct read that still sees it set gets EAGAIN at
    /// worst). On: under the reader lock, the flag set last (a drain that saw it clear has read).
    fn set_blocking(&self, blocking: bool) -> bool {
        if blocking && self.doorbell.is_none() {
            return false;
        }
        let _reader = blocking.then(|| self.reader.lock());
        if !blocking {
            self.blocking.store(false, Ordering::SeqCst);
        }
        if let Err(error) = set_nonblocking_to(self.fd(), !blocking) {
            log::error!("nd2: fcntl on the completion channel: {}", error.0);
            return false;
        }
        if blocking {
            self.blocking.store(true, Ordering::SeqCst);
        }
        true
    }
}

/// The descriptor has something to read now (poll with no wait).
fn readable(fd: i32) -> bool {
    let mut poll = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    crate::sys::poll(std::slice::from_mut(&mut poll), 0) == 1 && poll.revents & libc::POLLIN != 0
}

impl Drop for NotifyChannel {
    fn drop(&mut self) {
        if let Some(registration) = self.registration.lock().take() {
            pump::unregister(&registration);
        }
        // No thread is in a direct read now (a reader holds the channel while it reads): the
        // doorbell goes before the channel.
        drop(self.doorbell.take());
        // The channel goes with the fields (every CQ on it holds it, so none is left).
    }
}
