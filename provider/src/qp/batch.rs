//! The state of an `ibv_wr_*` batch between `wr_start` and
//! `wr_complete`/`wr_abort`: the WQEs it built on the send queue and its
//! first error. Pure bookkeeping on the queue; the C entries are in `wr`.

#![forbid(unsafe_code)]

use kernel_abi::rxe_send_wqe;

use crate::errno::Errno;
use crate::libibverbs::qp::IBV_QPT_UD;
use crate::work_queue::WorkQueue;
use crate::wqe::{self, SendLimits, SendRequest, UdDest};

/// The state of the batch between `wr_start` and `wr_complete`/`wr_abort`,
/// guarded by the send queue's lock like the queue itself.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    /// The first error of the batch.
    err: Option<Errno>,
    /// The slot of the WQE built last, which setters fill in.
    last: Option<u32>,
    /// The last WQE is on a UD QP and has no address yet.
    needs_ud: bool,
}

impl Batch {
    /// `wr_start`: a fresh batch from the published producer index.
    pub(crate) fn start(&mut self, wq: &mut WorkQueue<SendLimits>) {
        *self = Batch::default();
        wq.prod = wq.ring().producer_index();
    }

    pub(crate) fn fail(&mut self, e: Errno) {
        self.err.get_or_insert(e);
    }

    /// A builder: the header of a new WQE in the next free slot.
    pub(crate) fn build(&mut self, wq: &mut WorkQueue<SendLimits>, req: &SendRequest) {
        if self.err.is_some() {
            return;
        }
        if self.needs_ud {
            return self.fail(Errno::EINVAL);
        }
        let index = wq.prod;
        match wq.next_slot() {
            // The stock provider's errno for a full queue in this API.
            Err(Errno::ENOMEM) => self.fail(Errno::ENOSPC),
            Err(e) => self.fail(e),
            Ok((hdr, _)) => {
                wqe::encode_header(req, hdr);
                wq.advance();
                self.last = Some(index);
                self.needs_ud = wq.limits.qp_type == IBV_QPT_UD;
            }
        }
    }

    /// A setter: `f` adjusts the WQE built last (its header, its payload).
    pub(crate) fn set(
        &mut self,
        wq: &mut WorkQueue<SendLimits>,
        f: impl FnOnce(&mut rxe_send_wqe, &mut [u8], &SendLimits) -> Result<(), Errno>,
    ) {
        if self.err.is_some() {
            return;
        }
        let Some(index) = self.last else {
            return self.fail(Errno::EINVAL);
        };
        let limits = wq.limits;
        // The slot is one this batch built: after the published producer
        // index, before ours.
        let (hdr, payload) = wq.slot_at(index);
        let r = f(hdr, payload, &limits);
        if let Err(e) = r {
            self.fail(e);
        }
    }

    /// `ibv_wr_set_ud_addr`.
    pub(crate) fn set_ud(&mut self, wq: &mut WorkQueue<SendLimits>, ud: Option<UdDest<'_>>) {
        if wq.limits.qp_type != IBV_QPT_UD {
            return self.fail(Errno::EINVAL);
        }
        let Some(ud) = ud else { return self.fail(Errno::EINVAL) };
        self.set(wq, |hdr, _, _| {
            wqe::set_ud(hdr, &ud);
            Ok(())
        });
        if self.err.is_none() {
            self.needs_ud = false;
        }
    }

    /// `wr_complete` up to the doorbell: `Ok(true)` when there is something
    /// to publish (the caller then publishes), `Ok(false)` for an empty
    /// batch; an error refuses the whole batch and rewinds our producer.
    pub(crate) fn finish(&mut self, wq: &mut WorkQueue<SendLimits>, accepts_posts: bool) -> Result<bool, Errno> {
        if self.needs_ud {
            self.fail(Errno::EINVAL);
        }
        if self.err.is_none() && self.last.is_some() && !accepts_posts {
            self.fail(Errno::EINVAL);
        }
        let r = match self.err {
            Some(e) => Err(e),
            None => Ok(self.last.is_some()),
        };
        if r.is_err() {
            self.abort(wq);
        }
        r
    }

    /// `wr_abort`: forget every WQE built since `wr_start`.
    pub(crate) fn abort(&mut self, wq: &mut WorkQueue<SendLimits>) {
        wq.prod = wq.ring().producer_index();
        self.last = None;
        self.needs_ud = false;
    }
}
