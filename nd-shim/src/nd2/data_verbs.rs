//! The verbs handles and calls under the ND2 data objects, each a safe wrapper over one raw
//! call: the caller's SGE arrays and buffers ([`sge_list`], [`CallerBuffer`]), the posts and
//! polls ([`SendWr`]), the SRQ and MW handles ([`RawSrq`], [`RawMw`]), and the adapter's
//! completion channel with its doorbell queues ([`CompChannel`], [`CqEvents`],
//! [`DoorbellQueues`]). The C entries above them are `entry_data`.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::sync::Arc;

use rdma_mummy_sys as ffi;

use super::registration::RawMr;
use super::sge::Nd2Sge;
use super::{code, HResult, ND_INVALID_PARAMETER};
use crate::status::NdStatus;
use crate::sys::last_error;
use crate::{CompletionQueue, QueuePair};
use std::sync::atomic::{AtomicU32, Ordering};

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

/// A Bind of a window to a region, from its read of the MR until its post returned: counted in
/// the region's `binds` while it lives ([`super::mr::MrBody::begin_bind`]).
pub(super) struct RegionBind<'a> {
    binds: &'a AtomicU32,
    /// The registered MR, live while this lives (Deregister refuses meanwhile).
    raw: *mut ffi::ibv_mr,
}

impl<'a> RegionBind<'a> {
    /// The bind `binds` already counts, of the registered MR `raw`.
    pub(super) fn new(binds: &'a AtomicU32, raw: *mut ffi::ibv_mr) -> Self {
        RegionBind { binds, raw }
    }

    /// The registered MR, live while this lives.
    pub(super) fn raw(&self) -> *mut ffi::ibv_mr {
        self.raw
    }
}

impl Drop for RegionBind<'_> {
    fn drop(&mut self) {
        // Release: the post happens before a Deregister that sees the count drop frees the MR.
        self.binds.fetch_sub(1, Ordering::Release);
    }
}

// ---- Verbs calls on the objects' handles ----

/// Up to `wcs.len()` completions of `cq` into `wcs`: how many it filled (0 when the CQ is empty
/// or the poll failed).
#[inline(always)]
pub(super) fn poll_into(cq: &CompletionQueue, wcs: &mut [MaybeUninit<ffi::ibv_wc>]) -> usize {
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
    pub(super) fn create(adapter: &crate::Adapter, mut init: ffi::ibv_srq_init_attr) -> Result<RawSrq, HResult> {
        // SAFETY: the PD is live while the adapter is; init is a valid attribute block.
        let srq = unsafe { ffi::ibv_create_srq(adapter.inner.pd.0, &mut init) };
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
pub(super) fn reg_mr(
    adapter: &crate::Adapter,
    buffer: &CallerBuffer,
    access: u32,
) -> Result<(RawMr, u32, u32), NdStatus> {
    // SAFETY: the PD is live while the adapter is; the caller lends the buffer while it is
    // registered (CallerBuffer); unmapped memory is refused by the kernel (EFAULT:
    // ND_ACCESS_VIOLATION).
    let raw = unsafe { ffi::ibv_reg_mr(adapter.inner.pd.0, buffer.ptr.cast_mut(), buffer.len, access as i32) };
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
    pub(super) fn alloc(adapter: &crate::Adapter) -> Result<RawMw, HResult> {
        // SAFETY: the PD is live while the adapter is.
        let mw = unsafe { ffi::ibv_alloc_mw(adapter.inner.pd.0, ffi::ibv_mw_type::IBV_MW_TYPE_2) };
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
