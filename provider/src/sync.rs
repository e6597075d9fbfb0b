//! What the lock ([`crate::lock`]) is built on: std's atomics and parking_lot_core's parking lot
//! and spin, or, in a `--cfg loom` build, loom's models of them, so that the loom models in
//! `lock.rs` explore every interleaving of the real lock code (docs/safety.md). A normal build
//! gets std's and parking_lot_core's items themselves, behind `#[inline]` wrappers.

pub(crate) use core::sync::atomic::Ordering;
#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicU8, AtomicUsize};
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU8, AtomicUsize};

#[cfg(not(loom))]
pub(crate) use parking_lot_core::SpinWait;

/// Stores `value` with Release ordering: a plain store.
#[cfg(not(loom))]
#[inline(always)]
pub(crate) fn store_release(atomic: &AtomicU8, value: u8) {
    atomic.store(value, Ordering::Release);
}

/// Under loom, the store is a swap. loom orders a plain store only after the stores its own
/// thread has seen, so another thread's read-modify-write may then read "around" it (read the
/// value the store overwrote), which C11 forbids when the overwritten value was itself written
/// by a read-modify-write: in the lock's unlock, a false lost wake-up (loom reports a deadlock
/// that cannot happen). The swap is ordered after every earlier write.
#[cfg(loom)]
pub(crate) fn store_release(atomic: &AtomicU8, value: u8) {
    atomic.swap(value, Ordering::Release);
}

/// Where a lock's waiters sleep: parking_lot_core's process-wide parking lot, keyed by the
/// address of the lock's state (nothing stored here: zero bytes).
#[cfg(not(loom))]
pub(crate) struct Parker;

#[cfg(not(loom))]
impl Parker {
    pub(crate) fn new() -> Parker {
        Parker
    }

    /// Sleeps until [`unpark_one`](Self::unpark_one) of `key`, if `validate`, which runs under
    /// the parking lot's queue lock (as `unpark_one` does), still holds.
    ///
    /// # Safety
    /// `key` is the address of the caller's own state, which no other primitive parks on;
    /// `validate` does not panic or call into parking_lot.
    #[inline]
    pub(crate) unsafe fn park(&self, key: usize, validate: impl FnOnce() -> bool) {
        // SAFETY: per the contract; before_sleep and timed_out do nothing (they may not panic,
        // and do not).
        unsafe {
            parking_lot_core::park(
                key,
                validate,
                || {},
                |_, _| {},
                parking_lot_core::DEFAULT_PARK_TOKEN,
                None,
            );
        }
    }

    /// Wakes one thread parked on `key`, if any.
    ///
    /// # Safety
    /// As for [`park`](Self::park).
    #[inline]
    pub(crate) unsafe fn unpark_one(&self, key: usize) {
        // SAFETY: per the contract; the callback does not panic or call into parking_lot.
        unsafe {
            parking_lot_core::unpark_one(key, |_| parking_lot_core::DEFAULT_UNPARK_TOKEN);
        }
    }
}

/// The calling thread's id, never 0: `pthread_self()`, the address of the thread's descriptor
/// (unique among live threads). One load in libc, where a thread-local of this library would
/// be a call of `__tls_get_addr` (a shared library's thread-locals are dynamic).
#[cfg(not(loom))]
#[inline]
pub(crate) fn this_thread() -> usize {
    // SAFETY: pthread_self has no preconditions.
    unsafe { libc::pthread_self() as usize }
}

/// loom's model of parking_lot_core's spin: one spin (a yield), then "park now", so the models
/// cover both the spin path and the parking path without unrolling parking_lot's ten rounds.
#[cfg(loom)]
pub(crate) struct SpinWait {
    spun: bool,
}

#[cfg(loom)]
impl SpinWait {
    pub(crate) fn new() -> SpinWait {
        SpinWait { spun: false }
    }

    pub(crate) fn spin(&mut self) -> bool {
        if self.spun {
            return false;
        }
        self.spun = true;
        loom::thread::yield_now();
        true
    }
}

/// loom's model of the parking lot for one key: a queue lock, the number of threads parked and
/// the wake-ups handed to them. As parking_lot's, `validate` runs under the queue lock, which
/// `unpark_one` takes too, and an unpark with nobody parked does nothing.
#[cfg(loom)]
pub(crate) struct Parker {
    queue: loom::sync::Mutex<(usize, usize)>,
    woken: loom::sync::Condvar,
}

#[cfg(loom)]
impl Parker {
    pub(crate) fn new() -> Parker {
        Parker {
            queue: loom::sync::Mutex::new((0, 0)),
            woken: loom::sync::Condvar::new(),
        }
    }

    /// # Safety
    /// None here; the signature is the production one's.
    pub(crate) unsafe fn park(&self, _key: usize, validate: impl FnOnce() -> bool) {
        let mut q = self.queue.lock().unwrap();
        if !validate() {
            return;
        }
        q.0 += 1;
        while q.1 == 0 {
            q = self.woken.wait(q).unwrap();
        }
        q.1 -= 1;
    }

    /// # Safety
    /// None here; the signature is the production one's.
    pub(crate) unsafe fn unpark_one(&self, _key: usize) {
        let mut q = self.queue.lock().unwrap();
        if q.0 > 0 {
            q.0 -= 1;
            q.1 += 1;
            self.woken.notify_one();
        }
    }
}

/// The calling loom thread's id, never 0: the address of its thread-local byte.
#[cfg(loom)]
pub(crate) fn this_thread() -> usize {
    loom::thread_local! {
        static MARK: u8 = 0;
    }
    MARK.with(|m| core::ptr::from_ref(m) as usize)
}
