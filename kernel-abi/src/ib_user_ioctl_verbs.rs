//! `<rdma/ib_user_ioctl_verbs.h>`: enums and structs shared by the ioctl() command channel and
//! the write() commands (core support and advise flags, the driver id, the extended port
//! response).

use crate::ib_user_verbs::ib_uverbs_query_port_resp;
use crate::layout::{abi, abi_consts};
use zerocopy::IntoBytes;

abi_consts! {
    // enum ib_uverbs_core_support
    pub const IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS: u32 = 1;

    // enum ib_uverbs_advise_mr_flag
    pub const IB_UVERBS_ADVISE_MR_FLAG_FLUSH: u32 = 1;

    // enum rdma_driver_id
    pub const RDMA_DRIVER_RXE: u32 = 14;
}

abi! {
    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_query_port_resp_ex [size 48] {
        0 => pub legacy_resp: ib_uverbs_query_port_resp,
        40 => pub port_cap_flags2: u16,
        42 => pub reserved: [u8; 2],
        /// Linux 6.6+ (XDR speeds); reserved bytes, left zero, before.
        44 => pub active_speed_ex: u32,
    }
}
