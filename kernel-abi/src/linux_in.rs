//! `<linux/in.h>` and `<linux/in6.h>`: the socket addresses embedded in `rxe_av`, defined here
//! so that no libc is needed.

use crate::layout::abi;
use zerocopy::IntoBytes;

abi! {
    #[derive(IntoBytes, Debug)]
    pub struct in_addr [size 4] {
        /// Big-endian (`__be32`).
        0 => pub s_addr: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct sockaddr_in [size 16] {
        0 => pub sin_family: u16,
        /// Big-endian (`__be16`).
        2 => pub sin_port: u16,
        4 => pub sin_addr: in_addr,
        8 => pub __pad: [u8; 8],
    }

    pub union in6_addr_in6_u [size 16, unnamed] {
        0 => pub u6_addr8: [u8; 16],
        /// Big-endian (`__be16[8]`).
        0 => pub u6_addr16: [u16; 8],
        /// Big-endian (`__be32[4]`).
        0 => pub u6_addr32: [u32; 4],
    }

    pub struct in6_addr [size 16] {
        0 => pub in6_u: in6_addr_in6_u,
    }

    pub struct sockaddr_in6 [size 28] {
        0 => pub sin6_family: u16,
        /// Big-endian (`__be16`).
        2 => pub sin6_port: u16,
        /// Big-endian (`__be32`).
        4 => pub sin6_flowinfo: u32,
        8 => pub sin6_addr: in6_addr,
        24 => pub sin6_scope_id: u32,
    }
}
