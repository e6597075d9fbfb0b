//! A work queue: a ring we produce into ([`Producer`]) with our copy of the
//! producer index and the queue's limits, and the lock that serializes its
//! posters. The send queue, the receive queue and the SRQ are built on it
//! ([`crate::send_queue`], [`crate::recv_queue`]).

use core::cell::UnsafeCell;

use crate::errno::Errno;
use crate::queue::Producer;
use crate::spinlock::SpinLock;
use crate::wqe::QueueLimits;

/// A ring we produce into: the mapping, our producer index (only we write
/// it; the shared copy is for the kernel) and the queue's limits, whose type
/// says what the slots hold (a send or a receive WQE header).
pub(crate) struct WorkQueue<L> {
    ring: Producer,
    pub prod: u32,
    pub limits: L,
}

impl<L: QueueLimits> WorkQueue<L> {
    /// The queue on `ring`, producing from the ring's producer index.
    /// `EPROTO` when a slot cannot hold an `L::Header`: checked once here,
    /// so the slots handed out later need no check.
    pub(crate) fn new(ring: Producer, limits: L) -> Result<WorkQueue<L>, Errno> {
        if ring.geometry().elem_size() < size_of::<L::Header>() {
            return Err(libc::EPROTO);
        }
        Ok(WorkQueue {
            prod: ring.producer_index(),
            ring,
            limits,
        })
    }

    pub(crate) fn ring(&self) -> &Producer {
        &self.ring
    }

    /// The next free slot as (header, payload), or `ENOMEM` when the ring is
    /// full (the kernel has not consumed far enough).
    #[inline]
    pub(crate) fn next_slot(&mut self) -> Result<(&mut L::Header, &mut [u8]), Errno> {
        if self.is_full() {
            return Err(libc::ENOMEM);
        }
        Ok(self.slot_at(self.prod))
    }

    /// Whether the kernel has not consumed far enough for another slot.
    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.ring.indices().is_full(self.prod, self.ring.consumed())
    }

    /// The slot of `index` (masked) as (header, payload). Sound to write only
    /// for a slot between the published producer index and `prod`, or the
    /// one at `prod` when the ring is not full: those the kernel does not read.
    #[inline]
    pub(crate) fn slot_at(&mut self, index: u32) -> (&mut L::Header, &mut [u8]) {
        let header = size_of::<L::Header>();
        let elem = self.ring.geometry().elem_size();
        let base = self.ring.slot_ptr(index).as_ptr();
        // SAFETY: the slot lies inside the mapping (Producer guarantees it) and
        // is elem >= size_of::<L::Header>() bytes long (checked in new);
        // slots start at multiples of 128 bytes in a page-aligned mapping,
        // enough for the header's alignment. The slot is ours until we
        // publish the producer past it: the kernel reads only published
        // slots (callers pass only unpublished ones), and the queue lock
        // excludes other posters. Any bytes are a valid header (FromBytes).
        unsafe {
            let h = &mut *base.cast::<L::Header>();
            let payload = core::slice::from_raw_parts_mut(base.add(header), elem - header);
            (h, payload)
        }
    }

    #[inline]
    pub(crate) fn advance(&mut self) {
        self.prod = self.ring.indices().next(self.prod);
    }

    /// Hands every slot built so far to the kernel.
    pub(crate) fn publish(&self) {
        self.ring.publish(self.prod);
    }
}

/// A work queue behind its lock.
pub(crate) struct Locked<L> {
    pub lock: SpinLock,
    pub wq: UnsafeCell<WorkQueue<L>>,
}

impl<L> Locked<L> {
    pub(crate) fn new(wq: WorkQueue<L>) -> Locked<L> {
        Locked {
            lock: SpinLock::new(),
            wq: UnsafeCell::new(wq),
        }
    }

    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut WorkQueue<L>) -> R) -> R {
        struct Unlock<'a>(&'a SpinLock);
        impl Drop for Unlock<'_> {
            fn drop(&mut self) {
                self.0.unlock();
            }
        }
        self.lock.lock();
        let _unlock = Unlock(&self.lock);
        // SAFETY: the lock is held until _unlock drops (also on a panic), so
        // this is the only reference to the queue state meanwhile.
        f(unsafe { &mut *self.wq.get() })
    }
}
