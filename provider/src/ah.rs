//! Address handles: `create_ah` / `destroy_ah`.
//!
//! Kernels since rxe learnt AH indices answer CREATE_AH with a non-zero
//! `ah_num`, which UD send WQEs carry. Older kernels leave it 0; for those we
//! build the address vector (`rxe_av`) ourselves and UD sends carry it whole,
//! as the stock provider does: the source GID from the port's GID table,
//! both GIDs as socket addresses, IPv4 or IPv6 after the destination GID, and
//! the destination MAC from libibverbs' neighbour resolution.

use core::ffi::{c_char, c_int, CStr};
use core::mem::offset_of;
use core::ptr::{self, NonNull};
use std::os::fd::RawFd;

use kernel_abi::{
    ib_uverbs_ah_attr, ib_uverbs_create_ah, ib_uverbs_create_ah_resp, ib_uverbs_destroy_ah, ib_uverbs_global_route,
    rxe_av, rxe_av_sockaddr, rxe_create_ah_resp, rxe_gid, rxe_global_route, IB_USER_VERBS_CMD_CREATE_AH,
    IB_USER_VERBS_CMD_DESTROY_AH, RXE_NETWORK_TYPE_IPV4, RXE_NETWORK_TYPE_IPV6,
};
use log::debug;
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

use crate::boundary;
use crate::command::{self, impl_write_cmd, WriteReq};
use crate::errno::Errno;
use crate::libibverbs::control_objects::{ibv_ah, ibv_ah_attr, ibv_pd};
use crate::libibverbs::device_context::ibv_context;
use crate::lifecycle::{self, Creating};
use crate::pd::{context_fd, DomainUse};

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
            // SAFETY: plain C data, all-zero.
            ibv_ah: unsafe { core::mem::zeroed() },
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

impl WriteReq for ib_uverbs_destroy_ah {
    const ID: u32 = IB_USER_VERBS_CMD_DESTROY_AH;
}

/// The kernel's form of the AH attributes.
pub(crate) fn uverbs_ah_attr(attr: &ibv_ah_attr) -> ib_uverbs_ah_attr {
    ib_uverbs_ah_attr {
        grh: ib_uverbs_global_route {
            // SAFETY: every arm of ibv_gid is plain bytes.
            dgid: unsafe { attr.grh.dgid.raw },
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
    // SAFETY: every arm of ibv_gid is plain bytes.
    let dgid = unsafe { attr.grh.dgid.raw };
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

/// The GID at `index` of `port`, from the device's sysfs GID table.
fn query_sgid(ctx: &ibv_context, port: u8, index: u8) -> Result<[u8; 16], Errno> {
    // SAFETY: a context's device is the live ibv_device it was opened on.
    let dev = unsafe { ctx.device.as_ref() }.ok_or(Errno::EINVAL)?;
    // SAFETY: c_char and u8 have the same size and alignment.
    let path = unsafe { &*ptr::from_ref(&dev.ibdev_path).cast::<[u8; 256]>() };
    let base = CStr::from_bytes_until_nul(path)
        .map_err(|_| Errno::EINVAL)?
        .to_str()
        .map_err(|_| Errno::EINVAL)?;
    let file = format!("{base}/ports/{port}/gids/{index}");
    let text = std::fs::read_to_string(&file).map_err(|e| e.raw_os_error().map_or(Errno::EINVAL, Errno::from_raw))?;
    parse_sysfs_gid(&text).ok_or(Errno::EINVAL)
}

type ResolveL2Fn = unsafe extern "C" fn(*mut ibv_context, *mut ibv_ah_attr, *mut u8, *mut u16) -> c_int;

/// The destination MAC, through libibverbs' public `ibv_resolve_eth_l2_from_gid`
/// (rtnetlink neighbour resolution; no uverbs command).
fn resolve_dmac(ctx: *mut ibv_context, attr: &ibv_ah_attr) -> Result<[u8; 6], Errno> {
    // SAFETY: RTLD_NOLOAD only returns a handle to the libibverbs already
    // loaded (it loaded us); the reference is kept, as runtime.rs does.
    let handle = unsafe { libc::dlopen(c"libibverbs.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if handle.is_null() {
        return Err(Errno::ENOSYS);
    }
    // SAFETY: both names are NUL-terminated; handle is live.
    let sym = unsafe {
        libc::dlvsym(
            handle,
            c"ibv_resolve_eth_l2_from_gid".as_ptr(),
            c"IBVERBS_1.1".as_ptr() as *const c_char,
        )
    };
    if sym.is_null() {
        return Err(Errno::ENOSYS);
    }
    // SAFETY: the symbol is the public function of that name and version,
    // whose C prototype is ResolveL2Fn.
    let resolve = unsafe { core::mem::transmute::<*mut libc::c_void, ResolveL2Fn>(sym) };
    let mut attr = *attr;
    let mut mac = [0u8; 6];
    // SAFETY: ctx is our live context, attr and mac are valid for the call,
    // and a null vid is accepted (the stock provider passes NULL too).
    let rc = unsafe { resolve(ctx, &mut attr, mac.as_mut_ptr(), ptr::null_mut()) };
    match rc {
        0 => Ok(mac),
        rc if rc > 0 => Err(Errno::from_raw(rc)),
        rc if rc < 0 && rc != -1 => Err(Errno::from_raw(-rc)),
        _ => Err(Errno::EINVAL),
    }
}

/// The user-space AV of an AH on a kernel without AH indices.
fn user_av(ctx: *mut ibv_context, attr: &ibv_ah_attr) -> Result<rxe_av, Errno> {
    // SAFETY: ctx is the live context of the PD.
    let c = unsafe { ctx.as_ref() }.ok_or(Errno::EINVAL)?;
    let sgid = query_sgid(c, attr.port_num, attr.grh.sgid_index)?;
    let dmac = resolve_dmac(ctx, attr)?;
    Ok(build_av(attr, &sgid, dmac))
}

/// `create_ah`.
pub(crate) unsafe extern "C" fn create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    boundary::guard("create_ah", ptr::null_mut(), || {
        // SAFETY: libibverbs passes a PD our alloc_pd made and the caller's
        // attributes (nulls refused).
        let (Some(p), Some(attr)) = (unsafe { pd.as_ref() }, unsafe { attr.as_ref() }) else {
            return boundary::fail_ptr(Errno::EINVAL);
        };
        let fd = match context_fd(p.context) {
            Ok(fd) => fd,
            Err(e) => return boundary::fail_ptr(e),
        };
        let obj = RxeAh {
            ibv_ah: ibv_ah {
                context: p.context,
                pd,
                handle: 0,
            },
            ah_num: 0,
            av: rxe_av::new_zeroed(),
            // SAFETY: a PD or parent domain our alloc_pd made (non-null, checked).
            domain: unsafe { DomainUse::of(pd) },
        };
        let mut ah = match Creating::new(obj, "AH", fd, destroy_kernel_ah) {
            Ok(c) => c,
            Err(e) => return boundary::fail_ptr(e),
        };
        let cmd = ib_uverbs_create_ah {
            response: 0,
            user_handle: ah.as_ptr() as usize as u64,
            pd_handle: p.handle,
            reserved: 0,
            attr: uverbs_ah_attr(attr),
            driver_data: [],
        };
        let resp = match command::write_cmd(fd, cmd) {
            Ok(r) => r,
            Err(e) => return boundary::fail_ptr(e),
        };
        ah.created(resp.core.ah_handle);
        let a = ah.get_mut();
        a.ibv_ah.handle = resp.core.ah_handle;
        a.ah_num = resp.drv.ah_num;
        if a.ah_num == 0 {
            match user_av(p.context, attr) {
                Ok(av) => a.av = av,
                Err(e) => {
                    debug!("create_ah: no address vector (errno {e}); destroying the kernel AH");
                    return boundary::fail_ptr(e);
                }
            }
        }
        ah.finish().as_ptr().cast::<ibv_ah>()
    })
}

/// `destroy_ah`: the AH is freed only when the kernel let it go.
pub(crate) unsafe extern "C" fn destroy_ah(ah: *mut ibv_ah) -> c_int {
    boundary::guard("destroy_ah", Errno::EIO.code(), || {
        // SAFETY: libibverbs passes an AH our create_ah made (null refused).
        let (Some(obj), Some(a)) = (NonNull::new(ah.cast::<RxeAh>()), unsafe { ah.as_ref() }) else {
            return boundary::fail_code(Errno::EINVAL);
        };
        let (context, handle) = (a.context, a.handle);
        let destroy = || context_fd(context).and_then(|fd| destroy_kernel_ah(fd, handle));
        // SAFETY: made by Creating::finish in create_ah (RxeAh begins with
        // its ibv_ah), not used after success.
        match unsafe { lifecycle::destroy(obj, destroy, |()| ()) } {
            Ok(()) => 0,
            Err(e) => boundary::fail_code(e),
        }
    })
}

fn destroy_kernel_ah(fd: RawFd, handle: u32) -> Result<(), Errno> {
    command::write_req(fd, ib_uverbs_destroy_ah { ah_handle: handle })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::libibverbs::control_objects::{ibv_gid, ibv_global_route};

    fn attr(dgid: [u8; 16]) -> ibv_ah_attr {
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

    const V4_198_18_0_2: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 18, 0, 2];
    const V4_198_18_0_1: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 18, 0, 1];
    const LINK_LOCAL: [u8; 16] = [
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0, 0xff, 0xfe, 0x12, 0x34, 0x56,
    ];

    #[test]
    fn an_ipv4_mapped_destination_makes_an_ipv4_av() {
        let av = build_av(&attr(V4_198_18_0_2), &V4_198_18_0_1, [2, 0, 0, 0, 0, 9]);
        assert_eq!(av.network_type as u32, RXE_NETWORK_TYPE_IPV4);
        assert_eq!((av.port_num, av.dmac), (1, [2, 0, 0, 0, 0, 9]));
        // SAFETY: network_type says the sockaddr_in arm is the valid one.
        let (s, d) = unsafe { (av.sgid_addr._sockaddr_in, av.dgid_addr._sockaddr_in) };
        assert_eq!(s.sin_family, libc::AF_INET as u16);
        assert_eq!(s.sin_addr.s_addr.to_ne_bytes(), [198, 18, 0, 1]);
        assert_eq!(d.sin_addr.s_addr.to_ne_bytes(), [198, 18, 0, 2]);
        assert_eq!((s.sin_port, d.__pad), (0, [0; 8]));
        // SAFETY: raw arm of a plain-bytes union.
        assert_eq!(unsafe { av.grh.dgid.raw }, V4_198_18_0_2);
        assert_eq!(
            (
                av.grh.flow_label,
                av.grh.sgid_index,
                av.grh.hop_limit,
                av.grh.traffic_class
            ),
            (0x12345, 1, 64, 3)
        );
    }

    #[test]
    fn any_other_destination_makes_an_ipv6_av() {
        let av = build_av(&attr(LINK_LOCAL), &LINK_LOCAL, [0; 6]);
        assert_eq!(av.network_type as u32, RXE_NETWORK_TYPE_IPV6);
        // SAFETY: network_type says the sockaddr_in6 arm is the valid one.
        let d = unsafe { av.dgid_addr._sockaddr_in6 };
        assert_eq!(d.sin6_family, libc::AF_INET6 as u16);
        // SAFETY: plain-bytes union arm.
        assert_eq!(unsafe { d.sin6_addr.in6_u.u6_addr8 }, LINK_LOCAL);
        assert_eq!((d.sin6_port, d.sin6_flowinfo, d.sin6_scope_id), (0, 0, 0));
        // The source follows its own GID's family, not the destination's.
        let mixed = build_av(&attr(LINK_LOCAL), &V4_198_18_0_1, [0; 6]);
        // SAFETY: as above, the source GID is IPv4-mapped.
        assert_eq!(unsafe { mixed.sgid_addr._sockaddr_in.sin_family }, libc::AF_INET as u16);
    }

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
