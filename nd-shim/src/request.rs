//! A call that returned ND_PENDING: wait for it, poll it, cancel it, or have a callback run when
//! it completes (on the thread that processes the adapter's events).

use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::Duration;

use crate::engine::AdapterInner;
use crate::status::NdStatus;

type Callback = Box<dyn FnOnce(NdStatus) + Send>;

#[derive(Default)]
struct SlotState {
    status: Option<NdStatus>,
    callback: Option<Callback>,
}

/// Where the engine puts a request's result.
#[derive(Default)]
pub(crate) struct Slot {
    state: Mutex<SlotState>,
    done: Condvar,
}

fn lock(slot: &Slot) -> MutexGuard<'_, SlotState> {
    crate::sync::lock(&slot.state)
}

impl Slot {
    pub(crate) fn new() -> Arc<Slot> {
        Arc::new(Slot::default())
    }

    /// Records the result and runs the callback, if any. Call without holding object locks.
    pub(crate) fn complete(&self, status: NdStatus) {
        let callback = {
            let mut state = lock(self);
            if state.status.is_some() {
                return;
            }
            state.status = Some(status);
            state.callback.take()
        };
        self.done.notify_all();
        if let Some(callback) = callback {
            // The application's callback, usually on the event thread: a panic in it must not
            // take the thread (and every other object's events) down.
            crate::sync::contain("a completion callback", || callback(status));
        }
    }

    fn status(&self) -> Option<NdStatus> {
        lock(self).status
    }
}

/// The owner's cancel (CancelOverlappedRequests on the connector or listener).
pub(crate) type Canceler = Box<dyn Fn() + Send + Sync>;

/// A pending request.
pub struct Pending {
    slot: Arc<Slot>,
    adapter: Weak<AdapterInner>,
    cancel: Canceler,
}

impl Pending {
    pub(crate) fn new(slot: Arc<Slot>, adapter: &Arc<AdapterInner>, cancel: Canceler) -> Pending {
        Pending {
            slot,
            adapter: Arc::downgrade(adapter),
            cancel,
        }
    }

    /// The result, if the request has completed.
    pub fn poll(&self) -> Option<NdStatus> {
        self.slot.status()
    }

    /// Blocks until the request completes. When the application drives the adapter itself
    /// ([`crate::Adapter::open_polled`]), this processes its events while waiting.
    pub fn wait(&self) -> NdStatus {
        loop {
            if let Some(status) = self.wait_for(Duration::from_millis(50)) {
                return status;
            }
        }
    }

    /// Waits at most `timeout`; `None` if the request is still pending.
    pub fn wait_for(&self, timeout: Duration) -> Option<NdStatus> {
        // Completed already: no clock read (a syscall where the clock has no vDSO, as in the rig).
        if let Some(status) = self.slot.status() {
            return Some(status);
        }
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(status) = self.slot.status() {
                return Some(status);
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return None;
            }
            let slice = (deadline - now).min(Duration::from_millis(20));
            match self.adapter.upgrade() {
                Some(adapter) if !adapter.has_event_thread() => adapter.drive_for(slice),
                _ => {
                    let state = lock(&self.slot);
                    if state.status.is_none() {
                        drop(self.slot.done.wait_timeout(state, slice));
                    }
                }
            }
        }
    }

    /// Cancels every pending request of the object this request belongs to (ND's
    /// CancelOverlappedRequests); this one then completes with ND_CANCELED if it was pending.
    pub fn cancel(&self) {
        (self.cancel)();
    }

    /// Runs `callback` with the result when the request completes (at once if it has).
    pub fn on_complete(&self, callback: impl FnOnce(NdStatus) + Send + 'static) {
        let mut state = lock(&self.slot);
        match state.status {
            Some(status) => {
                drop(state);
                callback(status);
            }
            None => state.callback = Some(Box::new(callback)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_callback_is_contained_and_the_result_kept() {
        let slot = Slot::new();
        lock(&slot).callback = Some(Box::new(|_| panic!("application bug")));
        slot.complete(NdStatus::ND_CONNECTION_REFUSED);
        assert_eq!(slot.status(), Some(NdStatus::ND_CONNECTION_REFUSED));
        // Completing again changes nothing.
        slot.complete(NdStatus::ND_SUCCESS);
        assert_eq!(slot.status(), Some(NdStatus::ND_CONNECTION_REFUSED));
    }
}
