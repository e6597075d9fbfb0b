//! CQs: create, resize, notify and destroy, and the `ib_uverbs_wc` completion record.

use crate::layout::abi;
use zerocopy::IntoBytes;

abi! {
    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_create_cq [size 32] {
        0 => pub response: u64,
        8 => pub user_handle: u64,
        16 => pub cqe: u32,
        20 => pub comp_vector: u32,
        24 => pub comp_channel: i32,
        28 => pub reserved: u32,
        32 => pub driver_data: [u64; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_ex_create_cq [size 32] {
        0 => pub user_handle: u64,
        8 => pub cqe: u32,
        12 => pub comp_vector: u32,
        16 => pub comp_channel: i32,
        20 => pub comp_mask: u32,
        24 => pub flags: u32,
        28 => pub reserved: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_create_cq_resp [size 8] {
        0 => pub cq_handle: u32,
        4 => pub cqe: u32,
        8 => pub driver_data: [u64; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_ex_create_cq_resp [size 16] {
        0 => pub base: ib_uverbs_create_cq_resp,
        8 => pub comp_mask: u32,
        12 => pub response_length: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_resize_cq [size 16] {
        0 => pub response: u64,
        8 => pub cq_handle: u32,
        12 => pub cqe: u32,
        16 => pub driver_data: [u64; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_resize_cq_resp [size 8] {
        0 => pub cqe: u32,
        4 => pub reserved: u32,
        8 => pub driver_data: [u64; 0],
    }

    pub union ib_uverbs_wc_ex [size 4, unnamed] {
        /// Big-endian (`__be32`).
        0 => pub imm_data: u32,
        0 => pub invalidate_rkey: u32,
    }

    /// A completion as `IB_USER_VERBS_CMD_POLL_CQ` returns it (rxe's CQ ring holds the same
    /// record).
    pub struct ib_uverbs_wc [size 48] {
        0 => pub wr_id: u64,
        8 => pub status: u32,
        12 => pub opcode: u32,
        16 => pub vendor_err: u32,
        20 => pub byte_len: u32,
        24 => pub ex: ib_uverbs_wc_ex,
        28 => pub qp_num: u32,
        32 => pub src_qp: u32,
        36 => pub wc_flags: u32,
        40 => pub pkey_index: u16,
        42 => pub slid: u16,
        44 => pub sl: u8,
        45 => pub dlid_path_bits: u8,
        46 => pub port_num: u8,
        47 => pub reserved: u8,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_req_notify_cq [size 8] {
        0 => pub cq_handle: u32,
        4 => pub solicited_only: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_destroy_cq [size 16] {
        0 => pub response: u64,
        8 => pub cq_handle: u32,
        12 => pub reserved: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_destroy_cq_resp [size 8] {
        0 => pub comp_events_reported: u32,
        4 => pub async_events_reported: u32,
    }
}
