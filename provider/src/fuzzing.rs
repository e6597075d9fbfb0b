//! Entry points for the fuzz targets of `fuzz/` (cargo feature `fuzzing`): thin wrappers over
//! the crate's private work-request, CQ and kernel-response code, so the targets call exactly
//! what the verbs entries call. Not an API: nothing outside `fuzz/` uses it.

use core::ffi::{c_char, c_int};
use core::mem::MaybeUninit;

use kernel_abi::{ib_uverbs_ex_query_device_resp, ib_uverbs_wc, rxe_av, rxe_recv_wqe, rxe_send_wqe};

use crate::cq::poll_state::PollState;
use crate::errno::Errno;
use crate::libibverbs::cq::ibv_wc;
use crate::libibverbs::device_context::ibv_device_attr_ex;
use crate::libibverbs::qp::{ibv_data_buf, ibv_send_wr, ibv_sge};
use crate::post_raw;
use crate::ring::testing::FakeRing;
use crate::ring::Consumer;
use crate::wqe;

/// A window bind's operands, as the WQE takes them.
pub use crate::wqe::request::MwBind;

/// Bytes of a send slot before its payload.
pub const SEND_WQE_HEADER: usize = wqe::SEND_WQE_HEADER;
/// Bytes of a receive slot before its SGEs.
pub const RECV_WQE_HEADER: usize = wqe::RECV_WQE_HEADER;

/// A send queue's limits ([`wqe::SendLimits::new`]).
#[derive(Clone, Copy, Debug)]
pub struct SendLimits(wqe::SendLimits);

impl SendLimits {
    pub fn new(qp_type: c_int, max_sge: u32, max_inline: u32, payload_room: usize) -> SendLimits {
        SendLimits(wqe::SendLimits::new(qp_type, max_sge, max_inline, payload_room))
    }
}

/// What a legacy request's pointers name ([`wqe::WrObjects`]), owned.
#[derive(Clone, Copy)]
pub enum Objects {
    None,
    Ud {
        remote_qpn: u32,
        remote_qkey: u32,
        ah_num: u32,
        av: rxe_av,
    },
    Bind(MwBind),
    Missing,
}

impl Objects {
    fn as_wqe(&self) -> wqe::WrObjects<'_> {
        match self {
            Objects::None => wqe::WrObjects::None,
            Objects::Ud {
                remote_qpn,
                remote_qkey,
                ah_num,
                av,
            } => wqe::WrObjects::Ud(wqe::UdDest {
                remote_qpn: *remote_qpn,
                remote_qkey: *remote_qkey,
                ah_num: *ah_num,
                av,
            }),
            Objects::Bind(b) => wqe::WrObjects::Bind(*b),
            Objects::Missing => wqe::WrObjects::Missing,
        }
    }
}

/// `ibv_post_send` of one request into a slot, as `send_queue::post_one_send` does it:
/// [`post_raw::send_sges`], [`wqe::check_send`], then [`post_raw::encode_send`]. Returns the length.
///
/// # Safety
/// As for `ibv_post_send`: `sg_list` has `num_sge` entries when that is at most `max_sge`, and
/// with `IBV_SEND_INLINE` the SGEs describe readable memory.
pub unsafe fn post_send(
    wr: &ibv_send_wr,
    lim: &SendLimits,
    objects: &Objects,
    hdr: &mut rxe_send_wqe,
    payload: &mut [u8],
) -> Result<u32, Errno> {
    // SAFETY: forwarded.
    let sges = unsafe { post_raw::send_sges(wr, &lim.0) }?;
    let objects = objects.as_wqe();
    let length = wqe::check_send(wr, sges, &objects, &lim.0)?;
    // SAFETY: checked just above; inline sources per the contract.
    unsafe { post_raw::encode_send(wr, sges, length, &objects, hdr, payload) };
    Ok(length)
}

/// Whether the legacy API allows `opcode` on a QP of `qp_type`.
pub fn opcode_allowed(qp_type: c_int, opcode: c_int) -> bool {
    wqe::opcode_allowed(qp_type, opcode)
}

/// The `ibv_wr_*` builders' header ([`wqe::encode_header`]).
#[allow(clippy::too_many_arguments)]
pub fn wr_header(
    hdr: &mut rxe_send_wqe,
    wr_id: u64,
    opcode: c_int,
    send_flags: u32,
    imm_data: u32,
    remote_addr: u64,
    rkey: u32,
    compare_add: u64,
    swap: u64,
    bind: Option<MwBind>,
) {
    let req = wqe::SendRequest {
        wr_id,
        opcode,
        send_flags,
        imm_data,
        remote_addr,
        rkey,
        compare_add,
        swap,
        bind,
    };
    wqe::encode_header(&req, hdr);
}

/// `ibv_wr_set_sge_list` ([`wqe::set_sges`]).
pub fn wr_set_sges(
    hdr: &mut rxe_send_wqe,
    payload: &mut [u8],
    sges: &[ibv_sge],
    lim: &SendLimits,
) -> Result<(), Errno> {
    wqe::set_sges(hdr, payload, sges, &lim.0)
}

/// `ibv_wr_set_inline_data_list` ([`post_raw::set_inline`]).
///
/// # Safety
/// Every buffer describes `length` readable bytes at `addr`.
pub unsafe fn wr_set_inline(
    hdr: &mut rxe_send_wqe,
    payload: &mut [u8],
    bufs: &[ibv_data_buf],
    lim: &SendLimits,
) -> Result<(), Errno> {
    // SAFETY: forwarded.
    unsafe { post_raw::set_inline(hdr, payload, bufs, &lim.0) }
}

/// `ibv_post_recv` of one request ([`wqe::validate_recv`] then [`wqe::encode_recv`]).
pub fn post_recv(
    wr_id: u64,
    sges: &[ibv_sge],
    max_sge: u32,
    hdr: &mut rxe_recv_wqe,
    payload: &mut [u8],
) -> Result<u32, Errno> {
    let lim = wqe::RecvLimits {
        max_sge,
        payload_room: payload.len(),
    };
    let length = wqe::validate_recv(sges, &lim)?;
    wqe::encode_recv(wr_id, sges, length, hdr, payload);
    Ok(length)
}

/// A CQ's ring in a memfd with the kernel's side played by the caller, and the CQ's poll state
/// over it: `ibv_poll_cq`, `ibv_start_poll` / `next_poll` / `end_poll`, and the purge of a QP's
/// completions, exactly as the CQ object runs them (under its lock, which a single thread
/// needs not take).
pub struct Cq {
    kernel: FakeRing,
    state: PollState,
}

impl Cq {
    /// A ring of `1 << log2_slots` slots of a CQE each.
    pub fn new(log2_slots: u32) -> Cq {
        let mask = (1u32 << log2_slots) - 1;
        let kernel = FakeRing::new(size_of::<ib_uverbs_wc>().next_power_of_two().trailing_zeros(), mask, 0);
        let ring = Consumer::map(kernel.raw_fd(), &kernel.mi, size_of::<ib_uverbs_wc>()).ok();
        Cq {
            kernel,
            state: PollState::new(ring),
        }
    }

    /// The kernel completes: false when the ring is full.
    pub fn produce(&self, wc: &ib_uverbs_wc) -> bool {
        let k = &self.kernel.kernel;
        if k.indices().is_full(k.producer_index(), k.consumer_index()) {
            return false;
        }
        self.kernel.produce(wc);
        true
    }

    pub fn poll(&mut self, ne: usize) -> Result<Vec<ibv_wc>, Errno> {
        let mut out = vec![MaybeUninit::<ibv_wc>::uninit(); ne];
        let n = self.state.poll(&mut out)?;
        // SAFETY: poll wrote the first n entries.
        Ok(out[..n].iter().map(|w| unsafe { w.assume_init() }).collect())
    }

    pub fn start_poll(&mut self) -> Result<ib_uverbs_wc, Errno> {
        self.state.start()
    }

    pub fn next_poll(&mut self) -> Result<ib_uverbs_wc, Errno> {
        self.state.next()
    }

    pub fn end_poll(&mut self) {
        self.state.end()
    }

    /// Drops `qp_num`'s completions (not during an ex poll); returns how many.
    pub fn purge(&mut self, qp_num: u32, keep_receives: bool) -> u32 {
        self.state.drop_qp_completions(qp_num, keep_receives)
    }

    /// The consumer index the kernel sees.
    pub fn kernel_consumer(&self) -> u32 {
        self.kernel.kernel.consumer_index()
    }
}

/// `query_device_ex`'s reading of the kernel's response: the valid length, then the attributes.
pub fn device_attr(
    resp: &ib_uverbs_ex_query_device_resp,
    response_length: u32,
    num_ports: u32,
) -> Option<ibv_device_attr_ex> {
    let len = crate::query::valid_ex_len(response_length).ok()?;
    Some(crate::query::device_attr_from(resp, len, num_ports))
}

/// The legacy `query_device`'s reading (the fixed legacy length).
pub fn device_attr_legacy(resp: &ib_uverbs_ex_query_device_resp, num_ports: u32) -> ibv_device_attr_ex {
    crate::query::device_attr_from(resp, size_of::<kernel_abi::ib_uverbs_query_device_resp>(), num_ports)
}

pub fn format_fw_ver(raw: u64, out: &mut [c_char; 64]) {
    crate::query::format_fw_ver(raw, out)
}

pub fn parse_sysfs_gid(text: &str) -> Option<[u8; 16]> {
    crate::ah::parse_sysfs_gid(text)
}
