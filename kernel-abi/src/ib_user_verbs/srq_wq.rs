//! SRQs, WQs and RWQ indirection tables.

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
    pub struct ib_uverbs_create_xsrq [size 48] {
        0 => pub response: u64,
        8 => pub user_handle: u64,
        16 => pub srq_type: u32,
        20 => pub pd_handle: u32,
        24 => pub max_wr: u32,
        28 => pub max_sge: u32,
        32 => pub srq_limit: u32,
        36 => pub max_num_tags: u32,
        40 => pub xrcd_handle: u32,
        44 => pub cq_handle: u32,
        48 => pub driver_data: [u64; 0],
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

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_ex_create_wq [size 40] {
        0 => pub comp_mask: u32,
        4 => pub wq_type: u32,
        8 => pub user_handle: u64,
        16 => pub pd_handle: u32,
        20 => pub cq_handle: u32,
        24 => pub max_wr: u32,
        28 => pub max_sge: u32,
        32 => pub create_flags: u32,
        36 => pub reserved: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_ex_create_wq_resp [size 24] {
        0 => pub comp_mask: u32,
        4 => pub response_length: u32,
        8 => pub wq_handle: u32,
        12 => pub max_wr: u32,
        16 => pub max_sge: u32,
        20 => pub wqn: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_ex_destroy_wq [size 8] {
        0 => pub comp_mask: u32,
        4 => pub wq_handle: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_ex_destroy_wq_resp [size 16] {
        0 => pub comp_mask: u32,
        4 => pub response_length: u32,
        8 => pub events_reported: u32,
        12 => pub reserved: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_ex_modify_wq [size 24] {
        0 => pub attr_mask: u32,
        4 => pub wq_handle: u32,
        8 => pub wq_state: u32,
        12 => pub curr_wq_state: u32,
        16 => pub flags: u32,
        20 => pub flags_mask: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_ex_create_rwq_ind_table [size 8] {
        0 => pub comp_mask: u32,
        4 => pub log_ind_tbl_size: u32,
        8 => pub wq_handles: [u32; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_ex_create_rwq_ind_table_resp [size 16] {
        0 => pub comp_mask: u32,
        4 => pub response_length: u32,
        8 => pub ind_tbl_handle: u32,
        12 => pub ind_tbl_num: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_ex_destroy_rwq_ind_table [size 8] {
        0 => pub comp_mask: u32,
        4 => pub ind_tbl_handle: u32,
    }
}
