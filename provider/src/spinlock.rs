//! The lock of a CQ and of each work queue.
//!
//! Like the stock provider's `pthread_spinlock_t`, it can be taken in one C
//! call and released in another (`ibv_start_poll`/`ibv_end_poll`,
//! `ibv_wr_start`/`ibv_wr_complete`), so it is a flag, not a guard object.
//! Acquire on taking pairs with Release on releasing: the queue state one
//! holder wrote is what the next one reads. Uncontended, taking it is one
//! compare-and-swap inline; a waiter spins, yielding now and then in case the
//! holder is descheduled (or in a syscall, as `resize_cq` is).

use core::hint::spin_loop;
use core::sync::atomic::{AtomicBool, Ordering};

pub(crate) struct SpinLock(AtomicBool);

impl SpinLock {
    pub(crate) const fn new() -> SpinLock {
        SpinLock(AtomicBool::new(false))
    }

    #[inline]
    pub(crate) fn lock(&self) {
        if self
            .0
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
    }

    #[cold]
    #[inline(never)]
    fn lock_contended(&self) {
        let mut spins = 0u32;
        while self
            .0
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            while self.0.load(Ordering::Relaxed) {
                spins = spins.wrapping_add(1);
                if spins % 128 == 0 {
                    std::thread::yield_now();
                } else {
                    spin_loop();
                }
            }
        }
    }

    #[inline]
    pub(crate) fn unlock(&self) {
        self.0.store(false, Ordering::Release);
    }

    pub(crate) fn is_locked(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn taken_in_one_call_released_in_another() {
        let l = SpinLock::new();
        l.lock();
        assert!(l.is_locked());
        l.unlock();
        assert!(!l.is_locked());
    }

    #[test]
    fn excludes_other_threads() {
        struct Shared {
            lock: SpinLock,
            count: core::cell::UnsafeCell<u64>,
        }
        // SAFETY: count is only touched with the lock held.
        unsafe impl Sync for Shared {}
        let s = Arc::new(Shared {
            lock: SpinLock::new(),
            count: core::cell::UnsafeCell::new(0),
        });
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let s = Arc::clone(&s);
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        s.lock.lock();
                        // SAFETY: the lock is held.
                        unsafe { *s.count.get() += 1 };
                        s.lock.unlock();
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
