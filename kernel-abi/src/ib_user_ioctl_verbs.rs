//! `<rdma/ib_user_ioctl_verbs.h>`: enums and structs shared by the ioctl() command channel and
//! the write() commands (access flags, QP types, device capability flags, driver ids).

use crate::ib_user_verbs::ib_uverbs_query_port_resp;
use crate::layout::{abi, abi_consts};
use zerocopy::IntoBytes;

pub type ib_uverbs_core_support = u32;
pub type ib_uverbs_access_flags = u32;
pub type ib_uverbs_srq_type = u32;
pub type ib_uverbs_wq_type = u32;
pub type ib_uverbs_wq_flags = u32;
pub type ib_uverbs_qp_type = u32;
pub type ib_uverbs_qp_create_flags = u32;
pub type ib_uverbs_query_port_cap_flags = u32;
pub type ib_uverbs_query_port_flags = u32;
pub type ib_uverbs_flow_action_esp_keymat = u32;
pub type ib_uverbs_flow_action_esp_keymat_aes_gcm_iv_algo = u32;
pub type ib_uverbs_flow_action_esp_replay = u32;
pub type ib_uverbs_flow_action_esp_flags = u32;
pub type ib_uverbs_read_counters_flags = u32;
pub type ib_uverbs_advise_mr_advice = u32;
pub type ib_uverbs_advise_mr_flag = u32;
pub type rdma_driver_id = u32;
pub type ib_uverbs_gid_type = u32;

abi_consts! {
    // enum ib_uverbs_core_support
    pub const IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS: ib_uverbs_core_support = 1;

    // enum ib_uverbs_access_flags
    pub const IB_UVERBS_ACCESS_LOCAL_WRITE: ib_uverbs_access_flags = 1;
    pub const IB_UVERBS_ACCESS_REMOTE_WRITE: ib_uverbs_access_flags = 2;
    pub const IB_UVERBS_ACCESS_REMOTE_READ: ib_uverbs_access_flags = 4;
    pub const IB_UVERBS_ACCESS_REMOTE_ATOMIC: ib_uverbs_access_flags = 8;
    pub const IB_UVERBS_ACCESS_MW_BIND: ib_uverbs_access_flags = 16;
    pub const IB_UVERBS_ACCESS_ZERO_BASED: ib_uverbs_access_flags = 32;
    pub const IB_UVERBS_ACCESS_ON_DEMAND: ib_uverbs_access_flags = 64;
    pub const IB_UVERBS_ACCESS_HUGETLB: ib_uverbs_access_flags = 128;
    pub const IB_UVERBS_ACCESS_RELAXED_ORDERING: ib_uverbs_access_flags = 0x100000;
    pub const IB_UVERBS_ACCESS_OPTIONAL_RANGE: ib_uverbs_access_flags = 1072693248;

    // enum ib_uverbs_srq_type
    pub const IB_UVERBS_SRQT_BASIC: ib_uverbs_srq_type = 0;
    pub const IB_UVERBS_SRQT_XRC: ib_uverbs_srq_type = 1;
    pub const IB_UVERBS_SRQT_TM: ib_uverbs_srq_type = 2;

    // enum ib_uverbs_wq_type
    pub const IB_UVERBS_WQT_RQ: ib_uverbs_wq_type = 0;

    // enum ib_uverbs_wq_flags
    pub const IB_UVERBS_WQ_FLAGS_CVLAN_STRIPPING: ib_uverbs_wq_flags = 1;
    pub const IB_UVERBS_WQ_FLAGS_SCATTER_FCS: ib_uverbs_wq_flags = 2;
    pub const IB_UVERBS_WQ_FLAGS_DELAY_DROP: ib_uverbs_wq_flags = 4;
    pub const IB_UVERBS_WQ_FLAGS_PCI_WRITE_END_PADDING: ib_uverbs_wq_flags = 8;

    // enum ib_uverbs_qp_type
    pub const IB_UVERBS_QPT_RC: ib_uverbs_qp_type = 2;
    pub const IB_UVERBS_QPT_UC: ib_uverbs_qp_type = 3;
    pub const IB_UVERBS_QPT_UD: ib_uverbs_qp_type = 4;
    pub const IB_UVERBS_QPT_RAW_PACKET: ib_uverbs_qp_type = 8;
    pub const IB_UVERBS_QPT_XRC_INI: ib_uverbs_qp_type = 9;
    pub const IB_UVERBS_QPT_XRC_TGT: ib_uverbs_qp_type = 10;
    pub const IB_UVERBS_QPT_DRIVER: ib_uverbs_qp_type = 255;

    // enum ib_uverbs_qp_create_flags
    pub const IB_UVERBS_QP_CREATE_BLOCK_MULTICAST_LOOPBACK: ib_uverbs_qp_create_flags = 2;
    pub const IB_UVERBS_QP_CREATE_SCATTER_FCS: ib_uverbs_qp_create_flags = 0x100;
    pub const IB_UVERBS_QP_CREATE_CVLAN_STRIPPING: ib_uverbs_qp_create_flags = 0x200;
    pub const IB_UVERBS_QP_CREATE_PCI_WRITE_END_PADDING: ib_uverbs_qp_create_flags = 0x800;
    pub const IB_UVERBS_QP_CREATE_SQ_SIG_ALL: ib_uverbs_qp_create_flags = 0x1000;

    // enum ib_uverbs_query_port_cap_flags
    pub const IB_UVERBS_PCF_SM: ib_uverbs_query_port_cap_flags = 2;
    pub const IB_UVERBS_PCF_NOTICE_SUP: ib_uverbs_query_port_cap_flags = 4;
    pub const IB_UVERBS_PCF_TRAP_SUP: ib_uverbs_query_port_cap_flags = 8;
    pub const IB_UVERBS_PCF_OPT_IPD_SUP: ib_uverbs_query_port_cap_flags = 16;
    pub const IB_UVERBS_PCF_AUTO_MIGR_SUP: ib_uverbs_query_port_cap_flags = 32;
    pub const IB_UVERBS_PCF_SL_MAP_SUP: ib_uverbs_query_port_cap_flags = 64;
    pub const IB_UVERBS_PCF_MKEY_NVRAM: ib_uverbs_query_port_cap_flags = 128;
    pub const IB_UVERBS_PCF_PKEY_NVRAM: ib_uverbs_query_port_cap_flags = 0x100;
    pub const IB_UVERBS_PCF_LED_INFO_SUP: ib_uverbs_query_port_cap_flags = 0x200;
    pub const IB_UVERBS_PCF_SM_DISABLED: ib_uverbs_query_port_cap_flags = 0x400;
    pub const IB_UVERBS_PCF_SYS_IMAGE_GUID_SUP: ib_uverbs_query_port_cap_flags = 0x800;
    pub const IB_UVERBS_PCF_PKEY_SW_EXT_PORT_TRAP_SUP: ib_uverbs_query_port_cap_flags = 0x1000;
    pub const IB_UVERBS_PCF_EXTENDED_SPEEDS_SUP: ib_uverbs_query_port_cap_flags = 0x4000;
    pub const IB_UVERBS_PCF_CM_SUP: ib_uverbs_query_port_cap_flags = 0x10000;
    pub const IB_UVERBS_PCF_SNMP_TUNNEL_SUP: ib_uverbs_query_port_cap_flags = 0x20000;
    pub const IB_UVERBS_PCF_REINIT_SUP: ib_uverbs_query_port_cap_flags = 0x40000;
    pub const IB_UVERBS_PCF_DEVICE_MGMT_SUP: ib_uverbs_query_port_cap_flags = 0x80000;
    pub const IB_UVERBS_PCF_VENDOR_CLASS_SUP: ib_uverbs_query_port_cap_flags = 0x100000;
    pub const IB_UVERBS_PCF_DR_NOTICE_SUP: ib_uverbs_query_port_cap_flags = 0x200000;
    pub const IB_UVERBS_PCF_CAP_MASK_NOTICE_SUP: ib_uverbs_query_port_cap_flags = 0x400000;
    pub const IB_UVERBS_PCF_BOOT_MGMT_SUP: ib_uverbs_query_port_cap_flags = 0x800000;
    pub const IB_UVERBS_PCF_LINK_LATENCY_SUP: ib_uverbs_query_port_cap_flags = 0x1000000;
    pub const IB_UVERBS_PCF_CLIENT_REG_SUP: ib_uverbs_query_port_cap_flags = 0x2000000;
    pub const IB_UVERBS_PCF_LINK_SPEED_WIDTH_TABLE_SUP: ib_uverbs_query_port_cap_flags = 0x8000000;
    pub const IB_UVERBS_PCF_VENDOR_SPECIFIC_MADS_TABLE_SUP: ib_uverbs_query_port_cap_flags = 0x10000000;
    pub const IB_UVERBS_PCF_MCAST_PKEY_TRAP_SUPPRESSION_SUP: ib_uverbs_query_port_cap_flags = 0x20000000;
    pub const IB_UVERBS_PCF_MCAST_FDB_TOP_SUP: ib_uverbs_query_port_cap_flags = 0x40000000;
    pub const IB_UVERBS_PCF_HIERARCHY_INFO_SUP: ib_uverbs_query_port_cap_flags = 0x80000000;
    pub const IB_UVERBS_PCF_IP_BASED_GIDS: ib_uverbs_query_port_cap_flags = 0x4000000;

    // enum ib_uverbs_query_port_flags
    pub const IB_UVERBS_QPF_GRH_REQUIRED: ib_uverbs_query_port_flags = 1;

    // enum ib_uverbs_flow_action_esp_keymat
    pub const IB_UVERBS_FLOW_ACTION_ESP_KEYMAT_AES_GCM: ib_uverbs_flow_action_esp_keymat = 0;

    // enum ib_uverbs_flow_action_esp_keymat_aes_gcm_iv_algo
    pub const IB_UVERBS_FLOW_ACTION_IV_ALGO_SEQ: ib_uverbs_flow_action_esp_keymat_aes_gcm_iv_algo = 0;

    // enum ib_uverbs_flow_action_esp_replay
    pub const IB_UVERBS_FLOW_ACTION_ESP_REPLAY_NONE: ib_uverbs_flow_action_esp_replay = 0;
    pub const IB_UVERBS_FLOW_ACTION_ESP_REPLAY_BMP: ib_uverbs_flow_action_esp_replay = 1;

    // enum ib_uverbs_flow_action_esp_flags
    pub const IB_UVERBS_FLOW_ACTION_ESP_FLAGS_INLINE_CRYPTO: ib_uverbs_flow_action_esp_flags = 0;
    pub const IB_UVERBS_FLOW_ACTION_ESP_FLAGS_FULL_OFFLOAD: ib_uverbs_flow_action_esp_flags = 1;
    pub const IB_UVERBS_FLOW_ACTION_ESP_FLAGS_TUNNEL: ib_uverbs_flow_action_esp_flags = 0;
    pub const IB_UVERBS_FLOW_ACTION_ESP_FLAGS_TRANSPORT: ib_uverbs_flow_action_esp_flags = 2;
    pub const IB_UVERBS_FLOW_ACTION_ESP_FLAGS_DECRYPT: ib_uverbs_flow_action_esp_flags = 0;
    pub const IB_UVERBS_FLOW_ACTION_ESP_FLAGS_ENCRYPT: ib_uverbs_flow_action_esp_flags = 4;
    pub const IB_UVERBS_FLOW_ACTION_ESP_FLAGS_ESN_NEW_WINDOW: ib_uverbs_flow_action_esp_flags = 8;

    // enum ib_uverbs_read_counters_flags
    pub const IB_UVERBS_READ_COUNTERS_PREFER_CACHED: ib_uverbs_read_counters_flags = 1;

    // enum ib_uverbs_advise_mr_advice
    pub const IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH: ib_uverbs_advise_mr_advice = 0;
    pub const IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE: ib_uverbs_advise_mr_advice = 1;
    pub const IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT: ib_uverbs_advise_mr_advice = 2;

    // enum ib_uverbs_advise_mr_flag
    pub const IB_UVERBS_ADVISE_MR_FLAG_FLUSH: ib_uverbs_advise_mr_flag = 1;

    // enum rdma_driver_id
    pub const RDMA_DRIVER_UNKNOWN: rdma_driver_id = 0;
    pub const RDMA_DRIVER_MLX5: rdma_driver_id = 1;
    pub const RDMA_DRIVER_MLX4: rdma_driver_id = 2;
    pub const RDMA_DRIVER_CXGB3: rdma_driver_id = 3;
    pub const RDMA_DRIVER_CXGB4: rdma_driver_id = 4;
    pub const RDMA_DRIVER_MTHCA: rdma_driver_id = 5;
    pub const RDMA_DRIVER_BNXT_RE: rdma_driver_id = 6;
    pub const RDMA_DRIVER_OCRDMA: rdma_driver_id = 7;
    pub const RDMA_DRIVER_NES: rdma_driver_id = 8;
    pub const RDMA_DRIVER_I40IW: rdma_driver_id = 9;
    pub const RDMA_DRIVER_IRDMA: rdma_driver_id = 9;
    pub const RDMA_DRIVER_VMW_PVRDMA: rdma_driver_id = 10;
    pub const RDMA_DRIVER_QEDR: rdma_driver_id = 11;
    pub const RDMA_DRIVER_HNS: rdma_driver_id = 12;
    pub const RDMA_DRIVER_USNIC: rdma_driver_id = 13;
    pub const RDMA_DRIVER_RXE: rdma_driver_id = 14;
    pub const RDMA_DRIVER_HFI1: rdma_driver_id = 15;
    pub const RDMA_DRIVER_QIB: rdma_driver_id = 16;
    pub const RDMA_DRIVER_EFA: rdma_driver_id = 17;
    pub const RDMA_DRIVER_SIW: rdma_driver_id = 18;
    pub const RDMA_DRIVER_ERDMA: rdma_driver_id = 19;

    // enum ib_uverbs_gid_type
    pub const IB_UVERBS_GID_TYPE_IB: ib_uverbs_gid_type = 0;
    pub const IB_UVERBS_GID_TYPE_ROCE_V1: ib_uverbs_gid_type = 1;
    pub const IB_UVERBS_GID_TYPE_ROCE_V2: ib_uverbs_gid_type = 2;

    // #defines
    pub const IB_UVERBS_ACCESS_OPTIONAL_FIRST: u32 = 1 << 20;
    pub const IB_UVERBS_ACCESS_OPTIONAL_LAST: u32 = 1 << 29;

    // Linux 6.2+ (absent from the 6.1 header).
    pub const IB_UVERBS_ACCESS_FLUSH_GLOBAL: ib_uverbs_access_flags = 1 << 8;
    pub const IB_UVERBS_ACCESS_FLUSH_PERSISTENT: ib_uverbs_access_flags = 1 << 9;
}

abi! {
    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_flow_action_esp_keymat_aes_gcm [size 56] {
        0 => pub iv: u64,
        8 => pub iv_algo: u32,
        12 => pub salt: u32,
        16 => pub icv_len: u32,
        20 => pub key_len: u32,
        24 => pub aes_key: [u32; 8],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_flow_action_esp_replay_bmp [size 4] {
        0 => pub size: u32,
    }

    #[derive(Debug)]
    pub struct ib_uverbs_flow_action_esp_encap [size 24] {
        0 => pub val_ptr: u64,
        8 => pub next_ptr: u64,
        16 => pub len: u16,
        18 => pub r#type: u16,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_flow_action_esp [size 24] {
        0 => pub spi: u32,
        4 => pub seq: u32,
        8 => pub tfc_pad: u32,
        12 => pub flags: u32,
        16 => pub hard_limit_pkts: u64,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_query_port_resp_ex [size 48] {
        0 => pub legacy_resp: ib_uverbs_query_port_resp,
        40 => pub port_cap_flags2: u16,
        42 => pub reserved: [u8; 2],
        /// Linux 6.6+ (XDR speeds); reserved bytes, left zero, before.
        44 => pub active_speed_ex: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_qp_cap [size 20] {
        0 => pub max_send_wr: u32,
        4 => pub max_recv_wr: u32,
        8 => pub max_send_sge: u32,
        12 => pub max_recv_sge: u32,
        16 => pub max_inline_data: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_gid_entry [size 32] {
        0 => pub gid: [u64; 2],
        16 => pub gid_index: u32,
        20 => pub port_num: u32,
        24 => pub gid_type: u32,
        28 => pub netdev_ifindex: u32,
    }
}
