//! `<rdma/rdma_user_rxe.h>`: rdma_rxe's user ABI: the mmap'd queue buffer, the send and receive
//! WQEs that live in it, the address vector, and the driver parts of the create responses.
//!
//! Follows the Linux 6.1 header plus two later additions (Linux 6.2) that newer kernels
//! understand: `rxe_send_wr.wr.flush` and `rxe_dma_info.atomic_wr`. Neither changes a size.

use crate::layout::{abi, abi_consts};
use crate::linux_in::{sockaddr_in, sockaddr_in6};
use zerocopy::IntoBytes;

abi_consts! {
    /// `rxe_av.network_type`: the address family of `sgid_addr`/`dgid_addr`.
    pub const RXE_NETWORK_TYPE_IPV4: u32 = 1;
    pub const RXE_NETWORK_TYPE_IPV6: u32 = 2;
}

abi! {
    #[derive(IntoBytes, Debug)]
    pub struct rxe_gid_global [size 16, unnamed] {
        /// Big-endian (`__be64`).
        0 => pub subnet_prefix: u64,
        /// Big-endian (`__be64`).
        8 => pub interface_id: u64,
    }

    /// A GID, as raw bytes or as its two big-endian halves.
    pub union rxe_gid [size 16] {
        0 => pub raw: [u8; 16],
        0 => pub global: rxe_gid_global,
    }

    pub struct rxe_global_route [size 24] {
        0 => pub dgid: rxe_gid,
        16 => pub flow_label: u32,
        20 => pub sgid_index: u8,
        21 => pub hop_limit: u8,
        22 => pub traffic_class: u8,
    }

    /// The unnamed union behind both `rxe_av.sgid_addr` and `rxe_av.dgid_addr` (C declares the
    /// two members with one union type); `rxe_av.network_type` says which arm is valid.
    pub union rxe_av_sockaddr [size 28, unnamed] {
        0 => pub _sockaddr_in: sockaddr_in,
        0 => pub _sockaddr_in6: sockaddr_in6,
    }

    /// The address vector: a UD send WR carries it inline, `rxe_create_ah_resp.ah_num` names a
    /// kernel copy instead.
    pub struct rxe_av [size 88] {
        /// One of `RXE_NETWORK_TYPE_*`.
        0 => pub port_num: u8,
        1 => pub network_type: u8,
        2 => pub dmac: [u8; 6],
        8 => pub grh: rxe_global_route,
        32 => pub sgid_addr: rxe_av_sockaddr,
        60 => pub dgid_addr: rxe_av_sockaddr,
    }

    pub union rxe_send_wr_ex [size 4, unnamed] {
        /// Big-endian (`__be32`).
        0 => pub imm_data: u32,
        0 => pub invalidate_rkey: u32,
    }

    /// `rxe_send_wr.wr.flush`, Linux 6.2+. Trailing padding, so no `IntoBytes`.
    #[derive(Debug)]
    pub struct rxe_send_wr_wr_flush [size 24, unnamed] {
        0 => pub remote_addr: u64,
        8 => pub length: u32,
        12 => pub rkey: u32,
        /// `IB_FLUSH_GLOBAL` and/or `IB_FLUSH_PERSISTENT` (placement type).
        16 => pub r#type: u8,
        /// `IB_FLUSH_RANGE` or `IB_FLUSH_MR` (selectivity level).
        17 => pub level: u8,
    }

    #[derive(IntoBytes, Debug)]
    pub struct rxe_send_wr_wr_rdma [size 16, unnamed] {
        0 => pub remote_addr: u64,
        8 => pub rkey: u32,
        12 => pub reserved: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct rxe_send_wr_wr_atomic [size 32, unnamed] {
        0 => pub remote_addr: u64,
        8 => pub compare_add: u64,
        16 => pub swap: u64,
        24 => pub rkey: u32,
        28 => pub reserved: u32,
    }

    pub struct rxe_send_wr_wr_ud [size 120, unnamed] {
        0 => pub remote_qpn: u32,
        4 => pub remote_qkey: u32,
        8 => pub pkey_index: u16,
        10 => pub reserved: u16,
        12 => pub ah_num: u32,
        16 => pub pad: [u32; 4],
        32 => pub av: rxe_av,
    }

    #[derive(IntoBytes, Debug)]
    pub struct rxe_send_wr_wr_mw [size 32, unnamed] {
        0 => pub addr: u64,
        8 => pub length: u64,
        16 => pub mr_lkey: u32,
        20 => pub mw_rkey: u32,
        24 => pub rkey: u32,
        28 => pub access: u32,
    }

    /// `rxe_send_wr.wr`: the opcode-specific part of a send WR.
    pub union rxe_send_wr_wr [size 120, unnamed] {
        /// Linux 6.2+ (not in the 6.1 header): RDMA FLUSH.
        0 => pub flush: rxe_send_wr_wr_flush,
        0 => pub rdma: rxe_send_wr_wr_rdma,
        0 => pub atomic: rxe_send_wr_wr_atomic,
        0 => pub ud: rxe_send_wr_wr_ud,
        0 => pub mw: rxe_send_wr_wr_mw,
    }

    /// A send work request as the kernel reads it from the send queue.
    pub struct rxe_send_wr [size 144] {
        0 => pub wr_id: u64,
        8 => pub reserved: u32,
        /// An `IB_UVERBS_WR_*` opcode.
        12 => pub opcode: u32,
        /// `IB_UVERBS_SEND_*` flags.
        16 => pub send_flags: u32,
        20 => pub ex: rxe_send_wr_ex,
        24 => pub wr: rxe_send_wr_wr,
    }

    #[derive(IntoBytes, Debug)]
    pub struct rxe_sge [size 16] {
        0 => pub addr: u64,
        8 => pub length: u32,
        12 => pub lkey: u32,
    }

    /// Where to mmap a queue: `offset` on the uverbs fd, `size` bytes.
    #[derive(IntoBytes, Debug)]
    pub struct mminfo [size 16] {
        0 => pub offset: u64,
        8 => pub size: u32,
        12 => pub pad: u32,
    }

    /// Progress through a WQE's data and, after it, the data itself (SGEs or inline bytes).
    pub struct rxe_dma_info [size 24] {
        0 => pub length: u32,
        4 => pub resid: u32,
        8 => pub cur_sge: u32,
        12 => pub num_sge: u32,
        16 => pub sge_offset: u32,
        20 => pub reserved: u32,
        24 => pub payload: rxe_dma_payload,
    }

    /// The anonymous union that ends `rxe_dma_info`: what follows the header in the WQE slot.
    pub union rxe_dma_payload [size 0, anonymous] {
        /// Inline send data (`IB_UVERBS_SEND_INLINE`).
        0 => pub inline_data: [u8; 0],
        /// Linux 6.2+ (not in the 6.1 header): the 8 bytes of an atomic write.
        0 => pub atomic_wr: [u8; 0],
        /// The scatter/gather list, `num_sge` entries.
        0 => pub sge: [rxe_sge; 0],
    }

    /// One send queue slot. The slot size is the queue's `1 << log2_elem_size`, larger than
    /// this header when SGEs or inline data follow.
    pub struct rxe_send_wqe [size 208] {
        0 => pub wr: rxe_send_wr,
        144 => pub status: u32,
        148 => pub state: u32,
        152 => pub iova: u64,
        160 => pub mask: u32,
        164 => pub first_psn: u32,
        168 => pub last_psn: u32,
        172 => pub ack_length: u32,
        176 => pub ssn: u32,
        180 => pub has_rd_atomic: u32,
        184 => pub dma: rxe_dma_info,
    }

    /// One receive queue (or SRQ) slot; SGEs follow as for send.
    pub struct rxe_recv_wqe [size 40] {
        0 => pub wr_id: u64,
        8 => pub reserved: u32,
        12 => pub padding: u32,
        16 => pub dma: rxe_dma_info,
    }

    #[derive(IntoBytes, Debug)]
    pub struct rxe_create_ah_resp [size 8] {
        0 => pub ah_num: u32,
        4 => pub reserved: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct rxe_create_cq_resp [size 16] {
        0 => pub mi: mminfo,
    }

    #[derive(IntoBytes, Debug)]
    pub struct rxe_resize_cq_resp [size 16] {
        0 => pub mi: mminfo,
    }

    #[derive(IntoBytes, Debug)]
    pub struct rxe_create_qp_resp [size 32] {
        0 => pub rq_mi: mminfo,
        16 => pub sq_mi: mminfo,
    }

    #[derive(IntoBytes, Debug)]
    pub struct rxe_create_srq_resp [size 24] {
        0 => pub mi: mminfo,
        16 => pub srq_num: u32,
        20 => pub reserved: u32,
    }

    /// Driver part of modify SRQ: where the kernel writes the SRQ's new `mminfo` on resize.
    #[derive(IntoBytes, Debug)]
    pub struct rxe_modify_srq_cmd [size 8] {
        0 => pub mmap_info_addr: u64,
    }

    /// The header at the start of every mmap'd rxe queue (SQ, RQ, SRQ, CQ), then the slots.
    ///
    /// Producer and consumer indices sit in separate 128-byte blocks so that the two sides do
    /// not share a cache line; indices are kept masked, in `[0, index_mask]`: each side advances
    /// its own as `(i + 1) & index_mask`.
    #[derive(IntoBytes, Debug)]
    pub struct rxe_queue_buf [size 384] {
        0 => pub log2_elem_size: u32,
        4 => pub index_mask: u32,
        8 => pub pad_1: [u32; 30],
        128 => pub producer_index: u32,
        132 => pub pad_2: [u32; 31],
        256 => pub consumer_index: u32,
        260 => pub pad_3: [u32; 31],
        384 => pub data: [u8; 0],
    }
}
