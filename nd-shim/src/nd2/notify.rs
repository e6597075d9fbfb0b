//! The adapter's completion channel: one channel per adapter serves every CQ's notifications.
//! The channel knows no CQ type: a CQ armed for a notification registers itself under its verbs
//! handle as a [`Notified`], so the adapter that holds the channel, and which every CQ holds,
//! does not depend on the CQ.
//!
//! Who reads the channel is the [`pump`](super::pump)'s business: the application thread that
//! waits in the shim (the leader) when there is one, so that a CQ event wakes one thread; else
//! the adapter's relay thread started here.

use parking_lot::Mutex;
use std::ffi::c_void;
use std::sync::{Arc, Weak};

use rdma_mummy_sys as ffi;

use super::int_map::IntMap;
use super::pump::{self, Drain, Registration};
use super::{code, HResult};
use crate::status::NdStatus;
use crate::sys::{last_error, set_nonblocking};
use crate::Adapter;

/// What the channel's thread calls when the channel reports a CQ's event.
pub(crate) trait Notified: Send + Sync {
    fn notified(&self);
}

struct RawChannel(*mut ffi::ibv_comp_channel);
// SAFETY: a completion channel is a file descriptor with a small struct; libibverbs allows its
// use from any thread.
unsafe impl Send for RawChannel {}
// SAFETY: as above.
unsafe impl Sync for RawChannel {}

/// The adapter's completion channel and the CQs it reports for.
pub(crate) struct NotifyChannel {
    channel: RawChannel,
    /// CQ handle -> what to tell of its events (parking_lot's: looked up on every event).
    cqs: Mutex<IntMap<usize, Weak<dyn Notified>>>,
    /// The channel's place in the pump's epoll set (set once, right after creation).
    registration: Mutex<Option<Registration>>,
}

impl NotifyChannel {
    /// The channel, and its thread: it lives while anything holds the channel.
    pub(crate) fn new(adapter: &Adapter) -> Result<Arc<NotifyChannel>, HResult> {
        // SAFETY: the adapter's context is open.
        let raw = unsafe { ffi::ibv_create_comp_channel(adapter.inner.ctx) };
        if raw.is_null() {
            return Err(code(last_error()));
        }
        let channel = Arc::new(NotifyChannel {
            channel: RawChannel(raw),
            cqs: Mutex::new(IntMap::default()),
            registration: Mutex::new(None),
        });
        // SAFETY: the channel was just created and is open.
        set_nonblocking(unsafe { (*raw).fd }).map_err(code)?;
        let weak = Arc::downgrade(&channel);
        let source: Weak<dyn Drain> = weak.clone();
        *channel.registration.lock() = Some(pump::register(channel.fd(), source).map_err(code)?);
        std::thread::Builder::new()
            .name("nd2-cq-notify".into())
            .spawn(move || {
                // A panic here must not unwind into the runtime's thread start (foreign edge:
                // nothing calls back into the application from this thread, but stay fenced).
                super::boundary("nd2-cq-notify", (), || loop {
                    // Holds no reference while it sleeps: the adapter's last Release ends it
                    // within one turn.
                    if weak.strong_count() == 0 {
                        return;
                    }
                    pump::relay(100);
                })
            })
            .map_err(|_| NdStatus::ND_INSUFFICIENT_RESOURCES.0)?;
        Ok(channel)
    }

    /// The verbs channel, to create a CQ on.
    pub(crate) fn raw(&self) -> *mut ffi::ibv_comp_channel {
        self.channel.0
    }

    /// From now on, the events of verbs CQ `cq` go to `target` (while it lives).
    pub(crate) fn register(&self, cq: *mut ffi::ibv_cq, target: Weak<dyn Notified>) {
        self.cqs.lock().insert(cq as usize, target);
    }

    /// The events of verbs CQ `cq` go nowhere.
    pub(crate) fn unregister(&self, cq: *mut ffi::ibv_cq) {
        self.cqs.lock().remove(&(cq as usize));
    }

    fn fd(&self) -> i32 {
        // SAFETY: the channel is open while self lives.
        unsafe { (*self.channel.0).fd }
    }
}

impl Drain for NotifyChannel {
    /// One event of the channel (it is non-blocking), told to its CQ. One read, not a loop to
    /// EAGAIN: the pump's sets are level-triggered and report a channel with more again.
    fn drain(&self) {
        let mut cq: *mut ffi::ibv_cq = std::ptr::null_mut();
        let mut context: *mut c_void = std::ptr::null_mut();
        // SAFETY: the channel is open and non-blocking; the out pointers are live locals.
        if unsafe { ffi::ibv_get_cq_event(self.channel.0, &mut cq, &mut context) } != 0 {
            return;
        }
        // Acknowledged at once: ibv_destroy_cq waits for the events it has handed out.
        // SAFETY: the CQ the event names is live until that acknowledgement.
        unsafe { ffi::ibv_ack_cq_events(cq, 1) };
        let target = self.cqs.lock().get(&(cq as usize)).and_then(Weak::upgrade);
        if let Some(target) = target {
            target.notified();
        }
    }
}

impl Drop for NotifyChannel {
    fn drop(&mut self) {
        if let Some(registration) = self.registration.lock().take() {
            pump::unregister(&registration);
        }
        // SAFETY: every CQ on the channel holds it (through its verbs CQ), so none is left.
        if unsafe { ffi::ibv_destroy_comp_channel(self.channel.0) } != 0 {
            log::error!("ibv_destroy_comp_channel: {}", last_error());
        }
    }
}
