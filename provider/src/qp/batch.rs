//! The state of an `ibv_wr_*` batch between `wr_start` and
//! `wr_complete`/`wr_abort`: the WQEs it built on the send queue and its
//! first error. Pure bookkeeping on the queue; the C entries are in
//! [`crate::entry::qp`].

#![forbid(unsafe_code)]

use kernel_abi::rxe_send_wqe;

use crate::errno::Errno;
use crate::libibverbs::qp::IBV_QPT_UD;
use crate::post_raw;
use crate::work_queue::WorkQueue;
use crate::wqe::{self, SendLimits, SendRequest, UdDest};

/// The state of the batch between `wr_start` and `wr_complete`/`wr_abort`,
/// guarded by the send queue's lock like the queue itself. The fast paths
/// test one byte, [`flags`](Self::flags).
#[derive(Debug, Default)]
pub(crate) struct Batch {
    /// [`FAILED`], [`NEEDS_UD`], [`BUILT`], [`SETTABLE`].
    flags: u8,
    /// The first error of the batch, when [`FAILED`].
    err: Option<Errno>,
    /// The slot of the WQE built last, which setters fill in, when [`BUILT`].
    last: u32,
}

/// The batch failed: later calls do nothing, `wr_complete` refuses it whole.
const FAILED: u8 = 1;
/// The last WQE is on a UD QP and has no address yet.
const NEEDS_UD: u8 = 2;
/// A WQE was built (`last` is its slot).
const BUILT: u8 = 4;
/// [`BUILT`] and not [`FAILED`]: a setter's one test.
const SETTABLE: u8 = 8;

impl Batch {
    /// `wr_start`: a fresh batch from the published producer index.
    #[inline(always)]
    pub(crate) fn start(&mut self, wq: &mut WorkQueue<SendLimits>) {
        self.flags = 0;
        wq.prod = wq.ring().own_index();
    }

    pub(crate) fn fail(&mut self, e: Errno) {
        if self.flags & FAILED == 0 {
            self.flags = (self.flags | FAILED) & !SETTABLE;
            self.err = Some(e);
        }
    }

    /// [`build_with`](Self::build_with) of `req` (the tests').
    #[cfg(test)]
    pub(crate) fn build(&mut self, wq: &mut WorkQueue<SendLimits>, req: &SendRequest) {
        self.build_with(wq, || *req);
    }

    /// A builder: the header of a new WQE in the next free slot, for the request `make`
    /// answers, asked only once the slot is known free (what it reads is not held across the
    /// ring's test). Inlined into each builder, so that its request's constant fields fold into
    /// the header's writes; a batch that already failed, a UD WQE still without its address,
    /// or a full ring, out of line.
    #[inline(always)]
    pub(crate) fn build_with(&mut self, wq: &mut WorkQueue<SendLimits>, make: impl FnOnce() -> SendRequest) {
        if self.flags & (FAILED | NEEDS_UD) != 0 {
            return self.build_refused();
        }
        let index = wq.prod;
        let ud = wq.limits.qp_type == IBV_QPT_UD;
        if !wq.fill_next(|hdr, _| wqe::encode_header(&make(), hdr)) {
            return self.build_refused();
        }
        self.last = index;
        self.flags = if ud {
            BUILT | SETTABLE | NEEDS_UD
        } else {
            BUILT | SETTABLE
        };
    }

    /// [`build`](Self::build) refused: the batch's first error stays, a UD WQE without its
    /// address fails the batch, and so does a full ring (`ENOSPC`, the stock provider's errno
    /// for it in this API).
    #[cold]
    #[inline(never)]
    fn build_refused(&mut self) {
        if self.flags & FAILED != 0 {
            return;
        }
        if self.flags & NEEDS_UD != 0 {
            return self.fail(Errno::EINVAL);
        }
        self.fail(Errno::ENOSPC);
    }

    /// A setter: `f` adjusts the WQE built last (its header, its payload).
    #[inline(always)]
    pub(crate) fn set(
        &mut self,
        wq: &mut WorkQueue<SendLimits>,
        f: impl FnOnce(&mut rxe_send_wqe, &mut [u8], &SendLimits) -> Result<(), Errno>,
    ) {
        if self.flags & SETTABLE == 0 {
            return self.set_refused();
        }
        let limits = wq.limits;
        // The slot is one this batch built: after the published producer
        // index, before ours.
        let (hdr, payload) = wq.slot_at(self.last);
        let r = f(hdr, payload, &limits);
        if let Err(e) = r {
            self.fail(e);
        }
    }

    /// [`set`](Self::set) refused: after a failure, nothing; a setter without a builder
    /// fails the batch.
    #[cold]
    #[inline(never)]
    fn set_refused(&mut self) {
        if self.flags & FAILED == 0 {
            self.fail(Errno::EINVAL);
        }
    }

    /// `ibv_wr_set_ud_addr`.
    pub(crate) fn set_ud(&mut self, wq: &mut WorkQueue<SendLimits>, ud: Option<UdDest<'_>>) {
        if wq.limits.qp_type != IBV_QPT_UD {
            return self.fail(Errno::EINVAL);
        }
        let Some(ud) = ud else { return self.fail(Errno::EINVAL) };
        self.set(wq, |hdr, _, _| {
            post_raw::set_ud(hdr, &ud);
            Ok(())
        });
        if self.flags & FAILED == 0 {
            self.flags &= !NEEDS_UD;
        }
    }

    /// Whether `wr_complete` publishes what the batch built (if anything, [`built`](Self::built)):
    /// no error, no UD WQE without its address, and a QP that takes sends.
    #[inline(always)]
    pub(crate) fn ready(&self, accepts_posts: bool) -> bool {
        self.flags & (FAILED | NEEDS_UD) == 0 && accepts_posts
    }

    /// Whether the batch built a WQE.
    #[inline(always)]
    pub(crate) fn built(&self) -> bool {
        self.flags & BUILT != 0
    }

    /// `wr_complete` up to the doorbell: `Ok(true)` when there is something
    /// to publish (the caller then publishes), `Ok(false)` for an empty
    /// batch; an error refuses the whole batch and rewinds our producer.
    #[inline(always)]
    pub(crate) fn finish(&mut self, wq: &mut WorkQueue<SendLimits>, accepts_posts: bool) -> Result<bool, Errno> {
        if self.ready(accepts_posts) {
            return Ok(self.built());
        }
        self.finish_refused(wq, accepts_posts)
    }

    /// [`finish`](Self::finish) of a batch that failed, that ends with a UD WQE without its
    /// address, or on a QP that takes no sends yet.
    #[cold]
    #[inline(never)]
    fn finish_refused(&mut self, wq: &mut WorkQueue<SendLimits>, accepts_posts: bool) -> Result<bool, Errno> {
        if self.flags & NEEDS_UD != 0 {
            self.fail(Errno::EINVAL);
        }
        if self.flags & (FAILED | BUILT) == BUILT && !accepts_posts {
            self.fail(Errno::EINVAL);
        }
        let r = match self.err {
            Some(e) if self.flags & FAILED != 0 => Err(e),
            _ => Ok(self.flags & BUILT != 0),
        };
        if r.is_err() {
            self.abort(wq);
        }
        r
    }

    /// `wr_abort`: forget every WQE built since `wr_start`.
    pub(crate) fn abort(&mut self, wq: &mut WorkQueue<SendLimits>) {
        wq.prod = wq.ring().own_index();
        self.flags &= FAILED;
    }
}
