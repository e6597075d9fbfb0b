//! Completion queues: `create_cq`, `create_cq_ex`, `destroy_cq`, `poll_cq`,
//! `req_notify_cq`, `resize_cq`, and the `ibv_cq_ex` poll API
//! (`start_poll`/`next_poll`/`end_poll` and the `read_*` callbacks).
//!
//! The kernel writes completions (`ib_uverbs_wc` at the start of each slot)
//! into the CQ's ring, our [`Consumer`]; we copy each one out once and
//! advance our consumer index. As in the stock provider one lock per CQ serializes
//! pollers; `ibv_cq_ex` takes it in `start_poll` and drops it in `end_poll`
//! (or in a `start_poll` that finds nothing), hence a raw lock
//! ([`QueueLock`]) that records its holder rather than a guard-based mutex;
//! `poll_cq` and `resize_cq` hold it for the call (RAII).
//!
//! What libibverbs expects of the `ibv_cq` we return: `context`, `handle`
//! and `cqe` filled as `ibv_cmd_create_cq` fills them; `verbs_init_cq` then
//! sets `channel` (and its refcount), `cq_context`, the event counters and
//! `mutex`/`cond`, which we also give valid initial values. `destroy_cq`
//! waits, as `ibv_cmd_destroy_cq` does, until the application acked every
//! event the kernel reported. Completion events need no `cq_event` hook (the
//! stock provider has none either).

use core::cell::UnsafeCell;
use core::ffi::{c_int, c_uint};
use core::mem::{size_of, MaybeUninit};
use core::ptr::{self, addr_of_mut, NonNull};
use std::os::fd::RawFd;

use kernel_abi::{
    ib_uverbs_create_cq, ib_uverbs_create_cq_resp, ib_uverbs_destroy_cq, ib_uverbs_destroy_cq_resp,
    ib_uverbs_ex_create_cq, ib_uverbs_ex_create_cq_resp, ib_uverbs_req_notify_cq, ib_uverbs_resize_cq,
    ib_uverbs_resize_cq_resp, ib_uverbs_wc, mminfo, rxe_create_cq_resp, rxe_resize_cq_resp,
    IB_USER_VERBS_CMD_CREATE_CQ, IB_USER_VERBS_CMD_DESTROY_CQ, IB_USER_VERBS_CMD_REQ_NOTIFY_CQ,
    IB_USER_VERBS_CMD_RESIZE_CQ, IB_USER_VERBS_EX_CMD_CREATE_CQ, IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN,
};
use log::{debug, error, warn};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

use crate::boundary;
use crate::command::{self, impl_write_cmd, WriteCmd, WriteExCmd};
use crate::errno::Errno;
use crate::libibverbs::cq::*;
use crate::libibverbs::device_context::ibv_context;
use crate::lifecycle::{self, Creating};
use crate::lock::QueueLock;
use crate::pd::{self, DomainUse};
use crate::ring::Consumer;

pub(crate) mod purge;

/// The `read_*` fields the stock rxe provider supports
/// (`RXE_SUP_WC_EX_FLAGS`); `read_opcode`, `read_vendor_err` and
/// `read_wc_flags` are always there.
pub(crate) const SUPPORTED_WC_FLAGS: u64 = IBV_WC_EX_WITH_BYTE_LEN
    | IBV_WC_EX_WITH_IMM
    | IBV_WC_EX_WITH_QP_NUM
    | IBV_WC_EX_WITH_SRC_QP
    | IBV_WC_EX_WITH_SLID
    | IBV_WC_EX_WITH_SL
    | IBV_WC_EX_WITH_DLID_PATH_BITS;

/// Legacy `CREATE_CQ` response: the core part, then rxe's.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct CreateCqResp {
    pub core: ib_uverbs_create_cq_resp,
    pub drv: rxe_create_cq_resp,
}

/// `RESIZE_CQ` response: the core part, then rxe's.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ResizeCqResp {
    pub core: ib_uverbs_resize_cq_resp,
    pub drv: rxe_resize_cq_resp,
}

impl_write_cmd!(ib_uverbs_create_cq, IB_USER_VERBS_CMD_CREATE_CQ, CreateCqResp);

impl WriteExCmd for ib_uverbs_ex_create_cq {
    const ID: u32 = IB_USER_VERBS_EX_CMD_CREATE_CQ;
    type Resp = ib_uverbs_ex_create_cq_resp;
}

impl_write_cmd!(ib_uverbs_resize_cq, IB_USER_VERBS_CMD_RESIZE_CQ, ResizeCqResp);

impl_write_cmd!(
    ib_uverbs_destroy_cq,
    IB_USER_VERBS_CMD_DESTROY_CQ,
    ib_uverbs_destroy_cq_resp
);

/// `REQ_NOTIFY_CQ` has no response.
impl WriteCmd for ib_uverbs_req_notify_cq {
    const ID: u32 = IB_USER_VERBS_CMD_REQ_NOTIFY_CQ;
    type Resp = ();
    fn set_response(&mut self, _addr: u64) {}
}

// `ibv_wc` is the kernel's `ib_uverbs_wc` with C enums for status and
// opcode: the same fields at the same offsets, so poll_cq copies a CQE to
// the caller whole, as the stock provider's memcpy does. (The kernel's
// port_num and reserved bytes land in ibv_wc's tail padding.)
const _: () = {
    use core::mem::offset_of;
    assert!(size_of::<ibv_wc>() == size_of::<ib_uverbs_wc>());
    assert!(offset_of!(ibv_wc, status) == offset_of!(ib_uverbs_wc, status));
    assert!(offset_of!(ibv_wc, opcode) == offset_of!(ib_uverbs_wc, opcode));
    assert!(offset_of!(ibv_wc, vendor_err) == offset_of!(ib_uverbs_wc, vendor_err));
    assert!(offset_of!(ibv_wc, byte_len) == offset_of!(ib_uverbs_wc, byte_len));
    assert!(offset_of!(ibv_wc, ex) == offset_of!(ib_uverbs_wc, ex));
    assert!(offset_of!(ibv_wc, qp_num) == offset_of!(ib_uverbs_wc, qp_num));
    assert!(offset_of!(ibv_wc, src_qp) == offset_of!(ib_uverbs_wc, src_qp));
    assert!(offset_of!(ibv_wc, wc_flags) == offset_of!(ib_uverbs_wc, wc_flags));
    assert!(offset_of!(ibv_wc, pkey_index) == offset_of!(ib_uverbs_wc, pkey_index));
    assert!(offset_of!(ibv_wc, slid) == offset_of!(ib_uverbs_wc, slid));
    assert!(offset_of!(ibv_wc, sl) == offset_of!(ib_uverbs_wc, sl));
    assert!(offset_of!(ibv_wc, dlid_path_bits) == offset_of!(ib_uverbs_wc, dlid_path_bits));
};

/// What the CQ lock protects.
pub(crate) struct PollState {
    /// `None` only after a resize whose new ring could not be mapped: the
    /// kernel has switched rings, so polling fails from then on.
    ring: Option<Consumer>,
    /// Our consumer index. Read from the ring once, when it is mapped; the
    /// shared copy is only for the kernel.
    cons: u32,
    /// During an `ibv_cq_ex` poll: the index of `current`.
    cur: u32,
    /// During an `ibv_cq_ex` poll: our copy of the current CQE.
    current: ib_uverbs_wc,
}

impl PollState {
    /// A ring whose slots cannot hold a CQE counts as none (every CQ ring
    /// is mapped with that minimum, so this only states what `poll` relies on).
    pub(crate) fn new(ring: Option<Consumer>) -> PollState {
        let ring = ring.filter(|r| r.geometry().elem_size() >= size_of::<ib_uverbs_wc>());
        let cons = ring.as_ref().map_or(0, Consumer::consumer_index);
        PollState {
            ring,
            cons,
            cur: cons,
            current: ib_uverbs_wc::new_zeroed(),
        }
    }

    fn ring(&self) -> Result<&Consumer, Errno> {
        self.ring.as_ref().ok_or(Errno::EIO)
    }

    /// `ibv_poll_cq`: copies up to `out.len()` completions out, oldest first.
    #[inline]
    pub(crate) fn poll(&mut self, out: &mut [MaybeUninit<ibv_wc>]) -> Result<usize, Errno> {
        let ring = self.ring.as_ref().ok_or(Errno::EIO)?;
        let q = ring.indices();
        let prod = ring.produced();
        let mut cons = self.cons;
        let mut n = 0;
        while n < out.len() && cons != prod {
            // SAFETY: out[n] is an ibv_wc's worth of writable memory, and
            // ibv_wc is ib_uverbs_wc field for field (asserted below); every
            // field is an integer, so any bits are a valid ibv_wc. The slots
            // hold an ib_uverbs_wc (PollState::new keeps no other ring).
            unsafe { ring.copy_slot(cons, out[n].as_mut_ptr().cast::<ib_uverbs_wc>()) };
            cons = q.next(cons);
            n += 1;
        }
        if n > 0 {
            self.cons = cons;
            ring.release(cons);
        }
        Ok(n)
    }

    /// `start_poll`: the oldest completion, or ENOENT. Consumes nothing yet.
    pub(crate) fn start(&mut self) -> Result<ib_uverbs_wc, Errno> {
        let ring = self.ring()?;
        if self.cons == ring.produced() {
            return Err(Errno::ENOENT);
        }
        self.current = ring.read_slot(self.cons);
        self.cur = self.cons;
        Ok(self.current)
    }

    /// `next_poll`: the completion after the current one, or ENOENT with the
    /// current one left as it is, so that `end` consumes exactly what was
    /// handed out (upstream's consumer-index overrun was an `end_poll` that
    /// advanced once more after such an ENOENT).
    pub(crate) fn next(&mut self) -> Result<ib_uverbs_wc, Errno> {
        let ring = self.ring()?;
        let next = ring.indices().next(self.cur);
        if next == ring.produced() {
            return Err(Errno::ENOENT);
        }
        self.current = ring.read_slot(next);
        self.cur = next;
        Ok(self.current)
    }

    /// `end_poll`: consumes everything up to and including the current CQE.
    pub(crate) fn end(&mut self) {
        if let Some(ring) = &self.ring {
            self.cons = ring.indices().next(self.cur);
            ring.release(self.cons);
        }
    }

    /// After a resize: the new ring (the kernel copied the unpolled CQEs
    /// into it) or none; the old one is unmapped.
    pub(crate) fn replace_ring(&mut self, ring: Option<Consumer>) {
        *self = PollState::new(ring);
    }
}

/// Our CQ. `vcq` must stay first: libibverbs and the application hold
/// `ibv_cq *`/`ibv_cq_ex *` pointers to it, and get ours back by casting.
/// It is in an `UnsafeCell` because libibverbs writes some of its fields
/// (event counters, under its mutex) while we hold `&RxeCq`.
#[repr(C)]
pub(crate) struct RxeCq {
    vcq: UnsafeCell<ibv_cq_ex>,
    cmd_fd: RawFd,
    lock: QueueLock,
    state: UnsafeCell<PollState>,
    /// The parent domain it was created on (`ibv_create_cq_ex` with
    /// `IBV_CQ_INIT_ATTR_MASK_PD`), if any.
    domain: DomainUse,
}

impl RxeCq {
    fn new(context: *mut ibv_context, channel: *mut ibv_comp_channel, cmd_fd: RawFd, lock: QueueLock) -> Box<RxeCq> {
        Box::new(RxeCq {
            vcq: UnsafeCell::new(ibv_cq_ex {
                context,
                channel,
                cq_context: ptr::null_mut(),
                handle: 0,
                cqe: 0,
                mutex: libc::PTHREAD_MUTEX_INITIALIZER,
                cond: libc::PTHREAD_COND_INITIALIZER,
                comp_events_completed: 0,
                async_events_completed: 0,
                comp_mask: 0,
                status: 0,
                wr_id: 0,
                start_poll: None,
                next_poll: None,
                end_poll: None,
                read_opcode: None,
                read_vendor_err: None,
                read_byte_len: None,
                read_imm_data: None,
                read_qp_num: None,
                read_src_qp: None,
                read_wc_flags: None,
                read_slid: None,
                read_sl: None,
                read_dlid_path_bits: None,
                read_completion_ts: None,
                read_cvlan: None,
                read_flow_tag: None,
                read_tm_info: None,
                read_completion_wallclock_ns: None,
            }),
            cmd_fd,
            lock,
            state: UnsafeCell::new(PollState::new(None)),
            domain: DomainUse::none(),
        })
    }

    /// # Safety
    /// `cq` is NULL or a CQ our `create_cq`/`create_cq_ex` returned and that
    /// is not destroyed (true for every CQ libibverbs passes to our ops).
    unsafe fn from_ptr<'a, T>(cq: *mut T) -> Option<&'a RxeCq> {
        // SAFETY: per the contract; vcq is at offset 0 of a live RxeCq.
        unsafe { cq.cast::<RxeCq>().as_ref() }
    }

    fn vcq(&self) -> *mut ibv_cq_ex {
        self.vcq.get()
    }

    fn handle(&self) -> u32 {
        // SAFETY: handle is written once, before the CQ is handed out.
        unsafe { (*self.vcq()).handle }
    }

    /// Runs `f` on the poll state with the lock held (released on return
    /// and on unwind).
    #[inline(always)]
    fn locked<R>(&self, f: impl FnOnce(&mut PollState) -> R) -> R {
        // SAFETY: the lock is held while f runs, so this is the only reference.
        self.lock.with(|| f(unsafe { &mut *self.state.get() }))
    }

    /// # Safety
    /// The caller holds the lock (between a successful `start_poll` and
    /// `end_poll`, as the `ibv_cq_ex` API requires).
    #[allow(clippy::mut_from_ref)]
    unsafe fn state_locked(&self) -> &mut PollState {
        // SAFETY: per the contract, the lock makes this the only reference.
        unsafe { &mut *self.state.get() }
    }

    /// Publishes the current CQE's `status` and `wr_id` in `ibv_cq_ex`,
    /// where libibverbs' inline readers look for them.
    fn set_current(&self, wc: &ib_uverbs_wc) {
        let vcq = self.vcq();
        // SAFETY: vcq is our live ibv_cq_ex; only the poller (holding the
        // lock) writes these fields.
        unsafe {
            addr_of_mut!((*vcq).status).write(wc.status as c_int);
            addr_of_mut!((*vcq).wr_id).write(wc.wr_id);
        }
    }
}

/// The kernel CQ a create made, to undo if the rest fails.
fn destroy_kernel_cq(fd: RawFd, handle: u32) -> Result<ib_uverbs_destroy_cq_resp, Errno> {
    command::write_cmd(
        fd,
        ib_uverbs_destroy_cq {
            response: 0,
            cq_handle: handle,
            reserved: 0,
        },
    )
}

/// What a create response must satisfy: the ring maps and is sane, and the
/// `cqe` the kernel granted is at least what was asked and fits the ring.
fn map_cq_ring(fd: RawFd, mi: &mminfo, asked: u32, granted: u32) -> Result<(Consumer, c_int), Errno> {
    let ring = Consumer::map(fd, mi, size_of::<ib_uverbs_wc>())?;
    if granted < asked || granted > ring.indices().capacity() {
        debug!(
            "CQ: kernel granted {granted} CQEs for {asked} on a ring of {}",
            ring.indices().capacity()
        );
        return Err(Errno::EPROTO);
    }
    let cqe = c_int::try_from(granted).map_err(|_| Errno::EPROTO)?;
    Ok((ring, cqe))
}

/// Creates the CQ: the kernel object (legacy command, or the extended one
/// with `ex_flags`), then the mapping. Any failure after the kernel object
/// exists destroys it again.
fn create(
    ibctx: *mut ibv_context,
    cqe: c_int,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
    ex_flags: Option<u32>,
    lock: QueueLock,
) -> Result<Creating<RxeCq>, Errno> {
    if ibctx.is_null() {
        return Err(Errno::EINVAL);
    }
    // SAFETY: libibverbs passes our live context; cmd_fd is set for its life.
    let fd = unsafe { (*ibctx).cmd_fd };
    let comp_channel = if channel.is_null() {
        -1
    } else {
        // SAFETY: a non-NULL channel is the application's live ibv_comp_channel.
        unsafe { (*channel).fd }
    };
    let mut cq = Creating::new(RxeCq::new(ibctx, channel, fd, lock), "CQ", fd, |fd, handle| {
        destroy_kernel_cq(fd, handle).map(|_| ())
    });
    // The kernel hands this back in completion events (ibv_get_cq_event).
    let user_handle = cq.get_mut().vcq() as u64;
    // The C library passes these ints through as u32; so do we, and the
    // kernel rejects what is out of range.
    let asked = cqe as u32;

    let (handle, granted, mi) = match ex_flags {
        None => {
            let cmd = ib_uverbs_create_cq {
                response: 0,
                user_handle,
                cqe: asked,
                comp_vector: comp_vector as u32,
                comp_channel,
                reserved: 0,
                driver_data: [],
            };
            let r = command::write_cmd(fd, cmd)?;
            (r.core.cq_handle, r.core.cqe, r.drv.mi)
        }
        Some(flags) => {
            let cmd = ib_uverbs_ex_create_cq {
                user_handle,
                cqe: asked,
                comp_vector: comp_vector as u32,
                comp_channel,
                comp_mask: 0,
                flags,
                reserved: 0,
            };
            let (core, drv) = command::write_ex_cmd_drv::<_, rxe_create_cq_resp>(fd, cmd)?;
            if (core.response_length as usize) < size_of::<ib_uverbs_create_cq_resp>() {
                // Without the core part we do not even know the handle; the
                // kernel always writes it, so this cannot leak in practice.
                return Err(Errno::EPROTO);
            }
            (core.base.cq_handle, core.base.cqe, drv.mi)
        }
    };

    cq.created(handle);
    let (ring, cqe) = map_cq_ring(fd, &mi, asked, granted)?;
    let c = cq.get_mut();
    let vcq = c.vcq.get_mut();
    vcq.handle = handle;
    vcq.cqe = cqe;
    *c.state.get_mut() = PollState::new(Some(ring));
    Ok(cq)
}

/// `verbs_context_ops.create_cq`
pub(crate) unsafe extern "C" fn create_cq(
    context: *mut ibv_context,
    cqe: c_int,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    boundary::guard("create_cq", ptr::null_mut(), || {
        match create(context, cqe, channel, comp_vector, None, QueueLock::new()) {
            Ok(cq) => cq.finish().as_ptr().cast::<ibv_cq>(),
            Err(errno) => boundary::fail_ptr(errno),
        }
    })
}

/// The kernel's create flags for `ibv_cq_init_attr_ex`, as
/// `ibv_cmd_create_cq_ex` derives them; or the errno to fail with.
pub(crate) fn ex_create_flags(attr: &ibv_cq_init_attr_ex) -> Result<u32, Errno> {
    if attr.wc_flags & !SUPPORTED_WC_FLAGS != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    if attr.comp_mask & !(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD) != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    let mut flags = 0;
    if attr.comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS != 0 && attr.flags & IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN != 0 {
        flags |= IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN;
    }
    Ok(flags)
}

/// Fills the `ibv_cq_ex` callbacks: the poll trio and the readers the
/// application asked for.
fn set_ex_callbacks(vcq: &mut ibv_cq_ex, wc_flags: u64) {
    let want = |flag: u64| wc_flags & flag != 0;
    vcq.start_poll = Some(start_poll);
    vcq.next_poll = Some(next_poll);
    vcq.end_poll = Some(end_poll);
    vcq.read_opcode = Some(read_opcode);
    vcq.read_vendor_err = Some(read_vendor_err);
    vcq.read_wc_flags = Some(read_wc_flags);
    vcq.read_byte_len = want(IBV_WC_EX_WITH_BYTE_LEN).then_some(read_byte_len as read_u32_fn);
    vcq.read_imm_data = want(IBV_WC_EX_WITH_IMM).then_some(read_imm_data as read_u32_fn);
    vcq.read_qp_num = want(IBV_WC_EX_WITH_QP_NUM).then_some(read_qp_num as read_u32_fn);
    vcq.read_src_qp = want(IBV_WC_EX_WITH_SRC_QP).then_some(read_src_qp as read_u32_fn);
    vcq.read_slid = want(IBV_WC_EX_WITH_SLID).then_some(read_slid as read_u32_fn);
    vcq.read_sl = want(IBV_WC_EX_WITH_SL).then_some(read_sl as read_u8_fn);
    vcq.read_dlid_path_bits = want(IBV_WC_EX_WITH_DLID_PATH_BITS).then_some(read_dlid_path_bits as read_u8_fn);
}

/// `verbs_context_ops.create_cq_ex`
pub(crate) unsafe extern "C" fn create_cq_ex(
    context: *mut ibv_context,
    attr: *mut ibv_cq_init_attr_ex,
) -> *mut ibv_cq_ex {
    boundary::guard("create_cq_ex", ptr::null_mut(), || {
        // SAFETY: a non-NULL attr is the caller's live ibv_cq_init_attr_ex.
        let Some(attr) = (unsafe { attr.as_ref() }) else {
            return boundary::fail_ptr(Errno::EINVAL);
        };
        let created = ex_create_flags(attr).and_then(|flags| {
            // A parent domain with a TD: no lock. Anything else given as
            // the PD is ignored, as the stock provider ignores it (mlx5
            // refuses what is not a parent domain; verbs-diff compares
            // with stock).
            let lock = if attr.comp_mask & IBV_CQ_INIT_ATTR_MASK_PD != 0 {
                // SAFETY: a PD of ours or null (lock_for takes null).
                unsafe { pd::lock_for(attr.parent_domain.cast()) }
            } else {
                QueueLock::new()
            };
            let cqe = attr.cqe as c_int;
            create(context, cqe, attr.channel, attr.comp_vector as c_int, Some(flags), lock)
        });
        match created {
            Ok(mut cq) => {
                if attr.comp_mask & IBV_CQ_INIT_ATTR_MASK_PD != 0 {
                    // SAFETY: as for lock_for above.
                    cq.get_mut().domain = unsafe { DomainUse::of(attr.parent_domain.cast()) };
                }
                set_ex_callbacks(cq.get_mut().vcq.get_mut(), attr.wc_flags);
                cq.finish().as_ptr().cast::<ibv_cq_ex>()
            }
            Err(errno) => boundary::fail_ptr(errno),
        }
    })
}

/// `verbs_context_ops.destroy_cq`
pub(crate) unsafe extern "C" fn destroy_cq(ibcq: *mut ibv_cq) -> c_int {
    boundary::guard("destroy_cq", Errno::EIO.code(), || {
        // SAFETY: libibverbs passes a live CQ of ours.
        let Some(cq) = (unsafe { RxeCq::from_ptr(ibcq) }) else {
            return Errno::EINVAL.code();
        };
        let (fd, handle, vcq) = (cq.cmd_fd, cq.handle(), cq.vcq());
        let Some(obj) = NonNull::new(ibcq.cast::<RxeCq>()) else {
            return Errno::EINVAL.code();
        };
        let wait = |resp: &ib_uverbs_destroy_cq_resp| {
            // SAFETY: libibverbs initialised mutex/cond (verbs_init_cq) and
            // updates the counters under that mutex (ibv_ack_cq_events,
            // ibv_ack_async_event). The kernel reports no more events for
            // this CQ.
            unsafe {
                lifecycle::wait_for_acks(addr_of_mut!((*vcq).mutex), addr_of_mut!((*vcq).cond), || {
                    ptr::read_volatile(addr_of_mut!((*vcq).comp_events_completed)) == resp.comp_events_reported
                        && ptr::read_volatile(addr_of_mut!((*vcq).async_events_completed)) == resp.async_events_reported
                })
            }
        };
        // SAFETY: the CQ came from Creating::finish in create_cq(_ex);
        // libibverbs does not use it after a successful destroy. Freeing
        // it unmaps the ring.
        match unsafe { lifecycle::destroy(obj, || destroy_kernel_cq(fd, handle), wait) } {
            Ok(()) => 0,
            Err(errno) => errno.code(),
        }
    })
}

/// `verbs_context_ops.poll_cq`: how many completions were written to `wc`,
/// or a negative errno.
pub(crate) unsafe extern "C" fn poll_cq(ibcq: *mut ibv_cq, ne: c_int, wc: *mut ibv_wc) -> c_int {
    boundary::guard("poll_cq", Errno::EIO.negative(), || {
        // SAFETY: libibverbs passes a live CQ of ours.
        let Some(cq) = (unsafe { RxeCq::from_ptr(ibcq) }) else {
            return Errno::EINVAL.negative();
        };
        let Ok(ne) = usize::try_from(ne) else { return 0 };
        if ne == 0 {
            return 0;
        }
        if wc.is_null() {
            return Errno::EINVAL.negative();
        }
        // SAFETY: the caller provides room for `ne` ibv_wc at wc; we only
        // write whole entries through MaybeUninit.
        let out = unsafe { core::slice::from_raw_parts_mut(wc.cast::<MaybeUninit<ibv_wc>>(), ne) };
        match cq.locked(|s| s.poll(out)) {
            // n <= ne, which came from a c_int.
            Ok(n) => n as c_int,
            Err(errno) => errno.negative(),
        }
    })
}

/// `verbs_context_ops.req_notify_cq`: arms the CQ for its next (solicited)
/// completion event, with the `REQ_NOTIFY_CQ` write as the stock provider's
/// `ibv_cmd_req_notify_cq` issues it.
pub(crate) unsafe extern "C" fn req_notify_cq(ibcq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    boundary::guard("req_notify_cq", Errno::EIO.code(), || {
        // SAFETY: libibverbs passes a live CQ of ours.
        let Some(cq) = (unsafe { RxeCq::from_ptr(ibcq) }) else {
            return Errno::EINVAL.code();
        };
        let cmd = ib_uverbs_req_notify_cq {
            cq_handle: cq.handle(),
            solicited_only: u32::from(solicited_only != 0),
        };
        match command::write_cmd(cq.cmd_fd, cmd) {
            Ok(()) => 0,
            Err(errno) => errno.code(),
        }
    })
}

/// `verbs_context_ops.resize_cq`. The kernel moves the unpolled CQEs into a
/// new ring; we map it in place of the old one with the lock held, so no
/// poller sees the switch half-done.
pub(crate) unsafe extern "C" fn resize_cq(ibcq: *mut ibv_cq, cqe: c_int) -> c_int {
    boundary::guard("resize_cq", Errno::EIO.code(), || {
        // SAFETY: libibverbs passes a live CQ of ours.
        let Some(cq) = (unsafe { RxeCq::from_ptr(ibcq) }) else {
            return Errno::EINVAL.code();
        };
        let asked = cqe as u32;
        cq.locked(|state| {
            // Our consumer index is already in the shared page (every poll
            // stores it), which is where the kernel reads it from to copy.
            let cmd = ib_uverbs_resize_cq {
                response: 0,
                cq_handle: cq.handle(),
                cqe: asked,
                driver_data: [],
            };
            let resp = match command::write_cmd(cq.cmd_fd, cmd) {
                Ok(resp) => resp,
                Err(errno) => return errno.code(),
            };
            match map_cq_ring(cq.cmd_fd, &resp.drv.mi, asked, resp.core.cqe) {
                Ok((ring, cqe)) => {
                    state.replace_ring(Some(ring));
                    // SAFETY: cqe is ours to write; readers of it expect it
                    // to change only in resize_cq.
                    unsafe { (*cq.vcq()).cqe = cqe };
                    0
                }
                Err(errno) => {
                    // The old ring is dead (the kernel writes only the new
                    // one): polling must fail rather than read stale CQEs.
                    error!(
                        "CQ {}: resized, but the new ring is unusable (errno {errno})",
                        cq.handle()
                    );
                    state.replace_ring(None);
                    errno.code()
                }
            }
        })
    })
}

// ---- ibv_cq_ex ----

unsafe extern "C" fn start_poll(current: *mut ibv_cq_ex, _attr: *mut ibv_poll_cq_attr) -> c_int {
    boundary::guard("start_poll", Errno::EIO.code(), || {
        // SAFETY: the application passes its live ibv_cq_ex of ours.
        let Some(cq) = (unsafe { RxeCq::from_ptr(current) }) else {
            return Errno::EINVAL.code();
        };
        if !cq.lock.hold() {
            // The stock provider deadlocks on its own spin lock here.
            warn!("start_poll again before end_poll on this thread: refused");
            boundary::set_errno(Errno::EINVAL);
            return Errno::EINVAL.code();
        }
        // A panic must not leave the lock taken.
        let r = boundary::guard("start_poll", Err(Errno::EIO), || {
            // SAFETY: this thread holds the lock now.
            unsafe { cq.state_locked() }.start()
        });
        match r {
            Ok(wc) => {
                // The lock stays held until end_poll.
                cq.set_current(&wc);
                0
            }
            Err(errno) => {
                cq.lock.release_held();
                boundary::set_errno(errno);
                errno.code()
            }
        }
    })
}

unsafe extern "C" fn next_poll(current: *mut ibv_cq_ex) -> c_int {
    boundary::guard("next_poll", Errno::EIO.code(), || {
        // SAFETY: the application passes its live ibv_cq_ex of ours.
        let Some(cq) = (unsafe { RxeCq::from_ptr(current) }) else {
            return Errno::EINVAL.code();
        };
        if !cq.lock.held_here() {
            // The stock provider would read the ring unlocked.
            warn!("next_poll without a successful start_poll on this thread: refused");
            boundary::set_errno(Errno::EINVAL);
            return Errno::EINVAL.code();
        }
        // SAFETY: this thread holds the lock (a successful start_poll).
        match unsafe { cq.state_locked() }.next() {
            Ok(wc) => {
                cq.set_current(&wc);
                0
            }
            // The lock stays held: end_poll, which the application must
            // still call, releases it (upstream's double unlock was here).
            Err(errno) => {
                boundary::set_errno(errno);
                errno.code()
            }
        }
    })
}

unsafe extern "C" fn end_poll(current: *mut ibv_cq_ex) {
    boundary::guard("end_poll", (), || {
        // SAFETY: the application passes its live ibv_cq_ex of ours.
        let Some(cq) = (unsafe { RxeCq::from_ptr(current) }) else {
            return;
        };
        if !cq.lock.held_here() {
            // The stock provider would unlock whoever holds the lock.
            warn!("end_poll without a successful start_poll on this thread: ignored");
            return;
        }
        // The lock is released even if end() panics.
        boundary::guard("end_poll", (), || {
            // SAFETY: this thread holds the lock (a successful start_poll).
            unsafe { cq.state_locked() }.end()
        });
        cq.lock.release_held();
    })
}

/// Reads a field of the current CQE (our copy) for a `read_*` callback.
fn read_current<R>(entry: &'static str, current: *mut ibv_cq_ex, on_error: R, f: impl FnOnce(&ib_uverbs_wc) -> R) -> R
where
    R: Copy,
{
    boundary::guard(entry, on_error, || {
        // SAFETY: the application passes its live ibv_cq_ex of ours.
        let Some(cq) = (unsafe { RxeCq::from_ptr(current) }) else {
            return on_error;
        };
        // SAFETY: read_* is only valid between a successful start_poll and
        // end_poll, with the lock held.
        f(&unsafe { cq.state_locked() }.current)
    })
}

unsafe extern "C" fn read_opcode(current: *mut ibv_cq_ex) -> c_int {
    read_current("read_opcode", current, 0, |c| c.opcode as c_int)
}

unsafe extern "C" fn read_vendor_err(current: *mut ibv_cq_ex) -> u32 {
    read_current("read_vendor_err", current, 0, |c| c.vendor_err)
}

unsafe extern "C" fn read_byte_len(current: *mut ibv_cq_ex) -> u32 {
    read_current("read_byte_len", current, 0, |c| c.byte_len)
}

/// Big-endian, as the kernel wrote it.
unsafe extern "C" fn read_imm_data(current: *mut ibv_cq_ex) -> u32 {
    // SAFETY: both arms of the union are a u32.
    read_current("read_imm_data", current, 0, |c| unsafe { c.ex.imm_data })
}

unsafe extern "C" fn read_qp_num(current: *mut ibv_cq_ex) -> u32 {
    read_current("read_qp_num", current, 0, |c| c.qp_num)
}

unsafe extern "C" fn read_src_qp(current: *mut ibv_cq_ex) -> u32 {
    read_current("read_src_qp", current, 0, |c| c.src_qp)
}

unsafe extern "C" fn read_wc_flags(current: *mut ibv_cq_ex) -> c_uint {
    read_current("read_wc_flags", current, 0, |c| c.wc_flags as c_uint)
}

unsafe extern "C" fn read_slid(current: *mut ibv_cq_ex) -> u32 {
    read_current("read_slid", current, 0, |c| u32::from(c.slid))
}

unsafe extern "C" fn read_sl(current: *mut ibv_cq_ex) -> u8 {
    read_current("read_sl", current, 0, |c| c.sl)
}

unsafe extern "C" fn read_dlid_path_bits(current: *mut ibv_cq_ex) -> u8 {
    read_current("read_dlid_path_bits", current, 0, |c| c.dlid_path_bits)
}

#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use crate::ring::testing::FakeRing;

    /// A CQ as create_cq leaves it, on a fake ring of 8 slots (the
    /// `FakeRing` plays the kernel), with the callbacks for `wc_flags`.
    /// Free it with `Box::from_raw(cq.cast::<RxeCq>())`.
    pub(crate) fn fake_rxe_cq(wc_flags: u64) -> (FakeRing, *mut ibv_cq_ex) {
        let fq = FakeRing::new(7, 7, 0);
        let cq = RxeCq::new(ptr::null_mut(), ptr::null_mut(), -1, QueueLock::new());
        // SAFETY: the CQ is ours alone.
        unsafe {
            *cq.state.get() = PollState::new(Some(Consumer::map(fq.raw_fd(), &fq.mi, 48).unwrap()));
            set_ex_callbacks(&mut *cq.vcq.get(), wc_flags);
        }
        (fq, Box::into_raw(cq).cast::<ibv_cq_ex>())
    }
}

#[cfg(test)]
mod tests {
    use super::testing::fake_rxe_cq;
    use super::*;
    use crate::ring::testing::FakeRing;
    use kernel_abi::ib_uverbs_wc_ex;

    /// IB_UVERBS_WC_* / ibv_wc_opcode values rxe completes with.
    const OPCODES: &[u32] = &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 128, 129];

    fn cqe(i: u32, opcode: u32, status: u32) -> ib_uverbs_wc {
        let mut c = ib_uverbs_wc::new_zeroed();
        c.wr_id = 0x1000_0000_0000 + u64::from(i);
        c.status = status;
        c.opcode = opcode;
        c.vendor_err = 0x100 + i;
        c.byte_len = 0x2000 + i;
        c.ex = ib_uverbs_wc_ex {
            imm_data: 0xdead_0000 + i,
        };
        c.qp_num = 0x11 + i;
        c.src_qp = 0x22 + i;
        c.wc_flags = i % 16;
        c.pkey_index = 3;
        c.slid = 0x4400 + i as u16;
        c.sl = (i % 16) as u8;
        c.dlid_path_bits = (i % 7) as u8;
        c
    }

    fn assert_wc_is(w: &ibv_wc, c: &ib_uverbs_wc) {
        assert_eq!(w.wr_id, c.wr_id);
        assert_eq!(w.status as u32, c.status);
        assert_eq!(w.opcode as u32, c.opcode);
        assert_eq!(w.vendor_err, c.vendor_err);
        assert_eq!(w.byte_len, c.byte_len);
        // SAFETY: both unions are two u32 arms.
        assert_eq!(unsafe { w.ex.imm_data }, unsafe { c.ex.imm_data });
        assert_eq!((w.qp_num, w.src_qp, w.wc_flags), (c.qp_num, c.src_qp, c.wc_flags));
        assert_eq!(
            (w.pkey_index, w.slid, w.sl, w.dlid_path_bits),
            (c.pkey_index, c.slid, c.sl, c.dlid_path_bits)
        );
    }

    fn fake_cq(mask: u32) -> (FakeRing, PollState) {
        let fq = FakeRing::new(7, mask, 0);
        let ring = Consumer::map(fq.raw_fd(), &fq.mi, size_of::<ib_uverbs_wc>()).unwrap();
        (fq, PollState::new(Some(ring)))
    }

    fn poll_n(s: &mut PollState, n: usize) -> Vec<ibv_wc> {
        let mut out = vec![MaybeUninit::<ibv_wc>::uninit(); n];
        let got = s.poll(&mut out).unwrap();
        // SAFETY: poll initialised the first `got` entries.
        out[..got].iter().map(|w| unsafe { w.assume_init() }).collect()
    }

    #[test]
    fn every_opcode_and_status_reaches_ibv_wc_unchanged() {
        let (fq, mut s) = fake_cq(7);
        let mut i = 0;
        for &opcode in OPCODES {
            // IBV_WC_SUCCESS .. IBV_WC_GENERAL_ERR, as rxe reports them.
            for status in 0..=21 {
                let c = cqe(i, opcode, status);
                fq.produce(&c);
                let got = poll_n(&mut s, 4);
                assert_eq!(got.len(), 1);
                assert_wc_is(&got[0], &c);
                i += 1;
            }
        }
    }

    #[test]
    fn poll_takes_at_most_ne_in_order_across_the_wrap() {
        let (fq, mut s) = fake_cq(3);
        let all: Vec<_> = (0..11).map(|i| cqe(i, 0, 0)).collect();
        let mut next = 0;
        let mut seen = Vec::new();
        while seen.len() < all.len() {
            // Fill the ring (capacity 3), then drain it two at a time.
            while next < all.len()
                && !fq
                    .kernel
                    .indices()
                    .is_full(fq.kernel.producer_index(), fq.kernel.consumer_index())
            {
                fq.produce(&all[next]);
                next += 1;
            }
            let got = poll_n(&mut s, 2);
            assert!(!got.is_empty() && got.len() <= 2);
            seen.extend(got.into_iter().map(|w| w.wr_id));
            // The kernel sees the slots handed back.
            assert_eq!(fq.kernel.consumer_index(), s.cons);
        }
        assert_eq!(seen, all.iter().map(|c| c.wr_id).collect::<Vec<_>>());
        assert!(poll_n(&mut s, 2).is_empty());
    }

    #[test]
    fn ex_polling_consumes_exactly_what_it_handed_out() {
        let (fq, mut s) = fake_cq(7);
        assert_eq!(s.start().err(), Some(Errno::ENOENT));
        fq.produce(&cqe(1, 0, 0));
        // start, next (ENOENT), end, start: upstream's overrun sequence.
        assert_eq!(s.start().unwrap().wr_id, cqe(1, 0, 0).wr_id);
        assert_eq!(s.next().err(), Some(Errno::ENOENT));
        s.end();
        assert_eq!(fq.kernel.consumer_index(), 1);
        assert_eq!(s.start().err(), Some(Errno::ENOENT));
        // Three more: start + two nexts + ENOENT, then end consumes all three.
        for i in 2..5 {
            fq.produce(&cqe(i, 128, 0));
        }
        assert_eq!(s.start().unwrap().wr_id, cqe(2, 0, 0).wr_id);
        assert_eq!(s.next().unwrap().wr_id, cqe(3, 0, 0).wr_id);
        assert_eq!(s.next().unwrap().wr_id, cqe(4, 0, 0).wr_id);
        assert_eq!(s.next().err(), Some(Errno::ENOENT));
        s.end();
        assert_eq!((s.cons, fq.kernel.consumer_index()), (4, 4));
        // start then end without next consumes one.
        fq.produce(&cqe(5, 0, 0));
        fq.produce(&cqe(6, 0, 0));
        s.start().unwrap();
        s.end();
        assert_eq!(
            poll_n(&mut s, 8).iter().map(|w| w.wr_id).collect::<Vec<_>>(),
            vec![cqe(6, 0, 0).wr_id]
        );
    }

    #[test]
    fn resize_bookkeeping_follows_the_new_ring() {
        let (fq, mut s) = fake_cq(3);
        fq.produce(&cqe(0, 0, 0));
        fq.produce(&cqe(1, 0, 0));
        assert_eq!(poll_n(&mut s, 1).len(), 1);
        // The kernel's new ring: 8 slots, the unpolled CQE copied to slot 0,
        // and the consumer index where its resize left it.
        let bigger = FakeRing::new(7, 7, 4096);
        bigger.produce(&cqe(1, 0, 0));
        bigger.produce(&cqe(2, 0, 0));
        bigger.kernel.release_consumer(1);
        s.replace_ring(Some(Consumer::map(bigger.raw_fd(), &bigger.mi, 48).unwrap()));
        assert_eq!((s.cons, s.cur), (1, 1));
        assert_eq!(
            poll_n(&mut s, 8).iter().map(|w| w.wr_id).collect::<Vec<_>>(),
            vec![cqe(2, 0, 0).wr_id]
        );
        // A lost ring fails every poll rather than reading stale memory.
        s.replace_ring(None);
        let mut out = [MaybeUninit::uninit(); 1];
        assert_eq!(s.poll(&mut out), Err(Errno::EIO));
        assert_eq!(s.start().err(), Some(Errno::EIO));
        s.end();
        // A ring whose slots cannot hold a CQE is not polled (poll copies whole CQEs).
        let small = FakeRing::new(5, 7, 0);
        s.replace_ring(Some(Consumer::map(small.raw_fd(), &small.mi, 0).unwrap()));
        assert_eq!(s.poll(&mut out), Err(Errno::EIO));
    }

    #[test]
    fn create_responses_are_checked() {
        let fq = FakeRing::new(7, 7, 0);
        assert_eq!(map_cq_ring(fq.raw_fd(), &fq.mi, 5, 7).map(|(_, c)| c).ok(), Some(7));
        // Fewer than asked, more than the ring holds.
        assert_eq!(map_cq_ring(fq.raw_fd(), &fq.mi, 8, 7).err(), Some(Errno::EPROTO));
        assert_eq!(map_cq_ring(fq.raw_fd(), &fq.mi, 1, 8).err(), Some(Errno::EPROTO));
        // Slots too small for a CQE.
        let small = FakeRing::new(5, 7, 0);
        assert_eq!(map_cq_ring(small.raw_fd(), &small.mi, 1, 7).err(), Some(Errno::EPROTO));
    }

    fn init_attr(wc_flags: u64, comp_mask: u32, flags: u32) -> ibv_cq_init_attr_ex {
        ibv_cq_init_attr_ex {
            cqe: 4,
            cq_context: ptr::null_mut(),
            channel: ptr::null_mut(),
            comp_vector: 0,
            wc_flags,
            comp_mask,
            flags,
            parent_domain: ptr::null_mut(),
        }
    }

    #[test]
    fn create_cq_ex_attributes_as_stock_checks_them() {
        assert_eq!(ex_create_flags(&init_attr(SUPPORTED_WC_FLAGS, 0, 0)), Ok(0));
        for unsupported in [
            IBV_WC_EX_WITH_COMPLETION_TIMESTAMP,
            IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK,
            1 << 8,
        ] {
            assert_eq!(ex_create_flags(&init_attr(unsupported, 0, 0)), Err(Errno::EOPNOTSUPP));
        }
        assert_eq!(ex_create_flags(&init_attr(0, 1 << 2, 0)), Err(Errno::EOPNOTSUPP));
        let overrun = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN | IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
        assert_eq!(
            ex_create_flags(&init_attr(0, IBV_CQ_INIT_ATTR_MASK_FLAGS, overrun)),
            Ok(IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN)
        );
        // Flags count only with their comp_mask bit.
        assert_eq!(ex_create_flags(&init_attr(0, IBV_CQ_INIT_ATTR_MASK_PD, overrun)), Ok(0));
    }

    #[test]
    fn only_the_requested_readers_are_set() {
        let (_fq, p) = fake_rxe_cq(IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_SL);
        // SAFETY: p is a live CQ of ours, freed at the end.
        unsafe {
            let v = &*p;
            assert!(v.start_poll.is_some() && v.next_poll.is_some() && v.end_poll.is_some());
            assert!(v.read_opcode.is_some() && v.read_vendor_err.is_some() && v.read_wc_flags.is_some());
            assert!(v.read_byte_len.is_some() && v.read_sl.is_some());
            assert!(v.read_imm_data.is_none() && v.read_qp_num.is_none() && v.read_src_qp.is_none());
            assert!(v.read_slid.is_none() && v.read_dlid_path_bits.is_none() && v.read_completion_ts.is_none());
            drop(Box::from_raw(p.cast::<RxeCq>()));
        }
    }

    #[test]
    fn the_c_entries_lock_poll_and_read_as_the_api_says() {
        let (fq, p) = fake_rxe_cq(SUPPORTED_WC_FLAGS);
        // SAFETY: p is a live CQ of ours, used from this thread only and
        // freed at the end; every call follows the ibv_cq_ex protocol.
        unsafe {
            let cq = RxeCq::from_ptr(p).unwrap();
            let mut attr = ibv_poll_cq_attr { comp_mask: 0 };
            assert_eq!(start_poll(p, &mut attr), Errno::ENOENT.code());
            assert!(!cq.lock.is_locked());

            let a = cqe(7, 129, 0);
            let b = cqe(8, 2, 5);
            fq.produce(&a);
            fq.produce(&b);
            assert_eq!(start_poll(p, &mut attr), 0);
            assert!(cq.lock.is_locked());
            assert_eq!(((*p).wr_id, (*p).status), (a.wr_id, 0));
            assert_eq!(read_opcode(p), 129);
            assert_eq!(
                (read_byte_len(p), read_imm_data(p), read_qp_num(p)),
                (a.byte_len, a.ex.imm_data, a.qp_num)
            );
            assert_eq!(
                (read_src_qp(p), read_wc_flags(p), read_vendor_err(p)),
                (a.src_qp, a.wc_flags, a.vendor_err)
            );
            assert_eq!(
                (read_slid(p), read_sl(p), read_dlid_path_bits(p)),
                (u32::from(a.slid), a.sl, a.dlid_path_bits)
            );
            assert_eq!(next_poll(p), 0);
            assert_eq!(((*p).wr_id, (*p).status, read_opcode(p)), (b.wr_id, 5, 2));
            assert_eq!(next_poll(p), Errno::ENOENT.code());
            assert!(cq.lock.is_locked(), "next_poll's ENOENT keeps the lock for end_poll");
            end_poll(p);
            assert!(!cq.lock.is_locked());
            end_poll(p); // a stray end_poll is ignored, not a double unlock

            // The legacy poll on the same CQ.
            let c = cqe(9, 1, 0);
            fq.produce(&c);
            let mut wc = [MaybeUninit::<ibv_wc>::uninit(); 4];
            let ibcq = p.cast::<ibv_cq>();
            assert_eq!(poll_cq(ibcq, 4, wc.as_mut_ptr().cast()), 1);
            assert_wc_is(&wc[0].assume_init(), &c);
            assert_eq!(poll_cq(ibcq, 4, wc.as_mut_ptr().cast()), 0);
            assert_eq!(poll_cq(ibcq, 0, ptr::null_mut()), 0);
            assert_eq!(poll_cq(ibcq, 1, ptr::null_mut()), Errno::EINVAL.negative());
            assert_eq!(
                poll_cq(ptr::null_mut(), 1, wc.as_mut_ptr().cast()),
                Errno::EINVAL.negative()
            );
            assert!(!cq.lock.is_locked());
            drop(Box::from_raw(p.cast::<RxeCq>()));
        }
    }

    #[test]
    fn create_fails_with_an_errno_without_a_kernel() {
        assert_eq!(
            create(ptr::null_mut(), 4, ptr::null_mut(), 0, None, QueueLock::new()).err(),
            Some(Errno::EINVAL)
        );
        // A context whose cmd_fd is not a uverbs file: the command fails
        // before the kernel object exists, and the CQ is freed.
        let mut ctx = MaybeUninit::<ibv_context>::zeroed();
        // SAFETY: zeroed is a valid ibv_context (pointers NULL, fds 0).
        unsafe { (*ctx.as_mut_ptr()).cmd_fd = -1 };
        assert_eq!(
            create(ctx.as_mut_ptr(), 4, ptr::null_mut(), 0, None, QueueLock::new()).err(),
            Some(Errno::EBADF)
        );
        assert_eq!(
            create(ctx.as_mut_ptr(), 4, ptr::null_mut(), 0, Some(0), QueueLock::new()).err(),
            Some(Errno::EBADF)
        );
    }
}
