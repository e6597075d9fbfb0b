//! SRQs: create, modify, query and destroy.

use crate::layout::abi;
use zerocopy::IntoBytes;

abi! {
    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_create_srq [size 32] {
        0 => pub response: u64,
        8 => pub user_handle: u64,
        16 => pub pd_handle: u32,
        20 => pub max_wr: u32,
        24 => pub max_sge: u32,
        28 => pub srq_limit: u32,
        32 => pub driver_data: [u64; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_create_srq_resp [size 16] {
        0 => pub srq_handle: u32,
        4 => pub max_wr: u32,
        8 => pub max_sge: u32,
        12 => pub srqn: u32,
        16 => pub driver_data: [u32; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_modify_srq [size 16] {
        0 => pub srq_handle: u32,
        4 => pub attr_mask: u32,
        8 => pub max_wr: u32,
        12 => pub srq_limit: u32,
        16 => pub driver_data: [u64; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_query_srq [size 16] {
        0 => pub response: u64,
        8 => pub srq_handle: u32,
        12 => pub reserved: u32,
        16 => pub driver_data: [u64; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_query_srq_resp [size 16] {
        0 => pub max_wr: u32,
        4 => pub max_sge: u32,
        8 => pub srq_limit: u32,
        12 => pub reserved: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_destroy_srq [size 16] {
        0 => pub response: u64,
        8 => pub srq_handle: u32,
        12 => pub reserved: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_destroy_srq_resp [size 4] {
        0 => pub events_reported: u32,
    }
}
