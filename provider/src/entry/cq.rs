//! The C entries of completion queues and `ibv_cq_ex`: the verbs ops
//! (`create_cq`, `create_cq_ex`, `destroy_cq`, `poll_cq`, `req_notify_cq`,
//! `resize_cq`), the `ibv_cq_ex` callbacks, the purge a QP's reset or destroy
//! runs on its CQs, and the raw access to our CQ they share: the `ibv_cq_ex`
//! fields libibverbs shares with us, and the poll state under the CQ's lock.
//! What the entries do is in `cq::*`.

use core::ffi::{c_int, c_uint, c_void};
use core::mem::MaybeUninit;
use core::ptr::{self, addr_of_mut, NonNull};
use core::sync::atomic::Ordering;

use kernel_abi::{ib_uverbs_destroy_cq_resp, ib_uverbs_wc, ib_uverbs_wc_ex};
use log::warn;

use crate::boundary;
use crate::cq::control::{self, destroy_kernel_cq, ex_create_flags, single_threaded, CreateArgs};
use crate::cq::object::{purge_qp_from_both, RxeCq};
use crate::cq::poll::{poll_answer, poll_cq_slow};
use crate::cq::poll_state::PollState;
use crate::cq::purge::{Purge, PurgeQueue};
use crate::errno::Errno;
use crate::libibverbs::control_objects::ibv_pd;
use crate::libibverbs::cq::*;
use crate::libibverbs::device_context::ibv_context;
use crate::lifecycle;
use crate::lock::QueueLock;
use crate::pd::{self, DomainUse, RxePd};

impl RxeCq {
    /// # Safety
    /// `cq` is NULL or a CQ our `create_cq`/`create_cq_ex` returned and that
    /// is not destroyed (true for every CQ libibverbs passes to our ops).
    #[inline(always)]
    pub(crate) unsafe fn from_ptr<'a, T>(cq: *mut T) -> Option<&'a RxeCq> {
        // SAFETY: per the contract; vcq is at offset 0 of a live RxeCq.
        unsafe { cq.cast::<RxeCq>().as_ref() }
    }

    /// Sets `ibv_cq.cqe` after a resize.
    pub(crate) fn set_cqe(&self, cqe: c_int) {
        // SAFETY: cqe is ours to write; readers of it expect it to change
        // only in resize_cq.
        unsafe { addr_of_mut!((*self.vcq()).cqe).write(cqe) };
    }

    /// Runs `f` on the poll state with the lock held (released on return
    /// and on unwind); EDEADLK inside this thread's `start_poll`.
    #[inline(always)]
    pub(crate) fn locked<R>(&self, f: impl FnOnce(&mut PollState) -> R) -> Result<R, Errno> {
        // SAFETY: the lock is held while f runs, so this is the only reference.
        self.lock.with(|| f(unsafe { &mut *self.state.get() }))
    }

    /// [`locked`](Self::locked) when the lock is free now; `None` (nothing run) otherwise
    /// ([`QueueLock::try_with`]).
    #[inline(always)]
    pub(crate) fn try_locked<R>(&self, f: impl FnOnce(&mut PollState) -> R) -> Option<R> {
        // SAFETY: the lock is held while f runs, so this is the only reference.
        self.lock.try_with(|| f(unsafe { &mut *self.state.get() }))
    }

    /// Runs `f` on the poll state if the CQ has a lock and it is free now, and no pair is open
    /// (a pair holds the lock); `None` (nothing run, nothing waited for) otherwise
    /// ([`QueueLock::try_acquire_now`]).
    pub(crate) fn try_locked_now<R>(&self, f: impl FnOnce(&mut PollState) -> R) -> Option<R> {
        if !self.lock.try_acquire_now() {
            return None;
        }
        // SAFETY: we hold the lock and no pair is open (it would hold the lock): no other
        // reference to the poll state lives while f runs; then we release what we took.
        unsafe {
            let r = f(&mut *self.state.get());
            self.lock.release();
            Some(r)
        }
    }

    /// # Safety
    /// A pair is open on the lock (between a successful `start_poll` and
    /// `end_poll`, on whichever thread continues it, one at a time, as the
    /// `ibv_cq_ex` API requires), or the caller took the lock for a call.
    #[allow(clippy::mut_from_ref)]
    #[inline(always)]
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

impl PurgeQueue {
    /// Queues a purge of `qp_num` with a snapshot of the ring's indices;
    /// `false` (nothing queued) when there is nothing it could drop (no
    /// ring, or an empty one).
    pub(crate) fn push(&self, qp_num: u32, keep_receives: bool) -> bool {
        let mut p = self.pending();
        let Some(view) = p.view else {
            return false;
        };
        // SAFETY: the view is replaced, under this mutex, before its ring
        // is unmapped (cq::purge: ring_changed, around_resize; the CQ drops
        // its poll state, and the ring with it, only when nothing can push).
        let (from, end) = unsafe { (view.consumer_index(), view.produced()) };
        if from == end {
            return false;
        }
        p.purges.push(Purge {
            qp_num,
            keep_receives,
            from,
            end,
        });
        self.queued.store(true, Ordering::Release);
        true
    }
}

/// Drops `qp_num`'s completions from the CQs of a QP that went to RESET or is destroyed
/// ([`RxeCq::purge_qp`]), once if they are one CQ; `has_srq` keeps its receive completions.
///
/// # Safety
/// Each CQ is NULL or a CQ our create made and that is not destroyed (the
/// `send_cq`/`recv_cq` of a live QP of ours: libibverbs keeps a CQ with
/// QPs from being destroyed).
pub(crate) unsafe fn purge_qp_from_cqs(send_cq: *mut c_void, recv_cq: *mut c_void, qp_num: u32, has_srq: bool) {
    // SAFETY: per the contract.
    let (send, recv) = unsafe { (RxeCq::from_ptr(send_cq), RxeCq::from_ptr(recv_cq)) };
    purge_qp_from_both(send, recv, qp_num, has_srq);
}

/// Fills the `ibv_cq_ex` callbacks: the poll trio and the readers the
/// application asked for.
pub(crate) fn set_ex_callbacks(vcq: &mut ibv_cq_ex, wc_flags: u64) {
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

/// The immediate data of a CQE (big-endian, as the kernel wrote it).
#[inline]
pub(crate) fn cqe_imm_data(c: &ib_uverbs_wc) -> u32 {
    let ex: &ib_uverbs_wc_ex = &c.ex;
    // SAFETY: both arms of the union are a u32.
    unsafe { ex.imm_data }
}

/// The immediate data of a completion as `poll_cq` wrote it.
#[cfg(test)]
pub(crate) fn wc_imm_data(w: &ibv_wc) -> u32 {
    // SAFETY: both arms of the union are a u32.
    unsafe { w.ex.imm_data }
}

/// [`PollState::poll`] into a vector of `n` at most: what it wrote.
#[cfg(test)]
pub(crate) fn poll_to_vec(s: &mut PollState, n: usize) -> Result<Vec<ibv_wc>, Errno> {
    let mut out = vec![MaybeUninit::<ibv_wc>::uninit(); n];
    let got = s.poll(&mut out)?;
    out.truncate(got);
    // SAFETY: poll initialised the first `got` entries; MaybeUninit<T> is a T in memory.
    Ok(out.into_iter().map(|w| unsafe { w.assume_init() }).collect())
}

/// Reads what a create needs through the pointers libibverbs passed: the command fd and the
/// channel's fd; EINVAL for a NULL context.
///
/// # Safety
/// `context` is NULL or our live context; `channel` is NULL or the application's live
/// `ibv_comp_channel`.
unsafe fn create_args(
    context: *mut ibv_context,
    cqe: c_int,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> Result<CreateArgs, Errno> {
    if context.is_null() {
        return Err(Errno::EINVAL);
    }
    // SAFETY: per the contract (not NULL: tested); cmd_fd is set for the context's life, and
    // a channel's fd for the channel's.
    let (fd, comp_channel) = unsafe { ((*context).cmd_fd, channel.as_ref().map_or(-1, |c| c.fd)) };
    Ok(CreateArgs {
        context,
        fd,
        channel,
        comp_channel,
        cqe,
        comp_vector,
    })
}

/// `verbs_context_ops.create_cq`
pub(crate) unsafe extern "C" fn create_cq(
    context: *mut ibv_context,
    cqe: c_int,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    boundary::guard("create_cq", ptr::null_mut(), || {
        // SAFETY: libibverbs passes our context and the application's channel (or NULL).
        let created = unsafe { create_args(context, cqe, channel, comp_vector) }
            .and_then(|args| control::create(&args, None, QueueLock::new()));
        match created {
            Ok(cq) => cq.finish().as_ptr().cast::<ibv_cq>(),
            Err(errno) => boundary::fail_ptr(errno),
        }
    })
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
        let with_pd = attr.comp_mask & IBV_CQ_INIT_ATTR_MASK_PD != 0;
        let created = ex_create_flags(attr).and_then(|flags| {
            let (cqe, comp_vector) = (attr.cqe as c_int, attr.comp_vector as c_int);
            let parent_domain = attr.parent_domain.cast::<ibv_pd>();
            // SAFETY: libibverbs passes our context; the channel is the application's (or
            // NULL); a PD given (its comp_mask bit set) is one of ours or NULL (RxePd::from_ibv and
            // DomainUse::of take NULL).
            let (args, (pd_lock, domain)) = unsafe {
                (
                    create_args(context, cqe, attr.channel, comp_vector)?,
                    if with_pd {
                        (
                            pd::lock_on(RxePd::from_ibv(parent_domain)),
                            DomainUse::of(parent_domain),
                        )
                    } else {
                        (QueueLock::new(), DomainUse::none())
                    },
                )
            };
            // A parent domain with a TD: no lock. Anything else given as
            // the PD is ignored, as the stock provider ignores it (mlx5
            // refuses what is not a parent domain; verbs-diff compares
            // with stock).
            let lock = if single_threaded(attr) {
                // The application promised one thread at a time (man
                // ibv_create_cq_ex): no lock, as on a thread domain.
                QueueLock::unlocked()
            } else if with_pd {
                pd_lock
            } else {
                QueueLock::new()
            };
            let mut cq = control::create(&args, Some(flags), lock)?;
            cq.get_mut().domain = domain;
            Ok(cq)
        });
        match created {
            Ok(mut cq) => {
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
        // SAFETY: the CQ came from Creating::finish in create_cq(_ex);
        // libibverbs does not use it after a successful destroy. Freeing
        // it unmaps the ring. The wait: libibverbs initialised mutex/cond
        // (verbs_init_cq) and updates the counters under that mutex
        // (ibv_ack_cq_events, ibv_ack_async_event); the kernel reports no
        // more events for this CQ once its destroy succeeded.
        let destroyed = unsafe {
            lifecycle::destroy(
                obj,
                || destroy_kernel_cq(fd, handle),
                |resp: &ib_uverbs_destroy_cq_resp| {
                    lifecycle::wait_for_acks(addr_of_mut!((*vcq).mutex), addr_of_mut!((*vcq).cond), || {
                        ptr::read_volatile(addr_of_mut!((*vcq).comp_events_completed)) == resp.comp_events_reported
                            && ptr::read_volatile(addr_of_mut!((*vcq).async_events_completed))
                                == resp.async_events_reported
                    })
                },
            )
        };
        match destroyed {
            Ok(()) => 0,
            Err(errno) => errno.code(),
        }
    })
}

/// An entry on a CQ that stays: `body` on the caller's CQ under the entry's
/// panic guard (EIO); EINVAL for a NULL CQ. (Not for destroy_cq: `body`'s
/// reference lives across the whole call.)
///
/// # Safety
/// `ibcq` is NULL or a live CQ of ours ([`RxeCq::from_ptr`]).
unsafe fn on_cq(entry: &'static str, ibcq: *mut ibv_cq, body: impl FnOnce(&RxeCq) -> c_int) -> c_int {
    boundary::guard(entry, Errno::EIO.code(), || {
        // SAFETY: per the contract.
        let Some(cq) = (unsafe { RxeCq::from_ptr(ibcq) }) else {
            return Errno::EINVAL.code();
        };
        body(cq)
    })
}

/// `verbs_context_ops.req_notify_cq`: arms the CQ for its next (solicited)
/// completion event ([`RxeCq::req_notify`]).
pub(crate) unsafe extern "C" fn req_notify_cq(ibcq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    // SAFETY: libibverbs passes a live CQ of ours.
    unsafe {
        on_cq("req_notify_cq", ibcq, |cq| match cq.req_notify(solicited_only != 0) {
            Ok(()) => 0,
            Err(errno) => errno.code(),
        })
    }
}

/// `verbs_context_ops.resize_cq` ([`RxeCq::resize`]).
pub(crate) unsafe extern "C" fn resize_cq(ibcq: *mut ibv_cq, cqe: c_int) -> c_int {
    // SAFETY: libibverbs passes a live CQ of ours.
    unsafe { on_cq("resize_cq", ibcq, |cq| cq.resize(cqe)) }
}

/// `verbs_context_ops.poll_cq`: how many completions were written to `wc`,
/// or a negative errno.
pub(crate) unsafe extern "C" fn poll_cq(ibcq: *mut ibv_cq, ne: c_int, wc: *mut ibv_wc) -> c_int {
    boundary::guard("poll_cq", Errno::EIO.negative(), || {
        // One test for the usual call; the refused and the empty ones out of line.
        if ibcq.is_null() || wc.is_null() || ne <= 0 {
            return poll_cq_refused(ibcq, ne, wc);
        }
        // SAFETY: libibverbs passes a live CQ of ours (not null: tested); the caller provides
        // room for `ne` (> 0) ibv_wc at wc, which we only write whole, through MaybeUninit.
        let (cq, out) = unsafe {
            (
                RxeCq::from_ptr(ibcq),
                core::slice::from_raw_parts_mut(wc.cast::<MaybeUninit<ibv_wc>>(), ne as usize),
            )
        };
        let Some(cq) = cq else {
            return Errno::EINVAL.negative();
        };
        // A purge queued by a QP's reset or destroy (cq::purge): applied
        // first, out of line. Tested before the lock: a purge queued after
        // this load is concurrent with this poll, which may then see what it
        // drops; one that returned before this poll began is seen here.
        if cq.purge.is_queued() {
            return poll_cq_slow(cq, out);
        }
        // The lock free now: the usual call. Taken by another thread, or refused, out of line.
        cq.try_locked(|s| poll_answer(s.poll(out)))
            .unwrap_or_else(|| poll_cq_slow(cq, out))
    })
}

/// [`poll_cq`]'s answer when `ibcq` or `wc` is null or `ne` <= 0: EINVAL
/// for a null CQ, then nothing polled for `ne` <= 0, then EINVAL for a null `wc`.
#[cold]
#[inline(never)]
fn poll_cq_refused(ibcq: *mut ibv_cq, ne: c_int, wc: *mut ibv_wc) -> c_int {
    if ibcq.is_null() {
        Errno::EINVAL.negative()
    } else if ne <= 0 {
        0
    } else {
        debug_assert!(wc.is_null());
        Errno::EINVAL.negative()
    }
}

unsafe extern "C" fn start_poll(current: *mut ibv_cq_ex, _attr: *mut ibv_poll_cq_attr) -> c_int {
    boundary::guard("start_poll", Errno::EIO.code(), || {
        // SAFETY: the application passes its live ibv_cq_ex of ours.
        let Some(cq) = (unsafe { RxeCq::from_ptr(current) }) else {
            return Errno::EINVAL.code();
        };
        if let Err(errno) = cq.lock.hold() {
            // The stock provider deadlocks on its own spin lock here.
            warn!("start_poll again before end_poll on this thread: refused");
            boundary::set_errno(errno);
            return errno.code();
        }
        // A panic must not leave the lock taken.
        let r = boundary::guard("start_poll", Err(Errno::EIO), || {
            // SAFETY: this thread holds the lock now.
            cq.start_pair(unsafe { cq.state_locked() })
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

/// Why an `ibv_cq_ex` callback that continues a pair does not: see [`in_pair`].
enum NotInPair {
    NoCq,
    NoPair,
}

/// The CQ of an `ibv_cq_ex` callback that continues a pair (`next_poll`, `end_poll`, the
/// `read_*`) and its poll state, which the open pair holds the lock of.
///
/// # Safety
/// `current` is NULL or our live `ibv_cq_ex`, and a pair open on it is continued by one thread
/// at a time, as the `ibv_cq_ex` API requires of the application.
#[inline(always)]
unsafe fn in_pair<'a>(current: *mut ibv_cq_ex) -> Result<(&'a RxeCq, &'a mut PollState), NotInPair> {
    // SAFETY: per the contract; with the pair open (a successful start_poll holds the lock)
    // the poll state is the continuing thread's alone.
    unsafe {
        let cq = RxeCq::from_ptr(current).ok_or(NotInPair::NoCq)?;
        if !cq.lock.pair_open() {
            return Err(NotInPair::NoPair);
        }
        Ok((cq, cq.state_locked()))
    }
}

unsafe extern "C" fn next_poll(current: *mut ibv_cq_ex) -> c_int {
    boundary::guard("next_poll", Errno::EIO.code(), || {
        // SAFETY: the application passes its live ibv_cq_ex of ours.
        let (cq, state) = match unsafe { in_pair(current) } {
            Ok(in_pair) => in_pair,
            Err(NotInPair::NoCq) => return Errno::EINVAL.code(),
            Err(NotInPair::NoPair) => {
                // The stock provider would read the ring unlocked.
                warn!("next_poll without a successful start_poll: refused");
                boundary::set_errno(Errno::EINVAL);
                return Errno::EINVAL.code();
            }
        };
        match state.next() {
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
        let (cq, state) = match unsafe { in_pair(current) } {
            Ok(in_pair) => in_pair,
            Err(NotInPair::NoCq) => return,
            Err(NotInPair::NoPair) => {
                // The stock provider would unlock whoever holds the lock.
                warn!("end_poll without a successful start_poll: refused");
                return;
            }
        };
        // The lock is released even if end() panics.
        boundary::guard("end_poll", (), || cq.end_pair(state));
        cq.lock.release_held();
    })
}

/// Reads a field of the current CQE (our copy) for a `read_*` callback.
fn read_current<R>(entry: &'static str, current: *mut ibv_cq_ex, on_error: R, f: impl FnOnce(&ib_uverbs_wc) -> R) -> R
where
    R: Copy,
{
    boundary::guard(entry, on_error, || {
        // SAFETY: the application passes its live ibv_cq_ex of ours (read_* are its
        // callbacks, valid only between a successful start_poll and end_poll).
        match unsafe { in_pair(current) } {
            Ok((_, state)) => f(&state.current),
            Err(NotInPair::NoCq) => on_error,
            Err(NotInPair::NoPair) => {
                warn!("{entry} outside start_poll/end_poll: refused");
                on_error
            }
        }
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
    read_current("read_imm_data", current, 0, cqe_imm_data)
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
mod tests {
    use core::ptr;

    use super::*;
    use crate::cq::poll::SUPPORTED_WC_FLAGS;
    use crate::cq::testing::{assert_wc_is, cqe, fake_cq, fake_rxe_cq, fake_rxe_cq_with};
    use crate::cq::testing::{flush_wc as wc, A, B, C};
    use crate::ring::testing::FakeRing;
    use crate::ring::Consumer;

    /// The CQ of a test: made by `fake_rxe_cq*`, freed by [`free`] after its last use.
    fn cq_of(cq: *mut ibv_cq_ex) -> &'static RxeCq {
        // SAFETY: the tests' CQs live until `free`, which comes after every use.
        unsafe { RxeCq::from_ptr(cq) }.unwrap()
    }

    #[test]
    fn only_the_requested_readers_are_set() {
        let (_fq, mut cq) = fake_cq(IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_SL, QueueLock::new());
        let v = cq.vcq.get_mut();
        assert!(v.start_poll.is_some() && v.next_poll.is_some() && v.end_poll.is_some());
        assert!(v.read_opcode.is_some() && v.read_vendor_err.is_some() && v.read_wc_flags.is_some());
        assert!(v.read_byte_len.is_some() && v.read_sl.is_some());
        assert!(v.read_imm_data.is_none() && v.read_qp_num.is_none() && v.read_src_qp.is_none());
        assert!(v.read_slid.is_none() && v.read_dlid_path_bits.is_none() && v.read_completion_ts.is_none());
    }

    #[test]
    fn a_create_without_a_context_or_attributes_is_einval() {
        let errno = || std::io::Error::last_os_error().raw_os_error();
        // SAFETY: the entries refuse NULL before they follow any pointer.
        unsafe {
            assert!(create_cq(ptr::null_mut(), 4, ptr::null_mut(), 0).is_null());
            assert_eq!(errno(), Some(Errno::EINVAL.code()));
            boundary::set_errno(Errno::EIO);
            assert!(create_cq_ex(ptr::null_mut(), ptr::null_mut()).is_null());
            assert_eq!(errno(), Some(Errno::EINVAL.code()));
            boundary::set_errno(Errno::EIO);
            let mut attr = ibv_cq_init_attr_ex {
                cqe: 4,
                cq_context: ptr::null_mut(),
                channel: ptr::null_mut(),
                comp_vector: 0,
                wc_flags: 0,
                comp_mask: 0,
                flags: 0,
                parent_domain: ptr::null_mut(),
            };
            assert!(create_cq_ex(ptr::null_mut(), &mut attr).is_null());
            assert_eq!(errno(), Some(Errno::EINVAL.code()));
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
    fn a_poll_opened_on_one_thread_is_continued_and_closed_on_another() {
        let (fq, p) = fake_rxe_cq(SUPPORTED_WC_FLAGS);
        let (a, b) = (cqe(1, 0, 0), cqe(2, 0, 0));
        fq.produce(&a);
        fq.produce(&b);
        let mut attr = ibv_poll_cq_attr { comp_mask: 0 };
        // SAFETY: p is a live CQ of ours, freed at the end; the threads take
        // turns (join), as the ibv_cq_ex contract asks: one at a time.
        unsafe {
            let cq = RxeCq::from_ptr(p).unwrap();
            assert_eq!(start_poll(p, &mut attr), 0);
            // What would deadlock on the opening thread is refused.
            assert_eq!(start_poll(p, &mut attr), Errno::EDEADLK.code());
            let mut wc = [MaybeUninit::<ibv_wc>::uninit(); 1];
            assert_eq!(poll_cq(p.cast(), 1, wc.as_mut_ptr().cast()), Errno::EDEADLK.negative());
            assert_eq!((*p).wr_id, a.wr_id);
            let addr = p as usize;
            std::thread::spawn(move || {
                let p = addr as *mut ibv_cq_ex;
                assert_eq!(next_poll(p), 0);
                assert_eq!((*p).wr_id, b.wr_id);
                assert_eq!(read_qp_num(p), b.qp_num);
                end_poll(p);
            })
            .join()
            .unwrap();
            assert!(!cq.lock.is_locked(), "the other thread's end_poll closed the poll");
            // Both were consumed once: not delivered again.
            assert_eq!(start_poll(p, &mut attr), Errno::ENOENT.code());
            // Outside a poll, the readers refuse (the poll state is not theirs).
            assert_eq!(read_qp_num(p), 0);
            drop(Box::from_raw(p.cast::<RxeCq>()));
        }
    }

    /// Threads polling one CQ while the kernel produces: two through `ibv_poll_cq`, one through
    /// `start_poll`/`next_poll`/`end_poll`. The CQ's lock serialises the consumers, so every
    /// completion is delivered exactly once, to one of them. ThreadSanitizer runs it
    /// (tests/check.sh, docs/safety.md): the poll state is the pollers' shared data.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "threads spinning on a ring: a run cut to a tenth had not ended after 8 minutes under Miri; ThreadSanitizer runs it"
    )]
    fn threads_polling_one_cq_take_each_completion_once() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        const N: usize = 600;
        /// The fake kernel's side, producing from a thread of its own as rxe does from another
        /// CPU.
        struct Kernel<'a>(&'a crate::ring::testing::FakeRing);
        // SAFETY: the kernel's side writes free slots and the producer index and reads the
        // consumer index, all through the shared mapping, as the kernel does concurrently.
        unsafe impl Send for Kernel<'_> {}
        let (fq, p) = fake_rxe_cq(SUPPORTED_WC_FLAGS);
        let addr = p as usize;
        let taken = AtomicUsize::new(0);
        let kernel = Kernel(&fq);
        let mut seen: Vec<u64> = std::thread::scope(|s| {
            let taken = &taken;
            s.spawn(move || {
                let fq = kernel.0;
                let k = &fq.kernel;
                for i in 0..N {
                    while k.indices().is_full(k.producer_index(), k.consumer_index()) {
                        std::thread::yield_now();
                    }
                    let mut c = cqe(0, 0, 0);
                    c.wr_id = i as u64;
                    fq.produce(&c);
                }
            });
            let pollers: Vec<_> = (0..3)
                .map(|t| {
                    s.spawn(move || {
                        let p = addr as *mut ibv_cq_ex;
                        let mut mine = Vec::new();
                        while taken.load(Ordering::Relaxed) < N {
                            let before = mine.len();
                            // SAFETY: the test's live CQ (freed after the threads end); each
                            // call follows the verbs' contract.
                            unsafe {
                                if t == 0 {
                                    let mut attr = ibv_poll_cq_attr { comp_mask: 0 };
                                    if start_poll(p, &mut attr) == 0 {
                                        mine.push((*p).wr_id);
                                        while next_poll(p) == 0 {
                                            mine.push((*p).wr_id);
                                        }
                                        end_poll(p);
                                    }
                                } else {
                                    let mut wc = [MaybeUninit::<ibv_wc>::uninit(); 4];
                                    let n = poll_cq(p.cast(), 4, wc.as_mut_ptr().cast());
                                    assert!(n >= 0, "poll_cq: {n}");
                                    for w in &wc[..n as usize] {
                                        mine.push(w.assume_init_ref().wr_id);
                                    }
                                }
                            }
                            if mine.len() == before {
                                std::thread::yield_now();
                            }
                            taken.fetch_add(mine.len() - before, Ordering::Relaxed);
                        }
                        mine
                    })
                })
                .collect();
            pollers.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        seen.sort_unstable();
        assert_eq!(seen, (0..N as u64).collect::<Vec<_>>());
        // The threads are done with it.
        free(p);
    }

    fn poll_cq_ids(cq: *mut ibv_cq_ex) -> Vec<(u32, u64)> {
        let mut out = vec![MaybeUninit::<ibv_wc>::uninit(); 16];
        // SAFETY: our live fake CQ; room for 16, of which poll_cq initialised the first n.
        unsafe {
            let n = poll_cq(cq.cast(), 16, out.as_mut_ptr().cast());
            assert!(n >= 0, "poll_cq: {n}");
            out[..n as usize]
                .iter()
                .map(|w| w.assume_init())
                .map(|w| (w.qp_num, w.wr_id))
                .collect()
        }
    }

    /// start_poll, next_poll until ENOENT, end_poll through the CQ's callbacks: what the pair saw.
    fn ex_poll_ids(cq: *mut ibv_cq_ex) -> Vec<(u32, u64)> {
        let mut seen = Vec::new();
        // SAFETY: our live fake CQ with its ex callbacks (made with IBV_WC_EX_WITH_QP_NUM).
        unsafe {
            let v = &*cq;
            let mut attr = ibv_poll_cq_attr { comp_mask: 0 };
            if v.start_poll.unwrap()(cq, &mut attr) != 0 {
                return seen;
            }
            loop {
                seen.push((v.read_qp_num.unwrap()(cq), (*cq).wr_id));
                if v.next_poll.unwrap()(cq) != 0 {
                    break;
                }
            }
            v.end_poll.unwrap()(cq);
        }
        seen
    }

    /// A fake CQ with `lock`, reading QP numbers, after the kernel produced a flush completion
    /// of each `(qp_num, wr_id)`.
    fn cq_holding(lock: QueueLock, completions: &[(u32, u64)]) -> (FakeRing, *mut ibv_cq_ex) {
        let (fq, cq) = fake_rxe_cq_with(IBV_WC_EX_WITH_QP_NUM, lock);
        for &(qp, id) in completions {
            fq.produce(&wc(qp, id));
        }
        (fq, cq)
    }

    fn free(cq: *mut ibv_cq_ex) {
        // SAFETY: a fake CQ made by fake_rxe_cq*, freed once.
        drop(unsafe { Box::from_raw(cq.cast::<RxeCq>()) });
    }

    #[test]
    fn a_free_cq_is_purged_at_once_and_once_for_one_cq() {
        let (fq, cq) = cq_holding(QueueLock::new(), &[(A, 1), (B, 2), (A, 3)]);
        let cq_ref = cq_of(cq);
        // SAFETY: our live fake CQ; NULL is allowed.
        unsafe {
            // Send and receive CQ the same: purged once.
            purge_qp_from_cqs(cq.cast(), cq.cast(), A, false);
            assert_eq!(fq.kernel.consumer_index(), 2, "applied before the call returned");
            assert!(!cq_ref.purge.is_queued() && !cq_ref.lock.is_locked());
            purge_qp_from_cqs(core::ptr::null_mut(), cq.cast(), B, false);
        }
        assert_eq!(fq.kernel.consumer_index(), 3);
        // An empty CQ queues nothing.
        cq_ref.purge_qp(A, false);
        assert!(!cq_ref.purge.is_queued());
        free(cq);
    }

    #[test]
    fn a_cq_held_by_another_threads_pair_is_purged_by_its_end_poll() {
        let (fq, cq) = cq_holding(QueueLock::new(), &[(A, 1), (B, 2), (A, 3)]);
        let addr = cq as usize;
        let (to_poller, poller_rx) = std::sync::mpsc::channel::<()>();
        let (to_main, main_rx) = std::sync::mpsc::channel::<Vec<(u32, u64)>>();
        let poller = std::thread::spawn(move || {
            let cq = addr as *mut ibv_cq_ex;
            let mut attr = ibv_poll_cq_attr { comp_mask: 0 };
            // SAFETY: the live fake CQ of the test, polled by this thread only.
            unsafe {
                let v = &*cq;
                assert_eq!(v.start_poll.unwrap()(cq, &mut attr), 0);
                let first = (v.read_qp_num.unwrap()(cq), (*cq).wr_id);
                to_main.send(vec![first]).unwrap();
                // The reset happens now, while this pair holds the CQ.
                poller_rx.recv().unwrap();
                let mut rest = Vec::new();
                while v.next_poll.unwrap()(cq) == 0 {
                    rest.push((v.read_qp_num.unwrap()(cq), (*cq).wr_id));
                }
                v.end_poll.unwrap()(cq);
                to_main.send(rest).unwrap();
            }
        });
        assert_eq!(main_rx.recv().unwrap(), vec![(A, 1)]);
        let cq_ref = cq_of(cq);
        cq_ref.purge_qp(B, false);
        assert!(cq_ref.purge.is_queued(), "queued for the holder, not waited for");
        assert_eq!(
            fq.kernel.consumer_index(),
            0,
            "the ring untouched while the pair holds it"
        );
        to_poller.send(()).unwrap();
        // The pair keeps its view of what was there when it opened...
        assert_eq!(main_rx.recv().unwrap(), vec![(B, 2), (A, 3)]);
        poller.join().unwrap();
        // ...and its end_poll applied the purge (nothing left to drop: all consumed).
        assert!(!cq_ref.purge.is_queued());
        assert_eq!(fq.kernel.consumer_index(), 3);
        free(cq);
    }

    #[test]
    fn this_threads_own_open_pair_defers_the_purge_to_its_end_poll() {
        let (fq, cq) = cq_holding(QueueLock::new(), &[(A, 1), (B, 2), (A, 3), (C, 4)]);
        let mut attr = ibv_poll_cq_attr { comp_mask: 0 };
        // SAFETY: our live fake CQ, this thread only.
        unsafe {
            let v = &*cq;
            assert_eq!(v.start_poll.unwrap()(cq, &mut attr), 0);
            assert_eq!((*cq).wr_id, 1);
            // Reset a QP of this CQ from inside the pair: no deadlock, no wait.
            cq_of(cq).purge_qp(A, false);
            v.end_poll.unwrap()(cq);
        }
        // end_poll consumed (A, 1) and dropped (A, 3).
        assert_eq!(poll_cq_ids(cq), vec![(B, 2), (C, 4)]);
        assert_eq!(fq.kernel.consumer_index(), 4);
        free(cq);
    }

    #[test]
    fn a_busy_cq_drops_the_qps_completions_at_its_next_poll() {
        let (fq, cq) = cq_holding(QueueLock::new(), &[(A, 1), (B, 2), (A, 3)]);
        let cq_ref = cq_of(cq);
        // A poll_cq in progress on another thread: the lock is taken.
        cq_ref
            .locked(|_| {
                cq_ref.purge_qp(A, false);
                assert_eq!(fq.kernel.consumer_index(), 0);
            })
            .unwrap();
        // The QP leaves RESET and completes new work before anyone polls: kept.
        fq.produce(&wc(A, 5));
        assert_eq!(ex_poll_ids(cq), vec![(B, 2), (A, 5)]);
        free(cq);
    }

    #[test]
    fn a_thread_domain_cq_is_purged_by_its_own_next_poll_only() {
        let (fq, cq) = cq_holding(QueueLock::unlocked(), &[(A, 1), (B, 2), (A, 3)]);
        let addr = cq as usize;
        // The reset on another thread than the CQ's user: the ring is not touched.
        std::thread::spawn(move || {
            cq_of(addr as *mut ibv_cq_ex).purge_qp(A, false);
        })
        .join()
        .unwrap();
        assert_eq!(fq.kernel.consumer_index(), 0);
        fq.produce(&wc(A, 4));
        assert_eq!(poll_cq_ids(cq), vec![(B, 2), (A, 4)]);
        // And through start_poll.
        fq.produce(&wc(B, 5));
        fq.produce(&wc(C, 6));
        cq_of(cq).purge_qp(B, false);
        assert_eq!(ex_poll_ids(cq), vec![(C, 6)]);
        free(cq);
    }

    #[test]
    fn a_resize_applies_the_queue_to_the_old_ring() {
        let (fq, cq) = cq_holding(QueueLock::new(), &[(A, 1), (B, 2)]);
        let cq_ref = cq_of(cq);
        let bigger = FakeRing::new(7, 15, 4096);
        bigger.produce(&wc(B, 2));
        bigger.produce(&wc(A, 3));
        // The lock held (a resize_cq): the purge is queued, and the resize applies it.
        cq_ref
            .locked(|state| {
                cq_ref.purge_qp(A, false);
                cq_ref.purge.around_resize(state, |s| {
                    assert_eq!(fq.kernel.consumer_index(), 1, "applied to the old ring first");
                    s.replace_ring(Some(Consumer::map(bigger.raw_fd(), &bigger.mi, 48).unwrap()));
                });
            })
            .unwrap();
        // The new ring's snapshots come from it.
        cq_ref.purge_qp(A, false);
        assert_eq!(poll_cq_ids(cq), vec![(B, 2)]);
        free(cq);
    }
}
