//! The two guards every object of the shim uses on the edges where its own threads meet
//! foreign code: one lock that survives a panic elsewhere, and one panic boundary for callbacks
//! and event handlers run on the event thread; and [`model`], the primitives of a request's
//! completion, which a `--cfg loom` build swaps for loom's (docs/safety.md).

#![forbid(unsafe_code)]

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, MutexGuard};

/// Locks `m`, ignoring poison. Every update under the shim's locks is complete before anything
/// that can panic runs (callbacks run after the lock is released), and a panic on the event
/// thread is contained by [`contain`], so the data behind a poisoned lock is still consistent.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The mutex and condition variable of a request's completion ([`crate::request::Slot`]):
/// std's, or in a `--cfg loom` build loom's models of them, so that the loom models in
/// `request.rs` explore every interleaving of the real completion code.
pub(crate) mod model {
    #[cfg(loom)]
    pub(crate) use loom::sync::{Condvar, Mutex, MutexGuard};
    #[cfg(not(loom))]
    pub(crate) use std::sync::{Condvar, Mutex, MutexGuard};

    /// Locks `m`, ignoring poison (as [`super::lock`]).
    pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Runs `f` behind a panic boundary: a panic is logged with `what` and becomes `None`, so the
/// thread that ran it (the adapter's event thread, or an application thread in
/// `process_events`) lives on.
pub(crate) fn contain<R>(what: &str, f: impl FnOnce() -> R) -> Option<R> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(value) => Some(value),
        Err(panic) => {
            log::error!("{what} panicked: {}", panic_message(panic.as_ref()));
            None
        }
    }
}

fn panic_message(panic: &(dyn Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_contained_and_the_lock_still_usable() {
        let m = Mutex::new(1);
        assert_eq!(contain("ok", || 7), Some(7));
        let got = contain("test callback", || {
            let mut guard = lock(&m);
            *guard = 2;
            panic!("boom");
        });
        assert_eq!(got, None::<()>);
        assert!(m.is_poisoned());
        assert_eq!(*lock(&m), 2);
    }
}
