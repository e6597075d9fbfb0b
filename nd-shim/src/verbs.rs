//! Enough of ND2's completion queue, queue pair and memory region, over libibverbs on the
//! adapter's rdma_cm device context, to connect a QP and move data.
//!
//! The QP is ours, not `rdma_create_qp`'s: it starts in INIT (so receives can be posted before
//! the handshake) and the connector moves it to RTR/RTS from `rdma_init_qp_attr`, and to ERR on
//! Disconnect (shortly after the DREQ, at the latest when the disconnect completes).

use std::collections::VecDeque;
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdma_mummy_sys as ffi;

use crate::connection::{settle_claim, ConnectorState, QpClaim};
use crate::connection_data::ReadLimits;
use crate::engine::{Adapter, AdapterInner};
use crate::status::{from_wc_status, NdStatus};
use crate::sys::{last_error, next_async_event, zeroed, AsyncEvent};

// SAFETY: `ctx` is an ibv_context, usable from any thread; the other fields are Send + Sync.
unsafe impl Send for AdapterInner {}
// SAFETY: as above.
unsafe impl Sync for AdapterInner {}

impl AdapterInner {
    /// Deallocates the adapter's PD (once: then the handle is NULL). Only with `&mut`: every
    /// CQ, QP, SRQ, MR and MW holds the adapter, so none uses the PD any more.
    pub(crate) fn release_pd(&mut self) {
        if !self.pd.0.is_null() {
            // SAFETY: allocated by open_device, unused (above), deallocated once.
            unsafe { ffi::ibv_dealloc_pd(self.pd.0) };
            self.pd.0 = std::ptr::null_mut();
        }
    }

    /// The next async event of the adapter's device, as [`next_async_event`].
    pub(crate) fn next_async_event(&self) -> Option<AsyncEvent> {
        // SAFETY: `ctx` is open for the adapter's life; `Adapter::open_polled` made its async fd
        // non-blocking before the adapter was handed out.
        unsafe { next_async_event(self.ctx) }
    }

    /// The async fd of the adapter's device context, borrowed from the adapter.
    pub(crate) fn async_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: `ctx` is open for the adapter's life, and its async fd with it (the context
        // owns and closes it).
        unsafe { BorrowedFd::borrow_raw((*self.ctx).async_fd) }
    }
}

/// One completion (ND2_RESULT).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    pub status: NdStatus,
    pub bytes_transferred: u32,
    pub request_context: u64,
    pub opcode: u32,
}

pub struct CompletionQueue {
    cq: *mut ffi::ibv_cq,
    /// Its completion channel's owner, when it has one: destroyed after the CQ.
    _channel: Option<Arc<dyn Send + Sync>>,
    _adapter: Arc<AdapterInner>,
}

// SAFETY: ibv_cq handles may be used from any thread; libibverbs/providers lock internally.
unsafe impl Send for CompletionQueue {}
// SAFETY: as above.
unsafe impl Sync for CompletionQueue {}

impl CompletionQueue {
    pub fn new(adapter: &Adapter, depth: u32) -> Result<CompletionQueue, NdStatus> {
        CompletionQueue::with_channel(adapter, depth, None)
    }

    /// A CQ whose notifications go to `channel` (ND2's CQ, whose Notify is overlapped): the raw
    /// channel of the adapter's context and what keeps it open until the CQ is destroyed.
    pub(crate) fn with_channel(
        adapter: &Adapter,
        depth: u32,
        channel: Option<(*mut ffi::ibv_comp_channel, Arc<dyn Send + Sync>)>,
    ) -> Result<CompletionQueue, NdStatus> {
        let depth = i32::try_from(depth).map_err(|_| NdStatus::ND_INVALID_PARAMETER)?;
        let (raw_channel, keep) = match channel {
            Some((raw, keep)) => (raw, Some(keep)),
            None => (std::ptr::null_mut(), None),
        };
        // SAFETY: the adapter's context is open; `raw_channel` is NULL or a channel of that
        // context, kept open (by `keep`) until the CQ is destroyed.
        let cq = unsafe { ffi::ibv_create_cq(adapter.inner.ctx, depth, std::ptr::null_mut(), raw_channel, 0) };
        if cq.is_null() {
            return Err(last_error());
        }
        Ok(CompletionQueue {
            cq,
            _channel: keep,
            _adapter: Arc::clone(&adapter.inner),
        })
    }

    pub(crate) fn as_raw(&self) -> *mut ffi::ibv_cq {
        self.cq
    }

    /// ND2 GetResults: up to `max` completions.
    pub fn get_results(&self, max: usize) -> Vec<Completion> {
        let mut wcs: Vec<ffi::ibv_wc> = vec![zeroed(); max];
        let n = i32::try_from(max).unwrap_or(i32::MAX);
        // SAFETY: the CQ is live; wcs has room for n entries.
        let got = unsafe { ffi::ibv_poll_cq(self.cq, n, wcs.as_mut_ptr()) };
        wcs.truncate(usize::try_from(got).unwrap_or(0));
        wcs.iter()
            .map(|wc| Completion {
                status: from_wc_status(wc.status),
                bytes_transferred: wc.byte_len,
                request_context: wc.wr_id,
                opcode: wc.opcode,
            })
            .collect()
    }
}

impl Drop for CompletionQueue {
    fn drop(&mut self) {
        // SAFETY: QPs hold an Arc of their CQs, so no QP uses this CQ any more.
        unsafe { ffi::ibv_destroy_cq(self.cq) };
    }
}

/// A registered buffer that the memory region owns.
pub struct MemoryRegion {
    mr: *mut ffi::ibv_mr,
    buffer: Box<[std::cell::UnsafeCell<u8>]>,
    _adapter: Arc<AdapterInner>,
}

// SAFETY: the MR handle is thread-safe; the buffer is only touched through raw copies.
unsafe impl Send for MemoryRegion {}
// SAFETY: as above.
unsafe impl Sync for MemoryRegion {}

impl MemoryRegion {
    /// Allocates and registers `len` bytes for local access and remote read/write.
    pub fn new(adapter: &Adapter, len: usize) -> Result<MemoryRegion, NdStatus> {
        let buffer: Box<[std::cell::UnsafeCell<u8>]> = (0..len.max(1)).map(|_| std::cell::UnsafeCell::new(0)).collect();
        let access = ffi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0
            | ffi::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0
            | ffi::ibv_access_flags::IBV_ACCESS_REMOTE_READ.0;
        // SAFETY: the PD is live; the buffer stays allocated (boxed, never moved) until Drop
        // deregisters it.
        let mr = unsafe {
            ffi::ibv_reg_mr(
                adapter.inner.pd.0,
                buffer.as_ptr() as *mut _,
                buffer.len(),
                access as i32,
            )
        };
        if mr.is_null() {
            return Err(last_error());
        }
        Ok(MemoryRegion {
            mr,
            buffer,
            _adapter: Arc::clone(&adapter.inner),
        })
    }

    pub fn address(&self) -> u64 {
        self.buffer.as_ptr() as u64
    }

    pub fn len(&self) -> usize {
        self.buffer.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buffer.is_empty()
    }

    /// The MR's fields (libibverbs wrote them at registration and leaves them alone).
    fn fields(&self) -> &ffi::ibv_mr {
        // SAFETY: the MR is live until Drop, which needs `&mut self`.
        unsafe { &*self.mr }
    }

    pub fn local_token(&self) -> u32 {
        self.fields().lkey
    }

    pub fn remote_token(&self) -> u32 {
        self.fields().rkey
    }

    /// Copies bytes out of the region (what the device or the peer wrote there).
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<(), NdStatus> {
        let end = offset.checked_add(out.len()).ok_or(NdStatus::ND_INVALID_PARAMETER)?;
        if end > self.buffer.len() {
            return Err(NdStatus::ND_INVALID_PARAMETER);
        }
        // SAFETY: in bounds (checked); the cells permit shared mutation, and bytes have no
        // invalid values whatever the device writes concurrently.
        unsafe { std::ptr::copy_nonoverlapping(self.buffer[offset].get(), out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    pub fn write(&self, offset: usize, data: &[u8]) -> Result<(), NdStatus> {
        let end = offset.checked_add(data.len()).ok_or(NdStatus::ND_INVALID_PARAMETER)?;
        if end > self.buffer.len() {
            return Err(NdStatus::ND_INVALID_PARAMETER);
        }
        // SAFETY: as in read.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.buffer[offset].get(), data.len()) };
        Ok(())
    }

    /// A scatter/gather entry over `[offset, offset + len)` of this region.
    pub fn sge(&self, offset: usize, len: u32) -> Result<Sge, NdStatus> {
        let end = offset.checked_add(len as usize);
        if end.map_or(true, |end| end > self.buffer.len()) {
            return Err(NdStatus::ND_INVALID_PARAMETER);
        }
        Ok(Sge(ffi::ibv_sge {
            addr: self.address() + offset as u64,
            length: len,
            lkey: self.local_token(),
        }))
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        // SAFETY: the MR is live and deregistered once, before the buffer is freed.
        unsafe { ffi::ibv_dereg_mr(self.mr) };
    }
}

/// A checked scatter/gather entry (ND2_SGE).
#[derive(Clone, Copy)]
pub struct Sge(ffi::ibv_sge);

pub(crate) struct RawQp(pub(crate) *mut ffi::ibv_qp);
// SAFETY: ibv_qp handles may be used from any thread.
unsafe impl Send for RawQp {}
// SAFETY: as above.
unsafe impl Sync for RawQp {}

pub(crate) struct QpInner {
    pub(crate) qp: RawQp,
    /// The connector whose connection uses this QP. ND's ND_CONNECTION_ACTIVE is decided here,
    /// before anything touches the QP.
    connection: QpClaim,
    _send_cq: Arc<CompletionQueue>,
    _recv_cq: Arc<CompletionQueue>,
    /// What else must outlive the QP (ND2: its shared receive queue).
    _keep: Option<Arc<dyn Send + Sync>>,
    /// The capabilities the provider granted (ibv_create_qp's answer: at least what was asked).
    pub(crate) granted: ffi::ibv_qp_cap,
    /// Set when the QP is moved to the error state ([`QpInner::flush`]); it never leaves it.
    flushed: AtomicBool,
    _adapter: Arc<AdapterInner>,
}

impl QpInner {
    pub(crate) fn qp_num(&self) -> u32 {
        // SAFETY: the QP is live until Drop.
        unsafe { (*self.qp.0).qp_num }
    }

    /// Claims the QP for the connector `token`: false when another connector's connection (or
    /// attempt) holds it. AcqRel: a claim is a handover between connectors on any thread.
    pub(crate) fn claim(&self, token: u64) -> bool {
        self.connection.claim(token)
    }

    /// Gives up `token`'s claim, if it holds one.
    pub(crate) fn release(&self, token: u64) {
        self.connection.release(token);
    }

    /// After a Connect or Accept with this QP by the connector `token`, now in `state`
    /// ([`crate::connection::settle_claim`]).
    pub(crate) fn settle_claim(&self, token: u64, state: ConnectorState, its_qp: bool) {
        settle_claim(&self.connection, token, state, its_qp);
    }

    /// The QP's read limits as programmed: (max_dest_rd_atomic, max_rd_atomic).
    pub(crate) fn read_limits(&self) -> Result<(u8, u8), NdStatus> {
        let mut attr: ffi::ibv_qp_attr = zeroed();
        let mut init: ffi::ibv_qp_init_attr = zeroed();
        let mask =
            ffi::ibv_qp_attr_mask::IBV_QP_MAX_DEST_RD_ATOMIC.0 | ffi::ibv_qp_attr_mask::IBV_QP_MAX_QP_RD_ATOMIC.0;
        // SAFETY: the QP is live; attr and init are valid out-parameters.
        match unsafe { ffi::ibv_query_qp(self.qp.0, &mut attr, mask as i32, &mut init) } {
            0 => Ok((attr.max_dest_rd_atomic, attr.max_rd_atomic)),
            e if e > 0 => Err(crate::status::from_errno(e)),
            _ => Err(last_error()),
        }
    }

    pub(crate) fn modify(&self, attr: &mut ffi::ibv_qp_attr, mask: i32) -> Result<(), NdStatus> {
        // SAFETY: the QP is live; attr is a valid attribute block for mask.
        match unsafe { ffi::ibv_modify_qp(self.qp.0, attr, mask) } {
            0 => Ok(()),
            e if e > 0 => Err(crate::status::from_errno(e)),
            _ => Err(last_error()),
        }
    }

    /// QP to ERR: every outstanding request completes, flushed (ND_CANCELED).
    pub(crate) fn flush(&self) -> Result<(), NdStatus> {
        // Before the transition (SeqCst, with the load in `after_receive`): a receive posted
        // concurrently either sees the flag or was posted before the transition drains the queue.
        self.flushed.store(true, Ordering::SeqCst);
        let mut attr: ffi::ibv_qp_attr = zeroed();
        attr.qp_state = ffi::ibv_qp_state::IBV_QPS_ERR;
        self.modify(&mut attr, ffi::ibv_qp_attr_mask::IBV_QP_STATE.0 as i32)
    }

    /// QP to ERR [`FLUSH_GRACE`] from now, unless something flushes it first, for a disconnect
    /// (the local Disconnect's DREQ, or the peer's). A message this side has received and
    /// completed may still owe its ACK: rxe's responder posts the receive's completion before
    /// it sends the ACK, and drops the ACK of a QP no longer ready (`rxe_xmit_packet`). So a
    /// flush at once can turn the peer's Send of a message that arrived into a failure
    /// (ND_CANCELED when the peer's own flush follows our DREQ, else a retry error); likewise
    /// an ACK that reached this QP and waits for rxe's completer is dropped when the QP moves
    /// to ERR (`drain_resp_pkts`), flushing a Send that the peer received. Microsoft's ndconn
    /// exchanges a message each way and disconnects at once; both its Sends must succeed, and
    /// IND2Connector::NotifyDisconnect says a disconnect received must not complete
    /// outstanding requests with ND_CANCELED. The grace lets what is on the wire settle; the
    /// flush still comes, in time for NdReceiveConnClosed (5 s). `token`: the connector whose
    /// connection ended; a QP that another connector has claimed since is left alone.
    pub(crate) fn flush_later(self: &Arc<Self>, token: u64) {
        let qp = Arc::downgrade(self);
        let flush = Box::new(move || {
            // A QP already released is gone (its Drop destroyed it); one that another connector
            // claimed since is not this disconnect's to flush.
            let Some(qp) = qp.upgrade() else { return };
            let holder = qp.connection.holder();
            if holder == 0 || holder == token {
                if let Err(status) = qp.flush() {
                    log::debug!("deferred flush of qpn {}: {status}", qp.qp_num());
                }
            }
        });
        if let Err(flush) = defer(Instant::now() + FLUSH_GRACE, flush) {
            flush();
        }
    }

    /// After a receive was posted: a QP already in the error state flushes it too (ND_CANCELED),
    /// as the IB specification's Error state has every posted request complete with a flush
    /// error. rxe (the kernel's responder) drains the receive queue of a QP in error
    /// only when it runs, and a receive posted from user space does not wake it: the receive
    /// would stay posted for ever, and a program that keeps posting after the peer's disconnect
    /// (Microsoft's ndpingpong) fills the queue (ND_NO_MEMORY). Moving the QP to ERR again (ERR
    /// to ERR is a valid transition) runs the responder, which completes the receive. One load
    /// on the common path.
    #[inline]
    pub(crate) fn after_receive(&self) {
        if self.flushed.load(Ordering::SeqCst) {
            let mut attr: ffi::ibv_qp_attr = zeroed();
            attr.qp_state = ffi::ibv_qp_state::IBV_QPS_ERR;
            if let Err(status) = self.modify(&mut attr, ffi::ibv_qp_attr_mask::IBV_QP_STATE.0 as i32) {
                log::debug!("receive after the flush: ERR again: {status}");
            }
        }
    }
}

/// How long after a disconnect the QP stays out of the error state ([`QpInner::flush_later`]):
/// far above the time an ACK already sent or received needs to be processed (microseconds, a
/// few milliseconds on a loaded software-emulated rig), and far below the seconds an application
/// waits for the flush (Microsoft's NdReceiveConnClosed: 5 s).
pub(crate) const FLUSH_GRACE: Duration = Duration::from_millis(100);

/// An action deferred to the timer thread: when, and what.
type Deferred = (Instant, Box<dyn FnOnce() + Send>);

/// The deferred flushes not yet run, in deadline order (every one waits the same grace), and
/// whether the timer thread runs. The thread exists only while there is work: it ends when it
/// finds the queue empty (under this lock), and the next [`defer`] starts another.
static FLUSH_TIMER: Mutex<(VecDeque<Deferred>, bool)> = Mutex::new((VecDeque::new(), false));

/// Runs `action` at `deadline` on the timer thread, started if none runs (a thread of the
/// shim's, counted by DllCanUnloadNow while it lives). If no thread can be started, `action` is
/// given back for the caller to run at once.
fn defer(deadline: Instant, action: Box<dyn FnOnce() + Send>) -> Result<(), Box<dyn FnOnce() + Send>> {
    let mut timer = crate::sync::lock(&FLUSH_TIMER);
    if timer.1 {
        timer.0.push_back((deadline, action));
        return Ok(());
    }
    // Started under the lock: the thread's first look at the queue comes after the push below.
    match crate::liveness::spawn("nd-shim-flush", run_deferred) {
        Ok(()) => {
            timer.0.push_back((deadline, action));
            timer.1 = true;
            Ok(())
        }
        Err(e) => {
            log::warn!("no flush timer thread ({e}): the disconnect flushes at once");
            Err(action)
        }
    }
}

/// The timer thread: each deferred action at its deadline, in order, until none is left.
fn run_deferred() {
    loop {
        let (deadline, action) = {
            let mut timer = crate::sync::lock(&FLUSH_TIMER);
            match timer.0.pop_front() {
                Some(item) => item,
                None => {
                    timer.1 = false;
                    return;
                }
            }
        };
        std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
        crate::sync::contain("a deferred flush", action);
    }
}

impl Drop for QpInner {
    fn drop(&mut self) {
        // SAFETY: the QP is live and destroyed once; its CQs outlive it (held above).
        unsafe { ffi::ibv_destroy_qp(self.qp.0) };
    }
}

/// An RC queue pair.
#[derive(Clone)]
pub struct QueuePair {
    pub(crate) inner: Arc<QpInner>,
}

/// ND2's flags for Send/Write.
pub const ND_OP_FLAG_SILENT_SUCCESS: u32 = 0x1;

/// An RDMA request of [`QueuePair`] (ND2 Write, Read): `$opcode` with the caller's SGEs, to or
/// from the peer's `remote_address` under its `remote_token`.
macro_rules! rdma_request {
    ($(#[$doc:meta])* $name:ident, $opcode:ident) => {
        $(#[$doc])*
        pub fn $name(
            &self,
            request_context: u64,
            sges: &[Sge],
            remote_address: u64,
            remote_token: u32,
            flags: u32,
        ) -> Result<(), NdStatus> {
            self.post(
                request_context,
                sges,
                flags,
                ffi::ibv_wr_opcode::$opcode,
                remote_address,
                remote_token,
            )
        }
    };
}

impl QueuePair {
    pub fn new(
        adapter: &Adapter,
        recv_cq: &Arc<CompletionQueue>,
        send_cq: &Arc<CompletionQueue>,
        receive_depth: u32,
        initiator_depth: u32,
        max_sge: u32,
    ) -> Result<QueuePair, NdStatus> {
        let cap = ffi::ibv_qp_cap {
            max_send_wr: initiator_depth,
            max_recv_wr: receive_depth,
            max_send_sge: max_sge,
            max_recv_sge: max_sge,
            max_inline_data: 0,
        };
        QueuePair::with_caps(adapter, recv_cq, send_cq, None, cap)
    }

    /// An RC QP with the given capabilities; with `srq`, its receives come from that shared
    /// receive queue (raw handle, and what keeps it alive as long as the QP).
    pub(crate) fn with_caps(
        adapter: &Adapter,
        recv_cq: &Arc<CompletionQueue>,
        send_cq: &Arc<CompletionQueue>,
        srq: Option<(*mut ffi::ibv_srq, Arc<dyn Send + Sync>)>,
        cap: ffi::ibv_qp_cap,
    ) -> Result<QueuePair, NdStatus> {
        let (srq, keep) = match srq {
            Some((raw, keep)) => (raw, Some(keep)),
            None => (std::ptr::null_mut(), None),
        };
        let mut init = ffi::ibv_qp_init_attr {
            qp_context: std::ptr::null_mut(),
            send_cq: send_cq.cq,
            recv_cq: recv_cq.cq,
            srq,
            cap,
            qp_type: ffi::ibv_qp_type::IBV_QPT_RC,
            sq_sig_all: 0,
        };
        // SAFETY: the PD, CQs and SRQ are live and belong to this adapter's context.
        let qp = unsafe { ffi::ibv_create_qp(adapter.inner.pd.0, &mut init) };
        if qp.is_null() {
            return Err(last_error());
        }
        let inner = Arc::new(QpInner {
            qp: RawQp(qp),
            connection: QpClaim::default(),
            _send_cq: Arc::clone(send_cq),
            _recv_cq: Arc::clone(recv_cq),
            _keep: keep,
            granted: init.cap,
            flushed: AtomicBool::new(false),
            _adapter: Arc::clone(&adapter.inner),
        });
        // RESET -> INIT now, so receives can be posted before the handshake, on the port that
        // has the adapter's address (rdma_cm's bind found it; rxe has one port).
        let mut attr: ffi::ibv_qp_attr = zeroed();
        attr.qp_state = ffi::ibv_qp_state::IBV_QPS_INIT;
        attr.pkey_index = 0;
        attr.port_num = adapter.inner.port_num;
        attr.qp_access_flags = ffi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0
            | ffi::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0
            | ffi::ibv_access_flags::IBV_ACCESS_REMOTE_READ.0;
        use ffi::ibv_qp_attr_mask as M;
        let mask = M::IBV_QP_STATE.0 | M::IBV_QP_PKEY_INDEX.0 | M::IBV_QP_PORT.0 | M::IBV_QP_ACCESS_FLAGS.0;
        inner.modify(&mut attr, mask as i32)?;
        Ok(QueuePair { inner })
    }

    pub fn qp_num(&self) -> u32 {
        self.inner.qp_num()
    }

    /// The read limits the QP is programmed with, as `ibv_query_qp` reports them: inbound
    /// (`max_dest_rd_atomic`, reads it serves) and outbound (`max_rd_atomic`, reads it issues).
    /// rxe rounds both up to a power of two.
    pub fn read_limits(&self) -> Result<ReadLimits, NdStatus> {
        let (inbound, outbound) = self.inner.read_limits()?;
        Ok(ReadLimits::new(u32::from(inbound), u32::from(outbound)))
    }

    /// ND2 Receive.
    pub fn receive(&self, request_context: u64, sges: &[Sge]) -> Result<(), NdStatus> {
        let mut list: Vec<ffi::ibv_sge> = sges.iter().map(|s| s.0).collect();
        let mut wr = ffi::ibv_recv_wr {
            wr_id: request_context,
            next: std::ptr::null_mut(),
            sg_list: list.as_mut_ptr(),
            num_sge: list.len() as i32,
        };
        let mut bad = std::ptr::null_mut();
        // SAFETY: the QP is live; wr and its SGE list are valid for the call (the provider
        // copies them); the SGEs point into registered regions (checked by MemoryRegion::sge).
        let ret = unsafe { ffi::ibv_post_recv(self.inner.qp.0, &mut wr, &mut bad) };
        post_result(ret)?;
        self.inner.after_receive();
        Ok(())
    }

    /// ND2 Send.
    pub fn send(&self, request_context: u64, sges: &[Sge], flags: u32) -> Result<(), NdStatus> {
        self.post(request_context, sges, flags, ffi::ibv_wr_opcode::IBV_WR_SEND, 0, 0)
    }

    rdma_request!(
        /// ND2 Write: RDMA write to the peer's `remote_address` under its `remote_token`.
        write,
        IBV_WR_RDMA_WRITE
    );

    rdma_request!(
        /// ND2 Read.
        read,
        IBV_WR_RDMA_READ
    );

    fn post(
        &self,
        request_context: u64,
        sges: &[Sge],
        flags: u32,
        opcode: ffi::ibv_wr_opcode::Type,
        remote_addr: u64,
        rkey: u32,
    ) -> Result<(), NdStatus> {
        let mut list: Vec<ffi::ibv_sge> = sges.iter().map(|s| s.0).collect();
        let mut wr: ffi::ibv_send_wr = zeroed();
        wr.wr_id = request_context;
        wr.sg_list = list.as_mut_ptr();
        wr.num_sge = list.len() as i32;
        wr.opcode = opcode;
        wr.send_flags = if flags & ND_OP_FLAG_SILENT_SUCCESS != 0 {
            0
        } else {
            ffi::ibv_send_flags::IBV_SEND_SIGNALED.0
        };
        wr.wr.rdma = ffi::rdma_t { remote_addr, rkey };
        let mut bad = std::ptr::null_mut();
        // SAFETY: as in receive.
        let ret = unsafe { ffi::ibv_post_send(self.inner.qp.0, &mut wr, &mut bad) };
        post_result(ret)
    }
}

fn post_result(ret: i32) -> Result<(), NdStatus> {
    match ret {
        0 => Ok(()),
        e if e > 0 => Err(crate::status::from_errno(e)),
        _ => Err(last_error()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The timer thread runs the deferred actions in order, at their deadlines, and then ends:
    /// the library can be unloaded with no disconnect pending.
    #[test]
    fn the_flush_timer_runs_in_order_and_ends_when_idle() {
        let _serial = crate::liveness::serial_for_test();
        let ran = Arc::new(Mutex::new(Vec::new()));
        let start = Instant::now();
        for i in 0..3 {
            let ran = Arc::clone(&ran);
            let action = Box::new(move || ran.lock().unwrap().push((i, Instant::now())));
            assert!(defer(start + Duration::from_millis(20), action).is_ok());
        }
        assert!(!crate::nd2::provider::can_unload(), "the timer thread runs");
        while crate::sync::lock(&FLUSH_TIMER).1 || !crate::nd2::provider::can_unload() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the timer thread never ended"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let ran = ran.lock().unwrap();
        assert_eq!(ran.iter().map(|r| r.0).collect::<Vec<_>>(), [0, 1, 2]);
        assert!(ran.iter().all(|r| r.1 >= start + Duration::from_millis(20)));
    }
}
