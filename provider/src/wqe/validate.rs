//! The checks a request passes whole before its slot is touched.

#![forbid(unsafe_code)]

use crate::errno::Errno;
use crate::libibverbs::qp::*;

use super::limits::{RecvLimits, SendLimits, SGE_SIZE};
use super::request::WrObjects;

/// The total length of a list of SGEs; `None` when it does not fit 32 bits.
#[inline(always)]
pub(crate) fn sge_total(sges: &[ibv_sge]) -> Option<u32> {
    match sges {
        // The common case: nothing to add, nothing to overflow.
        [one] => Some(one.length),
        _ => sges.iter().try_fold(0u32, |sum, s| sum.checked_add(s.length)),
    }
}

/// The opcodes with operand rules beyond the common ones.
const ATOMICS_AND_BIND: u32 = 1 << IBV_WR_ATOMIC_CMP_AND_SWP | 1 << IBV_WR_ATOMIC_FETCH_AND_ADD | 1 << IBV_WR_BIND_MW;

/// Checks a legacy send request against the queue; returns its message
/// length. `sges` is the request's list from [`send_sges`] (which bounds
/// it by `max_sge`), `objects` what its pointers name. Every rejection is
/// `EINVAL`, as `ibv_post_send(3)` and the stock provider give it (a full
/// queue is `ENOMEM`, checked by the caller).
#[inline(always)]
pub(crate) fn check_send(
    wr: &ibv_send_wr,
    sges: &[ibv_sge],
    objects: &WrObjects<'_>,
    lim: &SendLimits,
) -> Result<u32, Errno> {
    if !lim.allows(wr.opcode) || matches!(objects, WrObjects::Missing) {
        return Err(Errno::EINVAL);
    }
    check_allowed_send(wr, sges, lim)
}

/// [`check_send`] of a request whose opcode the queue allows and which
/// names no missing object ([`SendLimits::allows_naming_no_object`]): the
/// rest of its checks.
#[inline(always)]
pub(crate) fn check_allowed_send(wr: &ibv_send_wr, sges: &[ibv_sge], lim: &SendLimits) -> Result<u32, Errno> {
    let opcode = wr.opcode;
    let length = sge_total(sges).ok_or(Errno::EINVAL)?;
    if wr.send_flags & IBV_SEND_INLINE != 0 {
        // Inline bytes are read here, from addr: a NULL one with a length
        // would crash us (ibv_wr_set_inline_data* refuse it the same way).
        if length > lim.inline_room || sges.iter().any(|s| s.addr == 0 && s.length != 0) {
            return Err(Errno::EINVAL);
        }
    } else if sges.len() > lim.sge_room as usize {
        return Err(Errno::EINVAL);
    }
    // allows() proved 0 <= opcode < 32.
    if (ATOMICS_AND_BIND >> opcode) & 1 != 0 {
        let refused = if opcode == IBV_WR_BIND_MW {
            length != 0 || !sges.is_empty() || wr.imm_data != 0
        } else {
            length < 8 || wr.atomic_remote_addr() & 7 != 0
        };
        if refused {
            return Err(Errno::EINVAL);
        }
    }
    Ok(length)
}

/// Checks a receive request; returns its total length. Too many SGEs (for
/// the QP, or for the slot) is `EINVAL`, as for the stock provider.
pub(crate) fn validate_recv(sges: &[ibv_sge], lim: &RecvLimits) -> Result<u32, Errno> {
    if sges.len() > lim.max_sge as usize || sges.len() * SGE_SIZE > lim.payload_room {
        return Err(Errno::EINVAL);
    }
    sge_total(sges).ok_or(Errno::EINVAL)
}
