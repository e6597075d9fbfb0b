//! Address handles: `create_ah` / `destroy_ah`.
//!
//! Kernels since rxe learnt AH indices answer CREATE_AH with a non-zero
//! `ah_num`, which UD send WQEs carry. Older kernels leave it 0; for those we
//! build the address vector (`rxe_av`) ourselves and UD sends carry it whole,
//! as the stock provider does: the source GID from the port's GID table,
//! both GIDs as socket addresses, IPv4 or IPv6 after the destination GID, and
//! the destination MAC from libibverbs' neighbour resolution. The entries
//! are in `entry::objects`.

#![forbid(unsafe_code)]

use core::ffi::CStr;
use core::mem::offset_of;
use core::ptr::NonNull;
use std::os::fd::RawFd;

use kernel_abi::{
    ib_uverbs_ah_attr, ib_uverbs_create_ah, ib_uverbs_create_ah_resp, ib_uverbs_destroy_ah, ib_uverbs_global_route,
    rxe_av, rxe_av_sockaddr, rxe_create_ah_resp, rxe_gid, rxe_global_route, IB_USER_VERBS_CMD_CREATE_AH,
    RXE_NETWORK_TYPE_IPV4, RXE_NETWORK_TYPE_IPV6,
};
use log::debug;
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

use crate::command::{self, impl_write_cmd};
use crate::errno::Errno;
use crate::libibverbs::control_objects::{ibv_ah, ibv_ah_attr};
use crate::libibverbs::device_context::ibv_device;
use crate::lifecycle::{Creating, HandedBox, Kept};
use crate::pd::{self, DomainUse, OnPd};

/// Our AH. `ibv_ah` must stay first: libibverbs hands it back to us.
#[repr(C)]
pub(crate) struct RxeAh {
    pub ibv_ah: ibv_ah,
    /// The kernel's index of this AH; 0 on kernels without them.
    pub ah_num: u32,
    /// The address vector UD sends carry when `ah_num` is 0.
    pub av: rxe_av,
    /// The parent domain it was created on, if any (a user of it).
    domain: DomainUse,
}

impl RxeAh {
    /// An AH as create_ah leaves it with the kernel's index `ah_num` (0: none, the address
    /// vector travels in each WQE), for tests.
    #[cfg(test)]
    pub(crate) fn fake(ah_num: u32) -> RxeAh {
        RxeAh {
            ibv_ah: ibv_ah {
                context: core::ptr::null_mut(),
                pd: core::ptr::null_mut(),
                handle: 0,
            },
            ah_num,
            av: rxe_av::new_zeroed(),
            domain: DomainUse::none(),
        }
    }
}

/// CREATE_AH's response: the core part, then rxe's driver part.
#[repr(C)]
#[derive(FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct CreateAhResp {
    pub core: ib_uverbs_create_ah_resp,
    pub drv: rxe_create_ah_resp,
}
const _: () = assert!(offset_of!(CreateAhResp, drv) == 4 && size_of::<CreateAhResp>() == 12);

impl_write_cmd!(ib_uverbs_create_ah, IB_USER_VERBS_CMD_CREATE_AH, CreateAhResp, core: ib_uverbs_create_ah_resp);

/// The kernel's form of the AH attributes.
pub(crate) fn uverbs_ah_attr(attr: &ibv_ah_attr) -> ib_uverbs_ah_attr {
    ib_uverbs_ah_attr {
        grh: ib_uverbs_global_route {
            dgid: attr.grh.dgid.bytes(),
            flow_label: attr.grh.flow_label,
            sgid_index: attr.grh.sgid_index,
            hop_limit: attr.grh.hop_limit,
            traffic_class: attr.grh.traffic_class,
            reserved: 0,
        },
        dlid: attr.dlid,
        sl: attr.sl,
        src_path_bits: attr.src_path_bits,
        static_rate: attr.static_rate,
        is_global: attr.is_global,
        port_num: attr.port_num,
        reserved: 0,
    }
}

/// `::ffff:a.b.c.d`: a RoCEv2 GID that carries an IPv4 address.
pub(crate) fn is_v4_mapped(gid: &[u8; 16]) -> bool {
    gid[..10].iter().all(|&b| b == 0) && gid[10] == 0xff && gid[11] == 0xff
}

/// A GID as the socket address the kernel's AV expects.
pub(crate) fn gid_to_sockaddr(gid: &[u8; 16]) -> rxe_av_sockaddr {
    let mut sa = rxe_av_sockaddr::new_zeroed();
    if is_v4_mapped(gid) {
        sa._sockaddr_in.sin_family = libc::AF_INET as u16;
        sa._sockaddr_in.sin_addr.s_addr = u32::from_ne_bytes([gid[12], gid[13], gid[14], gid[15]]);
    } else {
        sa._sockaddr_in6.sin6_family = libc::AF_INET6 as u16;
        sa._sockaddr_in6.sin6_addr.in6_u.u6_addr8 = *gid;
    }
    sa
}

/// The address vector for `attr` from port GID `sgid` to MAC `dmac`.
pub(crate) fn build_av(attr: &ibv_ah_attr, sgid: &[u8; 16], dmac: [u8; 6]) -> rxe_av {
    let dgid = attr.grh.dgid.bytes();
    let network_type = if is_v4_mapped(&dgid) {
        RXE_NETWORK_TYPE_IPV4
    } else {
        RXE_NETWORK_TYPE_IPV6
    };
    rxe_av {
        port_num: attr.port_num,
        network_type: network_type as u8,
        dmac,
        grh: rxe_global_route {
            dgid: rxe_gid { raw: dgid },
            flow_label: attr.grh.flow_label,
            sgid_index: attr.grh.sgid_index,
            hop_limit: attr.grh.hop_limit,
            traffic_class: attr.grh.traffic_class,
        },
        sgid_addr: gid_to_sockaddr(sgid),
        dgid_addr: gid_to_sockaddr(&dgid),
    }
}

/// Parses a GID as sysfs prints it: eight groups of four hex digits.
pub(crate) fn parse_sysfs_gid(text: &str) -> Option<[u8; 16]> {
    let mut gid = [0u8; 16];
    let mut groups = text.trim().split(':');
    for pair in gid.chunks_exact_mut(2) {
        // Four hex digits: from_str_radix alone would also take a sign ("+fff").
        let g = groups
            .next()
            .filter(|g| g.len() == 4 && g.bytes().all(|b| b.is_ascii_hexdigit()))?;
        pair.copy_from_slice(&u16::from_str_radix(g, 16).ok()?.to_be_bytes());
    }
    groups.next().is_none().then_some(gid)
}

/// The GID at `index` of `port`, from the sysfs GID table of `dev`.
fn query_sgid(dev: &ibv_device, port: u8, index: u8) -> Result<[u8; 16], Errno> {
    let path: Vec<u8> = dev
        .ibdev_path
        .iter()
        .map(|&c| u8::from_ne_bytes(c.to_ne_bytes()))
        .collect();
    let base = CStr::from_bytes_until_nul(&path)
        .map_err(|_| Errno::EINVAL)?
        .to_str()
        .map_err(|_| Errno::EINVAL)?;
    let file = format!("{base}/ports/{port}/gids/{index}");
    let text = std::fs::read_to_string(&file).map_err(|e| e.raw_os_error().map_or(Errno::EINVAL, Errno::from_raw))?;
    parse_sysfs_gid(&text).ok_or(Errno::EINVAL)
}

/// The user-space AV of an AH on a kernel without AH indices: the source GID
/// from the sysfs of `device` (the PD's context's; `None`: `EINVAL`), the
/// destination MAC from `resolve_dmac` (libibverbs' neighbour resolution).
pub(crate) fn user_av(
    attr: &ibv_ah_attr,
    device: Option<&ibv_device>,
    resolve_dmac: impl FnOnce() -> Result<[u8; 6], Errno>,
) -> Result<rxe_av, Errno> {
    let sgid = query_sgid(device.ok_or(Errno::EINVAL)?, attr.port_num, attr.grh.sgid_index)?;
    let dmac = resolve_dmac()?;
    Ok(build_av(attr, &sgid, dmac))
}

/// `create_ah`; `user_av` builds the AV a kernel without AH indices needs
/// (`ah::user_av` with the context's device).
pub(crate) fn create_ah(
    on: Option<OnPd<'_>>,
    attr: Option<&ibv_ah_attr>,
    user_av: impl FnOnce(&ibv_ah_attr) -> Result<rxe_av, Errno>,
) -> Result<NonNull<RxeAh>, Errno> {
    let (Some(on), Some(attr)) = (on, attr) else {
        return Err(Errno::EINVAL);
    };
    let fd = on.fd?;
    let obj = RxeAh {
        ibv_ah: ibv_ah {
            context: on.pd.pd.context,
            pd: on.ptr,
            handle: 0,
        },
        ah_num: 0,
        av: rxe_av::new_zeroed(),
        domain: DomainUse::on(Some(on.pd)),
    };
    let mut ah = Creating::new(obj, "AH", fd, command::destroy_kernel::<ib_uverbs_destroy_ah>)?;
    let cmd = ib_uverbs_create_ah {
        response: 0,
        user_handle: ah.as_ptr() as usize as u64,
        pd_handle: on.pd.pd.handle,
        reserved: 0,
        attr: uverbs_ah_attr(attr),
        driver_data: [],
    };
    let resp = command::write_cmd(fd, cmd)?;
    ah.created(resp.core.ah_handle);
    let a = ah.get_mut();
    a.ibv_ah.handle = resp.core.ah_handle;
    a.ah_num = resp.drv.ah_num;
    if a.ah_num == 0 {
        a.av = user_av(attr).inspect_err(|e| {
            debug!("create_ah: no address vector (errno {e}); destroying the kernel AH");
        })?;
    }
    Ok(ah.finish())
}

/// `destroy_ah` (`fd`: its context's): the AH is freed only when the kernel
/// let it go.
pub(crate) fn destroy_ah(ah: HandedBox<RxeAh>, fd: Result<RawFd, Errno>) -> Result<(), Kept<RxeAh>> {
    let handle = ah.get().ibv_ah.handle;
    pd::destroy_object::<ib_uverbs_destroy_ah, _>(ah, fd, handle)
}

#[cfg(test)]
pub(crate) mod testing {
    use crate::libibverbs::control_objects::{ibv_ah_attr, ibv_gid, ibv_global_route};

    /// An AH attribute with a global route to `dgid` on port 1.
    pub(crate) fn attr(dgid: [u8; 16]) -> ibv_ah_attr {
        ibv_ah_attr {
            grh: ibv_global_route {
                dgid: ibv_gid { raw: dgid },
                flow_label: 0x12345,
                sgid_index: 1,
                hop_limit: 64,
                traffic_class: 3,
            },
            dlid: 0,
            sl: 2,
            src_path_bits: 0,
            static_rate: 0,
            is_global: 1,
            port_num: 1,
        }
    }

    pub(crate) const V4_198_18_0_2: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 18, 0, 2];
    pub(crate) const V4_198_18_0_1: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 18, 0, 1];
    pub(crate) const LINK_LOCAL: [u8; 16] = [
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0, 0xff, 0xfe, 0x12, 0x34, 0x56,
    ];
}

#[cfg(test)]
mod tests {
    use super::testing::{attr, LINK_LOCAL, V4_198_18_0_2};
    use super::*;

    #[test]
    fn v4_mapped_needs_the_whole_prefix() {
        assert!(is_v4_mapped(&V4_198_18_0_2));
        let mut g = V4_198_18_0_2;
        g[11] = 0xfe;
        assert!(!is_v4_mapped(&g));
        g = V4_198_18_0_2;
        g[0] = 1;
        assert!(!is_v4_mapped(&g));
    }

    #[test]
    fn the_kernel_gets_the_attributes_field_for_field() {
        let k = uverbs_ah_attr(&attr(V4_198_18_0_2));
        assert_eq!(k.grh.dgid, V4_198_18_0_2);
        assert_eq!(
            (k.grh.flow_label, k.grh.sgid_index, k.grh.hop_limit, k.grh.traffic_class),
            (0x12345, 1, 64, 3)
        );
        assert_eq!(
            (k.sl, k.is_global, k.port_num, k.reserved, k.grh.reserved),
            (2, 1, 1, 0, 0)
        );
    }

    #[test]
    fn sysfs_gids_parse_and_garbage_does_not() {
        assert_eq!(
            parse_sysfs_gid("fe80:0000:0000:0000:5054:00ff:fe12:3456\n"),
            Some(LINK_LOCAL)
        );
        assert_eq!(
            parse_sysfs_gid("0000:0000:0000:0000:0000:ffff:c612:0002"),
            Some(V4_198_18_0_2)
        );
        assert_eq!(parse_sysfs_gid("fe80:0000:0000:0000:5054:00ff:fe12"), None);
        assert_eq!(parse_sysfs_gid("fe80:0000:0000:0000:5054:00ff:fe12:3456:0000"), None);
        assert_eq!(parse_sysfs_gid("fe80::5054:00ff:fe12:3456"), None);
        assert_eq!(parse_sysfs_gid("zz80:0000:0000:0000:5054:00ff:fe12:3456"), None);
        // A sign is not a hex digit (found by the fuzz target kernel_resp).
        assert_eq!(parse_sysfs_gid("fe80:0000:0000:0000:5054:00ff:fe12:+456"), None);
        assert_eq!(parse_sysfs_gid("+e80:0000:0000:0000:5054:00ff:fe12:3456"), None);
    }

    #[test]
    fn create_ah_asks_for_the_driver_part_of_the_response() {
        let mut buf = [0u8; 128];
        let cmd = ib_uverbs_create_ah {
            response: 0,
            user_handle: 0,
            pd_handle: 5,
            reserved: 0,
            attr: uverbs_ah_attr(&attr(V4_198_18_0_2)),
            driver_data: [],
        };
        let n = command::frame_write(
            &mut buf,
            IB_USER_VERBS_CMD_CREATE_AH,
            cmd.as_bytes(),
            size_of::<CreateAhResp>(),
        )
        .unwrap();
        assert_eq!(n, 64);
        assert_eq!(u16::from_ne_bytes([buf[4], buf[5]]), 16); // (8 + 56) / 4
        assert_eq!(u16::from_ne_bytes([buf[6], buf[7]]), 3); // 4 core + 8 rxe bytes
    }
}
