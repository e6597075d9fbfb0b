//! The C entries of the data objects (CQ, QP, SRQ, MR, MW): their vtables and `extern "C"`
//! methods, which turn the caller's pointers into safe Rust once and call the objects' safe
//! logic (`cq`, `qp`, `srq`, `mr`, `mw`). The verbs handles and calls that logic stands on are
//! `data_verbs`.

use std::collections::VecDeque;
use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::sync::{Arc, Weak};

use rdma_mummy_sys as ffi;

use super::cq::{result_of, take, CqBody, Nd2Result};
use super::data_verbs::*;
use super::mr::MrBody;
use super::mw::MwBody;
use super::overlapped::CallerOverlapped;
use super::qp::QpBody;
use super::requests;
use super::sge::Nd2Sge;
use super::srq::SrqBody;
use super::{
    arg, boundary, com_class, hr_boundary, object, this, Class, Com, HResult, Held, OverlappedVtbl, UnknownVtbl,
    ND_INVALID_PARAMETER, ND_SUCCESS,
};
use crate::CompletionQueue;

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

/// The class of a queue that notifies (CQ, SRQ): IND2Overlapped's entries, then
/// GetNotifyAffinity, then the interface's own; its release cancels what is pending (Notify
/// requests among them).
macro_rules! notifying_class {
    ($body:ty, $vtbl:ident: $Vtbl:ident, $iid:ident { $($entries:tt)* }) => {
        com_class! {
            $body, $vtbl: $Vtbl, [IID_IND2Overlapped, $iid] {
                get_notify_affinity: get_notify_affinity::<$body>,
                $($entries)*
            }
            fn on_release(&self) {
                super::Overlapped::cancel(self);
            }
        }
    };
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

notifying_class! {
    CqBody, CQ_VTBL: CqVtbl, IID_IND2CompletionQueue {
        resize: cq_resize,
        notify: cq_notify,
        get_results: cq_get_results,
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

com_class! {
    QpBody, QP_VTBL: QpVtbl, [IID_IND2QueuePair] {
        flush: qp_flush,
        send: qp_send,
        receive: qp_receive,
        bind: qp_bind,
        invalidate: qp_invalidate,
        read: qp_rdma::<false>,
        write: qp_rdma::<true>,
    }
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

/// Read, or Write with `WRITE`: the caller's object and SGE array, then the RDMA operation.
unsafe extern "C" fn qp_rdma<const WRITE: bool>(
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
    let (entry, opcode) = if WRITE {
        ("IND2QueuePair::Write", ffi::ibv_wr_opcode::IBV_WR_RDMA_WRITE)
    } else {
        ("IND2QueuePair::Read", ffi::ibv_wr_opcode::IBV_WR_RDMA_READ)
    };
    rdma(entry, opcode, posting, context as u64, addr, token, flags)
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

notifying_class! {
    SrqBody, SRQ_VTBL: SrqVtbl, IID_IND2SharedReceiveQueue {
        modify: srq_modify,
        notify: srq_notify,
        receive: srq_receive,
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

com_class! {
    MrBody, MR_VTBL: MrVtbl, [IID_IND2Overlapped, IID_IND2MemoryRegion] {
        register: mr_register,
        deregister: mr_deregister,
        get_local_token: mr_get_local_token,
        get_remote_token: mr_get_remote_token,
    }
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

com_class! {
    MwBody, MW_VTBL: MwVtbl, [IID_IND2MemoryWindow] {
        get_remote_token: mw_get_remote_token,
    }
}

/// The rkey in network byte order, as the MR's.
unsafe extern "C" fn mw_get_remote_token(this: *mut c_void) -> u32 {
    boundary("IND2MemoryWindow::GetRemoteToken", 0, || {
        // SAFETY: the caller's object.
        unsafe { self::this::<MwBody>(this) }.map_or(0, |mw| mw.rkey().to_be())
    })
}
