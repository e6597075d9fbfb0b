//! The boundary of the data objects (CQ, QP, SRQ, MR, MW): their vtables and C entries, which
//! turn the caller's pointers into safe Rust once and call the objects' safe logic (`cq`, `qp`,
//! `srq`, `mr`, `mw`), and the verbs handles and calls that logic uses ([`RawSrq`], [`RawMw`],
//! [`SendWr`], the posts and polls), each a safe wrapper over one raw call.

use std::collections::VecDeque;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Weak};

use rdma_mummy_sys as ffi;

use super::adapter::AdapterBody;
use super::cq::{result_of, take, CqBody, Nd2Result};
use super::mr::{MrBody, RegionBind};
use super::mw::MwBody;
use super::overlapped::CallerOverlapped;
use super::qp::QpBody;
use super::registration::RawMr;
use super::requests;
use super::sge::Nd2Sge;
use super::srq::SrqBody;
use super::{
    arg, boundary, code, hr_boundary, iids, object, this, Class, Com, Guid, HResult, Held, OverlappedVtbl, UnknownVtbl,
    ND_INVALID_PARAMETER, ND_SUCCESS,
};
use crate::status::NdStatus;
use crate::sys::last_error;
use crate::{CompletionQueue, QueuePair};

// ---- The caller's arguments ----

/// The caller's SGE array as verbs SGEs (the same layout, see `sge`'s docs): NULL is allowed
/// only with no entries. A shared view: the array is the caller's and const (two threads may post
/// the same one at once, as C allows), and verbs only reads the list its work request points to.
///
/// # Safety
/// `sge` is NULL or readable for `n` entries for the returned lifetime.
#[inline(always)]
pub(super) unsafe fn sge_list<'a>(sge: *const Nd2Sge, n: u32) -> Result<&'a [ffi::ibv_sge], HResult> {
    match (sge.is_null(), n) {
        (_, 0) => Ok(&[]),
        (true, _) => Err(ND_INVALID_PARAMETER),
        // SAFETY: non-NULL and readable for n entries (the caller's promise); ibv_sge has
        // Nd2Sge's layout (asserted in `sge`).
        (false, n) => Ok(unsafe { std::slice::from_raw_parts(sge.cast::<ffi::ibv_sge>(), n as usize) }),
    }
}

/// The caller's buffer for IND2MemoryRegion::Register: any address and length (checked by
/// `mr::check_register`, and by the kernel, which refuses unmapped memory).
pub(super) struct CallerBuffer {
    ptr: *const c_void,
    len: usize,
}

impl CallerBuffer {
    /// # Safety
    /// The memory at `ptr`, `len` bytes, stays valid while it is registered and is the caller's
    /// to lend to the device (ND's rule for a registered buffer).
    pub(super) unsafe fn new(ptr: *const c_void, len: usize) -> CallerBuffer {
        CallerBuffer { ptr, len }
    }

    pub(super) fn ptr(&self) -> *const c_void {
        self.ptr
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }
}

// ---- Verbs calls on the objects' handles ----

/// Up to `wcs.len()` completions of `cq` into `wcs`: how many it filled (0 when the CQ is empty
/// or the poll failed).
#[inline(always)]
fn poll_into(cq: &CompletionQueue, wcs: &mut [MaybeUninit<ffi::ibv_wc>]) -> usize {
    let n = i32::try_from(wcs.len()).unwrap_or(i32::MAX);
    // SAFETY: the CQ is live while `cq` is; wcs has room for n entries, which ibv_poll_cq writes
    // (only the ones it returns are read).
    let got = unsafe { ffi::ibv_poll_cq(cq.as_raw(), n, wcs.as_mut_ptr().cast::<ffi::ibv_wc>()) };
    usize::try_from(got).unwrap_or(0).min(wcs.len())
}

/// One completion of `cq`, if it holds one.
pub(super) fn poll_one(cq: &CompletionQueue) -> Option<ffi::ibv_wc> {
    let mut one = [MaybeUninit::<ffi::ibv_wc>::uninit()];
    if poll_into(cq, &mut one) == 0 {
        return None;
    }
    // SAFETY: the poll filled the entry.
    Some(unsafe { one[0].assume_init_read() })
}

/// ibv_req_notify_cq: 0 or minus an errno.
pub(super) fn req_notify_cq(cq: &CompletionQueue, solicited_only: i32) -> i32 {
    // SAFETY: the CQ is live while `cq` is.
    unsafe { ffi::ibv_req_notify_cq(cq.as_raw(), solicited_only) }
}

/// ibv_resize_cq: 0 or an errno (either sign).
pub(super) fn resize_cq(cq: &CompletionQueue, depth: i32) -> i32 {
    // SAFETY: the CQ is live while `cq` is.
    unsafe { ffi::ibv_resize_cq(cq.as_raw(), depth) }
}

/// A verbs send work request whose pointers (its SGE list; a bind's window and region) are
/// borrowed for `'a`, so that they are live when it is posted; `next` is always NULL.
pub(super) struct SendWr<'a> {
    wr: ffi::ibv_send_wr,
    _borrows: PhantomData<&'a ()>,
}

impl<'a> SendWr<'a> {
    #[inline(always)]
    pub(super) fn new(
        wr_id: u64,
        sges: &'a [ffi::ibv_sge],
        opcode: ffi::ibv_wr_opcode::Type,
        send_flags: u32,
    ) -> SendWr<'a> {
        SendWr {
            wr: ffi::ibv_send_wr {
                wr_id,
                next: std::ptr::null_mut(),
                // Verbs reads the list and never writes it (`struct ibv_sge *` for want of a
                // const in the C API).
                sg_list: sges.as_ptr().cast_mut(),
                num_sge: sges.len() as i32,
                opcode,
                send_flags,
                // SAFETY: plain old data; zero is what a request leaves in the other fields.
                ..unsafe { std::mem::zeroed() }
            },
            _borrows: PhantomData,
        }
    }

    #[inline(always)]
    pub(super) fn wr_id(&self) -> u64 {
        self.wr.wr_id
    }

    #[inline(always)]
    pub(super) fn set_wr_id(&mut self, wr_id: u64) {
        self.wr.wr_id = wr_id;
    }

    #[inline(always)]
    pub(super) fn opcode(&self) -> ffi::ibv_wr_opcode::Type {
        self.wr.opcode
    }

    #[inline(always)]
    pub(super) fn send_flags(&self) -> u32 {
        self.wr.send_flags
    }

    #[inline(always)]
    pub(super) fn add_send_flags(&mut self, flags: u32) {
        self.wr.send_flags |= flags;
    }

    /// An RDMA Read or Write's remote side.
    pub(super) fn set_rdma(&mut self, remote_addr: u64, rkey: u32) {
        self.wr.wr = ffi::wr_t {
            rdma: ffi::rdma_t { remote_addr, rkey },
        };
    }

    /// A local invalidation's key.
    pub(super) fn set_invalidated_rkey(&mut self, rkey: u32) {
        self.wr.imm_data_invalidated_rkey_union = ffi::imm_data_invalidated_rkey_union_t { invalidated_rkey: rkey };
    }

    /// A Bind of `mw` (giving out `rkey`) to `length` bytes at `addr` of `region`'s MR.
    pub(super) fn set_bind(
        &mut self,
        mw: &'a RawMw,
        rkey: u32,
        region: &'a RegionBind<'_>,
        addr: u64,
        length: u64,
        mw_access_flags: u32,
    ) {
        self.wr.bind_mw_tso_union = ffi::bind_mw_tso_union_t {
            bind_mw: ffi::bind_mw_t {
                mw: mw.0,
                rkey,
                bind_info: ffi::ibv_mw_bind_info {
                    mr: region.raw(),
                    addr,
                    length,
                    mw_access_flags,
                },
            },
        };
    }
}

/// ibv_post_send of one request: 0, or a positive errno (or negative: see errno).
#[inline(always)]
pub(super) fn post_send(qp: &QueuePair, wr: &mut SendWr<'_>) -> i32 {
    let mut bad = std::ptr::null_mut();
    // SAFETY: the QP is live while `qp` is; wr is one request (next NULL) whose pointers are
    // borrowed for its lifetime (SendWr), valid for the call.
    unsafe { ffi::ibv_post_send(qp.inner.qp.0, &mut wr.wr, &mut bad) }
}

/// ibv_post_recv of one request over `sges`.
#[inline(always)]
pub(super) fn post_recv(qp: &QueuePair, wr_id: u64, sges: &[ffi::ibv_sge]) -> i32 {
    let mut wr = recv_wr(wr_id, sges);
    let mut bad = std::ptr::null_mut();
    // SAFETY: the QP is live while `qp` is; wr and the SGEs it points to are valid for the call.
    unsafe { ffi::ibv_post_recv(qp.inner.qp.0, &mut wr, &mut bad) }
}

#[inline(always)]
fn recv_wr(wr_id: u64, sges: &[ffi::ibv_sge]) -> ffi::ibv_recv_wr {
    ffi::ibv_recv_wr {
        wr_id,
        next: std::ptr::null_mut(),
        // Read, never written (as SendWr's).
        sg_list: sges.as_ptr().cast_mut(),
        num_sge: sges.len() as i32,
    }
}

/// A verbs SRQ, destroyed when the last holder lets it go (every QP on it holds it).
pub(crate) struct RawSrq(pub(crate) *mut ffi::ibv_srq);
// SAFETY: an SRQ handle may be used from any thread; libibverbs locks internally.
unsafe impl Send for RawSrq {}
// SAFETY: as above.
unsafe impl Sync for RawSrq {}

impl RawSrq {
    /// ibv_create_srq on the adapter's PD.
    pub(super) fn create(adapter: &AdapterBody, mut init: ffi::ibv_srq_init_attr) -> Result<RawSrq, HResult> {
        // SAFETY: the PD is live while the adapter is; init is a valid attribute block.
        let srq = unsafe { ffi::ibv_create_srq(adapter.adapter.inner.pd.0, &mut init) };
        if srq.is_null() {
            return Err(code(last_error()));
        }
        Ok(RawSrq(srq))
    }

    /// ibv_modify_srq: 0 or an errno (either sign).
    pub(super) fn modify(&self, attr: &mut ffi::ibv_srq_attr, mask: i32) -> i32 {
        // SAFETY: the SRQ is live while self is; attr is a valid attribute block.
        unsafe { ffi::ibv_modify_srq(self.0, attr, mask) }
    }

    /// ibv_post_srq_recv of one request over `sges`.
    #[inline]
    pub(super) fn post_recv(&self, wr_id: u64, sges: &[ffi::ibv_sge]) -> i32 {
        let mut wr = recv_wr(wr_id, sges);
        let mut bad = std::ptr::null_mut();
        // SAFETY: the SRQ is live while self is; wr and its list are valid for the call.
        unsafe { ffi::ibv_post_srq_recv(self.0, &mut wr, &mut bad) }
    }
}

impl Drop for RawSrq {
    fn drop(&mut self) {
        // SAFETY: every QP on the SRQ holds this (verbs' keep-alive), so none is left.
        if unsafe { ffi::ibv_destroy_srq(self.0) } != 0 {
            log::error!("ibv_destroy_srq: {}", last_error());
        }
    }
}

/// ibv_reg_mr of the caller's buffer on the adapter's PD, with its (lkey, rkey).
pub(super) fn reg_mr(adapter: &AdapterBody, buffer: &CallerBuffer, access: u32) -> Result<(RawMr, u32, u32), NdStatus> {
    // SAFETY: the PD is live while the adapter is; the caller lends the buffer while it is
    // registered (CallerBuffer); unmapped memory is refused by the kernel (EFAULT:
    // ND_ACCESS_VIOLATION).
    let raw = unsafe {
        ffi::ibv_reg_mr(
            adapter.adapter.inner.pd.0,
            buffer.ptr.cast_mut(),
            buffer.len,
            access as i32,
        )
    };
    if raw.is_null() {
        return Err(last_error());
    }
    // SAFETY: just registered, live.
    let (lkey, rkey) = unsafe { ((*raw).lkey, (*raw).rkey) };
    Ok((RawMr(raw), lkey, rkey))
}

/// A type-2 memory window (ibv_alloc_mw), deallocated when dropped.
pub(super) struct RawMw(*mut ffi::ibv_mw);
// SAFETY: an MW handle may be used from any thread; its key is changed only through `&mut`.
unsafe impl Send for RawMw {}
// SAFETY: as above.
unsafe impl Sync for RawMw {}

impl RawMw {
    /// A new type-2 window on the adapter's PD.
    pub(super) fn alloc(adapter: &AdapterBody) -> Result<RawMw, HResult> {
        // SAFETY: the PD is live while the adapter is.
        let mw = unsafe { ffi::ibv_alloc_mw(adapter.adapter.inner.pd.0, ffi::ibv_mw_type::IBV_MW_TYPE_2) };
        if mw.is_null() {
            return Err(code(last_error()));
        }
        Ok(RawMw(mw))
    }

    /// The key the ibv_mw holds (the provider names the window by it in a Bind).
    pub(super) fn rkey(&self) -> u32 {
        // SAFETY: live while self is.
        unsafe { (*self.0).rkey }
    }

    pub(super) fn set_rkey(&mut self, rkey: u32) {
        // SAFETY: live while self is, and ours alone (`&mut`).
        unsafe { (*self.0).rkey = rkey };
    }
}

impl Drop for RawMw {
    fn drop(&mut self) {
        // SAFETY: allocated by alloc, deallocated once.
        if unsafe { ffi::ibv_dealloc_mw(self.0) } != 0 {
            log::error!("ibv_dealloc_mw: {}", last_error());
        }
    }
}

// ---- Shared entries ----

/// A weak reference to the body of a live object (None's: a dangling Weak).
fn weak_of<T: Class>(object: &Com<T>) -> Weak<T> {
    match object.arc() {
        Ok(body) => Arc::downgrade(&body),
        Err(_) => Weak::new(),
    }
}

/// The objects whose GetNotifyAffinity is the interface's, with its entry name.
trait NotifyAffinity: Class {
    const GET_NOTIFY_AFFINITY: &'static str;
}

impl NotifyAffinity for CqBody {
    const GET_NOTIFY_AFFINITY: &'static str = "IND2CompletionQueue::GetNotifyAffinity";
}

impl NotifyAffinity for SrqBody {
    const GET_NOTIFY_AFFINITY: &'static str = "IND2SharedReceiveQueue::GetNotifyAffinity";
}

/// No affinity is set: group 0, every processor (as an object created with affinity 0).
unsafe extern "C" fn get_notify_affinity<T: NotifyAffinity>(
    this: *mut c_void,
    group: *mut u16,
    affinity: *mut usize,
) -> HResult {
    hr_boundary(T::GET_NOTIFY_AFFINITY, || {
        // SAFETY: the caller's object; the out pointers are NULL or writable (its promise).
        let (_object, group, affinity) = unsafe { (self::this::<T>(this)?, group.as_mut(), affinity.as_mut()) };
        let (Some(group), Some(affinity)) = (group, affinity) else {
            return Err(ND_INVALID_PARAMETER);
        };
        *group = 0;
        *affinity = 0;
        Ok(ND_SUCCESS)
    })
}

// ---- IND2CompletionQueue ----

#[repr(C)]
pub(crate) struct CqVtbl {
    unknown: UnknownVtbl,
    overlapped: OverlappedVtbl,
    get_notify_affinity: unsafe extern "C" fn(*mut c_void, *mut u16, *mut usize) -> HResult,
    resize: unsafe extern "C" fn(*mut c_void, u32) -> HResult,
    notify: unsafe extern "C" fn(*mut c_void, u32, *mut c_void) -> HResult,
    get_results: unsafe extern "C" fn(*mut c_void, *mut Nd2Result, u32) -> u32,
}

pub(super) static CQ_VTBL: CqVtbl = CqVtbl {
    unknown: UnknownVtbl::of::<CqBody>(),
    overlapped: OverlappedVtbl::of::<CqBody>(),
    get_notify_affinity: get_notify_affinity::<CqBody>,
    resize: cq_resize,
    notify: cq_notify,
    get_results: cq_get_results,
};

impl Class for CqBody {
    type Vtbl = CqVtbl;
    const VTBL: &'static CqVtbl = &CQ_VTBL;
    const IIDS: &'static [&'static Guid] = &[
        &iids::IID_IUnknown,
        &iids::IID_IND2Overlapped,
        &iids::IID_IND2CompletionQueue,
    ];

    fn on_release(&self) {
        super::Overlapped::cancel(self);
    }
}

unsafe extern "C" fn cq_resize(this: *mut c_void, depth: u32) -> HResult {
    hr_boundary("IND2CompletionQueue::Resize", || {
        // SAFETY: the caller's object.
        unsafe { self::this::<CqBody>(this)? }.resize(depth)
    })
}

unsafe extern "C" fn cq_notify(this: *mut c_void, kind: u32, ov: *mut c_void) -> HResult {
    hr_boundary("IND2CompletionQueue::Notify", || {
        // SAFETY: the caller's object, and its OVERLAPPED, live until a request started on it
        // completes (the Win32 rule).
        let (object, ov) = unsafe { (object::<CqBody>(this)?, CallerOverlapped::new(ov)) };
        object.hold()?.notify(kind, ov, || weak_of(object))
    })
}

/// Completions read per ibv_poll_cq call.
const BATCH: usize = 16;

/// Up to `n` (at most BATCH) completions of `cq` into `wcs`: how many.
#[inline]
fn poll_batch(cq: &CompletionQueue, wcs: &mut [MaybeUninit<ffi::ibv_wc>; BATCH], n: usize) -> usize {
    poll_into(cq, &mut wcs[..n.min(BATCH)])
}

unsafe extern "C" fn cq_get_results(this: *mut c_void, results: *mut Nd2Result, max: u32) -> u32 {
    // The empty poll, which a polling program makes many times per completion, stays outside
    // the panic boundary and costs about what ibv_poll_cq does: the object check, the front's
    // lock (uncontended: two atomic operations), the provider's poll (C) and comparisons, none
    // of which can panic. So does the common completion, a direct request of a live QP
    // (Requests::completed_direct: arithmetic and atomic loads; the batch's indices are within
    // BATCH and `max` by construction). The first other completion, and the rest of the call
    // from there, go through the boundary to the request records.
    // SAFETY: the caller's object.
    let Ok(cq) = (unsafe { self::this::<CqBody>(this) }) else {
        return 0;
    };
    if results.is_null() || max == 0 {
        return 0;
    }
    let max = max as usize;
    // Held for the whole call: no Notify polls in between this call's polls (the CQ's order).
    let mut front = cq.front.lock();
    if !front.is_empty() {
        // SAFETY: as below.
        return unsafe { get_front(&cq, &mut front, results, max) };
    }
    // Not zeroed: ibv_poll_cq writes the entries it returns, and only those are read.
    let mut wcs = [const { MaybeUninit::<ffi::ibv_wc>::uninit() }; BATCH];
    let asked = max.min(BATCH);
    let got = poll_batch(&cq.cq, &mut wcs, asked);
    if got == 0 {
        return 0;
    }
    if got == 1 {
        // One completion ends the call: it was a short batch (the CQ is empty) or `max` is 1.
        // The common one, a direct request, is translated here, without translate's frame.
        // SAFETY: ibv_poll_cq filled the first entry; the caller's array has room for `max`
        // >= 1 results.
        unsafe {
            let wc = wcs[0].assume_init_ref();
            if let Some(found) = cq.adapter.requests.completed_direct(wc.qp_num, wc.wr_id) {
                results.write(result_of(wc, found));
                return 1;
            }
        }
    }
    // SAFETY: as above; the caller's array has room for `max` results.
    unsafe { translate(&cq, results, max, &mut wcs, asked, got) }
}

/// GetResults when Notify left completions at the front: those first, oldest first, then the
/// CQ's (the front's lock held by the caller).
///
/// # Safety
/// `results` is writable for `max` (at least 1) entries.
#[inline(never)]
unsafe fn get_front(cq: &CqBody, front: &mut VecDeque<ffi::ibv_wc>, results: *mut Nd2Result, max: usize) -> u32 {
    let mut wcs = [const { MaybeUninit::<ffi::ibv_wc>::uninit() }; BATCH];
    let asked = max.min(BATCH);
    let mut got = 0;
    for (slot, wc) in wcs.iter_mut().zip(take(front, asked)) {
        slot.write(wc);
        got += 1;
    }
    // The front emptied: taken as a full batch, so that translate goes on to the CQ's own
    // completions. Else only these: the front still holds older ones than the CQ's.
    let max = if front.is_empty() { max } else { got };
    // SAFETY: `got` entries filled from the front; got <= max, BATCH.
    unsafe { translate(cq, results, max, &mut wcs, got, got) }
}

/// GetResults once a poll found `got` completions of the `asked`: translates them into the
/// caller's `results` (room for `max`) and polls again while the CQ gives full batches; how
/// many results it wrote. Out of line, so that the empty poll keeps a small frame.
///
/// # Safety
/// `wcs` holds `got` entries filled by ibv_poll_cq; `results` is writable for `max` entries,
/// `asked` is at most `max` and BATCH.
#[inline(never)]
unsafe fn translate(
    cq: &CqBody,
    results: *mut Nd2Result,
    max: usize,
    wcs: &mut [MaybeUninit<ffi::ibv_wc>; BATCH],
    mut asked: usize,
    mut got: usize,
) -> u32 {
    let requests = &cq.adapter.requests;
    let mut done = 0usize;
    // How many of the batch are translated when one is not on the common path.
    let mut from = loop {
        if got == 0 {
            return done as u32;
        }
        let mut taken = 0;
        for wc in &wcs[..got] {
            // SAFETY: ibv_poll_cq filled the first `got` entries; the caller's array has room
            // for `max` results, and done < max.
            unsafe {
                let wc = wc.assume_init_ref();
                let Some(found) = requests.completed_direct(wc.qp_num, wc.wr_id) else {
                    break;
                };
                results.add(done).write(result_of(wc, found));
            }
            done += 1;
            taken += 1;
        }
        if taken < got {
            break taken;
        }
        // A short batch emptied the CQ.
        if got < asked || done >= max {
            return done as u32;
        }
        asked = (max - done).min(BATCH);
        got = poll_batch(&cq.cq, wcs, asked);
    };
    // Entry `from` of the batch is not on the common path: from there on, the records. A panic
    // returns the results written before it.
    boundary("IND2CompletionQueue::GetResults", done as u32, || {
        loop {
            for wc in &wcs[from..got] {
                // SAFETY: as above.
                unsafe {
                    let wc = wc.assume_init_ref();
                    let found = requests.completed(wc.qp_num, wc.wr_id, wc.status == 0, wc.opcode);
                    results.add(done).write(result_of(wc, found));
                }
                done += 1;
            }
            if got < asked || done >= max {
                break;
            }
            asked = (max - done).min(BATCH);
            got = poll_batch(&cq.cq, wcs, asked);
            if got == 0 {
                break;
            }
            from = 0;
        }
        done as u32
    })
}

// ---- IND2QueuePair ----

type PostFn = unsafe extern "C" fn(*mut c_void, *mut c_void, *const Nd2Sge, u32, u64, u32, u32) -> HResult;

#[repr(C)]
pub(crate) struct QpVtbl {
    unknown: UnknownVtbl,
    flush: unsafe extern "C" fn(*mut c_void) -> HResult,
    send: unsafe extern "C" fn(*mut c_void, *mut c_void, *const Nd2Sge, u32, u32) -> HResult,
    receive: unsafe extern "C" fn(*mut c_void, *mut c_void, *const Nd2Sge, u32) -> HResult,
    bind:
        unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void, *mut c_void, *const c_void, usize, u32) -> HResult,
    invalidate: unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void, u32) -> HResult,
    read: PostFn,
    write: PostFn,
}

pub(super) static QP_VTBL: QpVtbl = QpVtbl {
    unknown: UnknownVtbl::of::<QpBody>(),
    flush: qp_flush,
    send: qp_send,
    receive: qp_receive,
    bind: qp_bind,
    invalidate: qp_invalidate,
    read: qp_read,
    write: qp_write,
};

impl Class for QpBody {
    type Vtbl = QpVtbl;
    const VTBL: &'static QpVtbl = &QP_VTBL;
    const IIDS: &'static [&'static Guid] = &[&iids::IID_IUnknown, &iids::IID_IND2QueuePair];
}

/// A post's object and SGE list.
type Posting<'a> = Result<(Held<'a, QpBody>, &'a [ffi::ibv_sge]), HResult>;

/// The QP behind `this` and the caller's SGE array, in that order of checks.
///
/// # Safety
/// `this` as [`this`]; `sge` is NULL or readable for `n` entries during the call.
#[inline(always)]
unsafe fn posting<'a>(this: *mut c_void, sge: *const Nd2Sge, n: u32) -> Posting<'a> {
    // SAFETY: forwarded.
    unsafe { Ok((self::this::<QpBody>(this)?, sge_list(sge, n)?)) }
}

unsafe extern "C" fn qp_flush(this: *mut c_void) -> HResult {
    hr_boundary("IND2QueuePair::Flush", || {
        // SAFETY: the caller's object.
        unsafe { self::this::<QpBody>(this)? }.flush()
    })
}

/// Send: a direct context (the common path) makes no record, and nothing on its path can
/// panic: no boundary.
unsafe extern "C" fn qp_send(
    this: *mut c_void,
    context: *mut c_void,
    sge: *const Nd2Sge,
    n: u32,
    flags: u32,
) -> HResult {
    // SAFETY: the caller's object and SGE array.
    let posting = unsafe { posting(this, sge, n) };
    if requests::is_direct(context as u64) {
        return match posting.and_then(|(qp, sges)| qp.send_direct(context as u64, sges, flags)) {
            Ok(hr) | Err(hr) => hr,
        };
    }
    send_recorded(posting, context as u64, flags)
}

/// Send with a context that needs a record, inside the boundary. Out of line: the common path
/// keeps a frame without the closure's captures.
#[inline(never)]
fn send_recorded(posting: Posting<'_>, context: u64, flags: u32) -> HResult {
    hr_boundary("IND2QueuePair::Send", || {
        let (qp, sges) = posting?;
        qp.send_recorded(context, sges, flags)
    })
}

/// Receive: as Send, a direct context has no boundary.
unsafe extern "C" fn qp_receive(this: *mut c_void, context: *mut c_void, sge: *const Nd2Sge, n: u32) -> HResult {
    // SAFETY: the caller's object and SGE array.
    let posting = unsafe { posting(this, sge, n) };
    if requests::is_direct(context as u64) {
        return match posting.and_then(|(qp, sges)| qp.post_receive(context as u64, sges)) {
            Ok(hr) | Err(hr) => hr,
        };
    }
    receive_recorded(posting, context as u64)
}

/// Receive with a context that needs a record, inside the boundary (out of line, as
/// [`send_recorded`]).
#[inline(never)]
fn receive_recorded(posting: Posting<'_>, context: u64) -> HResult {
    hr_boundary("IND2QueuePair::Receive", || {
        let (qp, sges) = posting?;
        qp.post_receive(context, sges)
    })
}

fn rdma(
    entry: &str,
    opcode: ffi::ibv_wr_opcode::Type,
    posting: Posting<'_>,
    context: u64,
    remote_address: u64,
    remote_token: u32,
    flags: u32,
) -> HResult {
    hr_boundary(entry, || {
        let (qp, sges) = posting?;
        qp.rdma(opcode, context, sges, remote_address, remote_token, flags)
    })
}

unsafe extern "C" fn qp_read(
    this: *mut c_void,
    context: *mut c_void,
    sge: *const Nd2Sge,
    n: u32,
    addr: u64,
    token: u32,
    flags: u32,
) -> HResult {
    // SAFETY: the caller's object and SGE array.
    let posting = unsafe { posting(this, sge, n) };
    rdma(
        "IND2QueuePair::Read",
        ffi::ibv_wr_opcode::IBV_WR_RDMA_READ,
        posting,
        context as u64,
        addr,
        token,
        flags,
    )
}

unsafe extern "C" fn qp_write(
    this: *mut c_void,
    context: *mut c_void,
    sge: *const Nd2Sge,
    n: u32,
    addr: u64,
    token: u32,
    flags: u32,
) -> HResult {
    // SAFETY: the caller's object and SGE array.
    let posting = unsafe { posting(this, sge, n) };
    rdma(
        "IND2QueuePair::Write",
        ffi::ibv_wr_opcode::IBV_WR_RDMA_WRITE,
        posting,
        context as u64,
        addr,
        token,
        flags,
    )
}

unsafe extern "C" fn qp_bind(
    this: *mut c_void,
    context: *mut c_void,
    region: *mut c_void,
    window: *mut c_void,
    buffer: *const c_void,
    len: usize,
    flags: u32,
) -> HResult {
    hr_boundary("IND2QueuePair::Bind", || {
        // SAFETY: the caller's objects, checked by kind.
        let (qp, mr, mw) = unsafe {
            (
                self::this::<QpBody>(this)?,
                arg::<MrBody>(region)?,
                arg::<MwBody>(window)?,
            )
        };
        qp.bind(context as u64, &mr, &mw, buffer as u64, len as u64, flags)
    })
}

unsafe extern "C" fn qp_invalidate(
    this: *mut c_void,
    context: *mut c_void,
    window: *mut c_void,
    flags: u32,
) -> HResult {
    hr_boundary("IND2QueuePair::Invalidate", || {
        // SAFETY: the caller's objects, checked by kind.
        let (qp, mw) = unsafe { (self::this::<QpBody>(this)?, arg::<MwBody>(window)?) };
        qp.invalidate(context as u64, &mw, flags)
    })
}

// ---- IND2SharedReceiveQueue ----

#[repr(C)]
pub(crate) struct SrqVtbl {
    unknown: UnknownVtbl,
    overlapped: OverlappedVtbl,
    get_notify_affinity: unsafe extern "C" fn(*mut c_void, *mut u16, *mut usize) -> HResult,
    modify: unsafe extern "C" fn(*mut c_void, u32, u32) -> HResult,
    notify: unsafe extern "C" fn(*mut c_void, *mut c_void) -> HResult,
    receive: unsafe extern "C" fn(*mut c_void, *mut c_void, *const Nd2Sge, u32) -> HResult,
}

pub(super) static SRQ_VTBL: SrqVtbl = SrqVtbl {
    unknown: UnknownVtbl::of::<SrqBody>(),
    overlapped: OverlappedVtbl::of::<SrqBody>(),
    get_notify_affinity: get_notify_affinity::<SrqBody>,
    modify: srq_modify,
    notify: srq_notify,
    receive: srq_receive,
};

impl Class for SrqBody {
    type Vtbl = SrqVtbl;
    const VTBL: &'static SrqVtbl = &SRQ_VTBL;
    const IIDS: &'static [&'static Guid] = &[
        &iids::IID_IUnknown,
        &iids::IID_IND2Overlapped,
        &iids::IID_IND2SharedReceiveQueue,
    ];

    fn on_release(&self) {
        super::Overlapped::cancel(self);
    }
}

unsafe extern "C" fn srq_modify(this: *mut c_void, depth: u32, threshold: u32) -> HResult {
    hr_boundary("IND2SharedReceiveQueue::Modify", || {
        // SAFETY: the caller's object.
        unsafe { self::this::<SrqBody>(this)? }.modify(depth, threshold)
    })
}

unsafe extern "C" fn srq_notify(this: *mut c_void, ov: *mut c_void) -> HResult {
    hr_boundary("IND2SharedReceiveQueue::Notify", || {
        // SAFETY: the caller's object, and its OVERLAPPED, live until a request started on it
        // completes (the Win32 rule).
        let (object, ov) = unsafe { (object::<SrqBody>(this)?, CallerOverlapped::new(ov)) };
        object.hold()?.notify(ov, || weak_of(object))
    })
}

unsafe extern "C" fn srq_receive(this: *mut c_void, context: *mut c_void, sge: *const Nd2Sge, n: u32) -> HResult {
    hr_boundary("IND2SharedReceiveQueue::Receive", || {
        // SAFETY: the caller's object and SGE array of `n` entries.
        let (srq, sges) = unsafe { (self::this::<SrqBody>(this)?, sge_list(sge, n)?) };
        srq.receive(context as u64, sges)
    })
}

// ---- IND2MemoryRegion ----

#[repr(C)]
pub(crate) struct MrVtbl {
    unknown: UnknownVtbl,
    overlapped: OverlappedVtbl,
    register: unsafe extern "C" fn(*mut c_void, *const c_void, usize, u32, *mut c_void) -> HResult,
    deregister: unsafe extern "C" fn(*mut c_void, *mut c_void) -> HResult,
    get_local_token: unsafe extern "C" fn(*mut c_void) -> u32,
    get_remote_token: unsafe extern "C" fn(*mut c_void) -> u32,
}

pub(super) static MR_VTBL: MrVtbl = MrVtbl {
    unknown: UnknownVtbl::of::<MrBody>(),
    overlapped: OverlappedVtbl::of::<MrBody>(),
    register: mr_register,
    deregister: mr_deregister,
    get_local_token: mr_get_local_token,
    get_remote_token: mr_get_remote_token,
};

impl Class for MrBody {
    type Vtbl = MrVtbl;
    const VTBL: &'static MrVtbl = &MR_VTBL;
    const IIDS: &'static [&'static Guid] = &[
        &iids::IID_IUnknown,
        &iids::IID_IND2Overlapped,
        &iids::IID_IND2MemoryRegion,
    ];
}

unsafe extern "C" fn mr_register(
    this: *mut c_void,
    buffer: *const c_void,
    len: usize,
    flags: u32,
    ov: *mut c_void,
) -> HResult {
    hr_boundary("IND2MemoryRegion::Register", || {
        // SAFETY: the caller's object; its OVERLAPPED (NULL is ND_INVALID_PARAMETER), live until
        // its request completes; its buffer, lent while registered (ND's rule).
        let (mr, ov, buffer) = unsafe {
            (
                self::this::<MrBody>(this)?,
                CallerOverlapped::new(ov),
                CallerBuffer::new(buffer, len),
            )
        };
        mr.register(buffer, flags, ov)
    })
}

unsafe extern "C" fn mr_deregister(this: *mut c_void, ov: *mut c_void) -> HResult {
    hr_boundary("IND2MemoryRegion::Deregister", || {
        // SAFETY: the caller's object and OVERLAPPED (as Register's).
        let (mr, ov) = unsafe { (self::this::<MrBody>(this)?, CallerOverlapped::new(ov)) };
        mr.deregister(ov)
    })
}

// The token entries need no panic boundary: the object check and an atomic load cannot panic.
unsafe extern "C" fn mr_get_local_token(this: *mut c_void) -> u32 {
    // SAFETY: the caller's object.
    unsafe { self::this::<MrBody>(this) }.map_or(0, |mr| mr.keys().0)
}

/// The rkey in network byte order, as IND2MemoryRegion.md asks (the peer's Read and Write take it
/// back so: IND2QueuePair's Read/Write turn it into the host-order rkey).
unsafe extern "C" fn mr_get_remote_token(this: *mut c_void) -> u32 {
    // SAFETY: the caller's object.
    unsafe { self::this::<MrBody>(this) }.map_or(0, |mr| mr.keys().1.to_be())
}

// ---- IND2MemoryWindow ----

#[repr(C)]
pub(crate) struct MwVtbl {
    unknown: UnknownVtbl,
    get_remote_token: unsafe extern "C" fn(*mut c_void) -> u32,
}

pub(super) static MW_VTBL: MwVtbl = MwVtbl {
    unknown: UnknownVtbl::of::<MwBody>(),
    get_remote_token: mw_get_remote_token,
};

impl Class for MwBody {
    type Vtbl = MwVtbl;
    const VTBL: &'static MwVtbl = &MW_VTBL;
    const IIDS: &'static [&'static Guid] = &[&iids::IID_IUnknown, &iids::IID_IND2MemoryWindow];
}

/// The rkey in network byte order, as the MR's.
unsafe extern "C" fn mw_get_remote_token(this: *mut c_void) -> u32 {
    boundary("IND2MemoryWindow::GetRemoteToken", 0, || {
        // SAFETY: the caller's object.
        unsafe { self::this::<MwBody>(this) }.map_or(0, |mw| mw.rkey().to_be())
    })
}

// ---- The adapter's completion channel and its doorbell (`notify`, `doorbell`) ----

/// A verbs completion channel of an adapter's context, destroyed when dropped (every CQ on it
/// holds it: none is left then; libibverbs refuses, EBUSY, while one is).
pub(super) struct CompChannel(*mut ffi::ibv_comp_channel);
// SAFETY: a completion channel is a file descriptor with a small struct; libibverbs allows its
// use from any thread.
unsafe impl Send for CompChannel {}
// SAFETY: as above.
unsafe impl Sync for CompChannel {}

impl CompChannel {
    pub(super) fn create(adapter: &crate::Adapter) -> Result<CompChannel, NdStatus> {
        // SAFETY: the adapter's context is open while `adapter` is.
        let raw = unsafe { ffi::ibv_create_comp_channel(adapter.inner.ctx) };
        if raw.is_null() {
            return Err(last_error());
        }
        Ok(CompChannel(raw))
    }

    /// The verbs channel, to create a CQ on.
    pub(super) fn raw(&self) -> *mut ffi::ibv_comp_channel {
        self.0
    }

    pub(super) fn fd(&self) -> i32 {
        // SAFETY: the channel is open while self lives.
        unsafe { (*self.0).fd }
    }

    /// One event of the channel (ibv_get_cq_event): None if there was none (EAGAIN, EINTR, a
    /// failure: errno says which).
    pub(super) fn read_event(&self) -> Option<CqEvents> {
        let mut cq: *mut ffi::ibv_cq = std::ptr::null_mut();
        let mut context: *mut c_void = std::ptr::null_mut();
        // SAFETY: the channel is open; the out pointers are live locals.
        if unsafe { ffi::ibv_get_cq_event(self.0, &mut cq, &mut context) } != 0 {
            return None;
        }
        Some(CqEvents { cq, count: 1 })
    }
}

impl Drop for CompChannel {
    fn drop(&mut self) {
        // SAFETY: open, destroyed once.
        if unsafe { ffi::ibv_destroy_comp_channel(self.0) } != 0 {
            log::error!("ibv_destroy_comp_channel: {}", last_error());
        }
    }
}

/// Events read from a completion channel for one CQ and not yet acknowledged: acknowledged
/// (ibv_ack_cq_events) when dropped. The CQ stays alive until then: ibv_destroy_cq waits for
/// every event read from it to be acknowledged.
pub(super) struct CqEvents {
    cq: *mut ffi::ibv_cq,
    count: u32,
}
// SAFETY: ibv_ack_cq_events may be called from any thread (libibverbs locks the CQ's counts).
unsafe impl Send for CqEvents {}

impl CqEvents {
    /// The CQ the events are of (its address, to find its route by).
    pub(super) fn cq(&self) -> *mut ffi::ibv_cq {
        self.cq
    }

    pub(super) fn count(&self) -> u32 {
        self.count
    }

    /// Takes `more` events of the same CQ in (of another CQ they are acknowledged now).
    pub(super) fn add(&mut self, mut more: CqEvents) {
        if more.cq == self.cq {
            self.count += std::mem::take(&mut more.count);
        }
    }
}

impl Drop for CqEvents {
    fn drop(&mut self) {
        if self.count > 0 {
            // SAFETY: `count` events of this CQ were read and not acknowledged: it is live.
            unsafe { ffi::ibv_ack_cq_events(self.cq, self.count) };
        }
    }
}

/// Which verbs object of a doorbell could not be made.
pub(super) enum DoorbellPart {
    Cq,
    Qp,
}

/// A doorbell's verbs objects (`doorbell`): a CQ on a completion channel and an RC QP whose
/// sends go to it, destroyed when dropped (the QP first).
pub(super) struct DoorbellQueues {
    cq: *mut ffi::ibv_cq,
    qp: *mut ffi::ibv_qp,
    /// The PD and context the QP and CQ belong to.
    _adapter: Arc<crate::engine::AdapterInner>,
}
// SAFETY: a verbs CQ and QP may be used from any thread.
unsafe impl Send for DoorbellQueues {}
// SAFETY: as above.
unsafe impl Sync for DoorbellQueues {}

impl DoorbellQueues {
    /// A CQ of `depth` on `channel` and a QP of `cap` on it; the failure (errno read before
    /// anything is undone) says which could not be made.
    pub(super) fn create(
        adapter: &Arc<crate::engine::AdapterInner>,
        channel: &CompChannel,
        depth: i32,
        cap: ffi::ibv_qp_cap,
    ) -> Result<DoorbellQueues, (DoorbellPart, NdStatus)> {
        // SAFETY: the context is open and `channel` is open (of this context, as the caller's
        // adapter made it).
        let cq = unsafe { ffi::ibv_create_cq(adapter.ctx, depth, std::ptr::null_mut(), channel.0, 0) };
        if cq.is_null() {
            return Err((DoorbellPart::Cq, last_error()));
        }
        let mut init = ffi::ibv_qp_init_attr {
            qp_context: std::ptr::null_mut(),
            send_cq: cq,
            recv_cq: cq,
            srq: std::ptr::null_mut(),
            cap,
            qp_type: ffi::ibv_qp_type::IBV_QPT_RC,
            sq_sig_all: 1,
        };
        // SAFETY: the PD and CQ are live and of this context.
        let qp = unsafe { ffi::ibv_create_qp(adapter.pd.0, &mut init) };
        if qp.is_null() {
            let error = last_error();
            // SAFETY: created above, nothing else refers to it.
            unsafe { ffi::ibv_destroy_cq(cq) };
            return Err((DoorbellPart::Qp, error));
        }
        Ok(DoorbellQueues {
            cq,
            qp,
            _adapter: Arc::clone(adapter),
        })
    }

    /// The verbs CQ whose events are the doorbell's.
    pub(super) fn cq(&self) -> *mut ffi::ibv_cq {
        self.cq
    }

    /// ibv_modify_qp to `state` (with `port`, the pkey index and access flags if `with_port`):
    /// true if it went.
    pub(super) fn move_qp(&self, state: ffi::ibv_qp_state::Type, with_port: Option<u8>) -> bool {
        // SAFETY: plain old data; zero is what the fields left out mean.
        let mut attr: ffi::ibv_qp_attr = unsafe { std::mem::zeroed() };
        attr.qp_state = state;
        let mut mask = ffi::ibv_qp_attr_mask::IBV_QP_STATE.0;
        if let Some(port) = with_port {
            attr.port_num = port;
            mask |= ffi::ibv_qp_attr_mask::IBV_QP_PORT.0
                | ffi::ibv_qp_attr_mask::IBV_QP_PKEY_INDEX.0
                | ffi::ibv_qp_attr_mask::IBV_QP_ACCESS_FLAGS.0;
        }
        // SAFETY: the QP is live; attr is valid for the mask.
        unsafe { ffi::ibv_modify_qp(self.qp, &mut attr, mask as i32) == 0 }
    }

    /// ibv_req_notify_cq for any completion: true if armed.
    pub(super) fn arm(&self) -> bool {
        // SAFETY: the CQ is live.
        unsafe { ffi::ibv_req_notify_cq(self.cq, 0) == 0 }
    }

    /// ibv_post_send of `wr`: 0 or the provider's error.
    pub(super) fn post_send(&self, wr: &mut SendWr<'_>) -> i32 {
        let mut bad = std::ptr::null_mut();
        // SAFETY: the QP is live; wr is one request whose pointers are borrowed (SendWr).
        unsafe { ffi::ibv_post_send(self.qp, &mut wr.wr, &mut bad) }
    }

    /// Takes every completion the CQ holds, `N` per poll.
    pub(super) fn drain_cq<const N: usize>(&self) {
        let mut wcs = [const { MaybeUninit::<ffi::ibv_wc>::uninit() }; N];
        // SAFETY: the CQ is live; wcs has room for N entries (none is read).
        while unsafe { ffi::ibv_poll_cq(self.cq, N as i32, wcs.as_mut_ptr().cast::<ffi::ibv_wc>()) } > 0 {}
    }
}

impl Drop for DoorbellQueues {
    fn drop(&mut self) {
        // SAFETY: both are live and destroyed once, the QP first; the channel outlives them
        // (NotifyChannel drops its doorbell before its channel).
        unsafe {
            if ffi::ibv_destroy_qp(self.qp) != 0 {
                log::error!("nd2: ibv_destroy_qp(doorbell): {}", last_error());
            }
            if ffi::ibv_destroy_cq(self.cq) != 0 {
                log::error!("nd2: ibv_destroy_cq(doorbell): {}", last_error());
            }
        }
    }
}

// ---- The pump's and the channel's system calls (`pump`, `notify`): each over live memory it
// borrows, with descriptors the kernel checks (a closed one is EBADF) ----

/// poll(2) of `fds` for at most `ms` milliseconds (-1: no limit): what it returns.
pub(super) fn poll(fds: &mut [libc::pollfd], ms: i32) -> i32 {
    // SAFETY: fds is live for its length.
    unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) }
}

/// epoll_ctl(EPOLL_CTL_ADD) of descriptor `fd` to `set` for `events`, reported with `token`.
pub(super) fn epoll_add(set: &nix::sys::epoll::Epoll, fd: i32, events: u32, token: u64) -> nix::Result<()> {
    let mut event = libc::epoll_event { events, u64: token };
    // SAFETY: the set is open while borrowed; `event` is a live local.
    let ret = unsafe { libc::epoll_ctl(set.0.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut event) };
    nix::errno::Errno::result(ret).map(drop)
}

/// epoll_ctl(EPOLL_CTL_DEL) of descriptor `fd` from `set`.
pub(super) fn epoll_delete(set: &nix::sys::epoll::Epoll, fd: i32) -> nix::Result<()> {
    // SAFETY: the set is open while borrowed; DEL reads no event.
    let ret = unsafe { libc::epoll_ctl(set.0.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut()) };
    nix::errno::Errno::result(ret).map(drop)
}

/// The epoll_pwait system call with no signal mask (epoll_wait; not glibc's wrapper, a
/// cancellation point: see the pump's wait_once): up to `events.len()` events of `set` within
/// `ms` milliseconds (-1: no limit); the count, or -1 with errno.
#[inline]
pub(super) fn epoll_wait(set: &nix::sys::epoll::Epoll, events: &mut [libc::epoll_event], ms: i32) -> libc::c_long {
    let room = libc::c_int::try_from(events.len()).unwrap_or(libc::c_int::MAX);
    // SAFETY: the set is open while borrowed; `events` has room for `room` entries; a null
    // signal mask is not read.
    unsafe {
        libc::syscall(
            libc::SYS_epoll_pwait,
            set.0.as_raw_fd(),
            events.as_mut_ptr(),
            room,
            ms,
            std::ptr::null::<libc::sigset_t>(),
            0usize,
        )
    }
}

/// FUTEX_WAKE (private) of every thread waiting on `word`.
pub(super) fn futex_wake_all(word: &std::sync::atomic::AtomicU32) {
    // SAFETY: a futex wake on a live word; no memory is written.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            i32::MAX,
        )
    };
}

/// FUTEX_WAIT (private) on `word` while it holds `seen` (the kernel compares it before it
/// sleeps), for at most `limit`.
pub(super) fn futex_wait(word: &std::sync::atomic::AtomicU32, seen: u32, limit: std::time::Duration) {
    let limit = libc::timespec {
        tv_sec: limit.as_secs() as libc::time_t,
        tv_nsec: libc::c_long::from(limit.subsec_nanos() as i32),
    };
    // SAFETY: a futex wait on a live word, with a live timespec.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            seen,
            std::ptr::addr_of!(limit),
        )
    };
}

/// write(2) of `value` (8 bytes) to descriptor `fd` (the tests' eventfds): what it returns.
#[cfg(test)]
pub(super) fn write_counter(fd: i32, value: u64) -> isize {
    // SAFETY: 8 bytes of a live local.
    unsafe { libc::write(fd, std::ptr::addr_of!(value).cast(), 8) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two threads turning the same const array into lists at once (as two posts of one array
    /// do) share it: both see the caller's entries, and the array is not changed.
    #[test]
    fn one_const_array_posted_from_two_threads_is_shared_not_borrowed_mutably() {
        let array: [Nd2Sge; 2] = [
            Nd2Sge {
                buffer: 0x1000 as *mut c_void,
                buffer_length: 64,
                memory_region_token: 7,
            },
            Nd2Sge {
                buffer: 0x2000 as *mut c_void,
                buffer_length: 32,
                memory_region_token: 8,
            },
        ];
        let shared = array.as_ptr() as usize;
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(move || {
                    for _ in 0..1000 {
                        // SAFETY: the array lives for the scope, readable for two entries.
                        let list = unsafe { sge_list(shared as *const Nd2Sge, 2) }.unwrap();
                        let wr = SendWr::new(0, list, ffi::ibv_wr_opcode::IBV_WR_SEND, 0);
                        assert_eq!(wr.wr.sg_list as usize, shared, "the caller's array, not a copy");
                        assert_eq!(
                            (list[0].addr, list[0].length, list[0].lkey, list[1].lkey),
                            (0x1000, 64, 7, 8)
                        );
                    }
                });
            }
        });
        // SAFETY: NULL with no entries, and with some.
        unsafe {
            assert!(sge_list(std::ptr::null(), 0).unwrap().is_empty());
            assert_eq!(sge_list(std::ptr::null(), 1).err(), Some(ND_INVALID_PARAMETER));
        }
    }
}
