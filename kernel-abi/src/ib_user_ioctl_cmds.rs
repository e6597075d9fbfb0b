//! `<rdma/ib_user_ioctl_cmds.h>`: object, method and attribute ids of the ioctl() command
//! channel (`ib_uverbs_ioctl_hdr.object_id`/`method_id`, `ib_uverbs_attr.attr_id`).

use crate::layout::abi_consts;

abi_consts! {
    // enum uverbs_default_objects
    pub const UVERBS_OBJECT_DEVICE: u32 = 0;
    pub const UVERBS_OBJECT_MR: u32 = 7;

    // anonymous enum
    pub const UVERBS_ATTR_UHW_IN: u32 = 0x1000;
    pub const UVERBS_ATTR_UHW_OUT: u32 = 4097;

    // enum uverbs_methods_device
    pub const UVERBS_METHOD_INVOKE_WRITE: u32 = 0;
    pub const UVERBS_METHOD_QUERY_PORT: u32 = 2;
    pub const UVERBS_METHOD_QUERY_CONTEXT: u32 = 4;

    // enum uverbs_attrs_invoke_write_cmd_attr_ids
    pub const UVERBS_ATTR_CORE_IN: u32 = 0;
    pub const UVERBS_ATTR_CORE_OUT: u32 = 1;
    pub const UVERBS_ATTR_WRITE_CMD: u32 = 2;

    // enum uverbs_attrs_query_port_cmd_attr_ids
    pub const UVERBS_ATTR_QUERY_PORT_PORT_NUM: u32 = 0;
    pub const UVERBS_ATTR_QUERY_PORT_RESP: u32 = 1;

    // enum uverbs_attrs_query_context_attr_ids
    pub const UVERBS_ATTR_QUERY_CONTEXT_CORE_SUPPORT: u32 = 1;

    // enum uverbs_methods_mr
    pub const UVERBS_METHOD_ADVISE_MR: u32 = 2;

    // enum uverbs_attrs_advise_mr_cmd_attr_ids
    pub const UVERBS_ATTR_ADVISE_MR_PD_HANDLE: u32 = 0;
    pub const UVERBS_ATTR_ADVISE_MR_ADVICE: u32 = 1;
    pub const UVERBS_ATTR_ADVISE_MR_FLAGS: u32 = 2;
    pub const UVERBS_ATTR_ADVISE_MR_SGE_LIST: u32 = 3;
}
