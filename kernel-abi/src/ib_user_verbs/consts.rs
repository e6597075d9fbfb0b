//! The enums and constants of `<rdma/ib_user_verbs.h>`: command ids, flags, opcodes and
//! capability bits.

use crate::layout::abi_consts;

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
