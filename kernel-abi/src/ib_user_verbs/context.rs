//! The command headers, and the commands on the context, device, port, PD, MR and MW.

use crate::layout::abi;
use zerocopy::IntoBytes;

abi! {
    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_cq_moderation_caps [size 8] {
        0 => pub max_cq_moderation_count: u16,
        2 => pub max_cq_moderation_period: u16,
        4 => pub reserved: u32,
    }

    /// Starts every write() command. `command` is an `IB_USER_VERBS_CMD_*` id, or an
    /// `IB_USER_VERBS_EX_CMD_*` id with `IB_USER_VERBS_CMD_FLAG_EXTENDED`. Legacy commands count
    /// `in_words`/`out_words` in 4-byte words, request including this header; extended ones in
    /// 8-byte words of the core request and response, headers excluded.
    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_cmd_hdr [size 8] {
        0 => pub command: u32,
        4 => pub in_words: u16,
        6 => pub out_words: u16,
    }

    /// Follows `ib_uverbs_cmd_hdr` in extended commands: the response address, and the sizes of
    /// the driver-specific tails in 8-byte words.
    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_ex_cmd_hdr [size 16] {
        0 => pub response: u64,
        8 => pub provider_in_words: u16,
        10 => pub provider_out_words: u16,
        12 => pub cmd_hdr_reserved: u32,
    }

    /// Opens the uverbs context; the response carries the async event fd.
    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_get_context [size 8] {
        0 => pub response: u64,
        8 => pub driver_data: [u64; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_get_context_resp [size 8] {
        0 => pub async_fd: u32,
        4 => pub num_comp_vectors: u32,
        8 => pub driver_data: [u64; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_query_device [size 8] {
        0 => pub response: u64,
        8 => pub driver_data: [u64; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_query_device_resp [size 176] {
        0 => pub fw_ver: u64,
        /// Big-endian (`__be64`).
        8 => pub node_guid: u64,
        /// Big-endian (`__be64`).
        16 => pub sys_image_guid: u64,
        24 => pub max_mr_size: u64,
        32 => pub page_size_cap: u64,
        40 => pub vendor_id: u32,
        44 => pub vendor_part_id: u32,
        48 => pub hw_ver: u32,
        52 => pub max_qp: u32,
        56 => pub max_qp_wr: u32,
        60 => pub device_cap_flags: u32,
        64 => pub max_sge: u32,
        68 => pub max_sge_rd: u32,
        72 => pub max_cq: u32,
        76 => pub max_cqe: u32,
        80 => pub max_mr: u32,
        84 => pub max_pd: u32,
        88 => pub max_qp_rd_atom: u32,
        92 => pub max_ee_rd_atom: u32,
        96 => pub max_res_rd_atom: u32,
        100 => pub max_qp_init_rd_atom: u32,
        104 => pub max_ee_init_rd_atom: u32,
        108 => pub atomic_cap: u32,
        112 => pub max_ee: u32,
        116 => pub max_rdd: u32,
        120 => pub max_mw: u32,
        124 => pub max_raw_ipv6_qp: u32,
        128 => pub max_raw_ethy_qp: u32,
        132 => pub max_mcast_grp: u32,
        136 => pub max_mcast_qp_attach: u32,
        140 => pub max_total_mcast_qp_attach: u32,
        144 => pub max_ah: u32,
        148 => pub max_fmr: u32,
        152 => pub max_map_per_fmr: u32,
        156 => pub max_srq: u32,
        160 => pub max_srq_wr: u32,
        164 => pub max_srq_sge: u32,
        168 => pub max_pkeys: u16,
        170 => pub local_ca_ack_delay: u8,
        171 => pub phys_port_cnt: u8,
        172 => pub reserved: [u8; 4],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_ex_query_device [size 8] {
        0 => pub comp_mask: u32,
        4 => pub reserved: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_odp_caps_per_transport_caps [size 12, unnamed] {
        0 => pub rc_odp_caps: u32,
        4 => pub uc_odp_caps: u32,
        8 => pub ud_odp_caps: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_odp_caps [size 24] {
        0 => pub general_caps: u64,
        8 => pub per_transport_caps: ib_uverbs_odp_caps_per_transport_caps,
        20 => pub reserved: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_rss_caps [size 16] {
        0 => pub supported_qpts: u32,
        4 => pub max_rwq_indirection_tables: u32,
        8 => pub max_rwq_indirection_table_size: u32,
        12 => pub reserved: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_tm_caps [size 24] {
        0 => pub max_rndv_hdr_size: u32,
        4 => pub max_num_tags: u32,
        8 => pub flags: u32,
        12 => pub max_ops: u32,
        16 => pub max_sge: u32,
        20 => pub reserved: u32,
    }

    /// Response of `IB_USER_VERBS_EX_CMD_QUERY_DEVICE`; the kernel fills only as many bytes as
    /// the response buffer has (`response_length` says how many).
    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_ex_query_device_resp [size 304] {
        0 => pub base: ib_uverbs_query_device_resp,
        176 => pub comp_mask: u32,
        180 => pub response_length: u32,
        184 => pub odp_caps: ib_uverbs_odp_caps,
        208 => pub timestamp_mask: u64,
        216 => pub hca_core_clock: u64,
        224 => pub device_cap_flags_ex: u64,
        232 => pub rss_caps: ib_uverbs_rss_caps,
        248 => pub max_wq_type_rq: u32,
        252 => pub raw_packet_caps: u32,
        256 => pub tm_caps: ib_uverbs_tm_caps,
        280 => pub cq_moderation_caps: ib_uverbs_cq_moderation_caps,
        288 => pub max_dm_size: u64,
        296 => pub xrc_odp_caps: u32,
        300 => pub reserved: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_query_port [size 16] {
        0 => pub response: u64,
        8 => pub port_num: u8,
        9 => pub reserved: [u8; 7],
        16 => pub driver_data: [u64; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_query_port_resp [size 40] {
        0 => pub port_cap_flags: u32,
        4 => pub max_msg_sz: u32,
        8 => pub bad_pkey_cntr: u32,
        12 => pub qkey_viol_cntr: u32,
        16 => pub gid_tbl_len: u32,
        20 => pub pkey_tbl_len: u16,
        22 => pub lid: u16,
        24 => pub sm_lid: u16,
        26 => pub state: u8,
        27 => pub max_mtu: u8,
        28 => pub active_mtu: u8,
        29 => pub lmc: u8,
        30 => pub max_vl_num: u8,
        31 => pub sm_sl: u8,
        32 => pub subnet_timeout: u8,
        33 => pub init_type_reply: u8,
        34 => pub active_width: u8,
        35 => pub active_speed: u8,
        36 => pub phys_state: u8,
        37 => pub link_layer: u8,
        38 => pub flags: u8,
        39 => pub reserved: u8,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_alloc_pd [size 8] {
        0 => pub response: u64,
        8 => pub driver_data: [u64; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_alloc_pd_resp [size 4] {
        0 => pub pd_handle: u32,
        4 => pub driver_data: [u32; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_dealloc_pd [size 4] {
        0 => pub pd_handle: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_reg_mr [size 40] {
        0 => pub response: u64,
        8 => pub start: u64,
        16 => pub length: u64,
        24 => pub hca_va: u64,
        32 => pub pd_handle: u32,
        36 => pub access_flags: u32,
        40 => pub driver_data: [u64; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_reg_mr_resp [size 12] {
        0 => pub mr_handle: u32,
        4 => pub lkey: u32,
        8 => pub rkey: u32,
        12 => pub driver_data: [u32; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_rereg_mr [size 48] {
        0 => pub response: u64,
        8 => pub mr_handle: u32,
        12 => pub flags: u32,
        16 => pub start: u64,
        24 => pub length: u64,
        32 => pub hca_va: u64,
        40 => pub pd_handle: u32,
        44 => pub access_flags: u32,
        48 => pub driver_data: [u64; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_rereg_mr_resp [size 8] {
        0 => pub lkey: u32,
        4 => pub rkey: u32,
        8 => pub driver_data: [u64; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_dereg_mr [size 4] {
        0 => pub mr_handle: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_alloc_mw [size 16] {
        0 => pub response: u64,
        8 => pub pd_handle: u32,
        12 => pub mw_type: u8,
        13 => pub reserved: [u8; 3],
        16 => pub driver_data: [u64; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_alloc_mw_resp [size 8] {
        0 => pub mw_handle: u32,
        4 => pub rkey: u32,
        8 => pub driver_data: [u64; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_dealloc_mw [size 4] {
        0 => pub mw_handle: u32,
    }
}
