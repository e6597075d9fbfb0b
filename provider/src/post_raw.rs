//! The raw access behind posting work, below the queues that post: libibverbs' work requests
//! as the application hands them ([`SendWr`], its inline buffers, [`RecvWr`]), the ring slot a
//! WQE is built in, and the work queue's critical section under its lock. A boundary module
//! (docs/provider-architecture.md, "Where unsafe lives"): what posts ([`crate::send_queue`],
//! [`crate::recv_queue`], [`crate::qp`], [`crate::srq`]) is safe code over these views, and the
//! C entries that make them are in [`crate::entry`].

use core::ffi::c_int;
use core::marker::PhantomData;

use kernel_abi::{rxe_send_wqe, rxe_sge};

use crate::ah::RxeAh;
use crate::errno::Errno;
use crate::libibverbs::qp::*;
use crate::work_queue::{Locked, WorkQueue};
use crate::wqe::encode::{set_atomic, set_data, set_mw, set_rdma, write_header};
use crate::wqe::payload::write_sges;
use crate::wqe::{self, MwBind, QueueLimits, SendLimits, UdDest, WrObjects, SGE_SIZE};

// ---------------------------------------------------------------------------------------------
// Work queues: the slot a WQE is built in, the lock's critical section

impl<L: QueueLimits> WorkQueue<L> {
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
}

impl<L> Locked<L> {
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
                // SAFETY: the lock is still held (with() took it and did not release it) and
                // f's borrow ended (it unwound), so this is the only reference to the queue
                // until the release.
                unsafe {
                    let wq = &mut *self.0.wq.get();
                    wq.prod = wq.ring.own_index();
                    self.0.lock.release();
                }
            }
        }
        self.lock.acquire_for_call()?;
        let guard = RewindOnUnwind(self);
        // SAFETY: the lock is held for as long as f runs (or the object is
        // on a thread domain, used by one thread at a time), so this is the
        // only reference to the queue state meanwhile; then the lock taken
        // above is released (the normal path: the guard's drop is the unwind path).
        let r = unsafe {
            let r = f(&mut *self.wq.get());
            core::mem::forget(guard);
            self.lock.release();
            r
        };
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

// ---------------------------------------------------------------------------------------------
// Work requests: a legacy request's SGE list, unions and inline bytes

/// A legacy send request of the caller's list, read under the `ibv_post_send` contract, which
/// [`SendWr::from_caller`] takes on: with at most the QP's `max_sge` entries, `sg_list` has
/// `num_sge` of them; the union arm of its opcode is written (the `ud` arm on a UD QP); the AH
/// (UD) and the MW and MR (BIND_MW) it names are objects of ours or null; with
/// `IBV_SEND_INLINE` its SGEs describe readable bytes. Its methods read those parts safely.
#[derive(Clone, Copy)]
pub(crate) struct SendWr<'a>(&'a ibv_send_wr);

/// The SGE list of a [`SendWr`] (at most `max_sge` entries), which only [`SendWr::sges`]
/// makes: inline bytes are read from the addresses of these SGEs.
#[derive(Clone, Copy)]
pub(crate) struct SendSges<'a>(&'a [ibv_sge]);

impl<'a> SendSges<'a> {
    #[cfg(any(test, feature = "fuzzing"))]
    #[inline(always)]
    pub(crate) fn as_slice(self) -> &'a [ibv_sge] {
        self.0
    }
}

impl<'a> SendWr<'a> {
    /// # Safety
    /// `wr` points at a live request under the `ibv_post_send` contract (above), which stays
    /// unchanged for `'a`.
    #[inline(always)]
    pub(crate) unsafe fn from_caller(wr: *const ibv_send_wr) -> SendWr<'a> {
        // SAFETY: per the contract.
        SendWr(unsafe { &*wr })
    }

    /// The request's plain fields (its unions and pointers are read through the methods).
    #[inline(always)]
    pub(crate) fn wr(self) -> &'a ibv_send_wr {
        self.0
    }

    /// The SGE list. More entries than the QP's `max_sge` (a negative count included) is
    /// `EINVAL`, as is a null list with entries.
    #[inline(always)]
    pub(crate) fn sges(self, lim: &SendLimits) -> Result<SendSges<'a>, Errno> {
        let wr = self.0;
        // A negative count is a huge u32.
        let n = wr.num_sge as u32;
        if n > lim.max_sge {
            return Err(Errno::EINVAL);
        }
        if n == 0 {
            return Ok(SendSges(&[]));
        }
        if wr.sg_list.is_null() {
            return Err(Errno::EINVAL);
        }
        // SAFETY: n <= max_sge entries at sg_list (the contract of SendWr); n is a u32.
        Ok(SendSges(unsafe { core::slice::from_raw_parts(wr.sg_list, n as usize) }))
    }

    /// What the provider objects the request points at mean for its WQE: for a UD QP the AH
    /// (with the request's QPN and Q_Key), for BIND_MW the window and the MR. Only those
    /// pointers are read, each for its case.
    #[inline]
    pub(crate) fn objects(self, qp_type: c_int) -> WrObjects<'a> {
        let wr = self.0;
        if qp_type == IBV_QPT_UD {
            // SAFETY: the ud arm, written for a UD QP; the AH is one our create_ah made
            // (RxeAh begins with its ibv_ah) or null (the contract of SendWr).
            let (u, ah) = unsafe {
                let u = &wr.wr.ud;
                (u, u.ah.cast::<RxeAh>().as_ref())
            };
            return match ah {
                Some(ah) => WrObjects::Ud(UdDest {
                    remote_qpn: u.remote_qpn,
                    remote_qkey: u.remote_qkey,
                    ah_num: ah.ah_num,
                    av: &ah.av,
                }),
                None => WrObjects::Missing,
            };
        }
        if wr.opcode != IBV_WR_BIND_MW {
            return WrObjects::None;
        }
        // SAFETY: the bind_mw arm for BIND_MW; the MW is ours or null, the MR is
        // ours or null (an unbind, length 0, needs none).
        unsafe {
            let b = &wr.ext.bind_mw;
            let mr = b.bind_info.mr.as_ref();
            match b.mw.as_ref() {
                Some(mw) if mr.is_some() || b.bind_info.length == 0 => WrObjects::Bind(MwBind {
                    addr: b.bind_info.addr,
                    length: b.bind_info.length,
                    mr_lkey: mr.map_or(0, |mr| mr.lkey),
                    mw_rkey: mw.rkey,
                    new_rkey: b.rkey,
                    access: b.bind_info.mw_access_flags,
                }),
                _ => WrObjects::Missing,
            }
        }
    }

    /// Writes the checked request into a slot: `wqe` is the slot's header, `payload` the rest
    /// of the slot. `lists_here`: the inline bytes or a list of SGEs are copied here, not by a
    /// call (a constant at each use: the paths of requests that name objects keep those in
    /// registers, and call out for the copy, which is not their common case).
    ///
    /// # Safety
    /// The request passed [`check_send`](crate::wqe::check_send) with `sges` and `objects`
    /// for the queue `payload` belongs to (one SGE then fits the payload).
    #[inline(always)]
    unsafe fn encode(
        self,
        sges: SendSges<'_>,
        length: u32,
        objects: &WrObjects<'_>,
        wqe: &mut rxe_send_wqe,
        payload: &mut [u8],
        lists_here: bool,
    ) {
        let wr = self.0;
        let sges = sges.0;
        write_header(wqe, wr.wr_id, wr.opcode, wr.send_flags, wr.imm_data);
        // SAFETY: the arm of the request's opcode (the contract of SendWr); plain data.
        unsafe {
            match wr.opcode {
                IBV_WR_RDMA_WRITE | IBV_WR_RDMA_WRITE_WITH_IMM | IBV_WR_RDMA_READ => {
                    set_rdma(wqe, wr.wr.rdma.remote_addr, wr.wr.rdma.rkey);
                }
                IBV_WR_ATOMIC_CMP_AND_SWP | IBV_WR_ATOMIC_FETCH_AND_ADD => {
                    let a = &wr.wr.atomic;
                    set_atomic(wqe, a.remote_addr, a.rkey, a.compare_add, a.swap);
                }
                _ => {}
            }
        }
        match objects {
            WrObjects::Ud(ud) => set_ud(wqe, ud),
            WrObjects::Bind(b) => set_mw(wqe, b),
            WrObjects::None | WrObjects::Missing => {}
        }
        if wr.send_flags & IBV_SEND_INLINE != 0 {
            if lists_here {
                copy_inline(sges, payload);
            } else {
                copy_inline_apart(sges, payload);
            }
        } else if let [one] = sges {
            // The data path's common case: no loop, and no length check. `ibv_sge` and the
            // kernel's `rxe_sge` are the same 16 bytes, so it is one copy.
            const {
                assert!(size_of::<ibv_sge>() == SGE_SIZE);
                assert!(core::mem::offset_of!(ibv_sge, addr) == core::mem::offset_of!(rxe_sge, addr));
                assert!(core::mem::offset_of!(ibv_sge, length) == core::mem::offset_of!(rxe_sge, length));
                assert!(core::mem::offset_of!(ibv_sge, lkey) == core::mem::offset_of!(rxe_sge, lkey));
            };
            debug_assert!(payload.len() >= SGE_SIZE);
            // SAFETY: check_send bounded the SGEs by the queue's sge_room, at most
            // payload_room / SGE_SIZE, and payload is the rest of one of the queue's slots
            // (payload_room bytes): its first SGE_SIZE bytes are ours to write. `one` is
            // SGE_SIZE readable bytes with no padding (the assertions: a u64 and two u32s),
            // laid out as rxe_sge is; the two do not overlap (a ring slot, the caller's SGE).
            unsafe {
                core::ptr::copy_nonoverlapping(core::ptr::from_ref(one).cast::<u8>(), payload.as_mut_ptr(), SGE_SIZE)
            };
        } else {
            if lists_here {
                write_sges(sges, payload);
            } else {
                write_sges_apart(sges, payload);
            }
        }
        set_data(wqe, length, sges.len() as u32);
    }
}

#[cfg(test)]
impl<'a> SendWr<'a> {
    /// A test's request whose raw parts are all checked here, so that safe code can test the
    /// send queue's logic with it: its SGE list is `sges` (or a null list, which `sges`
    /// refuses before reading), and it names no AH (the union's first word, the `ud` arm's AH,
    /// is zero), no window, no atomic operands and no inline data. Panics otherwise.
    pub(crate) fn over(wr: &'a ibv_send_wr, sges: &'a [ibv_sge]) -> SendWr<'a> {
        let own_list = core::ptr::eq(wr.sg_list.cast_const(), sges.as_ptr())
            && usize::try_from(wr.num_sge).is_ok_and(|n| n <= sges.len());
        assert!(wr.sg_list.is_null() || own_list, "the request's SGE list is sges");
        assert!(wr.send_flags & IBV_SEND_INLINE == 0, "no inline data");
        assert!(
            !matches!(
                wr.opcode,
                IBV_WR_BIND_MW | IBV_WR_ATOMIC_CMP_AND_SWP | IBV_WR_ATOMIC_FETCH_AND_ADD
            ),
            "no window, no atomic operands"
        );
        assert_eq!(wr.atomic_remote_addr(), 0, "no AH");
        SendWr(wr)
    }
}

/// [`SendWr::sges`] of a request (the fuzz targets' and the tests' entry).
///
/// # Safety
/// `wr` is under the `ibv_post_send` contract ([`SendWr`]).
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) unsafe fn send_sges<'a>(wr: &'a ibv_send_wr, lim: &SendLimits) -> Result<&'a [ibv_sge], Errno> {
    // SAFETY: forwarded.
    unsafe { SendWr::from_caller(wr) }.sges(lim).map(SendSges::as_slice)
}

/// Writes a checked legacy send request into a slot (the fuzz targets' and the tests' entry).
///
/// # Safety
/// `wr` is under the `ibv_post_send` contract ([`SendWr`]), `sges` is its list, and it passed
/// [`check_send`](crate::wqe::check_send) with `sges` and `objects` for the queue `payload`
/// belongs to.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) unsafe fn encode_send(
    wr: &ibv_send_wr,
    sges: &[ibv_sge],
    length: u32,
    objects: &WrObjects<'_>,
    wqe: &mut rxe_send_wqe,
    payload: &mut [u8],
) {
    // SAFETY: forwarded.
    unsafe { SendWr::from_caller(wr).encode(SendSges(sges), length, objects, wqe, payload, true) }
}

/// [`copy_inline`] in a call of its own.
#[inline(never)]
fn copy_inline_apart(sges: &[ibv_sge], out: &mut [u8]) {
    copy_inline(sges, out);
}

/// [`write_sges`] in a call of its own.
#[inline(never)]
fn write_sges_apart(sges: &[ibv_sge], payload: &mut [u8]) {
    write_sges(sges, payload);
}

/// Copies the bytes the SGEs of a [`SendWr`] point at, back to back, to the start of `out`
/// (a slice index panics if they do not fit: check_send proved they do).
fn copy_inline(sges: &[ibv_sge], out: &mut [u8]) {
    let mut at = 0usize;
    for s in sges {
        let len = s.length as usize;
        if len == 0 {
            continue;
        }
        // SAFETY: with IBV_SEND_INLINE the SGEs of a SendWr describe readable bytes (its
        // contract); the caller's buffer, never the ring slot we write.
        let src = unsafe { core::slice::from_raw_parts(s.addr as usize as *const u8, len) };
        out[at..at + len].copy_from_slice(src);
        at += len;
    }
}

/// Writes a UD destination into a send WQE.
pub(crate) fn set_ud(wqe: &mut rxe_send_wqe, ud: &UdDest<'_>) {
    // SAFETY: the ud arm is plain data; its other fields were zeroed with
    // the header or are written here.
    let u = unsafe { &mut wqe.wr.wr.ud };
    u.remote_qpn = ud.remote_qpn;
    u.remote_qkey = ud.remote_qkey;
    u.pkey_index = 0;
    u.reserved = 0;
    u.ah_num = ud.ah_num;
    u.pad = [0; 4];
    if ud.ah_num == 0 {
        // Kernels without AH indices take the address vector whole.
        u.av = *ud.av;
    }
}

/// Copies inline data into a built send WQE (`ibv_wr_set_inline_data`,
/// `ibv_wr_set_inline_data_list`): the whole list is measured first, in
/// 64 bits, and refused with `ENOSPC` when it exceeds the QP's
/// `max_inline_data` or the slot, so nothing is written past the slot.
/// The WQE is marked inline: that is how rxe knows where its data is.
///
/// # Safety
/// Every buffer describes `length` readable bytes at `addr`.
pub(crate) unsafe fn set_inline(
    wqe: &mut rxe_send_wqe,
    payload: &mut [u8],
    bufs: &[ibv_data_buf],
    lim: &SendLimits,
) -> Result<(), Errno> {
    let room = u64::from(lim.max_inline).min(lim.payload_room.min(payload.len()) as u64);
    let mut total = 0u64;
    for b in bufs {
        total = total.checked_add(b.length as u64).ok_or(Errno::ENOSPC)?;
        if total > room {
            return Err(Errno::ENOSPC);
        }
    }
    let mut at = 0usize;
    for b in bufs.iter().filter(|b| b.length != 0) {
        // SAFETY: per the contract; the caller's buffer, never the ring.
        let src = unsafe { core::slice::from_raw_parts(b.addr.cast::<u8>(), b.length) };
        payload[at..at + b.length].copy_from_slice(src);
        at += b.length;
    }
    wqe.wr.send_flags |= IBV_SEND_INLINE;
    // total <= room, which came from a u32.
    set_data(wqe, total as u32, 0);
    Ok(())
}

/// A legacy send request checked for one send queue, which it borrows until it is built there:
/// the checks bounded its SGEs by that queue's slots.
pub(crate) struct CheckedSend<'q, 'a> {
    sq: &'q mut WorkQueue<SendLimits>,
    wr: SendWr<'a>,
    sges: SendSges<'a>,
    length: u32,
    /// Checked as naming no object (`allowed`).
    names_no_object: bool,
}

impl<'a> SendWr<'a> {
    /// The request checked for `sq` ([`check_send`](crate::wqe::check_send) with `objects`, what
    /// [`SendWr::objects`] answers for it, or [`check_allowed_send`](crate::wqe::check_allowed_send)
    /// when `allowed`: [`SendLimits::allows_naming_no_object`] said yes).
    #[inline(always)]
    pub(crate) fn check_for<'q>(
        self,
        sq: &'q mut WorkQueue<SendLimits>,
        objects: &WrObjects<'_>,
        allowed: bool,
    ) -> Result<CheckedSend<'q, 'a>, Errno> {
        let sges = self.sges(&sq.limits)?;
        let length = if allowed {
            wqe::check_allowed_send(self.0, sges.0, &sq.limits)?
        } else {
            wqe::check_send(self.0, sges.0, objects, &sq.limits)?
        };
        Ok(CheckedSend {
            sq,
            wr: self,
            sges,
            length,
            names_no_object: allowed,
        })
    }
}

impl CheckedSend<'_, '_> {
    /// Builds the request in its queue's next slot, with `objects` (those it was checked with),
    /// and takes the slot (our producer index moves past it, unpublished); `ENOMEM`, nothing
    /// written, when the ring is full.
    #[inline(always)]
    pub(crate) fn build(self, objects: &WrObjects<'_>) -> Result<(), Errno> {
        let sq = self.sq;
        let slot = sq.prod_slot_ptr();
        if sq.is_full() {
            return Err(Errno::ENOMEM);
        }
        // SAFETY: the slot of `prod`, the ring not full: unpublished, ours; the request was
        // checked for this queue (check_for).
        unsafe {
            let (hdr, payload) = sq.slot_parts(slot);
            self.wr
                .encode(self.sges, self.length, objects, hdr, payload, self.names_no_object);
        }
        sq.advance();
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Receive requests: the caller's list

/// A receive request of the caller's list, read under the `ibv_post_recv` contract, which
/// [`RecvWr::from_caller`] takes on: its `sg_list` has `num_sge` entries, and its `next` is null
/// or another such request.
///
/// The caller's pointer is kept, not a reference: the data path's check of a lone request
/// ([`lone_sge`](Self::lone_sge)) then stays a chain of branches, which a reference (known
/// dereferenceable) would let the compiler turn into loads of every field first.
#[derive(Clone, Copy)]
pub(crate) struct RecvWr<'a>(*mut ibv_recv_wr, PhantomData<&'a ibv_recv_wr>);

impl<'a> RecvWr<'a> {
    /// # Safety
    /// `wr` points at a live request under the `ibv_post_recv` contract (above), whose list
    /// stays unchanged for `'a`.
    #[inline(always)]
    pub(crate) unsafe fn from_caller(wr: *mut ibv_recv_wr) -> RecvWr<'a> {
        RecvWr(wr, PhantomData)
    }

    #[inline(always)]
    pub(crate) fn wr_id(self) -> u64 {
        // SAFETY: a live request (the contract of from_caller).
        unsafe { (*self.0).wr_id }
    }

    /// The one SGE of a list that is this one request with one SGE (the data path's common
    /// case), read without the list's checks.
    #[inline(always)]
    pub(crate) fn lone_sge(self) -> Option<&'a ibv_sge> {
        // SAFETY: a live request; with num_sge 1 and a list, that list is its one SGE (the
        // contract of from_caller).
        unsafe {
            let w = &*self.0;
            (w.next.is_null() && w.num_sge == 1 && !w.sg_list.is_null()).then(|| &*w.sg_list)
        }
    }

    /// The SGE list: a negative count, or a null list with entries, is `EINVAL`.
    #[inline(always)]
    pub(crate) fn sges(self) -> Result<&'a [ibv_sge], Errno> {
        // SAFETY: a live request, whose sg_list has num_sge entries (the contract).
        unsafe { c_slice((*self.0).sg_list, (*self.0).num_sge) }
    }

    /// The next request of the list.
    #[inline(always)]
    pub(crate) fn next(self) -> Option<RecvWr<'a>> {
        // SAFETY: a live request, whose next is null or a request under the same contract.
        let next = unsafe { (*self.0).next };
        (!next.is_null()).then_some(RecvWr(next, PhantomData))
    }

    /// The request's address, for `bad_wr`.
    #[inline(always)]
    pub(crate) fn as_ptr(self) -> *mut ibv_recv_wr {
        self.0
    }
}

/// A slice from a C pointer and count; a negative count is `EINVAL`.
///
/// # Safety
/// With a positive count, `ptr` points at `n` live elements.
pub(crate) unsafe fn c_slice<'a, T>(ptr: *const T, n: c_int) -> Result<&'a [T], Errno> {
    let n = usize::try_from(n).map_err(|_| Errno::EINVAL)?;
    if n == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Errno::EINVAL);
    }
    // SAFETY: per the contract.
    Ok(unsafe { core::slice::from_raw_parts(ptr, n) })
}
