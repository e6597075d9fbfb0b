//! The poll paths of a CQ: `poll_cq`, and the `ibv_cq_ex` API
//! (`start_poll`/`next_poll`/`end_poll` and the `read_*` callbacks the
//! application asked for). `ibv_cq_ex` takes the CQ lock in `start_poll` and
//! drops it in `end_poll` (or in a `start_poll` that finds nothing), hence a
//! raw lock that records its holder; `poll_cq` holds it for the call. The C
//! entries are in `entry::cq`; what they do with the poll state is here.

#![forbid(unsafe_code)]

use core::ffi::c_int;
use core::mem::MaybeUninit;

use kernel_abi::ib_uverbs_wc;

use super::object::RxeCq;
use super::poll_state::PollState;
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

/// `poll_cq`'s answer for what [`PollState::poll`] returned: how many, or a negative errno.
#[inline(always)]
pub(crate) fn poll_answer(polled: Result<usize, Errno>) -> c_int {
    match polled {
        // n <= ne, which came from a c_int.
        Ok(n) => n as c_int,
        Err(errno) => errno.negative(),
    }
}

/// `poll_cq` with the CQ's queued purges applied first, under the lock, and when the lock
/// was not free (it waits, or EDEADLK inside this thread's `start_poll`).
#[cold]
#[inline(never)]
pub(crate) fn poll_cq_slow(cq: &RxeCq, out: &mut [MaybeUninit<ibv_wc>]) -> c_int {
    cq.locked(|s| {
        if cq.purge.is_queued() {
            cq.purge.apply(s);
        }
        poll_answer(s.poll(out))
    })
    .unwrap_or_else(Errno::negative)
}

impl RxeCq {
    /// `start_poll` with the pair open: the purges queued before it, then the oldest CQE.
    pub(crate) fn start_pair(&self, s: &mut PollState) -> Result<ib_uverbs_wc, Errno> {
        if self.purge.is_queued() {
            self.purge.apply(s);
        }
        s.start()
    }

    /// `end_poll` before it closes the pair: consumes what the pair handed out, then applies
    /// a purge that came while the pair was open (`cq::purge`).
    pub(crate) fn end_pair(&self, s: &mut PollState) {
        s.end();
        if self.purge.is_queued() {
            self.purge.apply(s);
        }
    }
}
