//! `<rdma/ib_user_verbs.h>`: the write() command channel. A command is an `ib_uverbs_cmd_hdr`
//! (plus an `ib_uverbs_ex_cmd_hdr` for `IB_USER_VERBS_EX_CMD_*`), then the request body; the
//! kernel writes the response to the address in the body's `response` field. Also the
//! completion (`ib_uverbs_wc`) and event records read from the uverbs and event fds.

use crate::layout::{abi, abi_consts};
use zerocopy::IntoBytes;

pub type ib_uverbs_write_cmds = u32;
pub type ib_uverbs_ex_create_cq_flags = u32;
pub type ib_uverbs_wc_opcode = u32;
pub type ib_uverbs_create_qp_mask = u32;
pub type ib_uverbs_wr_opcode = u32;
pub type ib_uverbs_device_cap_flags = u64;
pub type ib_uverbs_raw_packet_caps = u32;
/// `enum ib_placement_type` (Linux 6.2+).
pub type ib_placement_type = u32;
/// `enum ib_selectivity_level` (Linux 6.2+).
pub type ib_selectivity_level = u32;

abi_consts! {
    // enum ib_uverbs_write_cmds
    pub const IB_USER_VERBS_CMD_GET_CONTEXT: ib_uverbs_write_cmds = 0;
    pub const IB_USER_VERBS_CMD_QUERY_DEVICE: ib_uverbs_write_cmds = 1;
    pub const IB_USER_VERBS_CMD_QUERY_PORT: ib_uverbs_write_cmds = 2;
    pub const IB_USER_VERBS_CMD_ALLOC_PD: ib_uverbs_write_cmds = 3;
    pub const IB_USER_VERBS_CMD_DEALLOC_PD: ib_uverbs_write_cmds = 4;
    pub const IB_USER_VERBS_CMD_CREATE_AH: ib_uverbs_write_cmds = 5;
    pub const IB_USER_VERBS_CMD_MODIFY_AH: ib_uverbs_write_cmds = 6;
    pub const IB_USER_VERBS_CMD_QUERY_AH: ib_uverbs_write_cmds = 7;
    pub const IB_USER_VERBS_CMD_DESTROY_AH: ib_uverbs_write_cmds = 8;
    pub const IB_USER_VERBS_CMD_REG_MR: ib_uverbs_write_cmds = 9;
    pub const IB_USER_VERBS_CMD_REG_SMR: ib_uverbs_write_cmds = 10;
    pub const IB_USER_VERBS_CMD_REREG_MR: ib_uverbs_write_cmds = 11;
    pub const IB_USER_VERBS_CMD_QUERY_MR: ib_uverbs_write_cmds = 12;
    pub const IB_USER_VERBS_CMD_DEREG_MR: ib_uverbs_write_cmds = 13;
    pub const IB_USER_VERBS_CMD_ALLOC_MW: ib_uverbs_write_cmds = 14;
    pub const IB_USER_VERBS_CMD_BIND_MW: ib_uverbs_write_cmds = 15;
    pub const IB_USER_VERBS_CMD_DEALLOC_MW: ib_uverbs_write_cmds = 16;
    pub const IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL: ib_uverbs_write_cmds = 17;
    pub const IB_USER_VERBS_CMD_CREATE_CQ: ib_uverbs_write_cmds = 18;
    pub const IB_USER_VERBS_CMD_RESIZE_CQ: ib_uverbs_write_cmds = 19;
    pub const IB_USER_VERBS_CMD_DESTROY_CQ: ib_uverbs_write_cmds = 20;
    pub const IB_USER_VERBS_CMD_POLL_CQ: ib_uverbs_write_cmds = 21;
    pub const IB_USER_VERBS_CMD_PEEK_CQ: ib_uverbs_write_cmds = 22;
    pub const IB_USER_VERBS_CMD_REQ_NOTIFY_CQ: ib_uverbs_write_cmds = 23;
    pub const IB_USER_VERBS_CMD_CREATE_QP: ib_uverbs_write_cmds = 24;
    pub const IB_USER_VERBS_CMD_QUERY_QP: ib_uverbs_write_cmds = 25;
    pub const IB_USER_VERBS_CMD_MODIFY_QP: ib_uverbs_write_cmds = 26;
    pub const IB_USER_VERBS_CMD_DESTROY_QP: ib_uverbs_write_cmds = 27;
    pub const IB_USER_VERBS_CMD_POST_SEND: ib_uverbs_write_cmds = 28;
    pub const IB_USER_VERBS_CMD_POST_RECV: ib_uverbs_write_cmds = 29;
    pub const IB_USER_VERBS_CMD_ATTACH_MCAST: ib_uverbs_write_cmds = 30;
    pub const IB_USER_VERBS_CMD_DETACH_MCAST: ib_uverbs_write_cmds = 31;
    pub const IB_USER_VERBS_CMD_CREATE_SRQ: ib_uverbs_write_cmds = 32;
    pub const IB_USER_VERBS_CMD_MODIFY_SRQ: ib_uverbs_write_cmds = 33;
    pub const IB_USER_VERBS_CMD_QUERY_SRQ: ib_uverbs_write_cmds = 34;
    pub const IB_USER_VERBS_CMD_DESTROY_SRQ: ib_uverbs_write_cmds = 35;
    pub const IB_USER_VERBS_CMD_POST_SRQ_RECV: ib_uverbs_write_cmds = 36;
    pub const IB_USER_VERBS_CMD_OPEN_XRCD: ib_uverbs_write_cmds = 37;
    pub const IB_USER_VERBS_CMD_CLOSE_XRCD: ib_uverbs_write_cmds = 38;
    pub const IB_USER_VERBS_CMD_CREATE_XSRQ: ib_uverbs_write_cmds = 39;
    pub const IB_USER_VERBS_CMD_OPEN_QP: ib_uverbs_write_cmds = 40;

    // anonymous enum
    pub const IB_USER_VERBS_EX_CMD_QUERY_DEVICE: u32 = 1;
    pub const IB_USER_VERBS_EX_CMD_CREATE_CQ: u32 = 18;
    pub const IB_USER_VERBS_EX_CMD_CREATE_QP: u32 = 24;
    pub const IB_USER_VERBS_EX_CMD_MODIFY_QP: u32 = 26;
    pub const IB_USER_VERBS_EX_CMD_CREATE_FLOW: u32 = 50;
    pub const IB_USER_VERBS_EX_CMD_DESTROY_FLOW: u32 = 51;
    pub const IB_USER_VERBS_EX_CMD_CREATE_WQ: u32 = 52;
    pub const IB_USER_VERBS_EX_CMD_MODIFY_WQ: u32 = 53;
    pub const IB_USER_VERBS_EX_CMD_DESTROY_WQ: u32 = 54;
    pub const IB_USER_VERBS_EX_CMD_CREATE_RWQ_IND_TBL: u32 = 55;
    pub const IB_USER_VERBS_EX_CMD_DESTROY_RWQ_IND_TBL: u32 = 56;
    pub const IB_USER_VERBS_EX_CMD_MODIFY_CQ: u32 = 57;

    // enum ib_uverbs_ex_create_cq_flags
    pub const IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION: ib_uverbs_ex_create_cq_flags = 1;
    pub const IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN: ib_uverbs_ex_create_cq_flags = 2;

    // enum ib_uverbs_wc_opcode
    pub const IB_UVERBS_WC_SEND: ib_uverbs_wc_opcode = 0;
    pub const IB_UVERBS_WC_RDMA_WRITE: ib_uverbs_wc_opcode = 1;
    pub const IB_UVERBS_WC_RDMA_READ: ib_uverbs_wc_opcode = 2;
    pub const IB_UVERBS_WC_COMP_SWAP: ib_uverbs_wc_opcode = 3;
    pub const IB_UVERBS_WC_FETCH_ADD: ib_uverbs_wc_opcode = 4;
    pub const IB_UVERBS_WC_BIND_MW: ib_uverbs_wc_opcode = 5;
    pub const IB_UVERBS_WC_LOCAL_INV: ib_uverbs_wc_opcode = 6;
    pub const IB_UVERBS_WC_TSO: ib_uverbs_wc_opcode = 7;

    // enum ib_uverbs_create_qp_mask
    pub const IB_UVERBS_CREATE_QP_MASK_IND_TABLE: ib_uverbs_create_qp_mask = 1;

    // anonymous enum
    pub const IB_UVERBS_CREATE_QP_SUP_COMP_MASK: u32 = 1;

    // enum ib_uverbs_wr_opcode
    pub const IB_UVERBS_WR_RDMA_WRITE: ib_uverbs_wr_opcode = 0;
    pub const IB_UVERBS_WR_RDMA_WRITE_WITH_IMM: ib_uverbs_wr_opcode = 1;
    pub const IB_UVERBS_WR_SEND: ib_uverbs_wr_opcode = 2;
    pub const IB_UVERBS_WR_SEND_WITH_IMM: ib_uverbs_wr_opcode = 3;
    pub const IB_UVERBS_WR_RDMA_READ: ib_uverbs_wr_opcode = 4;
    pub const IB_UVERBS_WR_ATOMIC_CMP_AND_SWP: ib_uverbs_wr_opcode = 5;
    pub const IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD: ib_uverbs_wr_opcode = 6;
    pub const IB_UVERBS_WR_LOCAL_INV: ib_uverbs_wr_opcode = 7;
    pub const IB_UVERBS_WR_BIND_MW: ib_uverbs_wr_opcode = 8;
    pub const IB_UVERBS_WR_SEND_WITH_INV: ib_uverbs_wr_opcode = 9;
    pub const IB_UVERBS_WR_TSO: ib_uverbs_wr_opcode = 10;
    pub const IB_UVERBS_WR_RDMA_READ_WITH_INV: ib_uverbs_wr_opcode = 11;
    pub const IB_UVERBS_WR_MASKED_ATOMIC_CMP_AND_SWP: ib_uverbs_wr_opcode = 12;
    pub const IB_UVERBS_WR_MASKED_ATOMIC_FETCH_AND_ADD: ib_uverbs_wr_opcode = 13;

    // enum ib_uverbs_device_cap_flags
    pub const IB_UVERBS_DEVICE_RESIZE_MAX_WR: ib_uverbs_device_cap_flags = 1;
    pub const IB_UVERBS_DEVICE_BAD_PKEY_CNTR: ib_uverbs_device_cap_flags = 2;
    pub const IB_UVERBS_DEVICE_BAD_QKEY_CNTR: ib_uverbs_device_cap_flags = 4;
    pub const IB_UVERBS_DEVICE_RAW_MULTI: ib_uverbs_device_cap_flags = 8;
    pub const IB_UVERBS_DEVICE_AUTO_PATH_MIG: ib_uverbs_device_cap_flags = 16;
    pub const IB_UVERBS_DEVICE_CHANGE_PHY_PORT: ib_uverbs_device_cap_flags = 32;
    pub const IB_UVERBS_DEVICE_UD_AV_PORT_ENFORCE: ib_uverbs_device_cap_flags = 64;
    pub const IB_UVERBS_DEVICE_CURR_QP_STATE_MOD: ib_uverbs_device_cap_flags = 128;
    pub const IB_UVERBS_DEVICE_SHUTDOWN_PORT: ib_uverbs_device_cap_flags = 0x100;
    pub const IB_UVERBS_DEVICE_PORT_ACTIVE_EVENT: ib_uverbs_device_cap_flags = 0x400;
    pub const IB_UVERBS_DEVICE_SYS_IMAGE_GUID: ib_uverbs_device_cap_flags = 0x800;
    pub const IB_UVERBS_DEVICE_RC_RNR_NAK_GEN: ib_uverbs_device_cap_flags = 0x1000;
    pub const IB_UVERBS_DEVICE_SRQ_RESIZE: ib_uverbs_device_cap_flags = 0x2000;
    pub const IB_UVERBS_DEVICE_N_NOTIFY_CQ: ib_uverbs_device_cap_flags = 0x4000;
    pub const IB_UVERBS_DEVICE_MEM_WINDOW: ib_uverbs_device_cap_flags = 0x20000;
    pub const IB_UVERBS_DEVICE_UD_IP_CSUM: ib_uverbs_device_cap_flags = 0x40000;
    pub const IB_UVERBS_DEVICE_XRC: ib_uverbs_device_cap_flags = 0x100000;
    pub const IB_UVERBS_DEVICE_MEM_MGT_EXTENSIONS: ib_uverbs_device_cap_flags = 0x200000;
    pub const IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2A: ib_uverbs_device_cap_flags = 0x800000;
    pub const IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2B: ib_uverbs_device_cap_flags = 0x1000000;
    pub const IB_UVERBS_DEVICE_RC_IP_CSUM: ib_uverbs_device_cap_flags = 0x2000000;
    pub const IB_UVERBS_DEVICE_RAW_IP_CSUM: ib_uverbs_device_cap_flags = 0x4000000;
    pub const IB_UVERBS_DEVICE_MANAGED_FLOW_STEERING: ib_uverbs_device_cap_flags = 0x20000000;
    pub const IB_UVERBS_DEVICE_RAW_SCATTER_FCS: ib_uverbs_device_cap_flags = 0x400000000;
    pub const IB_UVERBS_DEVICE_PCI_WRITE_END_PADDING: ib_uverbs_device_cap_flags = 0x1000000000;

    // enum ib_uverbs_raw_packet_caps
    pub const IB_UVERBS_RAW_PACKET_CAP_CVLAN_STRIPPING: ib_uverbs_raw_packet_caps = 1;
    pub const IB_UVERBS_RAW_PACKET_CAP_SCATTER_FCS: ib_uverbs_raw_packet_caps = 2;
    pub const IB_UVERBS_RAW_PACKET_CAP_IP_CSUM: ib_uverbs_raw_packet_caps = 4;
    pub const IB_UVERBS_RAW_PACKET_CAP_DELAY_DROP: ib_uverbs_raw_packet_caps = 8;

    // #defines
    pub const IB_USER_VERBS_ABI_VERSION: u32 = 6;
    pub const IB_USER_VERBS_CMD_THRESHOLD: u32 = 50;
    /// `ib_uverbs_cmd_hdr.command & IB_USER_VERBS_CMD_COMMAND_MASK` is the command id.
    pub const IB_USER_VERBS_CMD_COMMAND_MASK: u32 = 0xff;
    /// Set in `ib_uverbs_cmd_hdr.command` for `IB_USER_VERBS_EX_CMD_*`, which carry an
    /// `ib_uverbs_ex_cmd_hdr` after the basic header.
    pub const IB_USER_VERBS_CMD_FLAG_EXTENDED: u32 = 0x8000_0000;
    pub const IB_USER_VERBS_MAX_LOG_IND_TBL_SIZE: u32 = 0x0d;
    pub const IB_DEVICE_NAME_MAX: u32 = 64;

    // Linux 6.2+ (absent from the 6.1 header): RDMA FLUSH and ATOMIC WRITE.
    pub const IB_UVERBS_WC_FLUSH: ib_uverbs_wc_opcode = 8;
    pub const IB_UVERBS_WC_ATOMIC_WRITE: ib_uverbs_wc_opcode = 9;
    pub const IB_UVERBS_WR_FLUSH: ib_uverbs_wr_opcode = 14;
    pub const IB_UVERBS_WR_ATOMIC_WRITE: ib_uverbs_wr_opcode = 15;
    pub const IB_UVERBS_DEVICE_FLUSH_GLOBAL: ib_uverbs_device_cap_flags = 1 << 38;
    pub const IB_UVERBS_DEVICE_FLUSH_PERSISTENT: ib_uverbs_device_cap_flags = 1 << 39;
    pub const IB_UVERBS_DEVICE_ATOMIC_WRITE: ib_uverbs_device_cap_flags = 1 << 40;
    /// Placement type of a FLUSH (IBA A19.4.1.1), `rxe_send_wr.wr.flush.type`.
    pub const IB_FLUSH_GLOBAL: ib_placement_type = 1 << 0;
    pub const IB_FLUSH_PERSISTENT: ib_placement_type = 1 << 1;
    /// Selectivity level of a FLUSH (IBA A19.4.1.2), `rxe_send_wr.wr.flush.level`.
    pub const IB_FLUSH_RANGE: ib_selectivity_level = 0;
    pub const IB_FLUSH_MR: ib_selectivity_level = 1;
}

abi! {
    /// What a read() of the async event fd returns: `element` is the user handle of the object
    /// concerned, `event_type` an `ib_event_type` value.
    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_async_event_desc [size 16] {
        0 => pub element: u64,
        8 => pub event_type: u32,
        12 => pub reserved: u32,
    }

    /// What a read() of a completion channel fd returns: the user handle of the CQ.
    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_comp_event_desc [size 8] {
        0 => pub cq_handle: u64,
    }

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
    pub struct ib_uverbs_open_xrcd [size 16] {
        0 => pub response: u64,
        8 => pub fd: u32,
        12 => pub oflags: u32,
        16 => pub driver_data: [u64; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_open_xrcd_resp [size 4] {
        0 => pub xrcd_handle: u32,
        4 => pub driver_data: [u32; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_close_xrcd [size 4] {
        0 => pub xrcd_handle: u32,
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

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_create_comp_channel [size 8] {
        0 => pub response: u64,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_create_comp_channel_resp [size 4] {
        0 => pub fd: u32,
    }

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

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_poll_cq [size 16] {
        0 => pub response: u64,
        8 => pub cq_handle: u32,
        12 => pub ne: u32,
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

    pub struct ib_uverbs_poll_cq_resp [size 8] {
        0 => pub count: u32,
        4 => pub reserved: u32,
        8 => pub wc: [ib_uverbs_wc; 0],
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

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_qp_attr [size 144] {
        0 => pub qp_attr_mask: u32,
        4 => pub qp_state: u32,
        8 => pub cur_qp_state: u32,
        12 => pub path_mtu: u32,
        16 => pub path_mig_state: u32,
        20 => pub qkey: u32,
        24 => pub rq_psn: u32,
        28 => pub sq_psn: u32,
        32 => pub dest_qp_num: u32,
        36 => pub qp_access_flags: u32,
        40 => pub ah_attr: ib_uverbs_ah_attr,
        72 => pub alt_ah_attr: ib_uverbs_ah_attr,
        104 => pub max_send_wr: u32,
        108 => pub max_recv_wr: u32,
        112 => pub max_send_sge: u32,
        116 => pub max_recv_sge: u32,
        120 => pub max_inline_data: u32,
        124 => pub pkey_index: u16,
        126 => pub alt_pkey_index: u16,
        128 => pub en_sqd_async_notify: u8,
        129 => pub sq_draining: u8,
        130 => pub max_rd_atomic: u8,
        131 => pub max_dest_rd_atomic: u8,
        132 => pub min_rnr_timer: u8,
        133 => pub port_num: u8,
        134 => pub timeout: u8,
        135 => pub retry_cnt: u8,
        136 => pub rnr_retry: u8,
        137 => pub alt_port_num: u8,
        138 => pub alt_timeout: u8,
        139 => pub reserved: [u8; 5],
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
    pub struct ib_uverbs_ex_create_qp [size 64] {
        0 => pub user_handle: u64,
        8 => pub pd_handle: u32,
        12 => pub send_cq_handle: u32,
        16 => pub recv_cq_handle: u32,
        20 => pub srq_handle: u32,
        24 => pub max_send_wr: u32,
        28 => pub max_recv_wr: u32,
        32 => pub max_send_sge: u32,
        36 => pub max_recv_sge: u32,
        40 => pub max_inline_data: u32,
        44 => pub sq_sig_all: u8,
        45 => pub qp_type: u8,
        46 => pub is_srq: u8,
        47 => pub reserved: u8,
        48 => pub comp_mask: u32,
        52 => pub create_flags: u32,
        56 => pub rwq_ind_tbl_handle: u32,
        60 => pub source_qpn: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_open_qp [size 32] {
        0 => pub response: u64,
        8 => pub user_handle: u64,
        16 => pub pd_handle: u32,
        20 => pub qpn: u32,
        24 => pub qp_type: u8,
        25 => pub reserved: [u8; 7],
        32 => pub driver_data: [u64; 0],
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
    pub struct ib_uverbs_ex_create_qp_resp [size 40] {
        0 => pub base: ib_uverbs_create_qp_resp,
        32 => pub comp_mask: u32,
        36 => pub response_length: u32,
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
    pub struct ib_uverbs_ex_modify_qp [size 120] {
        0 => pub base: ib_uverbs_modify_qp,
        112 => pub rate_limit: u32,
        116 => pub reserved: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_ex_modify_qp_resp [size 8] {
        0 => pub comp_mask: u32,
        4 => pub response_length: u32,
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

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_sge [size 16] {
        0 => pub addr: u64,
        8 => pub length: u32,
        12 => pub lkey: u32,
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
    pub struct ib_uverbs_recv_wr [size 16] {
        0 => pub wr_id: u64,
        8 => pub num_sge: u32,
        12 => pub reserved: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_post_recv [size 24] {
        0 => pub response: u64,
        8 => pub qp_handle: u32,
        12 => pub wr_count: u32,
        16 => pub sge_count: u32,
        20 => pub wqe_size: u32,
        24 => pub recv_wr: [ib_uverbs_recv_wr; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_post_recv_resp [size 4] {
        0 => pub bad_wr: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_post_srq_recv [size 24] {
        0 => pub response: u64,
        8 => pub srq_handle: u32,
        12 => pub wr_count: u32,
        16 => pub sge_count: u32,
        20 => pub wqe_size: u32,
        24 => pub recv: [ib_uverbs_recv_wr; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_post_srq_recv_resp [size 4] {
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

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_flow_spec_hdr [size 8] {
        0 => pub r#type: u32,
        4 => pub size: u16,
        6 => pub reserved: u16,
        8 => pub flow_spec_data: [u64; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_flow_eth_filter [size 16] {
        0 => pub dst_mac: [u8; 6],
        6 => pub src_mac: [u8; 6],
        /// Big-endian (`__be16`).
        12 => pub ether_type: u16,
        /// Big-endian (`__be16`).
        14 => pub vlan_tag: u16,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_flow_spec_head_fields [size 8, anonymous] {
        0 => pub r#type: u32,
        4 => pub size: u16,
        6 => pub reserved: u16,
    }

    pub union ib_uverbs_flow_spec_head [size 8, anonymous] {
        0 => pub hdr: ib_uverbs_flow_spec_hdr,
        0 => pub fields: ib_uverbs_flow_spec_head_fields,
    }

    pub struct ib_uverbs_flow_spec_eth [size 40] {
        0 => pub head: ib_uverbs_flow_spec_head,
        8 => pub val: ib_uverbs_flow_eth_filter,
        24 => pub mask: ib_uverbs_flow_eth_filter,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_flow_ipv4_filter [size 12] {
        /// Big-endian (`__be32`).
        0 => pub src_ip: u32,
        /// Big-endian (`__be32`).
        4 => pub dst_ip: u32,
        8 => pub proto: u8,
        9 => pub tos: u8,
        10 => pub ttl: u8,
        11 => pub flags: u8,
    }

    pub struct ib_uverbs_flow_spec_ipv4 [size 32] {
        0 => pub head: ib_uverbs_flow_spec_head,
        8 => pub val: ib_uverbs_flow_ipv4_filter,
        20 => pub mask: ib_uverbs_flow_ipv4_filter,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_flow_tcp_udp_filter [size 4] {
        /// Big-endian (`__be16`).
        0 => pub dst_port: u16,
        /// Big-endian (`__be16`).
        2 => pub src_port: u16,
    }

    pub struct ib_uverbs_flow_spec_tcp_udp [size 16] {
        0 => pub head: ib_uverbs_flow_spec_head,
        8 => pub val: ib_uverbs_flow_tcp_udp_filter,
        12 => pub mask: ib_uverbs_flow_tcp_udp_filter,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_flow_ipv6_filter [size 40] {
        0 => pub src_ip: [u8; 16],
        16 => pub dst_ip: [u8; 16],
        /// Big-endian (`__be32`).
        32 => pub flow_label: u32,
        36 => pub next_hdr: u8,
        37 => pub traffic_class: u8,
        38 => pub hop_limit: u8,
        39 => pub reserved: u8,
    }

    pub struct ib_uverbs_flow_spec_ipv6 [size 88] {
        0 => pub head: ib_uverbs_flow_spec_head,
        8 => pub val: ib_uverbs_flow_ipv6_filter,
        48 => pub mask: ib_uverbs_flow_ipv6_filter,
    }

    pub struct ib_uverbs_flow_spec_action_tag [size 16] {
        0 => pub head: ib_uverbs_flow_spec_head,
        8 => pub tag_id: u32,
        12 => pub reserved1: u32,
    }

    pub struct ib_uverbs_flow_spec_action_drop [size 8] {
        0 => pub head: ib_uverbs_flow_spec_head,
    }

    pub struct ib_uverbs_flow_spec_action_handle [size 16] {
        0 => pub head: ib_uverbs_flow_spec_head,
        8 => pub handle: u32,
        12 => pub reserved1: u32,
    }

    pub struct ib_uverbs_flow_spec_action_count [size 16] {
        0 => pub head: ib_uverbs_flow_spec_head,
        8 => pub handle: u32,
        12 => pub reserved1: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_flow_tunnel_filter [size 4] {
        /// Big-endian (`__be32`).
        0 => pub tunnel_id: u32,
    }

    pub struct ib_uverbs_flow_spec_tunnel [size 16] {
        0 => pub head: ib_uverbs_flow_spec_head,
        8 => pub val: ib_uverbs_flow_tunnel_filter,
        12 => pub mask: ib_uverbs_flow_tunnel_filter,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_flow_spec_esp_filter [size 8] {
        0 => pub spi: u32,
        4 => pub seq: u32,
    }

    pub struct ib_uverbs_flow_spec_esp [size 24] {
        0 => pub head: ib_uverbs_flow_spec_head,
        8 => pub val: ib_uverbs_flow_spec_esp_filter,
        16 => pub mask: ib_uverbs_flow_spec_esp_filter,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_flow_gre_filter [size 8] {
        /// Big-endian (`__be16`).
        0 => pub c_ks_res0_ver: u16,
        /// Big-endian (`__be16`).
        2 => pub protocol: u16,
        /// Big-endian (`__be32`).
        4 => pub key: u32,
    }

    pub struct ib_uverbs_flow_spec_gre [size 24] {
        0 => pub head: ib_uverbs_flow_spec_head,
        8 => pub val: ib_uverbs_flow_gre_filter,
        16 => pub mask: ib_uverbs_flow_gre_filter,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_flow_mpls_filter [size 4] {
        /// Big-endian (`__be32`).
        0 => pub label: u32,
    }

    pub struct ib_uverbs_flow_spec_mpls [size 16] {
        0 => pub head: ib_uverbs_flow_spec_head,
        8 => pub val: ib_uverbs_flow_mpls_filter,
        12 => pub mask: ib_uverbs_flow_mpls_filter,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_flow_attr [size 16] {
        0 => pub r#type: u32,
        4 => pub size: u16,
        6 => pub priority: u16,
        8 => pub num_of_specs: u8,
        9 => pub reserved: [u8; 2],
        11 => pub port: u8,
        12 => pub flags: u32,
        16 => pub flow_specs: [ib_uverbs_flow_spec_hdr; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_create_flow [size 24] {
        0 => pub comp_mask: u32,
        4 => pub qp_handle: u32,
        8 => pub flow_attr: ib_uverbs_flow_attr,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_create_flow_resp [size 8] {
        0 => pub comp_mask: u32,
        4 => pub flow_handle: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_destroy_flow [size 8] {
        0 => pub comp_mask: u32,
        4 => pub flow_handle: u32,
    }

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

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_cq_moderation [size 4] {
        0 => pub cq_count: u16,
        2 => pub cq_period: u16,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_ex_modify_cq [size 16] {
        0 => pub cq_handle: u32,
        4 => pub attr_mask: u32,
        8 => pub attr: ib_uverbs_cq_moderation,
        12 => pub reserved: u32,
    }
}
