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
//!   on a panic builds its own guard on `acquire_for_call`/`release`.
//! - A lock made [`QueueLock::unlocked`] (the object was created on a parent
//!   domain with a thread domain) takes no lock: its state byte says "thread
//!   domain, no pair open", which a call tests with one compare (the same
//!   compare a lock that locks makes before its compare-and-swap); the
//!   opener of a pair is still recorded, and an open pair is marked in the
//!   state byte, so a call inside it is refused.
//! - [`QueueLock::hold`] / [`QueueLock::release_held`] are the two halves
//!   of the verbs pairs. The verbs contract is "one thread at a time", not
//!   "the same thread": a pair opened on one thread may be continued and
//!   closed on another (a goroutine or a virtual thread that migrated, an
//!   async task moved between workers), as with the stock provider's spin
//!   lock. The opener is recorded, so that what would deadlock is refused
//!   with EDEADLK instead (a second `start_poll`, or a `poll_cq`/`resize_cq`,
//!   on the thread whose pair is open), and a stray close (no pair open,
//!   or closed twice) is recognised and refused instead of unlocking a lock
//!   another thread holds.

use crate::errno::Errno;
use crate::sync::{store_release, this_thread, AtomicU8, AtomicUsize, Ordering, Parker, SpinWait};

/// A mutex of one byte that is not a guard object: Drepper's third futex
/// mutex ("Futexes Are Tricky", 2011), with parking_lot_core's parking lot
/// (keyed by the byte's address) in place of the futex, and a short spin
/// before sleeping. The state: [`FREE`], [`LOCKED`] (nobody waits), or
/// [`CONTENDED`] (locked, and a thread may be parked on it).
pub(crate) struct RawLock {
    state: AtomicU8,
    /// Where waiters sleep (zero bytes: the parking lot is keyed by `state`'s address).
    parker: Parker,
}

const FREE: u8 = 0;
const LOCKED: u8 = 1;
const CONTENDED: u8 = 2;
/// The state of a [`QueueLock::unlocked`] lock (a thread domain), which
/// [`RawLock::lock`] never takes: no pair open. A call's one test on a
/// thread domain compares the state with this; on a lock that locks the
/// same compare fails, and the compare-and-swap follows.
const TD_IDLE: u8 = 4;
/// The state of a [`QueueLock::unlocked`] lock while a pair is open: not
/// [`FREE`], so a call's compare-and-swap fails and its cold path refuses it.
const TD_PAIR_OPEN: u8 = 5;

impl RawLock {
    pub(crate) fn new() -> RawLock {
        RawLock::with_state(FREE)
    }

    fn with_state(state: u8) -> RawLock {
        RawLock {
            state: AtomicU8::new(state),
            parker: Parker::new(),
        }
    }

    /// Takes the lock: one compare-and-swap when it is free.
    #[inline(always)]
    pub(crate) fn lock(&self) {
        if !self.try_lock() {
            self.lock_contended();
        }
    }

    /// Takes the lock if it is free (one compare-and-swap); `false` if not.
    #[inline(always)]
    pub(crate) fn try_lock(&self) -> bool {
        self.state
            .compare_exchange(FREE, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    #[cold]
    #[inline(never)]
    pub(crate) fn lock_contended(&self) {
        let mut spin = SpinWait::new();
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
            // no other primitive parks on; validate only loads.
            unsafe {
                self.parker
                    .park(self.key(), || self.state.load(Ordering::Relaxed) == CONTENDED);
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
        store_release(&self.state, FREE);
        // SAFETY: our own key (see lock_contended).
        unsafe { self.parker.unpark_one(self.key()) };
    }

    fn key(&self) -> usize {
        core::ptr::from_ref(&self.state) as usize
    }

    /// Whether some thread holds it (tests and assertions).
    #[cfg(test)]
    pub(crate) fn is_locked(&self) -> bool {
        self.state.load(Ordering::Relaxed) != FREE
    }
}

pub(crate) struct QueueLock {
    raw: RawLock,
    /// Created on a thread domain: no locking at all (`raw` then holds
    /// [`TD_IDLE`] or [`TD_PAIR_OPEN`], never a lock state).
    single_thread: bool,
    /// The thread that opened the pair (`hold`) while it is open, or 0.
    /// Stored by the opener with the lock held; cleared by whichever thread
    /// closes the pair (`release_held`), with a swap, so that of two racing
    /// closes one releases the lock and the other is refused. The opener
    /// reading its own id here knows it would deadlock on the lock.
    holder: AtomicUsize,
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
    pub(crate) fn new() -> QueueLock {
        QueueLock {
            raw: RawLock::new(),
            single_thread: false,
            holder: AtomicUsize::new(0),
        }
    }

    /// No lock: for an object created on a parent domain with a thread
    /// domain, whose application promised to use it from one thread at a
    /// time (`man ibv_alloc_td`).
    pub(crate) fn unlocked() -> QueueLock {
        QueueLock {
            raw: RawLock::with_state(TD_IDLE),
            single_thread: true,
            holder: AtomicUsize::new(0),
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

    /// Releases what `acquire_for_call` took, also from an unwind path.
    ///
    /// # Safety
    /// The caller's context took it (`acquire_for_call`, `try_acquire_now`, or `acquire_mutex` where
    /// the lock [`locks`](Self::locks)).
    #[inline(always)]
    pub(crate) unsafe fn release(&self) {
        if self.locks() {
            // SAFETY: per the contract.
            unsafe { self.release_mutex() };
        }
    }

    /// Takes the lock for one call, or EDEADLK when the calling thread has a
    /// pair open on it (it would wait for itself; the stock provider hangs).
    /// On a thread domain nothing is taken, but an open pair is refused all
    /// the same: the call would interleave with it.
    ///
    /// One compare of the state byte on a thread domain with no pair open;
    /// that compare and the compare-and-swap on a lock that locks; the rest
    /// (an open pair on a thread domain, a lock taken) out of line.
    #[inline(always)]
    pub(crate) fn acquire_for_call(&self) -> Result<(), Errno> {
        if self.raw.state.load(Ordering::Relaxed) == TD_IDLE || self.raw.try_lock() {
            return Ok(());
        }
        self.acquire_contended()
    }

    /// Takes the lock for one call if it is free now (one compare-and-swap);
    /// `false` (nothing taken) when it is held (also by an open pair) and on
    /// a thread domain (no lock: the caller is not the object's user). For
    /// work that is handed to the holder instead and must never wait (the
    /// CQ purge, which a poll applies): a thread inside a poll pair must not
    /// block on a CQ lock. Released with [`release`](Self::release).
    pub(crate) fn try_acquire_now(&self) -> bool {
        self.locks() && self.raw.try_lock()
    }

    #[cold]
    #[inline(never)]
    fn acquire_contended(&self) -> Result<(), Errno> {
        if !self.locks() {
            // TD_PAIR_OPEN: a pair is open (on whichever thread).
            return Err(Errno::EDEADLK);
        }
        if self.holder.load(Ordering::Relaxed) == this_thread() {
            return Err(Errno::EDEADLK);
        }
        self.raw.lock_contended();
        Ok(())
    }

    /// Runs `f` with the lock held; released when `f` returns or unwinds.
    /// On a thread domain, just runs `f`. EDEADLK as
    /// [`acquire_for_call`](Self::acquire_for_call).
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce() -> R) -> Result<R, Errno> {
        self.acquire_for_call()?;
        let guard = UnlockOnUnwind(self);
        let r = f();
        // The normal path unlocks here; the guard's drop is the unwind path.
        core::mem::forget(guard);
        // SAFETY: taken above.
        unsafe { self.release() };
        Ok(r)
    }

    /// [`with`](Self::with) when the lock is free now (or on a thread domain with no pair
    /// open): `f`'s answer; `None`, nothing taken and `f` not run, otherwise, for the caller's
    /// out-of-line path (which waits, or is refused, in `with`). The fast path's registers are
    /// then the fast path's own.
    #[inline(always)]
    pub(crate) fn try_with<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        if !(self.raw.state.load(Ordering::Relaxed) == TD_IDLE || self.raw.try_lock()) {
            return None;
        }
        let guard = UnlockOnUnwind(self);
        let r = f();
        // The normal path unlocks here; the guard's drop is the unwind path.
        core::mem::forget(guard);
        // SAFETY: taken above.
        unsafe { self.release() };
        Some(r)
    }

    /// Opens a pair: takes the lock for a later
    /// [`release_held`](Self::release_held) in another C call (waiting while
    /// another thread's pair is open), recording this thread as the opener.
    /// EDEADLK (nothing taken) when this thread's pair is open already: the
    /// stock provider would deadlock on its own spin lock.
    pub(crate) fn hold(&self) -> Result<(), Errno> {
        let me = this_thread();
        if self.holder.load(Ordering::Relaxed) == me {
            return Err(Errno::EDEADLK);
        }
        if self.locks() {
            self.acquire_mutex();
        } else {
            // The thread domain's caller uses the object from one thread
            // at a time: a plain mark, which acquire_for_call refuses.
            self.raw.state.store(TD_PAIR_OPEN, Ordering::Relaxed);
        }
        self.holder.store(me, Ordering::Relaxed);
        Ok(())
    }

    /// Whether a pair is open, on whichever thread: the state the lock
    /// protects may then be used by the thread continuing the pair.
    #[inline]
    pub(crate) fn pair_open(&self) -> bool {
        self.holder.load(Ordering::Relaxed) != 0
    }

    /// Closes the open pair, from any thread; `false` (nothing released)
    /// when no pair is open.
    pub(crate) fn release_held(&self) -> bool {
        if self.holder.swap(0, Ordering::AcqRel) == 0 {
            return false;
        }
        if self.locks() {
            // SAFETY: a pair was open, so hold() took the lock, and the swap
            // made this call the one that closes it.
            unsafe { self.release_mutex() };
        } else {
            self.raw.state.store(TD_IDLE, Ordering::Relaxed);
        }
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_pair_opened_on_one_thread_may_be_closed_on_another() {
        let l = Arc::new(QueueLock::new());
        assert!(!l.release_held(), "nothing to release");
        assert_eq!(l.hold(), Ok(()));
        assert!(l.is_locked() && l.pair_open());
        assert_eq!(l.hold(), Err(Errno::EDEADLK), "a second open on the opener is refused");
        assert_eq!(l.with(|| ()), Err(Errno::EDEADLK), "so is a call on the opener");
        let other = Arc::clone(&l);
        let closed = std::thread::spawn(move || other.release_held()).join().unwrap();
        assert!(
            closed,
            "any thread may close the pair (one thread at a time, not the same one)"
        );
        assert!(!l.is_locked() && !l.pair_open());
        assert!(!l.release_held(), "a second close is refused");
        // Opened elsewhere, closed here; meanwhile this thread is not the opener: it waits, not EDEADLK.
        let other = Arc::clone(&l);
        std::thread::spawn(move || other.hold()).join().unwrap().unwrap();
        assert!(l.pair_open());
        assert!(l.release_held());
        assert_eq!(l.with(|| 5), Ok(5));
    }

    #[test]
    fn of_two_racing_closes_one_releases() {
        // Miri runs a few rounds (each of its threads is interpreted); the loom model
        // `loom_two_racing_closes` explores every interleaving of one.
        for _ in 0..if cfg!(miri) { 5 } else { 200 } {
            let l = Arc::new(QueueLock::new());
            l.hold().unwrap();
            let closers: Vec<_> = (0..2)
                .map(|_| {
                    let l = Arc::clone(&l);
                    std::thread::spawn(move || l.release_held())
                })
                .collect();
            let released = closers.into_iter().map(|c| c.join().unwrap()).filter(|&r| r).count();
            assert_eq!(released, 1);
            assert!(!l.is_locked());
        }
    }

    #[test]
    fn with_unlocks_on_return_and_on_panic() {
        let l = QueueLock::new();
        assert_eq!(l.with(|| 7), Ok(7));
        assert!(!l.is_locked());
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = l.with(|| panic!("mid-poll"));
        }));
        assert!(r.is_err());
        assert!(!l.is_locked());
    }

    #[test]
    fn an_unlocked_lock_takes_nothing_but_still_knows_its_holder() {
        let l = QueueLock::unlocked();
        assert!(!l.locks());
        l.with(|| assert!(!l.is_locked())).unwrap();
        assert_eq!(l.hold(), Ok(()));
        assert!(l.is_locked() && l.pair_open());
        assert_eq!(l.hold(), Err(Errno::EDEADLK));
        assert_eq!(
            l.with(|| ()),
            Err(Errno::EDEADLK),
            "a call inside the open pair is refused"
        );
        assert!(l.release_held());
        assert!(!l.release_held());
        assert_eq!(l.with(|| 1), Ok(1));
        // Opened on another thread: a call here is refused all the same (no lock to wait on),
        // and the close here lets calls in again.
        let l = Arc::new(l);
        let other = Arc::clone(&l);
        std::thread::spawn(move || other.hold()).join().unwrap().unwrap();
        assert_eq!(l.with(|| ()), Err(Errno::EDEADLK));
        assert!(!l.try_acquire_now());
        assert!(l.release_held());
        assert_eq!(l.with(|| 2), Ok(2));
        assert!(!l.try_acquire_now(), "a thread domain has no lock to take");
        assert!(!l.is_locked() && !l.pair_open());
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "sleeps 50 ms for the waiters to park in parking_lot_core: minutes under Miri; loom_park_and_wake models it"
    )]
    fn a_waiter_that_parked_is_woken_by_the_unlock() {
        let l = Arc::new(QueueLock::new());
        l.hold().unwrap();
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let l = Arc::clone(&l);
                std::thread::spawn(move || l.with(|| ()).unwrap())
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
        // Fewer under Miri, which interprets every thread (and checks the count for races).
        const ROUNDS: u64 = if cfg!(miri) { 50 } else { 10_000 };
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
                    for _ in 0..ROUNDS {
                        if i % 2 == 0 {
                            // SAFETY: the lock is held.
                            s.lock.with(|| unsafe { *s.count.get() += 1 }).unwrap();
                        } else {
                            s.lock.hold().unwrap();
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
        assert_eq!(unsafe { *s.count.get() }, 4 * ROUNDS);
    }
}

/// The lock under loom (`RUSTFLAGS="--cfg loom" cargo test --release -p rxe-rs-provider --lib
/// loom_`): each model runs the real lock code over loom's atomics and its model of the parking
/// lot (crate::sync) and explores every interleaving of its threads; a lost wake-up is a
/// deadlock loom reports, a second holder a data race on the shared cell.
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;
    use loom::thread;

    struct Shared {
        lock: QueueLock,
        count: UnsafeCell<u32>,
    }

    // SAFETY: count is only touched with the lock held (which is what the models check).
    unsafe impl Sync for Shared {}

    impl Shared {
        fn new() -> Arc<Shared> {
            Arc::new(Shared {
                lock: QueueLock::new(),
                count: UnsafeCell::new(0),
            })
        }

        /// Adds one with the lock held; loom reports a race if another thread is in too.
        fn bump(&self) {
            // SAFETY: the caller holds the lock.
            self.count.with_mut(|c| unsafe { *c += 1 });
        }

        fn count(&self) -> u32 {
            // SAFETY: every other thread is joined.
            self.count.with(|c| unsafe { *c })
        }
    }

    /// Runs `f` on a thread of its own, over `s`.
    fn spawn<T: Send + 'static>(
        s: &Arc<Shared>,
        f: impl FnOnce(&Shared) -> T + Send + 'static,
    ) -> thread::JoinHandle<T> {
        let s = Arc::clone(s);
        thread::spawn(move || f(&s))
    }

    /// Runs `body` as a loom model over a fresh [`Shared`]; `body` joins its threads, and the
    /// model ends with `bumps` bumps and the lock free.
    fn model(bumps: u32, body: impl Fn(&Arc<Shared>) + Send + Sync + 'static) {
        loom::model(move || {
            let s = Shared::new();
            body(&s);
            assert_eq!(s.count(), bumps);
            assert!(!s.lock.is_locked());
        });
    }

    /// lock/unlock: one thread takes the lock for a call (`with`) while another opens and
    /// closes a pair (`hold` ... `release_held`): each gets in alone (spinning or parking) and
    /// neither is left asleep.
    #[test]
    fn loom_lock_excludes_and_wakes() {
        model(2, |s| {
            let caller = spawn(s, |s| s.lock.with(|| s.bump()).unwrap());
            s.lock.hold().unwrap();
            s.bump();
            assert!(s.lock.release_held());
            caller.join().unwrap();
        });
    }

    /// park/wake: the holder releases while a waiter goes from spinning to CONTENDED to
    /// parked; whatever the order, the waiter is woken (no lost wake-up) and the state ends
    /// FREE.
    #[test]
    fn loom_park_and_wake() {
        model(2, |s| {
            s.lock.acquire_mutex();
            let waiter = spawn(s, |s| {
                s.lock.acquire_mutex();
                s.bump();
                // SAFETY: taken just above.
                unsafe { s.lock.release() };
            });
            s.bump();
            // SAFETY: taken above.
            unsafe { s.lock.release() };
            waiter.join().unwrap();
        });
    }

    /// The cross-thread end and the recorded opener: a pair opened on one thread, closed by
    /// two racing threads: exactly one closes it; the opener's own call meanwhile is EDEADLK
    /// while its pair is open, and a call after the close gets the lock.
    #[test]
    fn loom_two_racing_closes() {
        model(1, |s| {
            s.lock.hold().unwrap();
            assert_eq!(s.lock.with(|| ()), Err(Errno::EDEADLK));
            let closers: Vec<_> = (0..2).map(|_| spawn(s, |s| s.lock.release_held())).collect();
            let closed = closers.into_iter().map(|c| c.join().unwrap()).filter(|&c| c).count();
            assert_eq!(closed, 1);
            assert!(!s.lock.pair_open() && !s.lock.is_locked());
            assert_eq!(s.lock.with(|| s.bump()), Ok(()));
        });
    }

    /// A pair opened on one thread and closed on another while a third thread calls: the
    /// caller is never refused (it is not the opener: it waits), never in with the pair, and
    /// the pair's state is handed over with the lock.
    #[test]
    fn loom_pair_handed_across_threads() {
        model(3, |s| {
            s.lock.hold().unwrap();
            s.bump();
            let closer = spawn(s, |s| {
                // The thread continuing the pair uses its state, then closes it.
                s.bump();
                assert!(s.lock.release_held());
            });
            let caller = spawn(s, |s| s.lock.with(|| s.bump()));
            closer.join().unwrap();
            assert_eq!(caller.join().unwrap(), Ok(()));
        });
    }
}
