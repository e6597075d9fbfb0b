//! QPs and what hangs off them: the AH and QP attribute records, create/query/modify/destroy
//! QP, posting send work requests, AHs and multicast attach.

use crate::layout::abi;
use zerocopy::IntoBytes;

abi! {
    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_global_route [size 24] {
        0 => pub dgid: [u8; 16],
        16 => pub flow_label: u32,
        20 => pub sgid_index: u8,
        21 => pub hop_limit: u8,
        22 => pub traffic_class: u8,
        23 => pub reserved: u8,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_ah_attr [size 32] {
        0 => pub grh: ib_uverbs_global_route,
        24 => pub dlid: u16,
        26 => pub sl: u8,
        27 => pub src_path_bits: u8,
        28 => pub static_rate: u8,
        29 => pub is_global: u8,
        30 => pub port_num: u8,
        31 => pub reserved: u8,
    }

    /// Create QP. The rxe driver data (the send/receive queue mmap info) comes back in the
    /// response's `driver_data` as `rxe_create_qp_resp`.
    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_create_qp [size 56] {
        0 => pub response: u64,
        8 => pub user_handle: u64,
        16 => pub pd_handle: u32,
        20 => pub send_cq_handle: u32,
        24 => pub recv_cq_handle: u32,
        28 => pub srq_handle: u32,
        32 => pub max_send_wr: u32,
        36 => pub max_recv_wr: u32,
        40 => pub max_send_sge: u32,
        44 => pub max_recv_sge: u32,
        48 => pub max_inline_data: u32,
        52 => pub sq_sig_all: u8,
        53 => pub qp_type: u8,
        54 => pub is_srq: u8,
        55 => pub reserved: u8,
        56 => pub driver_data: [u64; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_create_qp_resp [size 32] {
        0 => pub qp_handle: u32,
        4 => pub qpn: u32,
        8 => pub max_send_wr: u32,
        12 => pub max_recv_wr: u32,
        16 => pub max_send_sge: u32,
        20 => pub max_recv_sge: u32,
        24 => pub max_inline_data: u32,
        28 => pub reserved: u32,
        32 => pub driver_data: [u32; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_qp_dest [size 32] {
        0 => pub dgid: [u8; 16],
        16 => pub flow_label: u32,
        20 => pub dlid: u16,
        22 => pub reserved: u16,
        24 => pub sgid_index: u8,
        25 => pub hop_limit: u8,
        26 => pub traffic_class: u8,
        27 => pub sl: u8,
        28 => pub src_path_bits: u8,
        29 => pub static_rate: u8,
        30 => pub is_global: u8,
        31 => pub port_num: u8,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_query_qp [size 16] {
        0 => pub response: u64,
        8 => pub qp_handle: u32,
        12 => pub attr_mask: u32,
        16 => pub driver_data: [u64; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_query_qp_resp [size 128] {
        0 => pub dest: ib_uverbs_qp_dest,
        32 => pub alt_dest: ib_uverbs_qp_dest,
        64 => pub max_send_wr: u32,
        68 => pub max_recv_wr: u32,
        72 => pub max_send_sge: u32,
        76 => pub max_recv_sge: u32,
        80 => pub max_inline_data: u32,
        84 => pub qkey: u32,
        88 => pub rq_psn: u32,
        92 => pub sq_psn: u32,
        96 => pub dest_qp_num: u32,
        100 => pub qp_access_flags: u32,
        104 => pub pkey_index: u16,
        106 => pub alt_pkey_index: u16,
        108 => pub qp_state: u8,
        109 => pub cur_qp_state: u8,
        110 => pub path_mtu: u8,
        111 => pub path_mig_state: u8,
        112 => pub sq_draining: u8,
        113 => pub max_rd_atomic: u8,
        114 => pub max_dest_rd_atomic: u8,
        115 => pub min_rnr_timer: u8,
        116 => pub port_num: u8,
        117 => pub timeout: u8,
        118 => pub retry_cnt: u8,
        119 => pub rnr_retry: u8,
        120 => pub alt_port_num: u8,
        121 => pub alt_timeout: u8,
        122 => pub sq_sig_all: u8,
        123 => pub reserved: [u8; 5],
        128 => pub driver_data: [u64; 0],
    }

    /// Legacy modify QP: `attr_mask` is a set of `IB_QP_*` bits (from verbs, not in this
    /// header).
    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_modify_qp [size 112] {
        0 => pub dest: ib_uverbs_qp_dest,
        32 => pub alt_dest: ib_uverbs_qp_dest,
        64 => pub qp_handle: u32,
        68 => pub attr_mask: u32,
        72 => pub qkey: u32,
        76 => pub rq_psn: u32,
        80 => pub sq_psn: u32,
        84 => pub dest_qp_num: u32,
        88 => pub qp_access_flags: u32,
        92 => pub pkey_index: u16,
        94 => pub alt_pkey_index: u16,
        96 => pub qp_state: u8,
        97 => pub cur_qp_state: u8,
        98 => pub path_mtu: u8,
        99 => pub path_mig_state: u8,
        100 => pub en_sqd_async_notify: u8,
        101 => pub max_rd_atomic: u8,
        102 => pub max_dest_rd_atomic: u8,
        103 => pub min_rnr_timer: u8,
        104 => pub port_num: u8,
        105 => pub timeout: u8,
        106 => pub retry_cnt: u8,
        107 => pub rnr_retry: u8,
        108 => pub alt_port_num: u8,
        109 => pub alt_timeout: u8,
        110 => pub reserved: [u8; 2],
        112 => pub driver_data: [u64; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_destroy_qp [size 16] {
        0 => pub response: u64,
        8 => pub qp_handle: u32,
        12 => pub reserved: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_destroy_qp_resp [size 4] {
        0 => pub events_reported: u32,
    }

    pub union ib_uverbs_send_wr_ex [size 4, unnamed] {
        /// Big-endian (`__be32`).
        0 => pub imm_data: u32,
        0 => pub invalidate_rkey: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_send_wr_wr_rdma [size 16, unnamed] {
        0 => pub remote_addr: u64,
        8 => pub rkey: u32,
        12 => pub reserved: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_send_wr_wr_atomic [size 32, unnamed] {
        0 => pub remote_addr: u64,
        8 => pub compare_add: u64,
        16 => pub swap: u64,
        24 => pub rkey: u32,
        28 => pub reserved: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_send_wr_wr_ud [size 16, unnamed] {
        0 => pub ah: u32,
        4 => pub remote_qpn: u32,
        8 => pub remote_qkey: u32,
        12 => pub reserved: u32,
    }

    pub union ib_uverbs_send_wr_wr [size 32, unnamed] {
        0 => pub rdma: ib_uverbs_send_wr_wr_rdma,
        0 => pub atomic: ib_uverbs_send_wr_wr_atomic,
        0 => pub ud: ib_uverbs_send_wr_wr_ud,
    }

    pub struct ib_uverbs_send_wr [size 56] {
        0 => pub wr_id: u64,
        8 => pub num_sge: u32,
        12 => pub opcode: u32,
        16 => pub send_flags: u32,
        20 => pub ex: ib_uverbs_send_wr_ex,
        24 => pub wr: ib_uverbs_send_wr_wr,
    }

    /// Post send. rxe builds WQEs in the mmap'd send queue itself and uses this command with
    /// `wr_count == 0` only as its doorbell.
    pub struct ib_uverbs_post_send [size 24] {
        0 => pub response: u64,
        8 => pub qp_handle: u32,
        12 => pub wr_count: u32,
        16 => pub sge_count: u32,
        20 => pub wqe_size: u32,
        24 => pub send_wr: [ib_uverbs_send_wr; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_post_send_resp [size 4] {
        0 => pub bad_wr: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_create_ah [size 56] {
        0 => pub response: u64,
        8 => pub user_handle: u64,
        16 => pub pd_handle: u32,
        20 => pub reserved: u32,
        24 => pub attr: ib_uverbs_ah_attr,
        56 => pub driver_data: [u64; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_create_ah_resp [size 4] {
        0 => pub ah_handle: u32,
        4 => pub driver_data: [u32; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_destroy_ah [size 4] {
        0 => pub ah_handle: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_attach_mcast [size 24] {
        0 => pub gid: [u8; 16],
        16 => pub qp_handle: u32,
        20 => pub mlid: u16,
        22 => pub reserved: u16,
        24 => pub driver_data: [u64; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_detach_mcast [size 24] {
        0 => pub gid: [u8; 16],
        16 => pub qp_handle: u32,
        20 => pub mlid: u16,
        22 => pub reserved: u16,
        24 => pub driver_data: [u64; 0],
    }
}
