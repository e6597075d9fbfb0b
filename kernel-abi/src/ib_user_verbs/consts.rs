//! The enums and constants of `<rdma/ib_user_verbs.h>` that the provider uses: command ids and
//! flags.

use crate::layout::abi_consts;

abi_consts! {
    // enum ib_uverbs_write_cmds
    pub const IB_USER_VERBS_CMD_GET_CONTEXT: u32 = 0;
    pub const IB_USER_VERBS_CMD_QUERY_DEVICE: u32 = 1;
    pub const IB_USER_VERBS_CMD_QUERY_PORT: u32 = 2;
    pub const IB_USER_VERBS_CMD_ALLOC_PD: u32 = 3;
    pub const IB_USER_VERBS_CMD_DEALLOC_PD: u32 = 4;
    pub const IB_USER_VERBS_CMD_CREATE_AH: u32 = 5;
    pub const IB_USER_VERBS_CMD_DESTROY_AH: u32 = 8;
    pub const IB_USER_VERBS_CMD_REG_MR: u32 = 9;
    pub const IB_USER_VERBS_CMD_REREG_MR: u32 = 11;
    pub const IB_USER_VERBS_CMD_DEREG_MR: u32 = 13;
    pub const IB_USER_VERBS_CMD_ALLOC_MW: u32 = 14;
    pub const IB_USER_VERBS_CMD_DEALLOC_MW: u32 = 16;
    pub const IB_USER_VERBS_CMD_CREATE_CQ: u32 = 18;
    pub const IB_USER_VERBS_CMD_RESIZE_CQ: u32 = 19;
    pub const IB_USER_VERBS_CMD_DESTROY_CQ: u32 = 20;
    pub const IB_USER_VERBS_CMD_REQ_NOTIFY_CQ: u32 = 23;
    pub const IB_USER_VERBS_CMD_CREATE_QP: u32 = 24;
    pub const IB_USER_VERBS_CMD_QUERY_QP: u32 = 25;
    pub const IB_USER_VERBS_CMD_MODIFY_QP: u32 = 26;
    pub const IB_USER_VERBS_CMD_DESTROY_QP: u32 = 27;
    pub const IB_USER_VERBS_CMD_POST_SEND: u32 = 28;
    pub const IB_USER_VERBS_CMD_ATTACH_MCAST: u32 = 30;
    pub const IB_USER_VERBS_CMD_DETACH_MCAST: u32 = 31;
    pub const IB_USER_VERBS_CMD_CREATE_SRQ: u32 = 32;
    pub const IB_USER_VERBS_CMD_MODIFY_SRQ: u32 = 33;
    pub const IB_USER_VERBS_CMD_QUERY_SRQ: u32 = 34;
    pub const IB_USER_VERBS_CMD_DESTROY_SRQ: u32 = 35;

    // anonymous enum
    pub const IB_USER_VERBS_EX_CMD_QUERY_DEVICE: u32 = 1;
    pub const IB_USER_VERBS_EX_CMD_CREATE_CQ: u32 = 18;

    // enum ib_uverbs_ex_create_cq_flags
    pub const IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN: u32 = 2;

    // #defines
    /// Set in `ib_uverbs_cmd_hdr.command` for `IB_USER_VERBS_EX_CMD_*`, which carry an
    /// `ib_uverbs_ex_cmd_hdr` after the basic header.
    pub const IB_USER_VERBS_CMD_FLAG_EXTENDED: u32 = 0x8000_0000;

    // Linux 6.2+ (absent from the 6.1 header): RDMA FLUSH.
    /// Placement type of a FLUSH (IBA A19.4.1.1), `rxe_send_wr.wr.flush.type`.
    pub const IB_FLUSH_GLOBAL: u32 = 1 << 0;
    pub const IB_FLUSH_PERSISTENT: u32 = 1 << 1;
    /// Selectivity level of a FLUSH (IBA A19.4.1.2), `rxe_send_wr.wr.flush.level`.
    pub const IB_FLUSH_RANGE: u32 = 0;
    pub const IB_FLUSH_MR: u32 = 1;
}
