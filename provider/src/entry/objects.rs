//! The C entries of `verbs_context_ops` for the context and the control-path
//! objects (`free_context`, the queries, PDs and thread and parent domains,
//! MRs, MWs, AHs, multicast), and the raw access to the objects libibverbs
//! hands them: each entry turns its pointers into references once and runs
//! the safe logic of the object's own module.

use core::ffi::{c_int, c_void};
use core::mem::size_of;
use core::ptr::{self, NonNull};
use std::os::fd::RawFd;

use crate::ah::{self, RxeAh};
use crate::boundary;
use crate::context::RxeContext;
use crate::device::RxeDevice;
use crate::errno::Errno;
use crate::libibverbs::control_objects::{
    ibv_ah, ibv_ah_attr, ibv_gid, ibv_mr, ibv_mw, ibv_parent_domain_init_attr, ibv_pd, ibv_qp, ibv_td,
    ibv_td_init_attr, verbs_mr,
};
use crate::libibverbs::device_context::{ibv_context, ibv_device_attr_ex, ibv_port_attr, ibv_query_device_ex_input};
use crate::libibverbs::qp::ibv_sge;
use crate::libibverbs::runtime::{self, HandedBox, Kept};
use crate::mcast;
use crate::mr::{self, RxeMr};
use crate::mw::{self, RxeMw};
use crate::pd::{self, DomainUse, OnPd, RxePd, RxeTd};
use crate::query;

// SAFETY: the fields of a PD that are not atomics are written only before
// it is handed out. Of its raw pointers, the context is the application's
// (shared by all its threads), read only for its cmd_fd, fixed before the
// context was handed out; the application's pd_context and allocators are
// only stored. So a PD may be used, and dropped, from any thread.
unsafe impl Send for RxePd {}
// SAFETY: as for Send.
unsafe impl Sync for RxePd {}
// SAFETY: as for RxePd: a TD's context pointer is only stored and compared.
unsafe impl Send for RxeTd {}
// SAFETY: as for Send.
unsafe impl Sync for RxeTd {}

impl RxePd {
    /// # Safety
    /// `pd` is null or a live PD our `alloc_pd`/`alloc_parent_domain` made,
    /// alive for `'a`.
    pub(crate) unsafe fn from_ibv<'a>(pd: *const ibv_pd) -> Option<&'a RxePd> {
        // SAFETY: per the contract; pd is at offset 0 of RxePd.
        unsafe { pd.cast::<RxePd>().as_ref() }
    }
}

impl DomainUse {
    /// Counts a user of `pd` when it is a parent domain ([`DomainUse::on`]).
    ///
    /// # Safety
    /// As for [`RxePd::from_ibv`].
    pub(crate) unsafe fn of(pd: *const ibv_pd) -> DomainUse {
        // SAFETY: per the contract.
        DomainUse::on(unsafe { RxePd::from_ibv(pd) })
    }
}

/// The command fd of the context an object belongs to (null: `EINVAL`).
///
/// # Safety
/// `ctx` is null or a live context: every object libibverbs hands our ops
/// points at the live context it was made in (we set the pointer ourselves).
unsafe fn context_fd(ctx: *const ibv_context) -> Result<RawFd, Errno> {
    // SAFETY: per the contract.
    unsafe { ctx.as_ref() }.map(|c| c.cmd_fd).ok_or(Errno::EINVAL)
}

/// The PD libibverbs passes to a verb, with the command fd of its context.
///
/// # Safety
/// As for [`RxePd::from_ibv`].
unsafe fn on_pd<'a>(pd: *mut ibv_pd) -> Option<OnPd<'a>> {
    // SAFETY: per the contract; a live PD's context is live.
    unsafe {
        RxePd::from_ibv(pd).map(|p| OnPd {
            ptr: pd,
            pd: p,
            fd: context_fd(p.pd.context),
        })
    }
}

/// A destroy entry (`$doc`): takes the object libibverbs gives back (a `$c`
/// at the start of our `$ours`; null: `EINVAL`) back from C, with the
/// command fd of its context (`$context` of the `$c`), and runs `$logic`,
/// which frees it or hands it back with the errno.
macro_rules! destroy_entry {
    ($doc:literal, $name:ident($c:ty => $ours:ty), $context:expr, $logic:path) => {
        #[doc = $doc]
        pub(crate) unsafe extern "C" fn $name(obj: *mut $c) -> c_int {
            boundary::guard(stringify!($name), Errno::EIO.code(), || {
                let Some(owned) = NonNull::new(obj.cast::<$ours>()) else {
                    return boundary::fail_code(Errno::EINVAL);
                };
                let context: fn(&$c) -> *mut ibv_context = $context;
                // SAFETY: libibverbs passes an object our create verb handed
                // out (HandedBox::into_raw, Creating::finish), which begins
                // with its C struct and whose context is live; libibverbs
                // forgets it when this succeeds, and `refused` hands it back
                // when this fails.
                let (fd, obj) = unsafe { (context_fd(context(&*obj)), HandedBox::from_raw(owned)) };
                $logic(obj, fd).map_or_else(refused, |()| 0)
            })
        }
    };
}

/// A destroy verb refused: the object goes back to C, the errno to the caller.
fn refused<T>((errno, obj): Kept<T>) -> c_int {
    obj.into_raw();
    boundary::fail_code(errno)
}

/// `free_context`, from `ibv_close_device`.
pub(crate) unsafe extern "C" fn free_context(ibctx: *mut ibv_context) {
    boundary::guard("free_context", (), || {
        let Some(lib) = runtime::get() else { return };
        // SAFETY: libibverbs passes a context our alloc_context made, whose
        // allocation starts its layout's verbs_context prefix before ibv_context (see
        // alloc_context); libibverbs is done with it, and we free it once.
        unsafe {
            let Some(ctx) = RxeContext::from_ibv_context(ibctx) else {
                return;
            };
            let base = ibctx
                .cast::<u8>()
                .sub(ctx.layout.verbs_context_prefix())
                .cast::<c_void>();
            lib.uninit_context(base);
            libc::free(base);
        }
    })
}

/// `verbs_context_ops.query_device_ex`; `ibv_query_device` comes here too
/// with `attr_size == sizeof(struct ibv_device_attr)`.
pub(crate) unsafe extern "C" fn query_device_ex(
    context: *mut ibv_context,
    input: *const ibv_query_device_ex_input,
    attr: *mut ibv_device_attr_ex,
    attr_size: usize,
) -> c_int {
    boundary::guard("query_device_ex", Errno::EIO.code(), || {
        // SAFETY: input, when given, points to the caller's input struct;
        // libibverbs passes a context our alloc_context made, whose device
        // is the one our alloc_device made.
        let (input, ctx) = unsafe {
            let ctx = RxeContext::from_ibv_context(context);
            let ports = |c: &RxeContext| RxeDevice::from_ibv_device(c.device()).map_or(0, |d| d.num_ports);
            (input.as_ref(), ctx.map(|c| (c, ports(c))))
        };
        let full = match query::query_device_ex(input, !attr.is_null(), attr_size, ctx) {
            Ok(full) => full,
            Err(e) => return e.code(),
        };
        // Fields past the caller's attr_size do not exist for it; bytes past
        // our struct (a newer caller) stay zero, as libibverbs' memset leaves them.
        let n = attr_size.min(size_of::<ibv_device_attr_ex>());
        // SAFETY: the caller's buffer holds attr_size bytes (>= n; checked
        // non-null); `full` is a local of size_of::<ibv_device_attr_ex>() >= n;
        // they do not overlap.
        unsafe {
            ptr::write_bytes(attr.cast::<u8>(), 0, attr_size);
            ptr::copy_nonoverlapping(ptr::from_ref(&full).cast::<u8>(), attr.cast::<u8>(), n);
        }
        0
    })
}

/// `verbs_context_ops.query_port`. libibverbs always passes a buffer of its
/// own `sizeof(struct ibv_port_attr)`, zeroed, which is at least our 52 bytes.
pub(crate) unsafe extern "C" fn query_port(
    context: *mut ibv_context,
    port_num: u8,
    port_attr: *mut ibv_port_attr,
) -> c_int {
    boundary::guard("query_port", Errno::EIO.code(), || {
        // SAFETY: libibverbs passes a context our alloc_context made and a
        // buffer of at least size_of::<ibv_port_attr>() writable bytes.
        let (ctx, attr) = unsafe { (RxeContext::from_ibv_context(context), port_attr.as_mut()) };
        match query::query_port(ctx, port_num, attr) {
            Ok(None) => 0,
            Ok(Some(active_speed_ex)) => {
                // SAFETY: libibverbs hands us a buffer of its own
                // sizeof(struct ibv_port_attr) (`__lib_query_port`), which
                // from v49 on (query_port answers only then) ends with the
                // u32 active_speed_ex at offset 52.
                unsafe {
                    port_attr
                        .cast::<u8>()
                        .add(query::ACTIVE_SPEED_EX_OFFSET)
                        .cast::<u32>()
                        .write_unaligned(active_speed_ex)
                };
                0
            }
            Err(e) => e.code(),
        }
    })
}

/// `alloc_pd`.
pub(crate) unsafe extern "C" fn alloc_pd(context: *mut ibv_context) -> *mut ibv_pd {
    boundary::guard("alloc_pd", ptr::null_mut(), || {
        // SAFETY: libibverbs passes its live context (null refused).
        match pd::alloc_pd(context, unsafe { context_fd(context) }) {
            Ok(pd) => pd.as_ptr().cast::<ibv_pd>(),
            Err(e) => boundary::fail_ptr(e),
        }
    })
}

destroy_entry!("`dealloc_pd`: a PD or a parent domain.", dealloc_pd(ibv_pd => RxePd), |p| p.context, pd::dealloc_pd);

/// `alloc_td`.
pub(crate) unsafe extern "C" fn alloc_td(context: *mut ibv_context, attr: *mut ibv_td_init_attr) -> *mut ibv_td {
    boundary::guard("alloc_td", ptr::null_mut(), || {
        // SAFETY: the caller's attributes (null refused).
        match pd::alloc_td(context, unsafe { attr.as_ref() }) {
            Ok(td) => HandedBox::new(td).into_raw().as_ptr().cast::<ibv_td>(),
            Err(e) => boundary::fail_ptr(e),
        }
    })
}

/// `dealloc_td`: the errno is returned, not left in `errno`.
pub(crate) unsafe extern "C" fn dealloc_td(td: *mut ibv_td) -> c_int {
    boundary::guard("dealloc_td", Errno::EIO.code(), || {
        let Some(obj) = NonNull::new(td.cast::<RxeTd>()) else {
            return Errno::EINVAL.code();
        };
        // SAFETY: a TD our alloc_td handed out, which libibverbs forgets when
        // this succeeds.
        match pd::dealloc_td(unsafe { HandedBox::from_raw(obj) }) {
            Ok(()) => 0,
            Err((e, obj)) => {
                obj.into_raw();
                e.code()
            }
        }
    })
}

/// `alloc_parent_domain`.
pub(crate) unsafe extern "C" fn alloc_parent_domain(
    context: *mut ibv_context,
    attr: *mut ibv_parent_domain_init_attr,
) -> *mut ibv_pd {
    boundary::guard("alloc_parent_domain", ptr::null_mut(), || {
        // SAFETY: the caller's attributes (null refused), which name a PD and
        // a TD of ours, or null.
        let (attr, protection, td) = unsafe {
            match attr.as_ref() {
                Some(a) => (Some(a), RxePd::from_ibv(a.pd), a.td.cast::<RxeTd>().as_ref()),
                None => (None, None, None),
            }
        };
        match pd::alloc_parent_domain(context, attr, protection, td) {
            Ok(parent) => HandedBox::new(parent).into_raw().as_ptr().cast::<ibv_pd>(),
            Err(e) => boundary::fail_ptr(e),
        }
    })
}

/// `reg_mr`.
pub(crate) unsafe extern "C" fn reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    hca_va: u64,
    access: c_int,
) -> *mut ibv_mr {
    boundary::guard("reg_mr", ptr::null_mut(), || {
        // SAFETY: libibverbs passes a PD our alloc_pd made (null refused).
        match mr::reg_mr(unsafe { on_pd(pd) }, addr, length, hca_va, access) {
            // ibv_mr is the first member: libibverbs gets back to verbs_mr by a cast.
            Ok(mr) => mr.as_ptr().cast::<ibv_mr>(),
            Err(e) => boundary::fail_ptr(e),
        }
    })
}

/// `rereg_mr`.
pub(crate) unsafe extern "C" fn rereg_mr(
    vmr: *mut verbs_mr,
    flags: c_int,
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> c_int {
    boundary::guard("rereg_mr", Errno::EIO.code(), || {
        // SAFETY: libibverbs passes an MR our reg_mr made, which it does not
        // touch during the call (null refused; verbs_mr begins our RxeMr),
        // whose context is live; and a PD our alloc_pd made, or null.
        let (mr, new_pd) = unsafe {
            let fd = vmr.as_ref().map(|m| context_fd(m.ibv_mr.context));
            (vmr.cast::<RxeMr>().as_mut().zip(fd), RxePd::from_ibv(pd))
        };
        mr::rereg_mr(mr, flags, new_pd, addr, length, access).map_or_else(boundary::fail_code, |()| 0)
    })
}

/// `advise_mr`: 0, or the errno (also left in `errno`), as `ibv_advise_mr`
/// returns it.
pub(crate) unsafe extern "C" fn advise_mr(
    pd: *mut ibv_pd,
    advice: u32,
    flags: u32,
    sg_list: *mut ibv_sge,
    num_sge: u32,
) -> c_int {
    boundary::guard("advise_mr", Errno::EIO.code(), || {
        // SAFETY: libibverbs passes a PD (or parent domain) our alloc_pd made;
        // null refused.
        mr::advise_mr(unsafe { on_pd(pd) }, advice, flags, sg_list, num_sge).map_or_else(boundary::fail_code, |()| 0)
    })
}

destroy_entry!("`dereg_mr`.", dereg_mr(verbs_mr => RxeMr), |m| m.ibv_mr.context, mr::dereg_mr);

/// `alloc_mw`.
pub(crate) unsafe extern "C" fn alloc_mw(pd: *mut ibv_pd, mw_type: c_int) -> *mut ibv_mw {
    boundary::guard("alloc_mw", ptr::null_mut(), || {
        // SAFETY: libibverbs passes a PD our alloc_pd made (null refused).
        match mw::alloc_mw(unsafe { on_pd(pd) }, mw_type) {
            // ibv_mw is the first member: libibverbs hands it back.
            Ok(mw) => mw.as_ptr().cast::<ibv_mw>(),
            Err(e) => boundary::fail_ptr(e),
        }
    })
}

destroy_entry!("`dealloc_mw`.", dealloc_mw(ibv_mw => RxeMw), |m| m.context, mw::dealloc_mw);

/// `create_ah`.
pub(crate) unsafe extern "C" fn create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    boundary::guard("create_ah", ptr::null_mut(), || {
        // SAFETY: libibverbs passes a PD our alloc_pd made and the caller's
        // attributes (nulls refused).
        let (on, attr) = unsafe { (on_pd(pd), attr.as_ref()) };
        let context = on.as_ref().map_or(ptr::null_mut(), |on| on.pd.pd.context);
        let user_av = |attr: &ibv_ah_attr| {
            // SAFETY: the PD's context is the live context it was made in, of
            // the libibverbs loaded here, and its device the live ibv_device
            // it was opened on.
            let device = unsafe { context.as_ref().and_then(|c| c.device.as_ref()) };
            // SAFETY: as above.
            ah::user_av(attr, device, || unsafe {
                runtime::resolve_eth_l2_from_gid(context, attr)
            })
        };
        match ah::create_ah(on, attr, user_av) {
            Ok(ah) => ah.as_ptr().cast::<ibv_ah>(),
            Err(e) => boundary::fail_ptr(e),
        }
    })
}

destroy_entry!("`destroy_ah`.", destroy_ah(ibv_ah => RxeAh), |a| a.context, ah::destroy_ah);

/// A multicast entry: 0, or the errno.
macro_rules! mcast_entry {
    ($name:ident) => {
        #[doc = concat!("`", stringify!($name), "`: 0, or the errno.")]
        pub(crate) unsafe extern "C" fn $name(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
            boundary::guard(stringify!($name), Errno::EIO.code(), || {
                // SAFETY: libibverbs passes a QP of ours, whose context is
                // live, and the caller's GID (nulls refused).
                let (qp, gid) = unsafe { (qp.as_ref().map(|q| (q, context_fd(q.context))), gid.as_ref()) };
                mcast::$name(qp, gid, lid).map_or_else(boundary::fail_code, |()| 0)
            })
        }
    };
}

mcast_entry!(attach_mcast);
mcast_entry!(detach_mcast);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ah::build_av;
    use crate::ah::testing::{attr, LINK_LOCAL, V4_198_18_0_1, V4_198_18_0_2};
    use crate::mr::advise_cmd;
    use kernel_abi::{
        ib_uverbs_attr, rxe_av, rxe_av_sockaddr, sockaddr_in, sockaddr_in6, RDMA_DRIVER_RXE, RXE_NETWORK_TYPE_IPV4,
        RXE_NETWORK_TYPE_IPV6,
    };
    use zerocopy::FromZeros;

    /// A socket address as IPv4, as IPv6, and its IPv6 address bytes.
    type Arms = (sockaddr_in, sockaddr_in6, [u8; 16]);

    /// What the tests read of an AV's unions: the source's and the
    /// destination's socket address arms, and the destination GID's bytes.
    fn av_arms(av: &rxe_av) -> ([Arms; 2], [u8; 16]) {
        // SAFETY: plain-bytes unions (every bit pattern valid), zeroed
        // whole before an arm was written.
        unsafe {
            let arms = |sa: &rxe_av_sockaddr| {
                (
                    sa._sockaddr_in,
                    sa._sockaddr_in6,
                    sa._sockaddr_in6.sin6_addr.in6_u.u6_addr8,
                )
            };
            ([arms(&av.sgid_addr), arms(&av.dgid_addr)], av.grh.dgid.raw)
        }
    }

    /// Every attribute's `data` (each is built through that arm).
    fn attr_data(attrs: &[ib_uverbs_attr]) -> Vec<u64> {
        // SAFETY: a plain-bytes union of 8 bytes, every arm a u64 or smaller.
        attrs.iter().map(|a| unsafe { a.value.data }).collect()
    }

    #[test]
    fn an_ipv4_mapped_destination_makes_an_ipv4_av() {
        let av = build_av(&attr(V4_198_18_0_2), &V4_198_18_0_1, [2, 0, 0, 0, 0, 9]);
        assert_eq!(av.network_type as u32, RXE_NETWORK_TYPE_IPV4);
        assert_eq!((av.port_num, av.dmac), (1, [2, 0, 0, 0, 0, 9]));
        let ([(s, ..), (d, ..)], dgid) = av_arms(&av);
        assert_eq!(s.sin_family, libc::AF_INET as u16);
        assert_eq!(s.sin_addr.s_addr.to_ne_bytes(), [198, 18, 0, 1]);
        assert_eq!(d.sin_addr.s_addr.to_ne_bytes(), [198, 18, 0, 2]);
        assert_eq!((s.sin_port, d.__pad), (0, [0; 8]));
        assert_eq!(dgid, V4_198_18_0_2);
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
        let ([_, (_, d, d_addr)], _) = av_arms(&av);
        assert_eq!(d.sin6_family, libc::AF_INET6 as u16);
        assert_eq!(d_addr, LINK_LOCAL);
        assert_eq!((d.sin6_port, d.sin6_flowinfo, d.sin6_scope_id), (0, 0, 0));
        // The source follows its own GID's family, not the destination's.
        let mixed = build_av(&attr(LINK_LOCAL), &V4_198_18_0_1, [0; 6]);
        assert_eq!(av_arms(&mixed).0[0].0.sin_family, libc::AF_INET as u16);
    }

    #[test]
    fn advise_is_the_ioctl_ibv_cmd_advise_mr_sends() {
        let sges = [ibv_sge::default(); 3];
        let cmd = advise_cmd(5, 1, 1, sges.as_ptr(), 3).unwrap();
        assert_eq!(
            (cmd.hdr.object_id, cmd.hdr.method_id, cmd.hdr.num_attrs, cmd.hdr.length),
            (7, 2, 4, 24 + 4 * 16)
        );
        assert_eq!(cmd.hdr.driver_id, RDMA_DRIVER_RXE);
        let data = attr_data(&cmd.attrs);
        let ids: Vec<u16> = cmd.attrs.iter().map(|a| a.attr_id).collect();
        let lens: Vec<u16> = cmd.attrs.iter().map(|a| a.len).collect();
        assert_eq!(ids, [0, 1, 2, 3]);
        // PD handle (IDR: no length), advice (8-byte constant), flags (u32), list.
        assert_eq!(lens, [0, 8, 4, 48]);
        assert_eq!(data[..3], [5, 1, u64::from_ne_bytes([1, 0, 0, 0, 0, 0, 0, 0])]);
        assert_eq!(data[3], sges.as_ptr() as usize as u64);
        // Every attribute mandatory, as libibverbs flags them.
        assert!(cmd.attrs.iter().all(|a| a.flags == 1));
    }

    #[test]
    fn advise_passes_what_the_kernel_judges_and_refuses_what_cannot_be_sent() {
        // Unknown advice and flags go to the kernel as given (its EOPNOTSUPP
        // and EINVAL, as for stock); so does an empty list (length 0).
        let cmd = advise_cmd(1, 99, 0x80, ptr::null(), 0).unwrap();
        let data = attr_data(&cmd.attrs);
        assert_eq!((data[1], cmd.attrs[2].len), (99, 4));
        assert_eq!(data[2].to_ne_bytes()[..4], 0x80u32.to_ne_bytes());
        assert_eq!((cmd.attrs[3].len, data[3]), (0, 0));
        // 4095 SGEs are 65520 bytes; 4096 do not fit the 16-bit length.
        let sges = [ibv_sge::default(); 1];
        assert_eq!(advise_cmd(1, 0, 1, sges.as_ptr(), 4095).unwrap().attrs[3].len, 65520);
        assert_eq!(advise_cmd(1, 0, 1, sges.as_ptr(), 4096).err(), Some(Errno::EINVAL));
        assert_eq!(advise_cmd(1, 0, 1, sges.as_ptr(), u32::MAX).err(), Some(Errno::EINVAL));
    }

    #[test]
    fn null_objects_are_einval_not_crashes() {
        let einval = Errno::EINVAL.code();
        // SAFETY: null is refused before any use.
        unsafe {
            assert!(alloc_pd(ptr::null_mut()).is_null());
            assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(einval));
            assert_eq!(dealloc_pd(ptr::null_mut()), einval);
            assert_eq!(dealloc_td(ptr::null_mut()), einval);
            assert!(alloc_td(ptr::null_mut(), ptr::null_mut()).is_null());
            assert!(alloc_parent_domain(ptr::null_mut(), ptr::null_mut()).is_null());
            assert!(reg_mr(ptr::null_mut(), ptr::null_mut(), 8, 0, 0).is_null());
            assert_eq!(dereg_mr(ptr::null_mut()), einval);
            assert_eq!(advise_mr(ptr::null_mut(), 0, 1, ptr::null_mut(), 0), einval);
            assert_eq!(
                rereg_mr(ptr::null_mut(), 4, ptr::null_mut(), ptr::null_mut(), 0, 0),
                einval
            );
            assert!(alloc_mw(ptr::null_mut(), 1).is_null());
            assert_eq!(dealloc_mw(ptr::null_mut()), einval);
            assert!(create_ah(ptr::null_mut(), ptr::null_mut()).is_null());
            assert_eq!(destroy_ah(ptr::null_mut()), einval);
            let gid = ibv_gid { raw: [0; 16] };
            assert_eq!(attach_mcast(ptr::null_mut(), &gid, 0), einval);
            assert_eq!(detach_mcast(ptr::null_mut(), ptr::null(), 0), einval);
            let mut attr = ibv_device_attr_ex::new_zeroed();
            assert_eq!(query_device_ex(ptr::null_mut(), ptr::null(), &mut attr, 400), einval);
            assert_eq!(
                query_device_ex(ptr::null_mut(), ptr::null(), ptr::null_mut(), 400),
                einval
            );
            assert_eq!(query_port(ptr::null_mut(), 1, ptr::null_mut()), einval);
        }
    }
}
