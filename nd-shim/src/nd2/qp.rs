//! IND2QueuePair: an RC QP of the Rust API ([`QueuePair`], so the connector can connect it)
//! whose requests are posted here with ND2's whole operation set: Send, Receive, Read, Write,
//! Bind and Invalidate of memory windows, Flush.
//! The caller's SGE arrays go to verbs as they are ([`super::sge`]). The vtable and C entries
//! are in `entry_data`.
#![forbid(unsafe_code)]

use std::sync::Arc;

use rdma_mummy_sys as ffi;

use super::adapter::AdapterBody;
use super::cq::CqBody;
use super::data_verbs::{post_recv, post_send, SendWr};
use super::mr::MrBody;
use super::mw::{BoundWindows, MwBody};
use super::requests::{self, QpRequests};
use super::sge::post_result;
use super::srq::SrqBody;
use super::{code, HResult, ND_INVALID_PARAMETER, ND_SUCCESS};
use crate::QueuePair;

const ND_OP_FLAG_SILENT_SUCCESS: u32 = 0x1;
const ND_OP_FLAG_READ_FENCE: u32 = 0x2;
const ND_OP_FLAG_SEND_AND_SOLICIT_EVENT: u32 = 0x4;
const ND_OP_FLAG_ALLOW_READ: u32 = 0x8;
const ND_OP_FLAG_ALLOW_WRITE: u32 = 0x10;
const ND_OP_FLAG_INLINE: u32 = 0x20;
const KNOWN_OP_FLAGS: u32 = ND_OP_FLAG_SILENT_SUCCESS
    | ND_OP_FLAG_READ_FENCE
    | ND_OP_FLAG_SEND_AND_SOLICIT_EVENT
    | ND_OP_FLAG_ALLOW_READ
    | ND_OP_FLAG_ALLOW_WRITE
    | ND_OP_FLAG_INLINE;

/// The verbs send flags of valid ND2 operation flags (no check).
const fn translate_send_flags(flags: u32) -> u32 {
    use ffi::ibv_send_flags as F;
    let mut out = 0;
    if flags & ND_OP_FLAG_SILENT_SUCCESS == 0 {
        out |= F::IBV_SEND_SIGNALED.0;
    }
    if flags & ND_OP_FLAG_READ_FENCE != 0 {
        out |= F::IBV_SEND_FENCE.0;
    }
    if flags & ND_OP_FLAG_SEND_AND_SOLICIT_EVENT != 0 {
        out |= F::IBV_SEND_SOLICITED.0;
    }
    out
}

/// Every combination of the known operation flags (they are the low six bits), translated once:
/// a Send looks its flags up instead of testing them one by one.
const SEND_FLAGS: [u32; 64] = {
    let mut table = [0; 64];
    let mut flags = 0;
    while flags < 64 {
        table[flags] = translate_send_flags(flags as u32);
        flags += 1;
    }
    table
};
const _: () = assert!(KNOWN_OP_FLAGS == 63);

/// Verbs send flags for ND2 operation flags; an unknown flag is ND_INVALID_PARAMETER.
/// ND_OP_FLAG_INLINE is not in the table: [`QpBody::inline_flag`] adds IBV_SEND_INLINE where the
/// request fits the QP's granted inline size.
#[inline]
pub(crate) fn send_flags(flags: u32) -> Result<u32, HResult> {
    match SEND_FLAGS.get(flags as usize) {
        Some(&out) => Ok(out),
        None => Err(ND_INVALID_PARAMETER),
    }
}

/// rxe's work queue entry headers (`<rdma/rdma_user_rxe.h>`, the kernel ABI):
/// sizeof(struct rxe_send_wqe) and sizeof(struct rxe_recv_wqe); an SGE is 16 bytes.
const RXE_SEND_WQE_HEADER: u32 = 208;
const RXE_RECV_WQE_HEADER: u32 = 40;
const SGE_BYTES: u32 = 16;

/// The payload room of an rxe queue slot that must hold `payload` bytes after `header`: rxe's
/// queues round a slot up to a power of two, at least a cache line (64 bytes).
const fn slot_room(header: u32, payload: u32) -> u32 {
    let slot = (header + payload).next_power_of_two();
    (if slot < 64 { 64 } else { slot }) - header
}

/// ND2's QP limits are minimums that a provider may round up: the verbs QP is asked for what
/// the slots rxe allocates for the request hold anyway (the same memory): as many SGEs and as
/// much inline data as fit, up to the device's maxima. rxe grants a send queue
/// max(SGEs x 16, inline) bytes of payload (its slot is that plus the header, rounded), so
/// asking more than the request within the same slot changes nothing but the limits.
/// `cap` is already within the adapter's limits (small numbers: no overflow).
pub(super) fn fitted_caps(cap: ffi::ibv_qp_cap, max_sge: u32, max_inline: u32) -> ffi::ibv_qp_cap {
    let send_room = slot_room(
        RXE_SEND_WQE_HEADER,
        (cap.max_send_sge * SGE_BYTES).max(cap.max_inline_data),
    );
    let max_recv_sge = if cap.max_recv_sge == 0 {
        0 // receives come from an SRQ
    } else {
        let recv_room = slot_room(RXE_RECV_WQE_HEADER, cap.max_recv_sge * SGE_BYTES);
        cap.max_recv_sge.max((recv_room / SGE_BYTES).min(max_sge))
    };
    ffi::ibv_qp_cap {
        max_send_wr: cap.max_send_wr,
        max_recv_wr: cap.max_recv_wr,
        max_send_sge: cap.max_send_sge.max((send_room / SGE_BYTES).min(max_sge)),
        max_recv_sge,
        max_inline_data: cap.max_inline_data.max(send_room.min(max_inline)),
    }
}

pub(crate) struct QpBody {
    adapter: Arc<AdapterBody>,
    pub(super) qp: QueuePair,
    /// What was posted and has not completed (ND2_RESULT's contexts and type).
    requests: Arc<QpRequests>,
    _receive_cq: Arc<CqBody>,
    _initiator_cq: Arc<CqBody>,
    _srq: Option<Arc<SrqBody>>,
    /// The windows bound through this QP, which its release takes ([`MwBody::release_from`]).
    windows: BoundWindows<MwBody>,
}

impl QpBody {
    pub(super) fn new(
        adapter: Arc<AdapterBody>,
        receive_cq: Arc<CqBody>,
        initiator_cq: Arc<CqBody>,
        srq: Option<Arc<SrqBody>>,
        context: usize,
        cap: ffi::ibv_qp_cap,
    ) -> Result<QpBody, HResult> {
        let raw_srq = srq.as_ref().map(|s| {
            let keep: Arc<dyn Send + Sync> = s.srq.clone();
            (s.srq.0, keep)
        });
        // The fitted request first; a device whose slots are not rxe's may refuse it, then the
        // caller's own.
        let fitted = fitted_caps(cap, adapter.device_max_sge, adapter.info.max_inline_data_size);
        let qp = QueuePair::with_caps(
            &adapter.adapter,
            &receive_cq.cq,
            &initiator_cq.cq,
            raw_srq.clone(),
            fitted,
        )
        .or_else(|_| QueuePair::with_caps(&adapter.adapter, &receive_cq.cq, &initiator_cq.cq, raw_srq, cap))
        .map_err(code)?;
        let granted = qp.inner.granted;
        log::debug!(
            "CreateQueuePair: asked SGEs {}/{} inline {}, granted SGEs {}/{} inline {}",
            cap.max_send_sge,
            cap.max_recv_sge,
            cap.max_inline_data,
            granted.max_send_sge,
            granted.max_recv_sge,
            granted.max_inline_data
        );
        let srq_requests = srq.as_ref().map(|s| Arc::clone(&s.requests));
        let requests = adapter.requests.open_qp(qp.qp_num(), context, srq_requests);
        Ok(QpBody {
            adapter,
            qp,
            requests,
            _receive_cq: receive_cq,
            _initiator_cq: initiator_cq,
            _srq: srq,
            windows: BoundWindows::default(),
        })
    }

    /// IBV_SEND_INLINE for a Send or Write with ND_OP_FLAG_INLINE whose bytes fit the inline
    /// size the QP was granted (at least what Query reports and CreateQueuePair asked): its data
    /// is copied at the post, from registered memory or not (an inline SGE's token "may be
    /// invalid"). A larger one goes from its SGEs, whose tokens then count.
    #[inline]
    fn inline_flag(&self, flags: u32, sges: &[ffi::ibv_sge]) -> u32 {
        if flags & ND_OP_FLAG_INLINE == 0 {
            return 0;
        }
        let total: u64 = sges.iter().map(|s| u64::from(s.length)).sum();
        if total <= u64::from(self.qp.inner.granted.max_inline_data) {
            ffi::ibv_send_flags::IBV_SEND_INLINE.0
        } else {
            0
        }
    }

    /// Posts a send work request under a wr_id of its record ([`super::requests`]).
    fn post(&self, mut wr: SendWr<'_>) -> Result<HResult, HResult> {
        let silent = wr.send_flags() & ffi::ibv_send_flags::IBV_SEND_SIGNALED.0 == 0;
        self.requests
            .post_send(wr.wr_id(), requests::of_send(wr.opcode()), silent, |wr_id| {
                wr.set_wr_id(wr_id);
                post_result(post_send(&self.qp, &mut wr)).map(|_| ())
            })
            .map(|()| ND_SUCCESS)
    }

    /// A send work request with the common fields.
    fn request<'a>(
        context: u64,
        sges: &'a [ffi::ibv_sge],
        opcode: ffi::ibv_wr_opcode::Type,
        flags: u32,
    ) -> Result<SendWr<'a>, HResult> {
        Ok(SendWr::new(context, sges, opcode, send_flags(flags)?))
    }

    /// IND2QueuePair::Flush.
    pub(super) fn flush(&self) -> Result<HResult, HResult> {
        self.qp.inner.flush().map_err(code)?;
        Ok(ND_SUCCESS)
    }

    /// Send with a context that needs a record.
    pub(super) fn send_recorded(&self, context: u64, sges: &[ffi::ibv_sge], flags: u32) -> Result<HResult, HResult> {
        let mut wr = QpBody::request(context, sges, ffi::ibv_wr_opcode::IBV_WR_SEND, flags)?;
        wr.add_send_flags(self.inline_flag(flags, sges));
        self.post(wr)
    }

    /// Send with a direct context (the common path): the work request is built once, where the
    /// provider reads it, under the wr_id that carries the request (no record, no copy through
    /// [`QpBody::post`]). A table lookup, arithmetic and the provider's post: nothing here can
    /// panic.
    #[inline(always)]
    pub(super) fn send_direct(&self, context: u64, sges: &[ffi::ibv_sge], flags: u32) -> Result<HResult, HResult> {
        let send_flags = send_flags(flags)? | self.inline_flag(flags, sges);
        let silent = send_flags & ffi::ibv_send_flags::IBV_SEND_SIGNALED.0 == 0;
        self.requests
            .post_send(context, requests::SEND, silent, |wr_id| {
                let mut wr = SendWr::new(wr_id, sges, ffi::ibv_wr_opcode::IBV_WR_SEND, send_flags);
                post_result(post_send(&self.qp, &mut wr)).map(|_| ())
            })
            .map(|()| ND_SUCCESS)
    }

    /// Receive's body: the request's wr_id (direct, or a record's) and the provider's post.
    #[inline(always)]
    pub(super) fn post_receive(&self, context: u64, sges: &[ffi::ibv_sge]) -> Result<HResult, HResult> {
        self.requests
            .post_receive(context, |wr_id| {
                post_result(post_recv(&self.qp, wr_id, sges)).map(|_| ())
            })
            .map(|()| {
                self.qp.inner.after_receive();
                ND_SUCCESS
            })
    }

    /// IND2QueuePair::Read and Write.
    pub(super) fn rdma(
        &self,
        opcode: ffi::ibv_wr_opcode::Type,
        context: u64,
        sges: &[ffi::ibv_sge],
        remote_address: u64,
        remote_token: u32,
        flags: u32,
    ) -> Result<HResult, HResult> {
        let mut wr = QpBody::request(context, sges, opcode, flags)?;
        if opcode == ffi::ibv_wr_opcode::IBV_WR_RDMA_WRITE {
            wr.add_send_flags(self.inline_flag(flags, sges));
        }
        // The token as GetRemoteToken gives it: the rkey in network byte order.
        wr.set_rdma(remote_address, u32::from_be(remote_token));
        self.post(wr)
    }

    /// IND2QueuePair::Bind of `mw` to `len` bytes at `buffer` of `mr`.
    pub(super) fn bind(
        &self,
        context: u64,
        mr: &MrBody,
        mw: &Arc<MwBody>,
        buffer: u64,
        len: u64,
        flags: u32,
    ) -> Result<HResult, HResult> {
        // Counted as a Bind of the region until the post returned (Deregister meanwhile is
        // ND_DEVICE_BUSY).
        let region = mr.begin_bind().ok_or(ND_INVALID_PARAMETER)?;
        use ffi::ibv_access_flags as A;
        let mut access = 0;
        if flags & ND_OP_FLAG_ALLOW_READ != 0 {
            access |= A::IBV_ACCESS_REMOTE_READ.0;
        }
        if flags & ND_OP_FLAG_ALLOW_WRITE != 0 {
            access |= A::IBV_ACCESS_REMOTE_WRITE.0;
        }
        // Flags checked before the window gives out a new rkey.
        let wr = QpBody::request(
            context,
            &[],
            ffi::ibv_wr_opcode::IBV_WR_BIND_MW,
            flags & !(ND_OP_FLAG_ALLOW_READ | ND_OP_FLAG_ALLOW_WRITE),
        )?;
        let posted = mw.bind_through(self.qp.qp_num(), |raw_mw, rkey| {
            let mut wr = wr;
            wr.set_bind(raw_mw, rkey, &region, buffer, len, access);
            self.post(wr)
        })?;
        self.windows.note(mw);
        Ok(posted)
    }

    /// IND2QueuePair::Invalidate of `mw`.
    pub(super) fn invalidate(&self, context: u64, mw: &MwBody, flags: u32) -> Result<HResult, HResult> {
        let mut wr = QpBody::request(context, &[], ffi::ibv_wr_opcode::IBV_WR_LOCAL_INV, flags)?;
        wr.set_invalidated_rkey(mw.rkey());
        self.post(wr)
    }
}

impl Drop for QpBody {
    fn drop(&mut self) {
        // Before the verbs QP goes: rxe's destroy would wait for the windows bound through it.
        let qp_num = self.qp.qp_num();
        for window in self.windows.take() {
            window.release_from(qp_num);
        }
        self.adapter.requests.close_qp(self.qp.qp_num(), &self.requests);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ffi::ibv_send_flags as F;

    fn cap(send_sge: u32, recv_sge: u32, inline: u32) -> ffi::ibv_qp_cap {
        ffi::ibv_qp_cap {
            max_send_wr: 8,
            max_recv_wr: 8,
            max_send_sge: send_sge,
            max_recv_sge: recv_sge,
            max_inline_data: inline,
        }
    }

    #[test]
    fn caps_fill_the_slot_rxe_allocates() {
        let fit = |s, r, i| {
            let c = fitted_caps(cap(s, r, i), 32, 512);
            assert_eq!((c.max_send_wr, c.max_recv_wr), (8, 8));
            (c.max_send_sge, c.max_recv_sge, c.max_inline_data)
        };
        // 208 + 16 -> a 256-byte slot: 48 bytes of room, 3 SGEs; a receive slot of 40 + 16 -> 64.
        assert_eq!(fit(1, 1, 0), (3, 1, 48));
        assert_eq!(fit(0, 1, 0), (3, 1, 48));
        assert_eq!(fit(2, 2, 0), (3, 5, 48));
        assert_eq!(fit(3, 5, 48), (3, 5, 48));
        // 208 + 64 -> 512: 304 bytes, 19 SGEs.
        assert_eq!(fit(4, 4, 0), (19, 5, 304));
        assert_eq!(fit(1, 1, 100), (19, 1, 304));
        // The device's maxima bound the rounding up.
        assert_eq!(fit(32, 27, 0), (32, 29, 512));
        assert_eq!(fit(32, 32, 0), (32, 32, 512));
        assert_eq!(fit(1, 1, 512), (32, 1, 512));
        // With an SRQ: no receive SGEs.
        assert_eq!(fit(1, 0, 0), (3, 0, 48));
        // Never less than asked, whatever the device says.
        let c = fitted_caps(cap(4, 4, 64), 2, 16);
        assert_eq!((c.max_send_sge, c.max_recv_sge, c.max_inline_data), (4, 4, 64));
    }

    #[test]
    fn operation_flags() {
        assert_eq!(send_flags(0), Ok(F::IBV_SEND_SIGNALED.0));
        assert_eq!(send_flags(ND_OP_FLAG_SILENT_SUCCESS), Ok(0));
        assert_eq!(
            send_flags(ND_OP_FLAG_READ_FENCE | ND_OP_FLAG_SEND_AND_SOLICIT_EVENT | ND_OP_FLAG_INLINE),
            Ok(F::IBV_SEND_SIGNALED.0 | F::IBV_SEND_FENCE.0 | F::IBV_SEND_SOLICITED.0)
        );
        assert_eq!(send_flags(0x40), Err(ND_INVALID_PARAMETER));
        assert_eq!(send_flags(u32::MAX), Err(ND_INVALID_PARAMETER));
        // Every valid combination: signaled unless silent, and the verbs flags of its other flags.
        let each = [
            (ND_OP_FLAG_READ_FENCE, F::IBV_SEND_FENCE.0),
            (ND_OP_FLAG_SEND_AND_SOLICIT_EVENT, F::IBV_SEND_SOLICITED.0),
            (ND_OP_FLAG_ALLOW_READ, 0),
            (ND_OP_FLAG_ALLOW_WRITE, 0),
            (ND_OP_FLAG_INLINE, 0),
        ];
        for flags in 0..=KNOWN_OP_FLAGS {
            let signaled = if flags & ND_OP_FLAG_SILENT_SUCCESS == 0 {
                F::IBV_SEND_SIGNALED.0
            } else {
                0
            };
            let want = each
                .iter()
                .filter(|&&(flag, _)| flags & flag != 0)
                .fold(signaled, |want, &(_, verbs)| want | verbs);
            assert_eq!(send_flags(flags), Ok(want), "flags {flags:#x}");
        }
    }
}
