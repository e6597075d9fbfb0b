//! The C entries of the `ibv_qp_ex` work-request API: the `ibv_wr_*` callbacks libibverbs'
//! inline functions call through the QP's `wr_ops` (start, the builders, the setters, complete,
//! abort) and [`set_send_ops`], which installs them. The rest of the QP's entries are
//! `entry::qp`.

use core::ffi::{c_int, c_void};
use core::ptr::{self};

use crate::ah::RxeAh;
use crate::boundary;
use crate::errno::Errno;
use crate::libibverbs::control_objects::{ibv_ah, ibv_mw};
use crate::libibverbs::qp::*;
use crate::post_raw::set_inline;
use crate::qp::batch::Batch;
use crate::qp::object::{ring_doorbell, sq_accepts_posts, RxeQp};
use crate::qp::wr::misuse;
use crate::work_queue::{Locked, WorkQueue};
use crate::wqe::{self, MwBind, SendLimits, SendRequest, UdDest};

// ---------------------------------------------------------------------------------------------
// C entries: the ibv_qp_ex work-request callbacks

/// The QP of an `ibv_qp_ex` callback and its send queue, without a test: libibverbs' inline
/// `ibv_wr_*` read the callback from that very `ibv_qp_ex` (so it is not null), and
/// [`set_send_ops`] gives a QP callbacks only once its send queue is mapped (create, after
/// `sq` is set; it is never unset).
///
/// # Safety
/// `ibqp` is the `ibv_qp_ex` of a live QP of ours with callbacks (libibverbs' `ibv_wr_*`).
#[inline(always)]
unsafe fn callback_qp<'a>(ibqp: *mut c_void) -> (&'a RxeQp, &'a Locked<SendLimits>) {
    // SAFETY: per the contract: not null, and it begins our RxeQp (from_ibv_qp's layout);
    // sq is Some (set before the callbacks, never unset).
    unsafe {
        let q = &*ibqp.cast::<RxeQp>();
        (q, q.sq.as_ref().unwrap_unchecked())
    }
}

/// [`callback_qp`] with the QP's open `ibv_wr_*` batch: its send queue and batch state, or
/// `None` when no batch is open on the send queue's lock (`pair_open`).
///
/// # Safety
/// As for [`callback_qp`]; the caller makes no other reference to the queue or the batch
/// while the ones returned live.
#[inline(always)]
#[allow(clippy::type_complexity)]
unsafe fn callback_batch<'a>(
    ibqp: *mut c_void,
) -> (
    &'a RxeQp,
    &'a Locked<SendLimits>,
    Option<(&'a mut WorkQueue<SendLimits>, &'a mut Batch)>,
) {
    // SAFETY: per the contract. An open batch (wr_start took sq.lock, wr_complete or wr_abort
    // release it) is built by one thread at a time, the only one touching the queue and the
    // batch until then.
    unsafe {
        let (q, sq) = callback_qp(ibqp);
        let open = sq.lock.pair_open().then(|| (sq.held(), &mut *q.batch.get()));
        (q, sq, open)
    }
}

/// Runs `f` on the QP's send queue and batch. Only between `wr_start` and
/// `wr_complete`/`wr_abort`, on whichever thread continues the batch (the
/// `ibv_wr_*` contract: one thread builds a batch at a time); a builder
/// called outside a batch is ignored (the stock provider would write into
/// the ring unlocked).
#[inline(always)]
fn with_batch<R>(ibqp: *mut c_void, dflt: R, f: impl FnOnce(&RxeQp, &mut WorkQueue<SendLimits>, &mut Batch) -> R) -> R {
    // SAFETY: libibverbs' ibv_wr_* pass the ibv_qp_ex of a QP of ours; the queue and the
    // batch are only handed to f.
    let (q, _, open) = unsafe { callback_batch(ibqp) };
    let Some((wq, batch)) = open else {
        misuse("ibv_wr_* builder outside wr_start/wr_complete: ignored");
        return dflt;
    };
    f(q, wq, batch)
}

/// The `wr_id` and `wr_flags` the application set in `ibv_qp_ex`.
#[inline(always)]
fn batch_wr_id_flags(q: &RxeQp) -> (u64, u32) {
    // SAFETY: plain fields of our live QP's ibv_qp_ex, which the building
    // thread wrote before calling the builder.
    unsafe {
        let ex = q.vqp.get().cast::<ibv_qp_ex_base>();
        (ptr::read_volatile(&(*ex).wr_id), ptr::read_volatile(&(*ex).wr_flags))
    }
}

/// A builder body: the request for `opcode` with the batch's wr_id/flags.
#[inline(always)]
fn build(ibqp: *mut c_void, opcode: c_int, fill: impl FnOnce(&mut SendRequest)) {
    with_batch(ibqp, (), |q, wq, batch| {
        batch.build_with(wq, || {
            let (wr_id, send_flags) = batch_wr_id_flags(q);
            let mut req = SendRequest {
                wr_id,
                opcode,
                send_flags,
                imm_data: 0,
                remote_addr: 0,
                rkey: 0,
                compare_add: 0,
                swap: 0,
                bind: None,
            };
            fill(&mut req);
            req
        });
    })
}

pub(super) unsafe extern "C" fn wr_start(ibqp: *mut c_void) {
    boundary::guard("wr_start", (), || {
        // SAFETY: a QP of ours with callbacks (libibverbs' ibv_wr_start); once this thread
        // holds the lock, the queue and the batch are its own (until wr_complete or wr_abort).
        unsafe {
            let (q, sq) = callback_qp(ibqp);
            if sq.lock.hold().is_err() {
                // The stock provider deadlocks on its own spin lock here.
                misuse("wr_start while this thread's batch is open: the batch goes on");
                return;
            }
            (*q.batch.get()).start(sq.held());
        }
    })
}

pub(super) unsafe extern "C" fn wr_complete(ibqp: *mut c_void) -> c_int {
    boundary::guard("wr_complete", Errno::EIO.code(), || {
        // SAFETY: a QP of ours with callbacks (libibverbs' ibv_wr_complete); the queue and
        // the batch are used here only, complete_refused makes its own.
        let (q, sq, open) = unsafe { callback_batch(ibqp) };
        let Some((wq, batch)) = open else {
            // The stock provider would unlock whoever holds the lock and
            // publish its stale index (nothing new): report the misuse.
            misuse("wr_complete without wr_start: nothing posted");
            return Errno::EINVAL.code();
        };
        let accepts = sq_accepts_posts(q);
        if !batch.ready(accepts) {
            return complete_refused(q, accepts);
        }
        // Nothing here panics (the publish is one store), so the lock is released below.
        let built = batch.built();
        if built {
            wq.publish();
        }
        sq.lock.release_held();
        if built {
            ring_doorbell(q).map_or_else(Errno::code, |()| 0)
        } else {
            0
        }
    })
}

/// [`wr_complete`] of a batch that is refused (an error, a UD WQE without its address, a QP
/// that takes no sends yet): its errno, the batch forgotten and the lock released.
#[cold]
#[inline(never)]
fn complete_refused(q: &RxeQp, accepts: bool) -> c_int {
    let Some(sq) = &q.sq else { return Errno::EINVAL.code() };
    // A panic in finish must neither leave the lock held nor a batch
    // half-published: forget the batch, then release.
    let r = boundary::guard("wr_complete", Err(Errno::EIO), || {
        // SAFETY: the batch is open: its lock, which guards the queue and the batch, is held
        // (the caller checked), and the caller's references to them ended.
        let (wq, batch) = unsafe { (sq.held(), &mut *q.batch.get()) };
        let r = batch.finish(wq, accepts);
        if r == Ok(true) {
            wq.publish();
        }
        r
    });
    if r == Err(Errno::EIO) {
        // SAFETY: as above; finish's borrow ended.
        unsafe { (*q.batch.get()).abort(sq.held()) };
    }
    sq.lock.release_held();
    match r {
        Ok(true) => ring_doorbell(q).map_or_else(Errno::code, |()| 0),
        Ok(false) => 0,
        Err(e) => e.code(),
    }
}

unsafe extern "C" fn wr_abort(ibqp: *mut c_void) {
    boundary::guard("wr_abort", (), || {
        // SAFETY: a QP of ours with callbacks (libibverbs' ibv_wr_abort); the queue and the
        // batch are used here only.
        let (_, sq, open) = unsafe { callback_batch(ibqp) };
        let Some((wq, batch)) = open else {
            misuse("wr_abort without wr_start: refused");
            return;
        };
        batch.abort(wq);
        sq.lock.release_held();
    })
}

unsafe extern "C" fn wr_send(ibqp: *mut c_void) {
    boundary::guard("wr_send", (), || build(ibqp, IBV_WR_SEND, |_| {}))
}

unsafe extern "C" fn wr_send_imm(ibqp: *mut c_void, imm_data: u32) {
    boundary::guard("wr_send_imm", (), || {
        build(ibqp, IBV_WR_SEND_WITH_IMM, |r| r.imm_data = imm_data)
    })
}

unsafe extern "C" fn wr_send_inv(ibqp: *mut c_void, invalidate_rkey: u32) {
    boundary::guard("wr_send_inv", (), || {
        build(ibqp, IBV_WR_SEND_WITH_INV, |r| r.imm_data = invalidate_rkey)
    })
}

unsafe extern "C" fn wr_local_inv(ibqp: *mut c_void, invalidate_rkey: u32) {
    boundary::guard("wr_local_inv", (), || {
        build(ibqp, IBV_WR_LOCAL_INV, |r| r.imm_data = invalidate_rkey)
    })
}

pub(super) unsafe extern "C" fn wr_rdma_write(ibqp: *mut c_void, rkey: u32, remote_addr: u64) {
    boundary::guard("wr_rdma_write", (), || {
        build(ibqp, IBV_WR_RDMA_WRITE, |r| {
            (r.rkey, r.remote_addr) = (rkey, remote_addr)
        })
    })
}

unsafe extern "C" fn wr_rdma_write_imm(ibqp: *mut c_void, rkey: u32, remote_addr: u64, imm_data: u32) {
    boundary::guard("wr_rdma_write_imm", (), || {
        build(ibqp, IBV_WR_RDMA_WRITE_WITH_IMM, |r| {
            (r.rkey, r.remote_addr, r.imm_data) = (rkey, remote_addr, imm_data)
        })
    })
}

unsafe extern "C" fn wr_rdma_read(ibqp: *mut c_void, rkey: u32, remote_addr: u64) {
    boundary::guard("wr_rdma_read", (), || {
        build(ibqp, IBV_WR_RDMA_READ, |r| {
            (r.rkey, r.remote_addr) = (rkey, remote_addr)
        })
    })
}

unsafe extern "C" fn wr_atomic_cmp_swp(ibqp: *mut c_void, rkey: u32, remote_addr: u64, compare: u64, swap: u64) {
    boundary::guard("wr_atomic_cmp_swp", (), || {
        build(ibqp, IBV_WR_ATOMIC_CMP_AND_SWP, |r| {
            (r.rkey, r.remote_addr, r.compare_add, r.swap) = (rkey, remote_addr, compare, swap)
        })
    })
}

unsafe extern "C" fn wr_atomic_fetch_add(ibqp: *mut c_void, rkey: u32, remote_addr: u64, add: u64) {
    boundary::guard("wr_atomic_fetch_add", (), || {
        build(ibqp, IBV_WR_ATOMIC_FETCH_AND_ADD, |r| {
            (r.rkey, r.remote_addr, r.compare_add) = (rkey, remote_addr, add)
        })
    })
}

/// The 8 bytes to write travel in the WQE, where the SGEs would be.
/// Reached only through the pointer in `ibv_qp_ex`; `inline(never)` gives
/// it one address under Miri too, which the test of the slots compares.
#[inline(never)]
unsafe extern "C" fn wr_atomic_write(ibqp: *mut c_void, rkey: u32, remote_addr: u64, atomic_wr: *const c_void) {
    boundary::guard("wr_atomic_write", (), || {
        build(ibqp, IBV_WR_ATOMIC_WRITE, |r| {
            (r.rkey, r.remote_addr) = (rkey, remote_addr)
        });
        with_batch(ibqp, (), |_, wq, batch| {
            batch.set(wq, |hdr, payload, _| {
                if atomic_wr.is_null() || payload.len() < 8 {
                    return Err(Errno::EINVAL);
                }
                // SAFETY: ibv_wr_atomic_write's contract: 8 readable bytes.
                let value = unsafe { core::slice::from_raw_parts(atomic_wr.cast::<u8>(), 8) };
                payload[..8].copy_from_slice(value);
                hdr.dma.length = 8;
                hdr.dma.resid = 8;
                Ok(())
            })
        })
    })
}

/// `ibv_wr_flush`: the range (or the whole MR, by `level`) made durable at
/// the responder; no data travels.
unsafe extern "C" fn wr_flush(ibqp: *mut c_void, rkey: u32, remote_addr: u64, length: usize, placement: u8, level: u8) {
    boundary::guard("wr_flush", (), || {
        build(ibqp, IBV_WR_FLUSH, |r| (r.rkey, r.remote_addr) = (rkey, remote_addr));
        with_batch(ibqp, (), |_, wq, batch| {
            batch.set(wq, |hdr, _, _| {
                // The stock provider truncates the length to the WQE's 32 bits.
                let f = wqe::Flush {
                    remote_addr,
                    rkey,
                    length: length as u32,
                    placement,
                    level,
                };
                wqe::set_flush(hdr, &f);
                Ok(())
            })
        })
    })
}

unsafe extern "C" fn wr_bind_mw(ibqp: *mut c_void, mw: *mut ibv_mw, rkey: u32, info: *const ibv_mw_bind_info) {
    boundary::guard("wr_bind_mw", (), || {
        // SAFETY: the caller's window (ours) and bind description, or null.
        let bind = unsafe {
            match (mw.as_ref(), info.as_ref()) {
                (Some(m), Some(i)) if !(i.mr.is_null() && i.length != 0) => Some(MwBind {
                    addr: i.addr,
                    length: i.length,
                    // An unbind (length 0) names no MR.
                    mr_lkey: i.mr.as_ref().map_or(0, |mr| mr.lkey),
                    mw_rkey: m.rkey,
                    new_rkey: rkey,
                    access: i.mw_access_flags,
                }),
                _ => None,
            }
        };
        build(ibqp, IBV_WR_BIND_MW, |r| r.bind = bind);
        if bind.is_none() {
            with_batch(ibqp, (), |_, _, batch| batch.fail(Errno::EINVAL));
        }
    })
}

unsafe extern "C" fn wr_set_ud_addr(ibqp: *mut c_void, ah: *mut ibv_ah, remote_qpn: u32, remote_qkey: u32) {
    boundary::guard("wr_set_ud_addr", (), || {
        // SAFETY: an AH our create_ah made (RxeAh begins with its ibv_ah), or null.
        let ud = unsafe { ah.cast::<RxeAh>().as_ref() }.map(|a| UdDest {
            remote_qpn,
            remote_qkey,
            ah_num: a.ah_num,
            av: &a.av,
        });
        with_batch(ibqp, (), |_, wq, batch| batch.set_ud(wq, ud))
    })
}

pub(super) unsafe extern "C" fn wr_set_sge(ibqp: *mut c_void, lkey: u32, addr: u64, length: u32) {
    boundary::guard("wr_set_sge", (), || {
        let sge = ibv_sge { addr, length, lkey };
        with_batch(ibqp, (), |_, wq, batch| {
            batch.set(wq, |hdr, payload, lim| wqe::set_sge(hdr, payload, &sge, lim))
        })
    })
}

unsafe extern "C" fn wr_set_sge_list(ibqp: *mut c_void, num_sge: usize, sg_list: *const ibv_sge) {
    boundary::guard("wr_set_sge_list", (), || {
        with_batch(ibqp, (), |_, wq, batch| {
            batch.set(wq, |hdr, payload, lim| {
                if num_sge > lim.max_sge as usize {
                    return Err(Errno::ENOSPC);
                }
                if num_sge != 0 && sg_list.is_null() {
                    return Err(Errno::EINVAL);
                }
                let sges = if num_sge == 0 {
                    &[][..]
                } else {
                    // SAFETY: ibv_wr_set_sge_list's contract: num_sge entries.
                    unsafe { core::slice::from_raw_parts(sg_list, num_sge) }
                };
                wqe::set_sges(hdr, payload, sges, lim)
            })
        })
    })
}

unsafe extern "C" fn wr_set_inline_data(ibqp: *mut c_void, addr: *mut c_void, length: usize) {
    boundary::guard("wr_set_inline_data", (), || {
        let buf = [ibv_data_buf { addr, length }];
        with_batch(ibqp, (), |_, wq, batch| {
            batch.set(wq, |hdr, payload, lim| {
                if length != 0 && addr.is_null() {
                    return Err(Errno::EINVAL);
                }
                // SAFETY: ibv_wr_set_inline_data's contract: length bytes at addr.
                unsafe { set_inline(hdr, payload, &buf, lim) }
            })
        })
    })
}

unsafe extern "C" fn wr_set_inline_data_list(ibqp: *mut c_void, num_buf: usize, buf_list: *const ibv_data_buf) {
    boundary::guard("wr_set_inline_data_list", (), || {
        with_batch(ibqp, (), |_, wq, batch| {
            batch.set(wq, |hdr, payload, lim| {
                if num_buf != 0 && buf_list.is_null() {
                    return Err(Errno::EINVAL);
                }
                // SAFETY: the contract: num_buf entries at buf_list (not null, checked above,
                // when there are any), each readable for its length; a null address with a
                // length is refused before any is read.
                unsafe {
                    let bufs = if num_buf == 0 {
                        &[][..]
                    } else {
                        core::slice::from_raw_parts(buf_list, num_buf)
                    };
                    if bufs.iter().any(|b| b.length != 0 && b.addr.is_null()) {
                        return Err(Errno::EINVAL);
                    }
                    set_inline(hdr, payload, bufs, lim)
                }
            })
        })
    })
}

/// A typed callback as the opaque slot type of `ibv_qp_ex`.
macro_rules! slot {
    ($f:expr) => {{
        // SAFETY: only the pointer's type changes; libibverbs' inline
        // ibv_wr_* call it with exactly the signature it was defined with
        // (verbs.h), which is $f's.
        Some(unsafe { core::mem::transmute::<*const (), unsafe extern "C" fn()>($f as *const ()) })
    }};
}

/// Fills the `ibv_qp_ex` callbacks for `flags` (already checked), as the
/// stock provider's `set_qp_send_ops` does: builders per flag, every setter
/// and start/complete/abort always.
pub(crate) fn set_send_ops(vqp: &mut VerbsQp, layout: QpExLayout, flags: u64) {
    let ops = &mut vqp.qp_ex.wr_ops;
    // The builder at `wr_op::$at` when `flags` has `$flag`.
    macro_rules! builder {
        ($flag:ident, $at:ident, $f:ident) => {
            if flags & $flag != 0 {
                ops[wr_op::$at] = slot!($f);
            }
        };
    }
    builder!(IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP, ATOMIC_CMP_SWP, wr_atomic_cmp_swp);
    builder!(
        IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
        ATOMIC_FETCH_ADD,
        wr_atomic_fetch_add
    );
    builder!(IBV_QP_EX_WITH_BIND_MW, BIND_MW, wr_bind_mw);
    builder!(IBV_QP_EX_WITH_LOCAL_INV, LOCAL_INV, wr_local_inv);
    builder!(IBV_QP_EX_WITH_RDMA_READ, RDMA_READ, wr_rdma_read);
    builder!(IBV_QP_EX_WITH_RDMA_WRITE, RDMA_WRITE, wr_rdma_write);
    builder!(IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM, RDMA_WRITE_IMM, wr_rdma_write_imm);
    builder!(IBV_QP_EX_WITH_SEND, SEND, wr_send);
    builder!(IBV_QP_EX_WITH_SEND_WITH_IMM, SEND_IMM, wr_send_imm);
    builder!(IBV_QP_EX_WITH_SEND_WITH_INV, SEND_INV, wr_send_inv);
    ops[wr_op::SET_UD_ADDR] = slot!(wr_set_ud_addr);
    ops[wr_op::SET_INLINE_DATA] = slot!(wr_set_inline_data);
    ops[wr_op::SET_INLINE_DATA_LIST] = slot!(wr_set_inline_data_list);
    ops[wr_op::SET_SGE] = slot!(wr_set_sge);
    ops[wr_op::SET_SGE_LIST] = slot!(wr_set_sge_list);
    ops[wr_op::START] = slot!(wr_start);
    ops[wr_op::COMPLETE] = slot!(wr_complete);
    ops[wr_op::ABORT] = slot!(wr_abort);
    if flags & IBV_QP_EX_WITH_ATOMIC_WRITE != 0 {
        vqp.set_wr_atomic_write(layout, slot!(wr_atomic_write));
    }
    if flags & IBV_QP_EX_WITH_FLUSH != 0 {
        vqp.set_wr_flush(layout, slot!(wr_flush));
    }
}

#[cfg(test)]
mod wr_tests {
    use super::*;
    use crate::libibverbs::qp::ibv_qp_ex_base;
    use crate::libibverbs::runtime::zeroed;
    use crate::ring::testing::FakeRing;
    use crate::ring::Producer;
    use crate::wqe::SEND_WQE_HEADER;
    use core::mem::size_of;
    use kernel_abi::rxe_send_wqe;

    /// A send queue of 4 slots of 256 bytes (capacity 3) on a fake ring.
    fn queue(fq: &FakeRing, qp_type: c_int, max_sge: u32, max_inline: u32) -> WorkQueue<SendLimits> {
        let ring = Producer::map(fq.raw_fd(), &fq.mi, SEND_WQE_HEADER).unwrap();
        let payload_room = ring.geometry().elem_size() - SEND_WQE_HEADER;
        WorkQueue::new(ring, SendLimits::new(qp_type, max_sge, max_inline, payload_room)).unwrap()
    }

    /// [`queue`] and a batch for it.
    fn batch_on(fq: &FakeRing, qp_type: c_int, max_sge: u32, max_inline: u32) -> (WorkQueue<SendLimits>, Batch) {
        (queue(fq, qp_type, max_sge, max_inline), Batch::default())
    }

    fn req(wr_id: u64, opcode: c_int) -> SendRequest {
        SendRequest {
            wr_id,
            opcode,
            send_flags: IBV_SEND_SIGNALED,
            imm_data: 0,
            remote_addr: 0x1000,
            rkey: 0x55,
            compare_add: 0,
            swap: 0,
            bind: None,
        }
    }

    fn sges(b: &mut Batch, wq: &mut WorkQueue<SendLimits>, list: &[ibv_sge]) {
        b.set(wq, |h, p, l| wqe::set_sges(h, p, list, l));
    }

    fn sge(length: u32) -> ibv_sge {
        ibv_sge {
            addr: 0x2000,
            length,
            lkey: 7,
        }
    }

    /// Starts a batch and builds `req(wr_id, opcode)` in it.
    fn begin(b: &mut Batch, wq: &mut WorkQueue<SendLimits>, wr_id: u64, opcode: c_int) {
        b.start(wq);
        b.build(wq, &req(wr_id, opcode));
    }

    /// `length` bytes from the start of `data`, as an inline buffer.
    fn buf(data: &[u8], length: usize) -> ibv_data_buf {
        ibv_data_buf {
            addr: data.as_ptr().cast_mut().cast(),
            length,
        }
    }

    #[test]
    fn a_batch_is_published_only_by_complete() {
        let fq = FakeRing::new(8, 3, 0);
        let (mut wq, mut b) = batch_on(&fq, IBV_QPT_RC, 2, 64);
        begin(&mut b, &mut wq, 1, IBV_WR_SEND);
        sges(&mut b, &mut wq, &[sge(100), sge(28)]);
        b.build(&mut wq, &req(2, IBV_WR_RDMA_WRITE));
        sges(&mut b, &mut wq, &[sge(8)]);
        assert_eq!(fq.kernel.produced(), 0);
        assert_eq!(b.finish(&mut wq, true), Ok(true));
        wq.publish();
        assert_eq!(fq.kernel.produced(), 2);
        let w: rxe_send_wqe = fq.kernel.read_slot(0);
        // The total of the list, not a multiple of its first entry.
        assert_eq!(
            (w.wr.wr_id, w.wr.opcode, w.dma.length, w.dma.resid, w.dma.num_sge),
            (1, 2, 128, 128, 2)
        );
        let w: rxe_send_wqe = fq.kernel.read_slot(1);
        let a: kernel_abi::rxe_send_wr_wr_rdma = crate::entry::qp::tests::wqe_arm(&fq.kernel, 1);
        let (ra, rk) = (a.remote_addr, a.rkey);
        assert_eq!((w.wr.wr_id, ra, rk, w.iova, w.dma.length), (2, 0x1000, 0x55, 0x1000, 8));
        // An empty batch publishes nothing.
        b.start(&mut wq);
        assert_eq!(b.finish(&mut wq, true), Ok(false));
    }

    #[test]
    fn abort_restores_the_producer_index() {
        let fq = FakeRing::new(8, 3, 0);
        let (mut wq, mut b) = batch_on(&fq, IBV_QPT_RC, 2, 64);
        begin(&mut b, &mut wq, 1, IBV_WR_SEND);
        b.build(&mut wq, &req(2, IBV_WR_SEND));
        assert_eq!(wq.prod, 2);
        b.abort(&mut wq);
        assert_eq!((wq.prod, fq.kernel.produced()), (0, 0));
        // The next batch reuses the slots.
        begin(&mut b, &mut wq, 3, IBV_WR_SEND_WITH_IMM);
        assert_eq!(b.finish(&mut wq, true), Ok(true));
        wq.publish();
        assert_eq!(fq.kernel.produced(), 1);
        assert_eq!(fq.kernel.read_slot::<rxe_send_wqe>(0).wr.wr_id, 3);
    }

    #[test]
    fn an_error_in_the_middle_refuses_the_whole_batch() {
        let fq = FakeRing::new(8, 3, 0);
        let (mut wq, mut b) = batch_on(&fq, IBV_QPT_RC, 2, 64);
        begin(&mut b, &mut wq, 1, IBV_WR_SEND);
        sges(&mut b, &mut wq, &[sge(1)]);
        b.build(&mut wq, &req(2, IBV_WR_SEND));
        sges(&mut b, &mut wq, &[sge(1), sge(1), sge(1)]); // max_sge is 2
        b.build(&mut wq, &req(3, IBV_WR_SEND));
        sges(&mut b, &mut wq, &[sge(1)]);
        assert_eq!(b.finish(&mut wq, true), Err(Errno::ENOSPC));
        assert_eq!((wq.prod, fq.kernel.produced()), (0, 0));
        // A setter without a builder, and a full ring.
        b.start(&mut wq);
        sges(&mut b, &mut wq, &[sge(1)]);
        assert_eq!(b.finish(&mut wq, true), Err(Errno::EINVAL));
        b.start(&mut wq);
        for id in 0..4 {
            b.build(&mut wq, &req(id, IBV_WR_SEND));
        }
        assert_eq!(b.finish(&mut wq, true), Err(Errno::ENOSPC));
        assert_eq!(wq.prod, 0);
        // A QP that does not take sends yet (RESET..RTR): nothing is published.
        begin(&mut b, &mut wq, 1, IBV_WR_SEND);
        assert_eq!(b.finish(&mut wq, false), Err(Errno::EINVAL));
        assert_eq!((wq.prod, fq.kernel.produced()), (0, 0));
    }

    #[test]
    fn ud_wqes_need_their_address() {
        let fq = FakeRing::new(8, 3, 0);
        let (mut wq, mut b) = batch_on(&fq, IBV_QPT_UD, 1, 64);
        let av = <kernel_abi::rxe_av as zerocopy::FromZeros>::new_zeroed();
        let ud = UdDest {
            remote_qpn: 0x99,
            remote_qkey: 0x11,
            ah_num: 3,
            av: &av,
        };
        begin(&mut b, &mut wq, 1, IBV_WR_SEND);
        b.set_ud(&mut wq, Some(ud));
        sges(&mut b, &mut wq, &[sge(4)]);
        assert_eq!(b.finish(&mut wq, true), Ok(true));
        wq.publish();
        let w: rxe_send_wqe = fq.kernel.read_slot(0);
        let u: kernel_abi::rxe_send_wr_wr_ud = crate::entry::qp::tests::wqe_arm(&fq.kernel, 0);
        assert_eq!(
            (u.remote_qpn, u.remote_qkey, u.ah_num, w.dma.length),
            (0x99, 0x11, 3, 4)
        );
        // Without an address: at the next builder, or at complete.
        begin(&mut b, &mut wq, 2, IBV_WR_SEND);
        assert_eq!(b.finish(&mut wq, true), Err(Errno::EINVAL));
        begin(&mut b, &mut wq, 2, IBV_WR_SEND);
        b.set_ud(&mut wq, None);
        assert_eq!(b.finish(&mut wq, true), Err(Errno::EINVAL));
        assert_eq!(fq.kernel.produced(), 1);
        // On an RC QP the setter is an error, not a write into the rdma arm.
        let fq = FakeRing::new(8, 3, 0);
        let mut wq = queue(&fq, IBV_QPT_RC, 1, 64);
        begin(&mut b, &mut wq, 1, IBV_WR_RDMA_WRITE);
        b.set_ud(&mut wq, Some(ud));
        assert_eq!(b.finish(&mut wq, true), Err(Errno::EINVAL));
    }

    #[test]
    fn inline_data_never_crosses_into_the_next_slot() {
        let fq = FakeRing::new(8, 3, 0);
        // max_inline larger than the slot: the slot is the limit.
        let mut wq = queue(&fq, IBV_QPT_RC, 1, 4096);
        let room = wq.limits.payload_room;
        let data = vec![0x5au8; room + 1];
        let half = room / 2;
        let list = [buf(&data, half), buf(&data, room + 1 - half)];
        let mut b = Batch::default();
        begin(&mut b, &mut wq, 1, IBV_WR_SEND);
        // SAFETY: both buffers lie inside `data`.
        b.set(&mut wq, |h, p, l| unsafe { set_inline(h, p, &list, l) });
        assert_eq!(b.finish(&mut wq, true), Err(Errno::ENOSPC));
        // Slot 1 (right after) was never touched.
        assert!(fq.kernel.read_slot::<[u8; 256]>(1).iter().all(|&x| x == 0));
        // Lengths whose sum wraps 64 bits are refused too.
        let wrap = [buf(&data, usize::MAX), buf(&data, 2)];
        begin(&mut b, &mut wq, 1, IBV_WR_SEND);
        // SAFETY: refused before any byte is read.
        b.set(&mut wq, |h, p, l| unsafe { set_inline(h, p, &wrap, l) });
        assert_eq!(b.finish(&mut wq, true), Err(Errno::ENOSPC));
        // Exactly the slot's room fits, and the WQE is marked inline.
        let fit = [list[0], buf(&data, room - half)];
        begin(&mut b, &mut wq, 1, IBV_WR_SEND);
        // SAFETY: both buffers lie inside `data`.
        b.set(&mut wq, |h, p, l| unsafe { set_inline(h, p, &fit, l) });
        assert_eq!(b.finish(&mut wq, true), Ok(true));
        wq.publish();
        let w: rxe_send_wqe = fq.kernel.read_slot(0);
        assert_eq!(
            (w.dma.length, w.dma.num_sge, w.wr.send_flags & IBV_SEND_INLINE),
            (room as u32, 0, IBV_SEND_INLINE)
        );
        // The QP's max_inline_data is a limit of its own.
        let fq = FakeRing::new(8, 3, 0);
        let mut wq = queue(&fq, IBV_QPT_RC, 1, 16);
        let small = [buf(&data, 17)];
        begin(&mut b, &mut wq, 1, IBV_WR_SEND);
        // SAFETY: inside `data`.
        b.set(&mut wq, |h, p, l| unsafe { set_inline(h, p, &small, l) });
        assert_eq!(b.finish(&mut wq, true), Err(Errno::ENOSPC));
    }

    #[test]
    fn sge_list_length_is_the_sum_in_range() {
        let fq = FakeRing::new(8, 3, 0);
        let (mut wq, mut b) = batch_on(&fq, IBV_QPT_RC, 3, 0);
        begin(&mut b, &mut wq, 1, IBV_WR_SEND);
        sges(&mut b, &mut wq, &[sge(u32::MAX), sge(1)]);
        assert_eq!(b.finish(&mut wq, true), Err(Errno::EINVAL));
        begin(&mut b, &mut wq, 1, IBV_WR_SEND);
        sges(&mut b, &mut wq, &[sge(10), sge(20), sge(30)]);
        assert_eq!(b.finish(&mut wq, true), Ok(true));
        wq.publish();
        let w: rxe_send_wqe = fq.kernel.read_slot(0);
        assert_eq!((w.dma.length, w.dma.num_sge), (60, 3));
    }

    #[test]
    fn callbacks_land_in_the_release_slots() {
        for (release, aw) in [(43, false), (44, true), (45, true)] {
            let layout = QpExLayout::for_release(release);
            let mut v: VerbsQp = zeroed();
            set_send_ops(&mut v, layout, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_ATOMIC_WRITE);
            v.set_comp_mask(layout, VERBS_QP_EX);
            let ops = &v.qp_ex.wr_ops;
            assert!(ops[wr_op::SEND].is_some() && ops[wr_op::RDMA_WRITE].is_none());
            assert!(ops[wr_op::START].is_some() && ops[wr_op::COMPLETE].is_some() && ops[wr_op::ABORT].is_some());
            assert!(
                ops[wr_op::SET_SGE_LIST].is_some()
                    && ops[wr_op::SEND_TSO].is_none()
                    && ops[wr_op::SET_XRC_SRQN].is_none()
            );
            // SAFETY: reading the word right after wr_abort inside v (offset 344 on x86_64,
            // 352 on aarch64).
            let after_abort = unsafe {
                ptr::from_ref(&v)
                    .cast::<u8>()
                    .add(size_of::<ibv_qp_ex_base>())
                    .cast::<u64>()
                    .read()
            };
            assert_eq!(
                after_abort == wr_atomic_write as *const () as usize as u64,
                aw,
                "release {release}"
            );
            assert_eq!(v.comp_mask(layout), VERBS_QP_EX);
        }
    }
}
