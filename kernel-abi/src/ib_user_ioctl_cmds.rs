//! `<rdma/ib_user_ioctl_cmds.h>`: object, method and attribute ids of the ioctl() command
//! channel (`ib_uverbs_ioctl_hdr.object_id`/`method_id`, `ib_uverbs_attr.attr_id`).

use crate::layout::abi_consts;

pub type uverbs_default_objects = u32;
pub type uverbs_methods_device = u32;
pub type uverbs_attrs_invoke_write_cmd_attr_ids = u32;
pub type uverbs_attrs_query_port_cmd_attr_ids = u32;
pub type uverbs_attrs_query_context_attr_ids = u32;
pub type uverbs_methods_mr = u32;
pub type uverbs_attrs_advise_mr_cmd_attr_ids = u32;

abi_consts! {
    // enum uverbs_default_objects
    pub const UVERBS_OBJECT_DEVICE: uverbs_default_objects = 0;
    pub const UVERBS_OBJECT_MR: uverbs_default_objects = 7;

    // anonymous enum
    pub const UVERBS_ATTR_UHW_IN: u32 = 0x1000;
    pub const UVERBS_ATTR_UHW_OUT: u32 = 4097;

    // enum uverbs_methods_device
    pub const UVERBS_METHOD_INVOKE_WRITE: uverbs_methods_device = 0;
    pub const UVERBS_METHOD_QUERY_PORT: uverbs_methods_device = 2;
    pub const UVERBS_METHOD_QUERY_CONTEXT: uverbs_methods_device = 4;

    // enum uverbs_attrs_invoke_write_cmd_attr_ids
    pub const UVERBS_ATTR_CORE_IN: uverbs_attrs_invoke_write_cmd_attr_ids = 0;
    pub const UVERBS_ATTR_CORE_OUT: uverbs_attrs_invoke_write_cmd_attr_ids = 1;
    pub const UVERBS_ATTR_WRITE_CMD: uverbs_attrs_invoke_write_cmd_attr_ids = 2;

    // enum uverbs_attrs_query_port_cmd_attr_ids
    pub const UVERBS_ATTR_QUERY_PORT_PORT_NUM: uverbs_attrs_query_port_cmd_attr_ids = 0;
    pub const UVERBS_ATTR_QUERY_PORT_RESP: uverbs_attrs_query_port_cmd_attr_ids = 1;

    // enum uverbs_attrs_query_context_attr_ids
    pub const UVERBS_ATTR_QUERY_CONTEXT_CORE_SUPPORT: uverbs_attrs_query_context_attr_ids = 1;

    // enum uverbs_methods_mr
    pub const UVERBS_METHOD_ADVISE_MR: uverbs_methods_mr = 2;

    // enum uverbs_attrs_advise_mr_cmd_attr_ids
    pub const UVERBS_ATTR_ADVISE_MR_PD_HANDLE: uverbs_attrs_advise_mr_cmd_attr_ids = 0;
    pub const UVERBS_ATTR_ADVISE_MR_ADVICE: uverbs_attrs_advise_mr_cmd_attr_ids = 1;
    pub const UVERBS_ATTR_ADVISE_MR_FLAGS: uverbs_attrs_advise_mr_cmd_attr_ids = 2;
    pub const UVERBS_ATTR_ADVISE_MR_SGE_LIST: uverbs_attrs_advise_mr_cmd_attr_ids = 3;
}
