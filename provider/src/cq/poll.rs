//! The poll paths of a CQ: `poll_cq`, and the `ibv_cq_ex` API
//! (`start_poll`/`next_poll`/`end_poll` and the `read_*` callbacks the
//! application asked for). `ibv_cq_ex` takes the CQ lock in `start_poll` and
//! drops it in `end_poll` (or in a `start_poll` that finds nothing), hence a
//! raw lock that records its holder; `poll_cq` holds it for the call.

use core::ffi::{c_int, c_uint};
use core::mem::MaybeUninit;

use kernel_abi::ib_uverbs_wc;
use log::warn;

use super::object::RxeCq;
use crate::boundary;
use crate::errno::Errno;
use crate::libibverbs::cq::*;

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

/// Fills the `ibv_cq_ex` callbacks: the poll trio and the readers the
/// application asked for.
pub(super) fn set_ex_callbacks(vcq: &mut ibv_cq_ex, wc_flags: u64) {
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

/// `verbs_context_ops.poll_cq`: how many completions were written to `wc`,
/// or a negative errno.
pub(crate) unsafe extern "C" fn poll_cq(ibcq: *mut ibv_cq, ne: c_int, wc: *mut ibv_wc) -> c_int {
    boundary::guard("poll_cq", Errno::EIO.negative(), || {
        // One test for the usual call; the refused and the empty ones out of line.
        if ibcq.is_null() || wc.is_null() || ne <= 0 {
            return poll_cq_refused(ibcq, ne, wc);
        }
        // SAFETY: libibverbs passes a live CQ of ours (not null: tested).
        let Some(cq) = (unsafe { RxeCq::from_ptr(ibcq) }) else {
            return Errno::EINVAL.negative();
        };
        // SAFETY: the caller provides room for `ne` (> 0) ibv_wc at wc; we
        // only write whole entries through MaybeUninit.
        let out = unsafe { core::slice::from_raw_parts_mut(wc.cast::<MaybeUninit<ibv_wc>>(), ne as usize) };
        // A purge queued by a QP's reset or destroy (cq::purge): applied
        // first, out of line. Tested before the lock: a purge queued after
        // this load is concurrent with this poll, which may then see what it
        // drops; one that returned before this poll began is seen here.
        if cq.purge.is_queued() {
            return poll_cq_slow(cq, out);
        }
        // The lock free now: the usual call. Taken by another thread, or refused, out of line.
        cq.try_locked(|s| match s.poll(out) {
            // n <= ne, which came from a c_int.
            Ok(n) => n as c_int,
            Err(errno) => errno.negative(),
        })
        .unwrap_or_else(|| poll_cq_slow(cq, out))
    })
}

/// [`poll_cq`] with the CQ's queued purges applied first, under the lock, and when the lock
/// was not free (it waits, or EDEADLK inside this thread's `start_poll`).
#[cold]
#[inline(never)]
fn poll_cq_slow(cq: &RxeCq, out: &mut [MaybeUninit<ibv_wc>]) -> c_int {
    cq.locked(|s| {
        if cq.purge.is_queued() {
            cq.purge.apply(s);
        }
        match s.poll(out) {
            // n <= ne, which came from a c_int.
            Ok(n) => n as c_int,
            Err(errno) => errno.negative(),
        }
    })
    .unwrap_or_else(Errno::negative)
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
            let s = unsafe { cq.state_locked() };
            if cq.purge.is_queued() {
                cq.purge.apply(s);
            }
            s.start()
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
        if !cq.lock.pair_open() {
            // The stock provider would read the ring unlocked.
            warn!("next_poll without a successful start_poll: refused");
            boundary::set_errno(Errno::EINVAL);
            return Errno::EINVAL.code();
        }
        // SAFETY: the pair is open (a successful start_poll holds the lock).
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
        if !cq.lock.pair_open() {
            // The stock provider would unlock whoever holds the lock.
            warn!("end_poll without a successful start_poll: refused");
            return;
        }
        // The lock is released even if end() panics.
        boundary::guard("end_poll", (), || {
            // SAFETY: the pair is open (a successful start_poll holds the lock).
            let s = unsafe { cq.state_locked() };
            s.end();
            // A purge that came while the pair was open (cq::purge).
            if cq.purge.is_queued() {
                cq.purge.apply(s);
            }
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
        if !cq.lock.pair_open() {
            warn!("{entry} outside start_poll/end_poll: refused");
            return on_error;
        }
        // SAFETY: a pair is open: read_* is only valid between a successful
        // start_poll and end_poll, with the lock held.
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
mod tests {
    use core::ptr;

    use super::super::testing::{assert_wc_is, cqe, fake_rxe_cq};
    use super::*;

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
        // SAFETY: made by fake_rxe_cq, the threads are done with it.
        drop(unsafe { Box::from_raw(p.cast::<RxeCq>()) });
    }
}
