//! The event object: set, reset, taken by a wait (WaitForSingleObject's and
//! WaitForMultipleObjects', the latter's sleepers on one process-wide condition variable).

#![forbid(unsafe_code)]

use parking_lot::{Condvar, Mutex, MutexGuard};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use super::common::{timeout, wait_until};
use crate::nd2::pump;

/// A Win32 event: manual-reset stays signalled until ResetEvent; auto-reset releases one waiter.
pub(crate) struct Event {
    pub(super) manual: bool,
    pub(super) signalled: Mutex<bool>,
    pub(super) cv: Condvar,
}

impl Event {
    pub(crate) fn set(&self) {
        self.set_unkicked();
        pump::kick();
    }

    /// Sets the event without waking the leader: the caller calls [`pump::kick`] (or fences
    /// and calls [`pump::kick_fenced`]) once its changes are all made.
    pub(crate) fn set_unkicked(&self) {
        *self.signalled.lock() = true;
        if self.manual {
            self.cv.notify_all();
        } else {
            self.cv.notify_one();
        }
        multi().wake();
    }

    pub(super) fn reset(&self) {
        *self.signalled.lock() = false;
    }

    /// Takes the event if it is signalled (an auto-reset event is reset): a wait's success.
    fn take(&self) -> bool {
        let mut signalled = self.signalled.lock();
        let was = *signalled;
        if was && !self.manual {
            *signalled = false;
        }
        was
    }

    pub(super) fn wait(&self, ms: u32) -> bool {
        let deadline = timeout(ms).map(|t| Instant::now() + t);
        let manual = self.manual;
        let take = move |signalled: &mut bool| {
            let was = *signalled;
            if was && !manual {
                *signalled = false;
            }
            was
        };
        if ms != 0 {
            // The leader reads the completion channels itself (pump.rs): one wake-up per event.
            if let Some(leader) = pump::lead() {
                return leader.wait_until(deadline, || take(&mut self.signalled.lock()));
            }
        }
        let _follower = (ms != 0).then(pump::follow);
        let taken = wait_until(&self.cv, &mut self.signalled.lock(), deadline, take);
        if !taken && ms == 0 {
            pump::polled();
        }
        taken
    }
}

/// The sleepers of WaitForMultipleObjects that are not the leader: they sleep on one process-wide
/// condition variable, which every SetEvent notifies while one of them waits (a load otherwise).
///
/// No lost wake-up: a sleeper counts itself, then checks its events under each one's lock,
/// holding `lock` from before the check until it sleeps; a setter sets under the event's lock,
/// then reads the count and, if non-zero, notifies under `lock`. The event's lock orders the
/// two: either the check sees the set, or the setter sees the count (and its notify, under
/// `lock`, comes after the sleeper sleeps).
#[derive(Default)]
struct MultiWait {
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    cv: Condvar,
}

fn multi() -> &'static MultiWait {
    static MULTI: OnceLock<MultiWait> = OnceLock::new();
    MULTI.get_or_init(MultiWait::default)
}

impl MultiWait {
    fn wake(&self) {
        if self.sleepers.load(Ordering::SeqCst) != 0 {
            let _held = self.lock.lock();
            self.cv.notify_all();
        }
    }
}

/// WaitForMultipleObjects' check: wait-any takes the first signalled event (lowest index);
/// wait-all takes all of them at once or none (their locks held together, in address order).
fn try_take(events: &[Arc<Event>], all: bool) -> Option<u32> {
    if !all {
        return events.iter().position(|e| e.take()).map(|i| i as u32);
    }
    let mut order: Vec<&Arc<Event>> = events.iter().collect();
    order.sort_by_key(|e| Arc::as_ptr(e) as usize);
    let mut guards: Vec<(bool, MutexGuard<'_, bool>)> = order.iter().map(|e| (e.manual, e.signalled.lock())).collect();
    if !guards.iter().all(|(_, signalled)| **signalled) {
        return None;
    }
    for (manual, signalled) in &mut guards {
        if !*manual {
            **signalled = false;
        }
    }
    Some(0)
}

/// Waits until [`try_take`] succeeds or the deadline passes.
pub(super) fn wait_multiple(events: &[Arc<Event>], all: bool, ms: u32) -> Option<u32> {
    let deadline = timeout(ms).map(|t| Instant::now() + t);
    if ms != 0 {
        if let Some(leader) = pump::lead() {
            let mut got = None;
            leader.wait_until(deadline, || {
                got = try_take(events, all);
                got.is_some()
            });
            return got;
        }
    }
    let _follower = (ms != 0).then(pump::follow);
    let multi = multi();
    multi.sleepers.fetch_add(1, Ordering::SeqCst);
    let mut got = None;
    wait_until(&multi.cv, &mut multi.lock.lock(), deadline, |_| {
        got = try_take(events, all);
        got.is_some()
    });
    multi.sleepers.fetch_sub(1, Ordering::SeqCst);
    if got.is_none() && ms == 0 {
        pump::polled();
    }
    got
}
