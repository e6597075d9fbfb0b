//! `<rdma/ib_user_ioctl_cmds.h>`: object, method and attribute ids of the ioctl() command
//! channel (`ib_uverbs_ioctl_hdr.object_id`/`method_id`, `ib_uverbs_attr.attr_id`).

use crate::layout::abi_consts;

pub type uverbs_default_objects = u32;
pub type uverbs_methods_device = u32;
pub type uverbs_attrs_invoke_write_cmd_attr_ids = u32;
pub type uverbs_attrs_query_port_cmd_attr_ids = u32;
pub type uverbs_attrs_get_context_attr_ids = u32;
pub type uverbs_attrs_query_context_attr_ids = u32;
pub type uverbs_attrs_create_cq_cmd_attr_ids = u32;
pub type uverbs_attrs_destroy_cq_cmd_attr_ids = u32;
pub type uverbs_attrs_create_flow_action_esp = u32;
pub type uverbs_attrs_modify_flow_action_esp = u32;
pub type uverbs_attrs_destroy_flow_action_esp = u32;
pub type uverbs_attrs_create_qp_cmd_attr_ids = u32;
pub type uverbs_attrs_destroy_qp_cmd_attr_ids = u32;
pub type uverbs_methods_qp = u32;
pub type uverbs_attrs_create_srq_cmd_attr_ids = u32;
pub type uverbs_attrs_destroy_srq_cmd_attr_ids = u32;
pub type uverbs_methods_srq = u32;
pub type uverbs_methods_cq = u32;
pub type uverbs_attrs_create_wq_cmd_attr_ids = u32;
pub type uverbs_attrs_destroy_wq_cmd_attr_ids = u32;
pub type uverbs_methods_wq = u32;
pub type uverbs_methods_actions_flow_action_ops = u32;
pub type uverbs_attrs_alloc_dm_cmd_attr_ids = u32;
pub type uverbs_attrs_free_dm_cmd_attr_ids = u32;
pub type uverbs_methods_dm = u32;
pub type uverbs_attrs_reg_dm_mr_cmd_attr_ids = u32;
pub type uverbs_methods_mr = u32;
pub type uverbs_attrs_mr_destroy_ids = u32;
pub type uverbs_attrs_advise_mr_cmd_attr_ids = u32;
pub type uverbs_attrs_query_mr_cmd_attr_ids = u32;
pub type uverbs_attrs_reg_dmabuf_mr_cmd_attr_ids = u32;
pub type uverbs_attrs_create_counters_cmd_attr_ids = u32;
pub type uverbs_attrs_destroy_counters_cmd_attr_ids = u32;
pub type uverbs_attrs_read_counters_cmd_attr_ids = u32;
pub type uverbs_methods_actions_counters_ops = u32;
pub type uverbs_attrs_info_handles_id = u32;
pub type uverbs_methods_pd = u32;
pub type uverbs_attrs_pd_destroy_ids = u32;
pub type uverbs_methods_mw = u32;
pub type uverbs_attrs_mw_destroy_ids = u32;
pub type uverbs_methods_xrcd = u32;
pub type uverbs_attrs_xrcd_destroy_ids = u32;
pub type uverbs_methods_ah = u32;
pub type uverbs_attrs_ah_destroy_ids = u32;
pub type uverbs_methods_rwq_ind_tbl = u32;
pub type uverbs_attrs_rwq_ind_tbl_destroy_ids = u32;
pub type uverbs_methods_flow = u32;
pub type uverbs_attrs_flow_destroy_ids = u32;
pub type uverbs_method_async_event = u32;
pub type uverbs_attrs_async_event_create = u32;
pub type uverbs_attrs_query_gid_table_cmd_attr_ids = u32;
pub type uverbs_attrs_query_gid_entry_cmd_attr_ids = u32;

abi_consts! {
    // enum uverbs_default_objects
    pub const UVERBS_OBJECT_DEVICE: uverbs_default_objects = 0;
    pub const UVERBS_OBJECT_PD: uverbs_default_objects = 1;
    pub const UVERBS_OBJECT_COMP_CHANNEL: uverbs_default_objects = 2;
    pub const UVERBS_OBJECT_CQ: uverbs_default_objects = 3;
    pub const UVERBS_OBJECT_QP: uverbs_default_objects = 4;
    pub const UVERBS_OBJECT_SRQ: uverbs_default_objects = 5;
    pub const UVERBS_OBJECT_AH: uverbs_default_objects = 6;
    pub const UVERBS_OBJECT_MR: uverbs_default_objects = 7;
    pub const UVERBS_OBJECT_MW: uverbs_default_objects = 8;
    pub const UVERBS_OBJECT_FLOW: uverbs_default_objects = 9;
    pub const UVERBS_OBJECT_XRCD: uverbs_default_objects = 10;
    pub const UVERBS_OBJECT_RWQ_IND_TBL: uverbs_default_objects = 11;
    pub const UVERBS_OBJECT_WQ: uverbs_default_objects = 12;
    pub const UVERBS_OBJECT_FLOW_ACTION: uverbs_default_objects = 13;
    pub const UVERBS_OBJECT_DM: uverbs_default_objects = 14;
    pub const UVERBS_OBJECT_COUNTERS: uverbs_default_objects = 15;
    pub const UVERBS_OBJECT_ASYNC_EVENT: uverbs_default_objects = 16;

    // anonymous enum
    pub const UVERBS_ATTR_UHW_IN: u32 = 0x1000;
    pub const UVERBS_ATTR_UHW_OUT: u32 = 4097;

    // enum uverbs_methods_device
    pub const UVERBS_METHOD_INVOKE_WRITE: uverbs_methods_device = 0;
    pub const UVERBS_METHOD_INFO_HANDLES: uverbs_methods_device = 1;
    pub const UVERBS_METHOD_QUERY_PORT: uverbs_methods_device = 2;
    pub const UVERBS_METHOD_GET_CONTEXT: uverbs_methods_device = 3;
    pub const UVERBS_METHOD_QUERY_CONTEXT: uverbs_methods_device = 4;
    pub const UVERBS_METHOD_QUERY_GID_TABLE: uverbs_methods_device = 5;
    pub const UVERBS_METHOD_QUERY_GID_ENTRY: uverbs_methods_device = 6;

    // enum uverbs_attrs_invoke_write_cmd_attr_ids
    pub const UVERBS_ATTR_CORE_IN: uverbs_attrs_invoke_write_cmd_attr_ids = 0;
    pub const UVERBS_ATTR_CORE_OUT: uverbs_attrs_invoke_write_cmd_attr_ids = 1;
    pub const UVERBS_ATTR_WRITE_CMD: uverbs_attrs_invoke_write_cmd_attr_ids = 2;

    // enum uverbs_attrs_query_port_cmd_attr_ids
    pub const UVERBS_ATTR_QUERY_PORT_PORT_NUM: uverbs_attrs_query_port_cmd_attr_ids = 0;
    pub const UVERBS_ATTR_QUERY_PORT_RESP: uverbs_attrs_query_port_cmd_attr_ids = 1;

    // enum uverbs_attrs_get_context_attr_ids
    pub const UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS: uverbs_attrs_get_context_attr_ids = 0;
    pub const UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT: uverbs_attrs_get_context_attr_ids = 1;

    // enum uverbs_attrs_query_context_attr_ids
    pub const UVERBS_ATTR_QUERY_CONTEXT_NUM_COMP_VECTORS: uverbs_attrs_query_context_attr_ids = 0;
    pub const UVERBS_ATTR_QUERY_CONTEXT_CORE_SUPPORT: uverbs_attrs_query_context_attr_ids = 1;

    // enum uverbs_attrs_create_cq_cmd_attr_ids
    pub const UVERBS_ATTR_CREATE_CQ_HANDLE: uverbs_attrs_create_cq_cmd_attr_ids = 0;
    pub const UVERBS_ATTR_CREATE_CQ_CQE: uverbs_attrs_create_cq_cmd_attr_ids = 1;
    pub const UVERBS_ATTR_CREATE_CQ_USER_HANDLE: uverbs_attrs_create_cq_cmd_attr_ids = 2;
    pub const UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL: uverbs_attrs_create_cq_cmd_attr_ids = 3;
    pub const UVERBS_ATTR_CREATE_CQ_COMP_VECTOR: uverbs_attrs_create_cq_cmd_attr_ids = 4;
    pub const UVERBS_ATTR_CREATE_CQ_FLAGS: uverbs_attrs_create_cq_cmd_attr_ids = 5;
    pub const UVERBS_ATTR_CREATE_CQ_RESP_CQE: uverbs_attrs_create_cq_cmd_attr_ids = 6;
    pub const UVERBS_ATTR_CREATE_CQ_EVENT_FD: uverbs_attrs_create_cq_cmd_attr_ids = 7;

    // enum uverbs_attrs_destroy_cq_cmd_attr_ids
    pub const UVERBS_ATTR_DESTROY_CQ_HANDLE: uverbs_attrs_destroy_cq_cmd_attr_ids = 0;
    pub const UVERBS_ATTR_DESTROY_CQ_RESP: uverbs_attrs_destroy_cq_cmd_attr_ids = 1;

    // enum uverbs_attrs_create_flow_action_esp
    pub const UVERBS_ATTR_CREATE_FLOW_ACTION_ESP_HANDLE: uverbs_attrs_create_flow_action_esp = 0;
    pub const UVERBS_ATTR_FLOW_ACTION_ESP_ATTRS: uverbs_attrs_create_flow_action_esp = 1;
    pub const UVERBS_ATTR_FLOW_ACTION_ESP_ESN: uverbs_attrs_create_flow_action_esp = 2;
    pub const UVERBS_ATTR_FLOW_ACTION_ESP_KEYMAT: uverbs_attrs_create_flow_action_esp = 3;
    pub const UVERBS_ATTR_FLOW_ACTION_ESP_REPLAY: uverbs_attrs_create_flow_action_esp = 4;
    pub const UVERBS_ATTR_FLOW_ACTION_ESP_ENCAP: uverbs_attrs_create_flow_action_esp = 5;

    // enum uverbs_attrs_modify_flow_action_esp
    pub const UVERBS_ATTR_MODIFY_FLOW_ACTION_ESP_HANDLE: uverbs_attrs_modify_flow_action_esp = 0;

    // enum uverbs_attrs_destroy_flow_action_esp
    pub const UVERBS_ATTR_DESTROY_FLOW_ACTION_HANDLE: uverbs_attrs_destroy_flow_action_esp = 0;

    // enum uverbs_attrs_create_qp_cmd_attr_ids
    pub const UVERBS_ATTR_CREATE_QP_HANDLE: uverbs_attrs_create_qp_cmd_attr_ids = 0;
    pub const UVERBS_ATTR_CREATE_QP_XRCD_HANDLE: uverbs_attrs_create_qp_cmd_attr_ids = 1;
    pub const UVERBS_ATTR_CREATE_QP_PD_HANDLE: uverbs_attrs_create_qp_cmd_attr_ids = 2;
    pub const UVERBS_ATTR_CREATE_QP_SRQ_HANDLE: uverbs_attrs_create_qp_cmd_attr_ids = 3;
    pub const UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE: uverbs_attrs_create_qp_cmd_attr_ids = 4;
    pub const UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE: uverbs_attrs_create_qp_cmd_attr_ids = 5;
    pub const UVERBS_ATTR_CREATE_QP_IND_TABLE_HANDLE: uverbs_attrs_create_qp_cmd_attr_ids = 6;
    pub const UVERBS_ATTR_CREATE_QP_USER_HANDLE: uverbs_attrs_create_qp_cmd_attr_ids = 7;
    pub const UVERBS_ATTR_CREATE_QP_CAP: uverbs_attrs_create_qp_cmd_attr_ids = 8;
    pub const UVERBS_ATTR_CREATE_QP_TYPE: uverbs_attrs_create_qp_cmd_attr_ids = 9;
    pub const UVERBS_ATTR_CREATE_QP_FLAGS: uverbs_attrs_create_qp_cmd_attr_ids = 10;
    pub const UVERBS_ATTR_CREATE_QP_SOURCE_QPN: uverbs_attrs_create_qp_cmd_attr_ids = 11;
    pub const UVERBS_ATTR_CREATE_QP_EVENT_FD: uverbs_attrs_create_qp_cmd_attr_ids = 12;
    pub const UVERBS_ATTR_CREATE_QP_RESP_CAP: uverbs_attrs_create_qp_cmd_attr_ids = 13;
    pub const UVERBS_ATTR_CREATE_QP_RESP_QP_NUM: uverbs_attrs_create_qp_cmd_attr_ids = 14;

    // enum uverbs_attrs_destroy_qp_cmd_attr_ids
    pub const UVERBS_ATTR_DESTROY_QP_HANDLE: uverbs_attrs_destroy_qp_cmd_attr_ids = 0;
    pub const UVERBS_ATTR_DESTROY_QP_RESP: uverbs_attrs_destroy_qp_cmd_attr_ids = 1;

    // enum uverbs_methods_qp
    pub const UVERBS_METHOD_QP_CREATE: uverbs_methods_qp = 0;
    pub const UVERBS_METHOD_QP_DESTROY: uverbs_methods_qp = 1;

    // enum uverbs_attrs_create_srq_cmd_attr_ids
    pub const UVERBS_ATTR_CREATE_SRQ_HANDLE: uverbs_attrs_create_srq_cmd_attr_ids = 0;
    pub const UVERBS_ATTR_CREATE_SRQ_PD_HANDLE: uverbs_attrs_create_srq_cmd_attr_ids = 1;
    pub const UVERBS_ATTR_CREATE_SRQ_XRCD_HANDLE: uverbs_attrs_create_srq_cmd_attr_ids = 2;
    pub const UVERBS_ATTR_CREATE_SRQ_CQ_HANDLE: uverbs_attrs_create_srq_cmd_attr_ids = 3;
    pub const UVERBS_ATTR_CREATE_SRQ_USER_HANDLE: uverbs_attrs_create_srq_cmd_attr_ids = 4;
    pub const UVERBS_ATTR_CREATE_SRQ_MAX_WR: uverbs_attrs_create_srq_cmd_attr_ids = 5;
    pub const UVERBS_ATTR_CREATE_SRQ_MAX_SGE: uverbs_attrs_create_srq_cmd_attr_ids = 6;
    pub const UVERBS_ATTR_CREATE_SRQ_LIMIT: uverbs_attrs_create_srq_cmd_attr_ids = 7;
    pub const UVERBS_ATTR_CREATE_SRQ_MAX_NUM_TAGS: uverbs_attrs_create_srq_cmd_attr_ids = 8;
    pub const UVERBS_ATTR_CREATE_SRQ_TYPE: uverbs_attrs_create_srq_cmd_attr_ids = 9;
    pub const UVERBS_ATTR_CREATE_SRQ_EVENT_FD: uverbs_attrs_create_srq_cmd_attr_ids = 10;
    pub const UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR: uverbs_attrs_create_srq_cmd_attr_ids = 11;
    pub const UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE: uverbs_attrs_create_srq_cmd_attr_ids = 12;
    pub const UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM: uverbs_attrs_create_srq_cmd_attr_ids = 13;

    // enum uverbs_attrs_destroy_srq_cmd_attr_ids
    pub const UVERBS_ATTR_DESTROY_SRQ_HANDLE: uverbs_attrs_destroy_srq_cmd_attr_ids = 0;
    pub const UVERBS_ATTR_DESTROY_SRQ_RESP: uverbs_attrs_destroy_srq_cmd_attr_ids = 1;

    // enum uverbs_methods_srq
    pub const UVERBS_METHOD_SRQ_CREATE: uverbs_methods_srq = 0;
    pub const UVERBS_METHOD_SRQ_DESTROY: uverbs_methods_srq = 1;

    // enum uverbs_methods_cq
    pub const UVERBS_METHOD_CQ_CREATE: uverbs_methods_cq = 0;
    pub const UVERBS_METHOD_CQ_DESTROY: uverbs_methods_cq = 1;

    // enum uverbs_attrs_create_wq_cmd_attr_ids
    pub const UVERBS_ATTR_CREATE_WQ_HANDLE: uverbs_attrs_create_wq_cmd_attr_ids = 0;
    pub const UVERBS_ATTR_CREATE_WQ_PD_HANDLE: uverbs_attrs_create_wq_cmd_attr_ids = 1;
    pub const UVERBS_ATTR_CREATE_WQ_CQ_HANDLE: uverbs_attrs_create_wq_cmd_attr_ids = 2;
    pub const UVERBS_ATTR_CREATE_WQ_USER_HANDLE: uverbs_attrs_create_wq_cmd_attr_ids = 3;
    pub const UVERBS_ATTR_CREATE_WQ_TYPE: uverbs_attrs_create_wq_cmd_attr_ids = 4;
    pub const UVERBS_ATTR_CREATE_WQ_EVENT_FD: uverbs_attrs_create_wq_cmd_attr_ids = 5;
    pub const UVERBS_ATTR_CREATE_WQ_MAX_WR: uverbs_attrs_create_wq_cmd_attr_ids = 6;
    pub const UVERBS_ATTR_CREATE_WQ_MAX_SGE: uverbs_attrs_create_wq_cmd_attr_ids = 7;
    pub const UVERBS_ATTR_CREATE_WQ_FLAGS: uverbs_attrs_create_wq_cmd_attr_ids = 8;
    pub const UVERBS_ATTR_CREATE_WQ_RESP_MAX_WR: uverbs_attrs_create_wq_cmd_attr_ids = 9;
    pub const UVERBS_ATTR_CREATE_WQ_RESP_MAX_SGE: uverbs_attrs_create_wq_cmd_attr_ids = 10;
    pub const UVERBS_ATTR_CREATE_WQ_RESP_WQ_NUM: uverbs_attrs_create_wq_cmd_attr_ids = 11;

    // enum uverbs_attrs_destroy_wq_cmd_attr_ids
    pub const UVERBS_ATTR_DESTROY_WQ_HANDLE: uverbs_attrs_destroy_wq_cmd_attr_ids = 0;
    pub const UVERBS_ATTR_DESTROY_WQ_RESP: uverbs_attrs_destroy_wq_cmd_attr_ids = 1;

    // enum uverbs_methods_wq
    pub const UVERBS_METHOD_WQ_CREATE: uverbs_methods_wq = 0;
    pub const UVERBS_METHOD_WQ_DESTROY: uverbs_methods_wq = 1;

    // enum uverbs_methods_actions_flow_action_ops
    pub const UVERBS_METHOD_FLOW_ACTION_ESP_CREATE: uverbs_methods_actions_flow_action_ops = 0;
    pub const UVERBS_METHOD_FLOW_ACTION_DESTROY: uverbs_methods_actions_flow_action_ops = 1;
    pub const UVERBS_METHOD_FLOW_ACTION_ESP_MODIFY: uverbs_methods_actions_flow_action_ops = 2;

    // enum uverbs_attrs_alloc_dm_cmd_attr_ids
    pub const UVERBS_ATTR_ALLOC_DM_HANDLE: uverbs_attrs_alloc_dm_cmd_attr_ids = 0;
    pub const UVERBS_ATTR_ALLOC_DM_LENGTH: uverbs_attrs_alloc_dm_cmd_attr_ids = 1;
    pub const UVERBS_ATTR_ALLOC_DM_ALIGNMENT: uverbs_attrs_alloc_dm_cmd_attr_ids = 2;

    // enum uverbs_attrs_free_dm_cmd_attr_ids
    pub const UVERBS_ATTR_FREE_DM_HANDLE: uverbs_attrs_free_dm_cmd_attr_ids = 0;

    // enum uverbs_methods_dm
    pub const UVERBS_METHOD_DM_ALLOC: uverbs_methods_dm = 0;
    pub const UVERBS_METHOD_DM_FREE: uverbs_methods_dm = 1;

    // enum uverbs_attrs_reg_dm_mr_cmd_attr_ids
    pub const UVERBS_ATTR_REG_DM_MR_HANDLE: uverbs_attrs_reg_dm_mr_cmd_attr_ids = 0;
    pub const UVERBS_ATTR_REG_DM_MR_OFFSET: uverbs_attrs_reg_dm_mr_cmd_attr_ids = 1;
    pub const UVERBS_ATTR_REG_DM_MR_LENGTH: uverbs_attrs_reg_dm_mr_cmd_attr_ids = 2;
    pub const UVERBS_ATTR_REG_DM_MR_PD_HANDLE: uverbs_attrs_reg_dm_mr_cmd_attr_ids = 3;
    pub const UVERBS_ATTR_REG_DM_MR_ACCESS_FLAGS: uverbs_attrs_reg_dm_mr_cmd_attr_ids = 4;
    pub const UVERBS_ATTR_REG_DM_MR_DM_HANDLE: uverbs_attrs_reg_dm_mr_cmd_attr_ids = 5;
    pub const UVERBS_ATTR_REG_DM_MR_RESP_LKEY: uverbs_attrs_reg_dm_mr_cmd_attr_ids = 6;
    pub const UVERBS_ATTR_REG_DM_MR_RESP_RKEY: uverbs_attrs_reg_dm_mr_cmd_attr_ids = 7;

    // enum uverbs_methods_mr
    pub const UVERBS_METHOD_DM_MR_REG: uverbs_methods_mr = 0;
    pub const UVERBS_METHOD_MR_DESTROY: uverbs_methods_mr = 1;
    pub const UVERBS_METHOD_ADVISE_MR: uverbs_methods_mr = 2;
    pub const UVERBS_METHOD_QUERY_MR: uverbs_methods_mr = 3;
    pub const UVERBS_METHOD_REG_DMABUF_MR: uverbs_methods_mr = 4;

    // enum uverbs_attrs_mr_destroy_ids
    pub const UVERBS_ATTR_DESTROY_MR_HANDLE: uverbs_attrs_mr_destroy_ids = 0;

    // enum uverbs_attrs_advise_mr_cmd_attr_ids
    pub const UVERBS_ATTR_ADVISE_MR_PD_HANDLE: uverbs_attrs_advise_mr_cmd_attr_ids = 0;
    pub const UVERBS_ATTR_ADVISE_MR_ADVICE: uverbs_attrs_advise_mr_cmd_attr_ids = 1;
    pub const UVERBS_ATTR_ADVISE_MR_FLAGS: uverbs_attrs_advise_mr_cmd_attr_ids = 2;
    pub const UVERBS_ATTR_ADVISE_MR_SGE_LIST: uverbs_attrs_advise_mr_cmd_attr_ids = 3;

    // enum uverbs_attrs_query_mr_cmd_attr_ids
    pub const UVERBS_ATTR_QUERY_MR_HANDLE: uverbs_attrs_query_mr_cmd_attr_ids = 0;
    pub const UVERBS_ATTR_QUERY_MR_RESP_LKEY: uverbs_attrs_query_mr_cmd_attr_ids = 1;
    pub const UVERBS_ATTR_QUERY_MR_RESP_RKEY: uverbs_attrs_query_mr_cmd_attr_ids = 2;
    pub const UVERBS_ATTR_QUERY_MR_RESP_LENGTH: uverbs_attrs_query_mr_cmd_attr_ids = 3;
    pub const UVERBS_ATTR_QUERY_MR_RESP_IOVA: uverbs_attrs_query_mr_cmd_attr_ids = 4;

    // enum uverbs_attrs_reg_dmabuf_mr_cmd_attr_ids
    pub const UVERBS_ATTR_REG_DMABUF_MR_HANDLE: uverbs_attrs_reg_dmabuf_mr_cmd_attr_ids = 0;
    pub const UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE: uverbs_attrs_reg_dmabuf_mr_cmd_attr_ids = 1;
    pub const UVERBS_ATTR_REG_DMABUF_MR_OFFSET: uverbs_attrs_reg_dmabuf_mr_cmd_attr_ids = 2;
    pub const UVERBS_ATTR_REG_DMABUF_MR_LENGTH: uverbs_attrs_reg_dmabuf_mr_cmd_attr_ids = 3;
    pub const UVERBS_ATTR_REG_DMABUF_MR_IOVA: uverbs_attrs_reg_dmabuf_mr_cmd_attr_ids = 4;
    pub const UVERBS_ATTR_REG_DMABUF_MR_FD: uverbs_attrs_reg_dmabuf_mr_cmd_attr_ids = 5;
    pub const UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS: uverbs_attrs_reg_dmabuf_mr_cmd_attr_ids = 6;
    pub const UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY: uverbs_attrs_reg_dmabuf_mr_cmd_attr_ids = 7;
    pub const UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY: uverbs_attrs_reg_dmabuf_mr_cmd_attr_ids = 8;

    // enum uverbs_attrs_create_counters_cmd_attr_ids
    pub const UVERBS_ATTR_CREATE_COUNTERS_HANDLE: uverbs_attrs_create_counters_cmd_attr_ids = 0;

    // enum uverbs_attrs_destroy_counters_cmd_attr_ids
    pub const UVERBS_ATTR_DESTROY_COUNTERS_HANDLE: uverbs_attrs_destroy_counters_cmd_attr_ids = 0;

    // enum uverbs_attrs_read_counters_cmd_attr_ids
    pub const UVERBS_ATTR_READ_COUNTERS_HANDLE: uverbs_attrs_read_counters_cmd_attr_ids = 0;
    pub const UVERBS_ATTR_READ_COUNTERS_BUFF: uverbs_attrs_read_counters_cmd_attr_ids = 1;
    pub const UVERBS_ATTR_READ_COUNTERS_FLAGS: uverbs_attrs_read_counters_cmd_attr_ids = 2;

    // enum uverbs_methods_actions_counters_ops
    pub const UVERBS_METHOD_COUNTERS_CREATE: uverbs_methods_actions_counters_ops = 0;
    pub const UVERBS_METHOD_COUNTERS_DESTROY: uverbs_methods_actions_counters_ops = 1;
    pub const UVERBS_METHOD_COUNTERS_READ: uverbs_methods_actions_counters_ops = 2;

    // enum uverbs_attrs_info_handles_id
    pub const UVERBS_ATTR_INFO_OBJECT_ID: uverbs_attrs_info_handles_id = 0;
    pub const UVERBS_ATTR_INFO_TOTAL_HANDLES: uverbs_attrs_info_handles_id = 1;
    pub const UVERBS_ATTR_INFO_HANDLES_LIST: uverbs_attrs_info_handles_id = 2;

    // enum uverbs_methods_pd
    pub const UVERBS_METHOD_PD_DESTROY: uverbs_methods_pd = 0;

    // enum uverbs_attrs_pd_destroy_ids
    pub const UVERBS_ATTR_DESTROY_PD_HANDLE: uverbs_attrs_pd_destroy_ids = 0;

    // enum uverbs_methods_mw
    pub const UVERBS_METHOD_MW_DESTROY: uverbs_methods_mw = 0;

    // enum uverbs_attrs_mw_destroy_ids
    pub const UVERBS_ATTR_DESTROY_MW_HANDLE: uverbs_attrs_mw_destroy_ids = 0;

    // enum uverbs_methods_xrcd
    pub const UVERBS_METHOD_XRCD_DESTROY: uverbs_methods_xrcd = 0;

    // enum uverbs_attrs_xrcd_destroy_ids
    pub const UVERBS_ATTR_DESTROY_XRCD_HANDLE: uverbs_attrs_xrcd_destroy_ids = 0;

    // enum uverbs_methods_ah
    pub const UVERBS_METHOD_AH_DESTROY: uverbs_methods_ah = 0;

    // enum uverbs_attrs_ah_destroy_ids
    pub const UVERBS_ATTR_DESTROY_AH_HANDLE: uverbs_attrs_ah_destroy_ids = 0;

    // enum uverbs_methods_rwq_ind_tbl
    pub const UVERBS_METHOD_RWQ_IND_TBL_DESTROY: uverbs_methods_rwq_ind_tbl = 0;

    // enum uverbs_attrs_rwq_ind_tbl_destroy_ids
    pub const UVERBS_ATTR_DESTROY_RWQ_IND_TBL_HANDLE: uverbs_attrs_rwq_ind_tbl_destroy_ids = 0;

    // enum uverbs_methods_flow
    pub const UVERBS_METHOD_FLOW_DESTROY: uverbs_methods_flow = 0;

    // enum uverbs_attrs_flow_destroy_ids
    pub const UVERBS_ATTR_DESTROY_FLOW_HANDLE: uverbs_attrs_flow_destroy_ids = 0;

    // enum uverbs_method_async_event
    pub const UVERBS_METHOD_ASYNC_EVENT_ALLOC: uverbs_method_async_event = 0;

    // enum uverbs_attrs_async_event_create
    pub const UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE: uverbs_attrs_async_event_create = 0;

    // enum uverbs_attrs_query_gid_table_cmd_attr_ids
    pub const UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE: uverbs_attrs_query_gid_table_cmd_attr_ids = 0;
    pub const UVERBS_ATTR_QUERY_GID_TABLE_FLAGS: uverbs_attrs_query_gid_table_cmd_attr_ids = 1;
    pub const UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES: uverbs_attrs_query_gid_table_cmd_attr_ids = 2;
    pub const UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES: uverbs_attrs_query_gid_table_cmd_attr_ids = 3;

    // enum uverbs_attrs_query_gid_entry_cmd_attr_ids
    pub const UVERBS_ATTR_QUERY_GID_ENTRY_PORT: uverbs_attrs_query_gid_entry_cmd_attr_ids = 0;
    pub const UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX: uverbs_attrs_query_gid_entry_cmd_attr_ids = 1;
    pub const UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS: uverbs_attrs_query_gid_entry_cmd_attr_ids = 2;
    pub const UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY: uverbs_attrs_query_gid_entry_cmd_attr_ids = 3;

    // #defines: an id's top nibble is its namespace; ids in namespace 1 belong to the driver.
    pub const UVERBS_ID_NS_MASK: u32 = 0xF000;
    pub const UVERBS_ID_NS_SHIFT: u32 = 12;
    pub const UVERBS_UDATA_DRIVER_DATA_NS: u32 = 1;
    pub const UVERBS_UDATA_DRIVER_DATA_FLAG: u32 = 1 << UVERBS_ID_NS_SHIFT;
}
