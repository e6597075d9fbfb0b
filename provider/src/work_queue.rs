//! A work queue: a ring we produce into ([`Producer`]) with our copy of the
//! producer index and the queue's limits, and the lock that serializes its
//! posters. The send queue, the receive queue and the SRQ are built on it
//! ([`crate::send_queue`], [`crate::recv_queue`]).

#![forbid(unsafe_code)]

use core::cell::UnsafeCell;

use crate::errno::Errno;
use crate::lock::QueueLock;
use crate::ring::Producer;
use crate::wqe::QueueLimits;

/// A ring we produce into: the mapping, our producer index (only we write
/// it; the shared copy is for the kernel) and the queue's limits, whose type
/// says what the slots hold (a send or a receive WQE header).
pub(crate) struct WorkQueue<L> {
    pub(crate) ring: Producer,
    pub prod: u32,
    pub limits: L,
}

impl<L: QueueLimits> WorkQueue<L> {
    /// The queue on `ring`, producing from the ring's producer index.
    /// `EPROTO` when a slot cannot hold an `L::Header`: checked once here,
    /// so the slots handed out later need no check.
    pub(crate) fn new(ring: Producer, limits: L) -> Result<WorkQueue<L>, Errno> {
        if ring.geometry().elem_size() < size_of::<L::Header>() {
            return Err(Errno::EPROTO);
        }
        Ok(WorkQueue {
            prod: ring.own_index(),
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
            return Err(Errno::ENOMEM);
        }
        Ok(self.slot_at(self.prod))
    }

    /// Where the slot of `prod` starts, for [`slot_parts`](Self::slot_parts)
    /// once [`is_full`](Self::is_full) said no. Worked out before the
    /// kernel's consumer index is read: what is loaded before that acquire
    /// load stays in registers, where loads after it are made again.
    #[inline(always)]
    pub(crate) fn prod_slot_ptr(&self) -> *mut [u8] {
        self.slot_ptr(self.prod)
    }

    /// The slot of `index` (masked), its whole element.
    #[inline(always)]
    pub(crate) fn slot_ptr(&self, index: u32) -> *mut [u8] {
        let elem = self.ring.geometry().elem_size();
        core::ptr::slice_from_raw_parts_mut(self.ring.slot_ptr(index).as_ptr(), elem)
    }

    #[inline(always)]
    pub(crate) fn is_full(&self) -> bool {
        self.ring.indices().is_full(self.prod, self.ring.kernel_index())
    }

    #[inline(always)]
    pub(crate) fn advance(&mut self) {
        self.prod = self.ring.indices().next(self.prod);
    }

    /// Hands every slot built so far to the kernel.
    pub(crate) fn publish(&self) {
        self.ring.hand_over(self.prod);
    }
}

/// A work queue behind its lock.
pub(crate) struct Locked<L> {
    pub lock: QueueLock,
    pub wq: UnsafeCell<WorkQueue<L>>,
}

impl<L> Locked<L> {
    /// `wq` behind `lock` ([`QueueLock::unlocked`] on a thread domain).
    pub(crate) fn new(wq: WorkQueue<L>, lock: QueueLock) -> Locked<L> {
        Locked {
            lock,
            wq: UnsafeCell::new(wq),
        }
    }
}
