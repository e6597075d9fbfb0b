//! The rxe queue: a buffer rdma_rxe allocates for every CQ, SQ, RQ and SRQ
//! and that we mmap from the uverbs fd at the `mminfo` the create (or
//! resize) response gives.
//!
//! ```text
//! | rxe_queue_buf: log2_elem_size, index_mask | producer_index | consumer_index | slot 0 | slot 1 | ...
//!   0                                           128              256              384
//! ```
//!
//! There are `index_mask + 1` slots (a power of two) of `1 << log2_elem_size`
//! bytes. Indices are kept *masked*, in `[0, index_mask]`, by the kernel and by
//! us: the next index is `(i + 1) & index_mask`. One slot always stays unused,
//! so `producer == consumer` means empty and `producer + 1 == consumer` full;
//! a queue holds at most `index_mask` elements. A QP's send or receive queue
//! created for 0 work requests has one slot (`index_mask` 0): rxe allocates
//! `roundup_pow_of_two(max_wr + 1)` slots, and such a queue is always full.
//!
//! Each side owns one index: the kernel produces into a CQ and consumes from
//! the SQ, RQ and SRQ; we do the opposite. The types say which: a CQ ring is
//! a [`Consumer`] (read the kernel's producer, copy slots out, release our
//! consumer index), a work queue ring a [`Producer`] (read the kernel's
//! consumer, build in a slot, publish our producer index); both wrap the one
//! private mapping with its validated geometry. The header is written by the kernel
//! once, before the create response, and read by us once, at map time: from
//! then on we use our validated copy ([`Geometry`]), mask every index we read
//! from the shared page, and copy slots out before looking at them. The
//! indices are the only memory both sides touch concurrently, always with
//! atomics (the kernel uses `smp_load_acquire`/`smp_store_release`).
//!
//! Threads of one process that share a queue serialize on the object's lock
//! (CQ, QP, SRQ); the orderings here are only about us and the kernel.

#[cfg_attr(miri, allow(unused_imports))] // only the mmap path uses it
use core::ffi::c_void;
use core::marker::PhantomData;
use core::mem::{offset_of, size_of, MaybeUninit};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, Ordering};
use std::os::fd::RawFd;
#[cfg(not(miri))]
use {
    core::num::NonZeroUsize,
    nix::sys::mman::{self, MapFlags, ProtFlags},
    std::os::fd::BorrowedFd,
};

use kernel_abi::{mminfo, rxe_queue_buf};
use zerocopy::FromBytes;

use crate::errno::Errno;

/// Bytes before slot 0.
pub const HEADER_LEN: usize = size_of::<rxe_queue_buf>();

/// The largest slot we accept (the biggest rxe element, a send WQE with its
/// SGEs or inline data, is a few hundred bytes).
const MAX_LOG2_ELEM_SIZE: u32 = 16;

/// Index arithmetic for a queue of `mask + 1` slots. Pure, for the unit tests
/// and for whoever needs it without a mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Indices {
    mask: u32,
}

impl Indices {
    /// `mask + 1` must be a power of two and fit a u32. One slot (mask 0) is
    /// a queue of capacity 0, what rxe makes for a QP queue of 0 work
    /// requests: empty and full at once, every post refused.
    pub fn new(mask: u32) -> Option<Indices> {
        let slots = mask.checked_add(1)?;
        slots.is_power_of_two().then_some(Indices { mask })
    }

    pub fn mask(self) -> u32 {
        self.mask
    }

    /// How many elements the queue can hold: one slot fewer than it has.
    pub fn capacity(self) -> u32 {
        self.mask
    }

    /// An index as read from shared memory, brought into range.
    pub fn wrap(self, index: u32) -> u32 {
        index & self.mask
    }

    pub fn next(self, index: u32) -> u32 {
        index.wrapping_add(1) & self.mask
    }

    /// Elements between consumer and producer.
    pub fn used(self, producer: u32, consumer: u32) -> u32 {
        producer.wrapping_sub(consumer) & self.mask
    }

    pub fn free(self, producer: u32, consumer: u32) -> u32 {
        self.capacity() - self.used(producer, consumer)
    }

    pub fn is_empty(self, producer: u32, consumer: u32) -> bool {
        self.used(producer, consumer) == 0
    }

    pub fn is_full(self, producer: u32, consumer: u32) -> bool {
        self.used(producer, consumer) == self.capacity()
    }
}

/// The shape of a mapped queue, checked against the mapping's length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub indices: Indices,
    pub log2_elem_size: u32,
    /// `1 << log2_elem_size`, kept so that a slot's offset is one multiply
    /// (a shift by a loaded count costs a mask and a move more).
    elem_size: usize,
}

impl Geometry {
    /// Validates a header read from a mapping of `map_len` bytes: a sane
    /// element size of at least `min_elem_size`, a power-of-two slot count,
    /// and every slot inside the mapping. The kernel rounds the mapping up to
    /// a page, so it may be longer than the header implies, never shorter.
    pub fn check(
        log2_elem_size: u32,
        index_mask: u32,
        map_len: usize,
        min_elem_size: usize,
    ) -> Result<Geometry, Errno> {
        if log2_elem_size > MAX_LOG2_ELEM_SIZE || (1usize << log2_elem_size) < min_elem_size {
            return Err(Errno::EPROTO);
        }
        let indices = Indices::new(index_mask).ok_or(Errno::EPROTO)?;
        let slots = usize::try_from(index_mask).map_err(|_| Errno::EPROTO)? + 1;
        let needed = slots
            .checked_mul(1usize << log2_elem_size)
            .and_then(|data| data.checked_add(HEADER_LEN))
            .ok_or(Errno::EPROTO)?;
        if needed > map_len {
            return Err(Errno::EPROTO);
        }
        Ok(Geometry {
            indices,
            log2_elem_size,
            elem_size: 1 << log2_elem_size,
        })
    }

    pub fn elem_size(self) -> usize {
        self.elem_size
    }

    /// Where the slot of `index` (masked here) starts, from the mapping's start.
    pub fn slot_offset(self, index: u32) -> usize {
        // No overflow: check() proved every slot's end fits the mapping.
        HEADER_LEN + self.indices.wrap(index) as usize * self.elem_size
    }
}

/// An mmap'd region, unmapped on drop.
struct Mapping {
    base: NonNull<u8>,
    len: usize,
}

impl Mapping {
    /// Under Miri (unit tests only), the queue comes from the fake
    /// kernel's memory ([`testing::FakeRing`]): Miri cannot map a file.
    #[cfg(miri)]
    fn new(fd: RawFd, mi: &mminfo) -> Result<Mapping, Errno> {
        let len = usize::try_from(mi.size).map_err(|_| Errno::EPROTO)?;
        if len < HEADER_LEN {
            return Err(Errno::EPROTO);
        }
        if fd < 0 {
            return Err(Errno::EBADF);
        }
        let base = testing::shared_memory(fd, mi.offset, len).ok_or(Errno::EINVAL)?;
        Ok(Mapping { base, len })
    }

    #[cfg(not(miri))]
    fn new(fd: RawFd, mi: &mminfo) -> Result<Mapping, Errno> {
        let len = usize::try_from(mi.size).map_err(|_| Errno::EPROTO)?;
        let offset = libc::off_t::try_from(mi.offset).map_err(|_| Errno::EPROTO)?;
        if len < HEADER_LEN {
            return Err(Errno::EPROTO);
        }
        let length = NonZeroUsize::new(len).ok_or(Errno::EPROTO)?;
        // BorrowedFd cannot hold -1 (it panics): what mmap would say of it.
        if fd < 0 {
            return Err(Errno::EBADF);
        }
        // SAFETY: a fresh shared mapping chosen by the kernel (no address
        // asked for); it aliases no Rust object. fd is the context's command
        // fd, open for as long as the context (the caller's borrow).
        let p = unsafe {
            mman::mmap(
                None,
                length,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
                BorrowedFd::borrow_raw(fd),
                offset,
            )
        }
        .map_err(Errno::from_nix)?;
        Ok(Mapping {
            base: p.cast::<u8>(),
            len,
        })
    }
}

#[cfg(not(miri))]
impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: base/len are exactly what mmap returned and nothing refers
        // into the region any more (the Ring that owned us is gone).
        if let Err(e) = unsafe { mman::munmap(self.base.cast::<c_void>(), self.len) } {
            log::warn!("munmap of a queue failed: {e}");
        }
    }
}

/// A mapped rxe queue with its validated geometry: what a [`Side`] wraps,
/// handing out only its role's methods.
struct Ring {
    map: Mapping,
    geometry: Geometry,
}

impl Ring {
    /// Maps the queue described by `mi` on `fd` (the context's `cmd_fd`) and
    /// validates its header; `min_elem_size` is the largest element we will
    /// read or write in a slot. Unmaps again if the header is not sane.
    fn map(fd: RawFd, mi: &mminfo, min_elem_size: usize) -> Result<Ring, Errno> {
        let map = Mapping::new(fd, mi)?;
        let hdr = map.base.as_ptr();
        // SAFETY: the mapping is at least HEADER_LEN bytes and page-aligned;
        // both fields are u32 at 4-aligned offsets. Read once, volatile, as
        // the memory is shared; the values are validated before any use.
        let (log2, mask) = unsafe {
            (
                hdr.add(offset_of!(rxe_queue_buf, log2_elem_size))
                    .cast::<u32>()
                    .read_volatile(),
                hdr.add(offset_of!(rxe_queue_buf, index_mask))
                    .cast::<u32>()
                    .read_volatile(),
            )
        };
        let geometry = Geometry::check(log2, mask, map.len, min_elem_size).inspect_err(|_| {
            log::debug!(
                "refused a queue: log2_elem_size {log2}, index_mask {mask:#x}, mapping {} bytes, \
                 elements of at least {min_elem_size} bytes needed",
                map.len
            );
        })?;
        Ok(Ring { map, geometry })
    }

    #[inline]
    fn indices(&self) -> Indices {
        self.geometry.indices
    }

    #[inline]
    fn index_at(&self, offset: usize) -> &AtomicU32 {
        // SAFETY: offset is producer_index or consumer_index, both inside the
        // header the mapping covers, 4-aligned in a page-aligned mapping.
        // AtomicU32 has u32's layout; the kernel accesses these words only
        // with (its) atomics, and the mapping outlives &self.
        unsafe { AtomicU32::from_ptr(self.map.base.as_ptr().add(offset).cast::<u32>()) }
    }

    /// The fake kernel's side of the tests and fuzz targets.
    #[cfg(any(test, feature = "fuzzing"))]
    #[inline]
    fn producer(&self) -> &AtomicU32 {
        self.index_at(offset_of!(rxe_queue_buf, producer_index))
    }

    /// The fake kernel's side of the tests and fuzz targets.
    #[cfg(any(test, feature = "fuzzing"))]
    #[inline]
    fn consumer(&self) -> &AtomicU32 {
        self.index_at(offset_of!(rxe_queue_buf, consumer_index))
    }

    /// The start of the slot of `index` (masked), `elem_size()` bytes long.
    #[inline]
    fn slot_ptr(&self, index: u32) -> NonNull<u8> {
        // SAFETY: Geometry::check proved every slot lies inside the mapping.
        unsafe { self.map.base.add(self.geometry.slot_offset(index)) }
    }

    /// A copy of the `T` at the start of the slot of `index` (masked). One
    /// read of the shared memory: the caller looks only at the copy.
    fn read_slot<T: FromBytes>(&self, index: u32) -> T {
        // An element larger than the slot would read the next one.
        assert!(
            size_of::<T>() <= self.geometry.elem_size(),
            "element larger than the queue's slots"
        );
        // SAFETY: the slot is inside the mapping and at least size_of::<T>()
        // bytes; slot offsets are multiples of the (power-of-two) element
        // size, which is >= size_of::<T>() and hence a multiple of T's
        // alignment; any bytes are a valid T (FromBytes).
        unsafe { self.slot_ptr(index).as_ptr().cast::<T>().read_volatile() }
    }
}

// SAFETY: a Ring is a pointer to a shared mapping that lives as long as the
// Ring; all access to it is through atomics or per-call copies, and callers
// serialize the index owner's side with their object's lock.
unsafe impl Send for Ring {}
// SAFETY: as above; &Ring hands out only atomics and copies.
unsafe impl Sync for Ring {}

/// Which side of a queue we are: the index word we own and the kernel's.
pub trait Role {
    /// The offset in the queue's header of the index we write.
    const OURS: usize;
    /// The offset of the index the kernel writes.
    const KERNELS: usize;
}

/// We produce, the kernel consumes: a QP's send and receive queues, an SRQ.
pub enum Produce {}

/// The kernel produces, we consume: a CQ.
pub enum Consume {}

impl Role for Produce {
    const OURS: usize = offset_of!(rxe_queue_buf, producer_index);
    const KERNELS: usize = offset_of!(rxe_queue_buf, consumer_index);
}

impl Role for Consume {
    const OURS: usize = offset_of!(rxe_queue_buf, consumer_index);
    const KERNELS: usize = offset_of!(rxe_queue_buf, producer_index);
}

/// Our side of a mapped queue: we own our index and the slots between the
/// kernel's index and ours (those we are writing, as producer; those the
/// kernel wrote and we have not handed back, as consumer).
pub struct Side<R: Role> {
    ring: Ring,
    role: PhantomData<R>,
}

/// A queue we produce into and the kernel consumes.
pub type Producer = Side<Produce>;

/// A queue the kernel produces into and we consume.
pub type Consumer = Side<Consume>;

impl<R: Role> Side<R> {
    /// Maps the queue (see [`Geometry::check`]); `min_elem_size` is the
    /// largest element we will write into (or read from) a slot.
    pub fn map(fd: RawFd, mi: &mminfo, min_elem_size: usize) -> Result<Side<R>, Errno> {
        Ring::map(fd, mi, min_elem_size).map(|ring| Side {
            ring,
            role: PhantomData,
        })
    }

    #[inline]
    pub fn geometry(&self) -> Geometry {
        self.ring.geometry
    }

    #[inline]
    pub fn indices(&self) -> Indices {
        self.ring.indices()
    }

    /// The kernel's index, masked. Acquire: pairs with the kernel's
    /// `smp_store_release` of it once it is done with the slots before it:
    /// read them (a consumer index: we may overwrite them) or written them
    /// (a producer index: we may copy them out).
    #[inline]
    pub fn kernel_index(&self) -> u32 {
        self.indices()
            .wrap(self.ring.index_at(R::KERNELS).load(Ordering::Acquire))
    }

    /// Our index as the shared page has it, masked. Only we write it;
    /// callers read it when they start and keep their own copy.
    #[inline]
    pub fn own_index(&self) -> u32 {
        self.indices().wrap(self.ring.index_at(R::OURS).load(Ordering::Relaxed))
    }

    /// Hands the slots before `index` to the kernel: the elements we wrote
    /// (producer) or the ones we copied out (consumer). Release: our writes
    /// into, or copies out of, those slots happen before the kernel's
    /// `smp_load_acquire` of our index lets it read or overwrite them.
    #[inline]
    pub fn hand_over(&self, index: u32) {
        self.ring
            .index_at(R::OURS)
            .store(self.indices().wrap(index), Ordering::Release);
    }
}

impl Producer {
    /// The start of the slot of `index` (masked), `elem_size()` bytes long,
    /// for building an element in place. Writing it is sound only while we
    /// own the slot (before handing it over).
    #[inline]
    pub fn slot_ptr(&self, index: u32) -> NonNull<u8> {
        self.ring.slot_ptr(index)
    }
}

impl Consumer {
    /// A copy of the `T` at the start of the slot of `index` (masked). One
    /// read of the shared memory: the caller looks only at the copy.
    pub fn read_slot<T: FromBytes>(&self, index: u32) -> T {
        self.ring.read_slot(index)
    }

    /// Copies the `T` at the start of the slot of `index` (masked) to `dst`:
    /// like [`Consumer::read_slot`], one read of the shared memory, but
    /// straight into the caller's memory.
    ///
    /// # Safety
    /// `dst` is valid for writing a `T` and does not point into the ring;
    /// the slots are at least `size_of::<T>()` bytes (the caller checked the
    /// geometry once, rather than this per copy).
    #[inline]
    pub unsafe fn copy_slot<T: FromBytes>(&self, index: u32, dst: *mut T) {
        debug_assert!(
            size_of::<T>() <= self.ring.geometry.elem_size(),
            "element larger than the queue's slots"
        );
        // SAFETY: the source is inside the mapping (as in read_slot), at
        // least size_of::<T>() bytes per the contract, aligned for T, any
        // bytes valid; the destination per the contract. The slot is one
        // the kernel published and does not write until we release it.
        unsafe { core::ptr::copy_nonoverlapping(self.ring.slot_ptr(index).as_ptr().cast::<T>(), dst, 1) }
    }
}

impl Consumer {
    /// Overwrites the slot of `index` (masked) with `value`: for compacting
    /// the ring when a QP's completions are dropped (`cq::object::purge_qp`). One
    /// write of the shared memory.
    ///
    /// Sound only for a slot we own: published by the kernel (before
    /// [`kernel_index`](Side::kernel_index)) and not yet released, which the kernel
    /// neither reads nor writes until we release it.
    pub fn write_slot<T: Copy + FromBytes>(&self, index: u32, value: &T) {
        // A larger element would overwrite the next slot.
        assert!(
            size_of::<T>() <= self.ring.geometry.elem_size(),
            "element larger than the queue's slots"
        );
        // SAFETY: the slot is inside the mapping (Geometry::check) and at
        // least size_of::<T>() bytes; slot offsets are multiples of the
        // power-of-two element size, so aligned for T. The caller owns the
        // slot (see above), so nothing else writes it meanwhile.
        unsafe { self.ring.slot_ptr(index).as_ptr().cast::<T>().write_volatile(*value) }
    }
}

/// A [`Consumer`] whose slots were checked once, at [`new`](Self::new), to hold a `T`:
/// [`copy_to`](Self::copy_to) copies one out with no check per copy. Everything else is the
/// [`Consumer`]'s (`Deref`).
pub struct ConsumerOf<T> {
    ring: Consumer,
    elem: PhantomData<fn() -> T>,
}

impl<T: FromBytes> ConsumerOf<T> {
    /// `None` when the slots are smaller than a `T`.
    pub fn new(ring: Consumer) -> Option<ConsumerOf<T>> {
        (ring.geometry().elem_size() >= size_of::<T>()).then_some(ConsumerOf {
            ring,
            elem: PhantomData,
        })
    }

    /// Copies the `T` at the start of the slot of `index` (masked) into `dst`, straight from
    /// the shared memory ([`Consumer::copy_slot`]).
    #[inline]
    pub fn copy_to(&self, index: u32, dst: &mut MaybeUninit<T>) {
        // SAFETY: dst is a live, writable T of ours (a `&mut` into our memory, never into the
        // mapping, to which no reference is handed out); every slot holds a T (checked in new).
        unsafe { self.ring.copy_slot(index, dst.as_mut_ptr()) }
    }
}

impl<T> core::ops::Deref for ConsumerOf<T> {
    type Target = Consumer;

    #[inline(always)]
    fn deref(&self) -> &Consumer {
        &self.ring
    }
}

/// The index words of a [`Consumer`]'s ring, readable from a thread that
/// holds no reference to the ring: the CQ purge takes its snapshot of the
/// producer and consumer indices with it while another thread may be
/// polling (a poll's `&mut` covers the `Consumer`, not the shared page).
/// Valid only while the ring it came from is mapped.
#[derive(Clone, Copy)]
pub struct IndexView {
    base: NonNull<u8>,
    indices: Indices,
}

// SAFETY: a pointer into shared memory read only with atomics; the holder
// (a CQ's purge queue, under its mutex) drops it before the ring is unmapped.
unsafe impl Send for IndexView {}

impl Consumer {
    /// See [`IndexView`].
    pub fn index_view(&self) -> IndexView {
        IndexView {
            base: self.ring.map.base,
            indices: self.indices(),
        }
    }
}

impl IndexView {
    pub fn indices(&self) -> Indices {
        self.indices
    }

    /// # Safety
    /// The ring this view came from is still mapped.
    unsafe fn word(&self, offset: usize) -> &AtomicU32 {
        // SAFETY: as in Ring::index_at, with the ring mapped per the contract.
        unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(offset).cast::<u32>()) }
    }

    /// [`Consumer`]'s [`kernel_index`](Side::kernel_index).
    ///
    /// # Safety
    /// The ring this view came from is still mapped.
    pub unsafe fn produced(&self) -> u32 {
        // SAFETY: per the contract.
        let word = unsafe { self.word(offset_of!(rxe_queue_buf, producer_index)) };
        self.indices.wrap(word.load(Ordering::Acquire))
    }

    /// The consumer index the kernel sees (the last one released), masked.
    ///
    /// # Safety
    /// As for [`kernel_index`](Side::kernel_index).
    pub unsafe fn consumer_index(&self) -> u32 {
        // SAFETY: per the contract.
        let word = unsafe { self.word(offset_of!(rxe_queue_buf, consumer_index)) };
        self.indices.wrap(word.load(Ordering::Acquire))
    }
}

#[cfg(any(test, feature = "fuzzing"))]
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) mod testing {
    //! A queue in a memfd, so host tests can play the kernel's side.

    use super::*;
    #[cfg(miri)]
    use nix::sys::eventfd::EventFd;
    #[cfg(not(miri))]
    use nix::sys::memfd::{memfd_create, MemFdCreateFlag};
    use std::os::fd::{AsRawFd, OwnedFd};

    pub struct FakeRing {
        pub fd: OwnedFd,
        pub mi: mminfo,
        /// The kernel's view: our own mapping of the same pages.
        pub kernel: KernelSide,
    }

    /// The kernel's side of a queue, which may move either index.
    pub struct KernelSide(Ring);

    impl KernelSide {
        pub fn indices(&self) -> Indices {
            self.0.indices()
        }

        pub fn geometry(&self) -> Geometry {
            self.0.geometry
        }

        pub fn produced(&self) -> u32 {
            self.indices().wrap(self.0.producer().load(Ordering::Acquire))
        }

        pub fn producer_index(&self) -> u32 {
            self.produced()
        }

        pub fn consumer_index(&self) -> u32 {
            self.indices().wrap(self.0.consumer().load(Ordering::Acquire))
        }

        pub fn publish_producer(&self, index: u32) {
            self.0.producer().store(self.indices().wrap(index), Ordering::Release);
        }

        pub fn release_consumer(&self, index: u32) {
            self.0.consumer().store(self.indices().wrap(index), Ordering::Release);
        }

        pub fn read_slot<T: FromBytes>(&self, index: u32) -> T {
            self.0.read_slot(index)
        }

        pub fn slot_ptr(&self, index: u32) -> NonNull<u8> {
            self.0.slot_ptr(index)
        }
    }

    impl FakeRing {
        /// A queue of `mask + 1` slots of `1 << log2` bytes, mapped `extra`
        /// bytes longer than needed.
        pub fn new(log2: u32, mask: u32, extra: usize) -> FakeRing {
            let size = HEADER_LEN + ((mask as usize + 1) << log2) + extra;
            let fd = shared_file(size);
            let mi = mminfo {
                offset: 0,
                size: size as u32,
                pad: 0,
            };
            let map = Mapping::new(fd.as_raw_fd(), &mi).unwrap();
            // SAFETY: the header lies inside the fresh mapping.
            unsafe {
                let hdr = map.base.as_ptr();
                hdr.cast::<u32>().write(log2);
                hdr.add(4).cast::<u32>().write(mask);
            }
            let kernel = KernelSide(Ring {
                geometry: Geometry::check(log2, mask, size, 0).unwrap(),
                map,
            });
            FakeRing { fd, mi, kernel }
        }

        /// Produces `value` as the kernel does: write the slot, then release
        /// the producer.
        pub fn produce<T: Copy>(&self, value: &T) {
            let k = &self.kernel;
            let prod = k.producer_index();
            assert!(
                !k.indices().is_full(prod, k.consumer_index()),
                "fake kernel: queue full"
            );
            assert!(size_of::<T>() <= k.geometry().elem_size());
            // SAFETY: the slot is inside the mapping, at least as large as T
            // (just checked) and aligned for it (slots are elem-size aligned).
            unsafe { k.slot_ptr(prod).as_ptr().cast::<T>().write(*value) };
            k.publish_producer(k.indices().next(prod));
        }

        pub fn set_header(&self, log2: u32, mask: u32) {
            // SAFETY: the header lies inside the mapping.
            unsafe {
                let hdr = self.kernel.0.map.base.as_ptr();
                hdr.cast::<u32>().write_volatile(log2);
                hdr.add(4).cast::<u32>().write_volatile(mask);
            }
        }

        pub fn raw_fd(&self) -> RawFd {
            self.fd.as_raw_fd()
        }
    }

    /// A file of `size` zero bytes that [`Mapping::new`] can map: a memfd.
    #[cfg(not(miri))]
    fn shared_file(size: usize) -> OwnedFd {
        let fd = memfd_create(c"rxe-queue", MemFdCreateFlag::empty()).unwrap();
        nix::unistd::ftruncate(&fd, libc::off_t::try_from(size).unwrap()).unwrap();
        fd
    }

    /// Under Miri, which can neither make a memfd nor map a file: an
    /// eventfd names the queue, whose pages are zeroed memory of ours, kept
    /// by fd number; every [`Mapping::new`] of that fd (ours and the code
    /// under test's) gets the same bytes, as mappings of one memfd share
    /// them. They are freed with the fd's [`FakeRing`].
    #[cfg(miri)]
    fn shared_file(size: usize) -> OwnedFd {
        let fd = OwnedFd::from(EventFd::new().unwrap());
        let raw = fd.as_raw_fd();
        let layout = std::alloc::Layout::from_size_align(size, 4096).unwrap();
        // SAFETY: a non-zero size (HEADER_LEN at least).
        let base = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!base.is_null());
        MIRI_FILES.lock().unwrap().push(MiriFile { fd: raw, base, size });
        fd
    }

    /// A fake queue's memory under Miri.
    #[cfg(miri)]
    struct MiriFile {
        fd: RawFd,
        base: *mut u8,
        size: usize,
    }

    // SAFETY: the memory is only reached through the queues' own accessors.
    #[cfg(miri)]
    unsafe impl Send for MiriFile {}

    #[cfg(miri)]
    static MIRI_FILES: std::sync::Mutex<Vec<MiriFile>> = std::sync::Mutex::new(Vec::new());

    /// The memory of the fake queue `fd` from `offset`, if `len` bytes fit it.
    #[cfg(miri)]
    pub(super) fn shared_memory(fd: RawFd, offset: u64, len: usize) -> Option<NonNull<u8>> {
        let files = MIRI_FILES.lock().unwrap();
        let file = files.iter().find(|f| f.fd == fd)?;
        let offset = usize::try_from(offset).ok()?;
        if offset.checked_add(len)? > file.size {
            return None;
        }
        NonNull::new(file.base.wrapping_add(offset))
    }

    #[cfg(miri)]
    impl Drop for FakeRing {
        fn drop(&mut self) {
            let mut files = MIRI_FILES.lock().unwrap();
            let at = files.iter().position(|f| f.fd == self.fd.as_raw_fd()).unwrap();
            let file = files.swap_remove(at);
            let layout = std::alloc::Layout::from_size_align(file.size, 4096).unwrap();
            // SAFETY: allocated in shared_file with this layout, freed once.
            unsafe { std::alloc::dealloc(file.base, layout) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::FakeRing;
    use super::*;

    #[test]
    fn slot_counts_must_be_powers_of_two() {
        assert!(Indices::new(0).is_some());
        assert!(Indices::new(1).is_some());
        assert!(Indices::new(2).is_none());
        assert!(Indices::new(5).is_none());
        assert!(Indices::new(6).is_none());
        assert!(Indices::new(7).is_some());
        assert!(Indices::new(u32::MAX).is_none());
        assert!(Indices::new(u32::MAX >> 1).is_some());
    }

    #[test]
    fn empty_full_and_counts() {
        let q = Indices::new(7).unwrap();
        assert_eq!(q.capacity(), 7);
        assert!(q.is_empty(0, 0) && !q.is_full(0, 0));
        assert_eq!((q.used(3, 0), q.free(3, 0)), (3, 4));
        assert!(q.is_full(7, 0) && !q.is_empty(7, 0));
        assert!(q.is_full(2, 3));
        assert!(!q.is_full(1, 3));
        assert_eq!(q.used(2, 3), 7);
    }

    #[test]
    fn a_single_slot_queue_holds_nothing() {
        let q = Indices::new(0).unwrap();
        assert_eq!(q.capacity(), 0);
        assert!(q.is_full(0, 0) && q.is_empty(0, 0));
        assert_eq!((q.used(5, 9), q.free(5, 9), q.next(0), q.wrap(3)), (0, 0, 0, 0));
    }

    #[test]
    fn indices_wrap_around() {
        let q = Indices::new(3).unwrap();
        assert_eq!(q.next(0), 1);
        assert_eq!(q.next(3), 0);
        // The producer wrapped past the end, the consumer did not.
        assert_eq!(q.used(1, 3), 2);
        assert_eq!(q.used(0, 1), 3);
        assert!(q.is_full(0, 1));
        // Garbage high bits from shared memory are masked away.
        assert_eq!(q.wrap(0xffff_fff6), 2);
        assert_eq!(q.next(u32::MAX), 0);
        assert_eq!(q.used(0x100, 0xffff_ff01), 3);
        // Walking the whole ring twice comes back to the start.
        let mut i = 2;
        for _ in 0..8 {
            i = q.next(i);
        }
        assert_eq!(i, 2);
    }

    #[test]
    fn geometry_rejects_what_does_not_fit_the_mapping() {
        let exact = HEADER_LEN + 8 * 128;
        let g = Geometry::check(7, 7, exact, 48).unwrap();
        assert_eq!(
            (g.elem_size(), g.slot_offset(0), g.slot_offset(7)),
            (128, 384, 384 + 7 * 128)
        );
        assert_eq!(g.slot_offset(9), g.slot_offset(1));
        assert_eq!(Geometry::check(7, 7, 4096, 48).map(|g| g.indices.mask()), Ok(7));
        assert_eq!(Geometry::check(7, 7, exact - 1, 48), Err(Errno::EPROTO));
        assert_eq!(Geometry::check(7, 15, exact, 48), Err(Errno::EPROTO));
        // Elements smaller than what we read from them.
        assert_eq!(Geometry::check(5, 7, exact, 48), Err(Errno::EPROTO));
        // Absurd element sizes and slot counts, without overflow.
        assert_eq!(Geometry::check(40, 7, usize::MAX, 0), Err(Errno::EPROTO));
        assert_eq!(Geometry::check(16, u32::MAX >> 1, 1 << 40, 0), Err(Errno::EPROTO));
        assert!(Geometry::check(16, u32::MAX >> 1, usize::MAX, 0).is_ok());
        assert_eq!(Geometry::check(7, 6, 1 << 20, 0), Err(Errno::EPROTO));
    }

    #[test]
    fn map_checks_the_header_against_the_size() {
        let fq = FakeRing::new(7, 7, 0);
        let ring = Ring::map(fq.raw_fd(), &fq.mi, 48).unwrap();
        assert_eq!(
            ring.geometry,
            Geometry {
                indices: Indices::new(7).unwrap(),
                log2_elem_size: 7,
                elem_size: 128
            }
        );
        drop(ring);
        // A header that claims more slots than were mapped.
        fq.set_header(7, 15);
        assert_eq!(Ring::map(fq.raw_fd(), &fq.mi, 48).err(), Some(Errno::EPROTO));
        // A mapping too short for the header itself.
        let short = mminfo {
            offset: 0,
            size: 100,
            pad: 0,
        };
        assert_eq!(Ring::map(fq.raw_fd(), &short, 48).err(), Some(Errno::EPROTO));
        // A bad fd is an errno.
        assert_eq!(Ring::map(-1, &fq.mi, 48).err(), Some(Errno::EBADF));
    }

    /// A fake ring of 4 slots of 64 bytes (capacity 3) and our `R` side of it, for u64s.
    fn small_ring<R: Role>() -> (FakeRing, Side<R>) {
        let fq = FakeRing::new(6, 3, 0);
        let side = Side::map(fq.raw_fd(), &fq.mi, 8).unwrap();
        (fq, side)
    }

    #[test]
    fn consumer_side_sees_what_the_producer_published_across_the_wrap() {
        let (fq, ring) = small_ring::<Consume>();
        let q = ring.indices();
        let mut cons = ring.own_index();
        let mut next = 0u64;
        // Ten rounds through a 4-slot ring (capacity 3).
        for round in 0..10u64 {
            for _ in 0..=round % 3 {
                fq.produce(&next);
                next += 1;
            }
            let prod = ring.kernel_index();
            let mut got = Vec::new();
            while !q.is_empty(prod, cons) {
                got.push(ring.read_slot::<u64>(cons));
                cons = q.next(cons);
            }
            ring.hand_over(cons);
            let first = next - got.len() as u64;
            assert_eq!(got, (first..next).collect::<Vec<_>>());
        }
        assert!(q.is_empty(ring.kernel_index(), fq.kernel.consumer_index()));
    }

    #[test]
    fn producer_side_publishes_in_place() {
        let (fq, ring) = small_ring::<Produce>();
        let q = ring.indices();
        let mut prod = ring.own_index();
        for v in 0..3u64 {
            assert!(!q.is_full(prod, ring.kernel_index()));
            // SAFETY: we own the slot at prod until we publish it.
            unsafe { ring.slot_ptr(prod).as_ptr().cast::<u64>().write(v + 100) };
            prod = q.next(prod);
            ring.hand_over(prod);
        }
        assert!(q.is_full(prod, ring.kernel_index()));
        assert_eq!(fq.kernel.read_slot::<u64>(2), 102);
        assert_eq!(fq.kernel.produced(), 3);
    }
}
