//! A call that returned ND_PENDING: wait for it, poll it, cancel it, or have a callback run when
//! it completes (on the thread that processes the adapter's events).

#![forbid(unsafe_code)]

use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::engine::AdapterInner;
use crate::status::NdStatus;
use crate::sync::model::{Condvar, Mutex, MutexGuard};

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
    crate::sync::model::lock(&slot.state)
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

/// A pending request whose cancel completes it with ND_CANCELED, as the owners' cancels do
/// (CancelOverlappedRequests): the tests' and the loom models' request.
#[cfg(test)]
fn pending(slot: &Arc<Slot>) -> Pending {
    let canceled = Arc::clone(slot);
    Pending {
        slot: Arc::clone(slot),
        adapter: Weak::new(),
        cancel: Box::new(move || canceled.complete(NdStatus::ND_CANCELED)),
    }
}

#[cfg(all(test, not(loom)))]
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

    /// The loom models' race on real threads, many rounds: the engine's completion, the owner's
    /// cancel, the callback's registration and a waiter, each on its own thread. One status,
    /// which the callback gets once and the waiter and every later look see. ThreadSanitizer
    /// runs it (tests/check.sh, docs/safety.md) over std's real mutex and condition variable.
    #[test]
    fn completion_cancel_callback_and_wait_race_on_real_threads() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        for _ in 0..200 {
            let slot = Slot::new();
            let calls = Arc::new(AtomicUsize::new(0));
            let seen = Arc::new(std::sync::Mutex::new(None));
            let (waiter, canceler, registrar) = (pending(&slot), pending(&slot), pending(&slot));
            let status = std::thread::scope(|s| {
                s.spawn(|| slot.complete(NdStatus::ND_SUCCESS));
                s.spawn(move || canceler.cancel());
                let (calls, seen) = (Arc::clone(&calls), Arc::clone(&seen));
                s.spawn(move || {
                    registrar.on_complete(move |status| {
                        calls.fetch_add(1, Ordering::Relaxed);
                        *seen.lock().unwrap() = Some(status);
                    });
                });
                s.spawn(move || waiter.wait()).join().unwrap()
            });
            assert!(status == NdStatus::ND_SUCCESS || status == NdStatus::ND_CANCELED);
            assert_eq!(slot.status(), Some(status), "the status stays");
            assert_eq!(calls.load(Ordering::Relaxed), 1, "the callback runs exactly once");
            assert_eq!(*seen.lock().unwrap(), Some(status), "with the status that stays");
        }
    }
}

/// A request's completion under loom (`RUSTFLAGS="--cfg loom" cargo test --release -p nd-shim
/// --lib loom_`): the real [`Slot`] and [`Pending`] over loom's mutex and condition variable
/// (crate::sync::model), every interleaving of the engine's completion, the owner's cancel, the
/// application's wait and callback, and the release of the request.
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::atomic::{AtomicUsize, Ordering};
    use loom::thread;

    /// A new slot, a pending request on it, and the engine's thread completing it ND_SUCCESS.
    fn completing() -> (Arc<Slot>, Pending, thread::JoinHandle<()>) {
        let slot = Slot::new();
        let p = pending(&slot);
        let engine = {
            let slot = Arc::clone(&slot);
            thread::spawn(move || slot.complete(NdStatus::ND_SUCCESS))
        };
        (slot, p, engine)
    }

    /// Complete vs cancel vs callback: the engine completes the request while the application
    /// cancels it and registers a callback; whatever the order, it completes exactly once: one
    /// status, which the callback gets once and every later look sees.
    #[test]
    fn loom_complete_vs_cancel_completes_once() {
        loom::model(|| {
            let (_slot, p, engine) = completing();
            let calls = loom::sync::Arc::new(AtomicUsize::new(0));
            let seen = Arc::new(std::sync::Mutex::new(None));
            {
                let (calls, seen) = (loom::sync::Arc::clone(&calls), Arc::clone(&seen));
                p.on_complete(move |status| {
                    calls.fetch_add(1, Ordering::Relaxed);
                    *seen.lock().unwrap() = Some(status);
                });
            }
            p.cancel();
            engine.join().unwrap();
            let status = p.poll().expect("completed");
            assert!(status == NdStatus::ND_SUCCESS || status == NdStatus::ND_CANCELED);
            assert_eq!(calls.load(Ordering::Relaxed), 1, "the callback runs exactly once");
            assert_eq!(*seen.lock().unwrap(), Some(status), "with the status that stays");
        });
    }

    /// Complete vs wait vs Release: the application waits on the request while the engine
    /// completes it and a third thread cancels it; the waiter is woken (no lost wake-up: loom
    /// reports a deadlock otherwise) with the status that stays; the request's release (its
    /// last handle dropped) meanwhile leaves the engine's completion harmless.
    #[test]
    fn loom_wait_is_woken_and_release_is_harmless() {
        loom::model(|| {
            let (slot, p, engine) = completing();
            let canceler = {
                let p = pending(&slot);
                thread::spawn(move || {
                    p.cancel();
                    // The released handle: the slot outlives it while the engine holds it.
                    drop(p);
                })
            };
            let status = p.wait();
            engine.join().unwrap();
            canceler.join().unwrap();
            assert_eq!(p.poll(), Some(status));
        });
    }
}
