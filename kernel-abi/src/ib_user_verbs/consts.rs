//! The enums and constants of `<rdma/ib_user_verbs.h>` that the provider uses: command ids and
//! flags.

use crate::layout::abi_consts;

pub type ib_uverbs_write_cmds = u32;
pub type ib_uverbs_ex_create_cq_flags = u32;
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
    pub const IB_USER_VERBS_CMD_DESTROY_AH: ib_uverbs_write_cmds = 8;
    pub const IB_USER_VERBS_CMD_REG_MR: ib_uverbs_write_cmds = 9;
    pub const IB_USER_VERBS_CMD_REREG_MR: ib_uverbs_write_cmds = 11;
    pub const IB_USER_VERBS_CMD_DEREG_MR: ib_uverbs_write_cmds = 13;
    pub const IB_USER_VERBS_CMD_ALLOC_MW: ib_uverbs_write_cmds = 14;
    pub const IB_USER_VERBS_CMD_DEALLOC_MW: ib_uverbs_write_cmds = 16;
    pub const IB_USER_VERBS_CMD_CREATE_CQ: ib_uverbs_write_cmds = 18;
    pub const IB_USER_VERBS_CMD_RESIZE_CQ: ib_uverbs_write_cmds = 19;
    pub const IB_USER_VERBS_CMD_DESTROY_CQ: ib_uverbs_write_cmds = 20;
    pub const IB_USER_VERBS_CMD_REQ_NOTIFY_CQ: ib_uverbs_write_cmds = 23;
    pub const IB_USER_VERBS_CMD_CREATE_QP: ib_uverbs_write_cmds = 24;
    pub const IB_USER_VERBS_CMD_QUERY_QP: ib_uverbs_write_cmds = 25;
    pub const IB_USER_VERBS_CMD_MODIFY_QP: ib_uverbs_write_cmds = 26;
    pub const IB_USER_VERBS_CMD_DESTROY_QP: ib_uverbs_write_cmds = 27;
    pub const IB_USER_VERBS_CMD_POST_SEND: ib_uverbs_write_cmds = 28;
    pub const IB_USER_VERBS_CMD_ATTACH_MCAST: ib_uverbs_write_cmds = 30;
    pub const IB_USER_VERBS_CMD_DETACH_MCAST: ib_uverbs_write_cmds = 31;
    pub const IB_USER_VERBS_CMD_CREATE_SRQ: ib_uverbs_write_cmds = 32;
    pub const IB_USER_VERBS_CMD_MODIFY_SRQ: ib_uverbs_write_cmds = 33;
    pub const IB_USER_VERBS_CMD_QUERY_SRQ: ib_uverbs_write_cmds = 34;
    pub const IB_USER_VERBS_CMD_DESTROY_SRQ: ib_uverbs_write_cmds = 35;

    // anonymous enum
    pub const IB_USER_VERBS_EX_CMD_QUERY_DEVICE: u32 = 1;
    pub const IB_USER_VERBS_EX_CMD_CREATE_CQ: u32 = 18;

    // enum ib_uverbs_ex_create_cq_flags
    pub const IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN: ib_uverbs_ex_create_cq_flags = 2;

    // #defines
    /// Set in `ib_uverbs_cmd_hdr.command` for `IB_USER_VERBS_EX_CMD_*`, which carry an
    /// `ib_uverbs_ex_cmd_hdr` after the basic header.
    pub const IB_USER_VERBS_CMD_FLAG_EXTENDED: u32 = 0x8000_0000;

    // Linux 6.2+ (absent from the 6.1 header): RDMA FLUSH.
    /// Placement type of a FLUSH (IBA A19.4.1.1), `rxe_send_wr.wr.flush.type`.
    pub const IB_FLUSH_GLOBAL: ib_placement_type = 1 << 0;
    pub const IB_FLUSH_PERSISTENT: ib_placement_type = 1 << 1;
    /// Selectivity level of a FLUSH (IBA A19.4.1.2), `rxe_send_wr.wr.flush.level`.
    pub const IB_FLUSH_RANGE: ib_selectivity_level = 0;
    pub const IB_FLUSH_MR: ib_selectivity_level = 1;
}
