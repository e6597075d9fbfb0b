//! `<rdma/rdma_user_ioctl_cmds.h>`: the ioctl() command header and attribute record, and the
//! ioctl request number.

use crate::layout::{abi, abi_consts};
use zerocopy::IntoBytes;

abi_consts! {
    // anonymous enum
    pub const UVERBS_ATTR_F_MANDATORY: u32 = 1;
    pub const UVERBS_ATTR_F_VALID_OUTPUT: u32 = 2;

    // #defines
    pub const RDMA_IOCTL_MAGIC: u32 = 0x1b;
    /// The ioctl request number of every uverbs ioctl command:
    /// `_IOWR(RDMA_IOCTL_MAGIC, 1, struct ib_uverbs_ioctl_hdr)`. With the asm-generic encoding
    /// (x86, arm, riscv...) that is `dir << 30 | size << 16 | type << 8 | nr`, where
    /// `dir = _IOC_READ | _IOC_WRITE = 3` and `size = sizeof(struct ib_uverbs_ioctl_hdr) = 24`.
    /// powerpc, mips and sparc encode differently (3-bit direction, 13-bit size).
    pub const RDMA_VERBS_IOCTL: u32 = (3 << 30)
        | ((core::mem::size_of::<ib_uverbs_ioctl_hdr>() as u32) << 16)
        | (RDMA_IOCTL_MAGIC << 8)
        | 1;
}

abi! {
    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_attr_attr_data_enum_data [size 2, unnamed] {
        0 => pub elem_id: u8,
        1 => pub reserved: u8,
    }

    pub union ib_uverbs_attr_attr_data [size 2, unnamed] {
        0 => pub enum_data: ib_uverbs_attr_attr_data_enum_data,
        0 => pub reserved: u16,
    }

    pub union ib_uverbs_attr_value [size 8, anonymous] {
        0 => pub data: u64,
        0 => pub data_s64: i64,
    }

    pub struct ib_uverbs_attr [size 16] {
        0 => pub attr_id: u16,
        2 => pub len: u16,
        4 => pub flags: u16,
        6 => pub attr_data: ib_uverbs_attr_attr_data,
        8 => pub value: ib_uverbs_attr_value,
    }

    pub struct ib_uverbs_ioctl_hdr [size 24] {
        0 => pub length: u16,
        2 => pub object_id: u16,
        4 => pub method_id: u16,
        6 => pub num_attrs: u16,
        8 => pub reserved1: u64,
        16 => pub driver_id: u32,
        20 => pub reserved2: u32,
        24 => pub attrs: [ib_uverbs_attr; 0],
    }
}
