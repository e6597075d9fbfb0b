//! A work queue: a ring we produce into ([`Producer`]) with our copy of the
//! producer index and the queue's limits, and the lock that serializes its
//! posters. The send queue, the receive queue and the SRQ are built on it
//! ([`crate::send_queue`], [`crate::recv_queue`]).

use core::cell::UnsafeCell;

use crate::errno::Errno;
use crate::lock::QueueLock;
use crate::ring::Producer;
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
            return Err(Errno::EPROTO);
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
            return Err(Errno::ENOMEM);
        }
        Ok(self.slot_at(self.prod))
    }

    /// Fills the next free slot with `fill` (header, payload) and takes it (our producer index
    /// moves past it, unpublished); `false`, nothing written, when the ring is full. The slot's
    /// address and the next index are worked out before the kernel's consumer index is read
    /// (see [`prod_slot_ptr`](Self::prod_slot_ptr)).
    #[inline(always)]
    pub(crate) fn fill_next(&mut self, fill: impl FnOnce(&mut L::Header, &mut [u8])) -> bool {
        let slot = self.prod_slot_ptr();
        let next = self.ring.indices().next(self.prod);
        if self.is_full() {
            return false;
        }
        // SAFETY: the slot of `prod`, the ring not full: unpublished, ours.
        let (hdr, payload) = unsafe { self.slot_parts(slot) };
        fill(hdr, payload);
        self.prod = next;
        true
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
    fn slot_ptr(&self, index: u32) -> *mut [u8] {
        let elem = self.ring.geometry().elem_size();
        core::ptr::slice_from_raw_parts_mut(self.ring.slot_ptr(index).as_ptr(), elem)
    }

    #[inline(always)]
    pub(crate) fn is_full(&self) -> bool {
        self.ring.indices().is_full(self.prod, self.ring.consumed())
    }

    /// The slot of `index` (masked) as (header, payload). Sound to write only
    /// for a slot between the published producer index and `prod`, or the
    /// one at `prod` when the ring is not full: those the kernel does not read.
    #[inline(always)]
    pub(crate) fn slot_at(&mut self, index: u32) -> (&mut L::Header, &mut [u8]) {
        let slot = self.slot_ptr(index);
        // SAFETY: the slot of `index`, which the caller may write (above).
        unsafe { self.slot_parts(slot) }
    }

    /// The slot `slot` (from [`prod_slot_ptr`](Self::prod_slot_ptr) or
    /// `slot_ptr`) as (header, payload).
    ///
    /// # Safety
    /// `slot` is a slot of this ring that the kernel does not read (see
    /// [`slot_at`](Self::slot_at)).
    #[inline(always)]
    pub(crate) unsafe fn slot_parts(&mut self, slot: *mut [u8]) -> (&mut L::Header, &mut [u8]) {
        let header = size_of::<L::Header>();
        let (base, elem) = (slot.cast::<u8>(), slot.len());
        // SAFETY: the slot lies inside the mapping (Producer guarantees it) and
        // is elem >= size_of::<L::Header>() bytes long (checked in new);
        // slots start at the 384-byte queue header plus a multiple of the
        // element size (a power of two, at least the header's size) in a
        // page-aligned mapping, enough for the header's alignment. The slot is ours until we
        // publish the producer past it: the kernel reads only published
        // slots (callers pass only unpublished ones), and the queue lock
        // excludes other posters. Any bytes are a valid header (FromBytes).
        unsafe {
            let h = &mut *base.cast::<L::Header>();
            let payload = core::slice::from_raw_parts_mut(base.add(header), elem - header);
            (h, payload)
        }
    }

    #[inline(always)]
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

    /// Runs `f` on the queue with the lock held. If `f` panics, what it
    /// built but did not publish is forgotten (our producer index goes back
    /// to the published one, so no half-posted list is published by a later
    /// call) and the lock is released. EDEADLK inside this thread's own
    /// `wr_start` batch (the call would wait for itself).
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut WorkQueue<L>) -> R) -> Result<R, Errno> {
        /// Dropped only on unwind: rewinds, then unlocks.
        struct RewindOnUnwind<'a, L>(&'a Locked<L>);
        impl<L> Drop for RewindOnUnwind<'_, L> {
            #[cold]
            fn drop(&mut self) {
                // SAFETY: the lock is still held and f's borrow ended (it
                // unwound), so this is the only reference.
                let wq = unsafe { &mut *self.0.wq.get() };
                wq.prod = wq.ring.producer_index();
                // SAFETY: with() took it and did not release it.
                unsafe { self.0.lock.release() };
            }
        }
        self.lock.acquire_for_call()?;
        let guard = RewindOnUnwind(self);
        // SAFETY: the lock is held for as long as f runs (or the object is
        // on a thread domain, used by one thread at a time), so this is the
        // only reference to the queue state meanwhile.
        let r = f(unsafe { &mut *self.wq.get() });
        // The normal path unlocks here; the guard's drop is the unwind path.
        core::mem::forget(guard);
        // SAFETY: taken above.
        unsafe { self.lock.release() };
        Ok(r)
    }

    /// The queue, for a thread between `self.lock.hold()` and
    /// `release_held()` (the `ibv_wr_*` batch).
    ///
    /// # Safety
    /// A batch is open on the lock (`self.lock.pair_open()`) and the caller makes no
    /// other reference to the queue while this one lives.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn held(&self) -> &mut WorkQueue<L> {
        // SAFETY: per the contract.
        unsafe { &mut *self.wq.get() }
    }
}
