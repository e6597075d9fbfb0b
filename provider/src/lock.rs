//! The lock of a CQ and of each work queue.
//!
//! Like the stock provider's `pthread_spinlock_t`, it can be taken in one C
//! call and released in another (`ibv_start_poll`/`ibv_end_poll`,
//! `ibv_wr_start`/`ibv_wr_complete`), so it is a raw lock, not a guard
//! object: [`RawLock`], one byte on `parking_lot_core`'s parking lot.
//! Uncontended, the lock is one compare-and-swap and the unlock one atomic
//! decrement and a branch (parking_lot's `RawMutex` unlocks with a
//! compare-and-swap, because its state has a "parked" bit the unlock must
//! test without clearing); a waiter spins a little and then sleeps, so it
//! burns no CPU while the holder is in a syscall (`resize_cq`) or in
//! application code between `start_poll` and `end_poll`.
//!
//! - [`QueueLock::with`] runs a closure with the lock held and releases it
//!   on return and on unwind (RAII); a caller that must also undo something
//!   on a panic builds its own guard on `acquire`/`release`.
//! - A lock made [`QueueLock::unlocked`] (the object was created on a parent
//!   domain with a thread domain) takes no lock: the callers branch once per
//!   call on [`QueueLock::locks`]; the holder is still recorded for the pairs.
//! - [`QueueLock::hold`] / [`QueueLock::release_held`] are the two halves
//!   of the verbs pairs. The holding thread is recorded, so a stray
//!   `end_poll`/`wr_complete`/`wr_abort` (without the matching start, twice,
//!   or from a thread that does not hold it) is recognised and refused
//!   instead of unlocking a lock another thread holds.

use core::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

/// A mutex of one byte that is not a guard object: Drepper's third futex
/// mutex ("Futexes Are Tricky", 2011), with parking_lot_core's parking lot
/// (keyed by the byte's address) in place of the futex, and a short spin
/// before sleeping. The state: [`FREE`], [`LOCKED`] (nobody waits), or
/// [`CONTENDED`] (locked, and a thread may be parked on it).
pub(crate) struct RawLock {
    state: AtomicU8,
}

const FREE: u8 = 0;
const LOCKED: u8 = 1;
const CONTENDED: u8 = 2;

impl RawLock {
    pub(crate) const fn new() -> RawLock {
        RawLock {
            state: AtomicU8::new(FREE),
        }
    }

    /// Takes the lock: one compare-and-swap when it is free.
    #[inline(always)]
    pub(crate) fn lock(&self) {
        if self
            .state
            .compare_exchange(FREE, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
    }

    #[cold]
    #[inline(never)]
    fn lock_contended(&self) {
        let mut spin = parking_lot_core::SpinWait::new();
        // While nobody is parked, spin on the plain state a little: the
        // holder of a data-path lock keeps it for a few hundred instructions.
        loop {
            match self.state.load(Ordering::Relaxed) {
                FREE => {
                    if self
                        .state
                        .compare_exchange_weak(FREE, LOCKED, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
                    {
                        return;
                    }
                }
                LOCKED if spin.spin() => {}
                _ => break,
            }
        }
        // From here on we take the lock as CONTENDED, never as LOCKED: we
        // cannot tell whether another thread is still parked, so the unlock
        // that follows ours must look (at worst, one unpark finds nobody).
        while self.state.swap(CONTENDED, Ordering::Acquire) != FREE {
            // SAFETY: the key is the address of our own state byte, which
            // no other primitive parks on; validate only loads, and
            // before_sleep / timed_out do nothing (they may not panic, and
            // do not).
            unsafe {
                parking_lot_core::park(
                    self.key(),
                    || self.state.load(Ordering::Relaxed) == CONTENDED,
                    || {},
                    |_, _| {},
                    parking_lot_core::DEFAULT_PARK_TOKEN,
                    None,
                );
            }
        }
    }

    /// Releases the lock: one atomic decrement; only if the state was
    /// [`CONTENDED`] does it go on to wake a waiter.
    ///
    /// # Safety
    /// The caller's context holds the lock.
    #[inline(always)]
    pub(crate) unsafe fn unlock(&self) {
        if self.state.fetch_sub(1, Ordering::Release) != LOCKED {
            self.unlock_contended();
        }
    }

    #[cold]
    #[inline(never)]
    fn unlock_contended(&self) {
        // The decrement left CONTENDED - 1 == LOCKED: free it and wake one.
        // A thread that saw LOCKED meanwhile has swapped in CONTENDED and
        // parks only if it still reads CONTENDED under the parking lot's
        // queue lock, which unpark_one takes too: it either sees FREE and
        // retries, or is queued before we look.
        self.state.store(FREE, Ordering::Release);
        // SAFETY: our own key (see lock_contended); the callback does not
        // panic or call into parking_lot.
        unsafe {
            parking_lot_core::unpark_one(self.key(), |_| parking_lot_core::DEFAULT_UNPARK_TOKEN);
        }
    }

    fn key(&self) -> usize {
        self.state.as_ptr() as usize
    }

    /// Whether some thread holds it (tests and assertions).
    #[cfg(test)]
    pub(crate) fn is_locked(&self) -> bool {
        self.state.load(Ordering::Relaxed) != FREE
    }
}

pub(crate) struct QueueLock {
    raw: RawLock,
    /// Created on a thread domain: no locking at all.
    single_thread: bool,
    /// The thread between `hold` and `release_held`, or 0. Written only by
    /// that thread (with the lock held, or alone on a thread domain), so a
    /// thread that reads its own id here knows it holds the lock.
    holder: AtomicUsize,
}

/// An id of the calling thread that is never 0: the address of a
/// thread-local byte.
#[inline]
fn this_thread() -> usize {
    thread_local! {
        static MARK: u8 = const { 0 };
    }
    MARK.with(|m| core::ptr::from_ref(m) as usize)
}

/// Unlocks when dropped, which in [`QueueLock::with`] happens only on unwind.
struct UnlockOnUnwind<'a>(&'a QueueLock);

impl Drop for UnlockOnUnwind<'_> {
    #[cold]
    fn drop(&mut self) {
        // SAFETY: with() took the lock and forgets this guard when it
        // releases the lock itself, so we run only while it is held.
        unsafe { self.0.release() };
    }
}

impl QueueLock {
    /// A lock for an object any thread may use.
    pub(crate) const fn new() -> QueueLock {
        QueueLock {
            raw: RawLock::new(),
            single_thread: false,
            holder: AtomicUsize::new(0),
        }
    }

    /// No lock: for an object created on a parent domain with a thread
    /// domain, whose application promised to use it from one thread at a
    /// time (`man ibv_alloc_td`).
    pub(crate) const fn unlocked() -> QueueLock {
        QueueLock {
            single_thread: true,
            ..QueueLock::new()
        }
    }

    /// Whether this lock locks (false on a thread domain).
    #[inline(always)]
    pub(crate) fn locks(&self) -> bool {
        !self.single_thread
    }

    /// Takes the mutex. Only where [`locks`](Self::locks): the callers
    /// branch once per call, not once per lock and unlock.
    #[inline(always)]
    pub(crate) fn acquire_mutex(&self) {
        self.raw.lock();
    }

    /// # Safety
    /// The caller's context took the mutex (`acquire_mutex`).
    #[inline(always)]
    pub(crate) unsafe fn release_mutex(&self) {
        // SAFETY: per the contract.
        unsafe { self.raw.unlock() };
    }

    /// Takes the lock (nothing on a thread domain).
    #[inline(always)]
    pub(crate) fn acquire(&self) {
        if self.locks() {
            self.acquire_mutex();
        }
    }

    /// Releases what `acquire` took, also from an unwind path.
    ///
    /// # Safety
    /// The caller's context took it (`acquire`, or `acquire_mutex` where
    /// the lock [`locks`](Self::locks)).
    #[inline(always)]
    pub(crate) unsafe fn release(&self) {
        if self.locks() {
            // SAFETY: per the contract.
            unsafe { self.release_mutex() };
        }
    }

    /// Runs `f` with the lock held; released when `f` returns or unwinds.
    /// On a thread domain, just runs `f`.
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce() -> R) -> R {
        if !self.locks() {
            return f();
        }
        self.acquire_mutex();
        let guard = UnlockOnUnwind(self);
        let r = f();
        // The normal path unlocks here; the guard's drop is the unwind path.
        core::mem::forget(guard);
        // SAFETY: taken above.
        unsafe { self.release_mutex() };
        r
    }

    /// Takes the lock for a later [`release_held`](Self::release_held) in
    /// another C call, recording this thread as the holder. `false` (and
    /// nothing taken) when this thread holds it already: the stock provider
    /// would deadlock on its own spin lock.
    pub(crate) fn hold(&self) -> bool {
        let me = this_thread();
        if self.holder.load(Ordering::Relaxed) == me {
            return false;
        }
        self.acquire();
        self.holder.store(me, Ordering::Relaxed);
        true
    }

    /// Whether the calling thread is between `hold` and `release_held`.
    pub(crate) fn held_here(&self) -> bool {
        self.holder.load(Ordering::Relaxed) == this_thread()
    }

    /// Releases what [`hold`](Self::hold) took on this thread; `false`
    /// (nothing released) when this thread does not hold it.
    pub(crate) fn release_held(&self) -> bool {
        if !self.held_here() {
            return false;
        }
        self.holder.store(0, Ordering::Relaxed);
        // SAFETY: this thread took it in hold() (the holder says so).
        unsafe { self.release() };
        true
    }

    /// Whether some thread holds the lock (tests and assertions).
    #[cfg(test)]
    pub(crate) fn is_locked(&self) -> bool {
        if self.locks() {
            self.raw.is_locked()
        } else {
            self.holder.load(Ordering::Relaxed) != 0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn held_in_one_call_released_in_another_by_its_holder_only() {
        let l = Arc::new(QueueLock::new());
        assert!(!l.release_held(), "nothing to release");
        assert!(l.hold());
        assert!(l.is_locked() && l.held_here());
        assert!(
            !l.hold(),
            "a second hold on the holding thread is refused, not a deadlock"
        );
        let other = Arc::clone(&l);
        let stray = std::thread::spawn(move || other.release_held()).join().unwrap();
        assert!(!stray, "another thread cannot release it");
        assert!(l.is_locked());
        assert!(l.release_held());
        assert!(!l.is_locked());
        assert!(!l.release_held(), "a second release is refused");
    }

    #[test]
    fn with_unlocks_on_return_and_on_panic() {
        let l = QueueLock::new();
        assert_eq!(l.with(|| 7), 7);
        assert!(!l.is_locked());
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            l.with(|| panic!("mid-poll"));
        }));
        assert!(r.is_err());
        assert!(!l.is_locked());
    }

    #[test]
    fn an_unlocked_lock_takes_nothing_but_still_knows_its_holder() {
        let l = QueueLock::unlocked();
        assert!(!l.locks());
        l.with(|| assert!(!l.is_locked()));
        assert!(l.hold());
        assert!(l.is_locked() && l.held_here());
        assert!(!l.hold());
        assert!(l.release_held());
        assert!(!l.release_held());
    }

    #[test]
    fn a_waiter_that_parked_is_woken_by_the_unlock() {
        let l = Arc::new(QueueLock::new());
        assert!(l.hold());
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let l = Arc::clone(&l);
                std::thread::spawn(move || l.with(|| ()))
            })
            .collect();
        // Long enough for the waiters to finish spinning and park (the
        // outcome does not depend on it: they spin or park, then get in).
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(l.release_held());
        for w in waiters {
            w.join().unwrap();
        }
        assert!(!l.is_locked());
    }

    #[test]
    fn excludes_other_threads() {
        struct Shared {
            lock: QueueLock,
            count: core::cell::UnsafeCell<u64>,
        }
        // SAFETY: count is only touched with the lock held.
        unsafe impl Sync for Shared {}
        let s = Arc::new(Shared {
            lock: QueueLock::new(),
            count: core::cell::UnsafeCell::new(0),
        });
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let s = Arc::clone(&s);
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        if i % 2 == 0 {
                            // SAFETY: the lock is held.
                            s.lock.with(|| unsafe { *s.count.get() += 1 });
                        } else {
                            assert!(s.lock.hold());
                            // SAFETY: the lock is held.
                            unsafe { *s.count.get() += 1 };
                            assert!(s.lock.release_held());
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // SAFETY: every thread is done.
        assert_eq!(unsafe { *s.count.get() }, 40_000);
    }
}
