//! `query_device_ex` and `query_port`, issued as write() commands the way the
//! stock rxe provider's path through libibverbs does (`ibv_cmd_query_device_any`,
//! `ibv_cmd_query_port`), with every size from the kernel checked.

use core::ffi::{c_char, c_int};
use core::mem::{offset_of, size_of};
use core::ptr;

use kernel_abi::{
    ib_uverbs_ex_query_device, ib_uverbs_ex_query_device_resp, ib_uverbs_query_device, ib_uverbs_query_port,
    ib_uverbs_query_port_resp_ex, RDMA_DRIVER_RXE, UVERBS_ATTR_QUERY_PORT_PORT_NUM, UVERBS_ATTR_QUERY_PORT_RESP,
    UVERBS_METHOD_QUERY_PORT, UVERBS_OBJECT_DEVICE,
};
use zerocopy::FromZeros;

use crate::boundary;
use crate::command::{self, IoctlCmd};
use crate::context::RxeContext;
use crate::device::RxeDevice;
use crate::errno::Errno;
use crate::libibverbs::device_context::{
    ibv_context, ibv_device_attr, ibv_device_attr_ex, ibv_port_attr, ibv_query_device_ex_input,
};

/// Bytes of an ex response that must be present for it to mean anything:
/// the legacy part, `comp_mask` and `response_length` itself.
const EX_RESP_MIN: usize = offset_of!(ib_uverbs_ex_query_device_resp, response_length) + 4;

/// How much of an ex response is valid: the kernel's `response_length`,
/// refused when it does not even cover itself, and clamped to our buffer
/// (the kernel never writes past the `out_words` we gave it).
pub(crate) fn valid_ex_len(response_length: u32) -> Result<usize, Errno> {
    let len = response_length as usize;
    if len < EX_RESP_MIN {
        return Err(Errno::EPROTO);
    }
    Ok(len.min(size_of::<ib_uverbs_ex_query_device_resp>()))
}

/// rxe reports `fw_ver` as major<<32 | minor<<16 | sub_minor; formatted as
/// the stock provider does ("%d.%d.%d").
pub(crate) fn format_fw_ver(raw: u64, out: &mut [c_char; 64]) {
    let text = format!("{}.{}.{}", (raw >> 32) & 0xffff, (raw >> 16) & 0xffff, raw & 0xffff);
    out.fill(0);
    for (d, s) in out.iter_mut().zip(text.bytes().take(63)) {
        *d = s as c_char;
    }
}

/// Builds the full `ibv_device_attr_ex` from a response of which the first
/// `resp_len` bytes are valid (`size_of::<ib_uverbs_query_device_resp>()`
/// for the legacy command). `num_ports` is sysfs' port count (0: unknown).
pub(crate) fn device_attr_from(
    resp: &ib_uverbs_ex_query_device_resp,
    resp_len: usize,
    num_ports: u32,
) -> ibv_device_attr_ex {
    // SAFETY: ibv_device_attr_ex is plain integers and arrays; all-zero is
    // valid and is what libibverbs' memset gives unfilled fields.
    let mut a: ibv_device_attr_ex = unsafe { core::mem::zeroed() };
    let b = &resp.base;
    let o: &mut ibv_device_attr = &mut a.orig_attr;
    format_fw_ver(b.fw_ver, &mut o.fw_ver);
    o.node_guid = b.node_guid;
    o.sys_image_guid = b.sys_image_guid;
    o.max_mr_size = b.max_mr_size;
    o.page_size_cap = b.page_size_cap;
    o.vendor_id = b.vendor_id;
    o.vendor_part_id = b.vendor_part_id;
    o.hw_ver = b.hw_ver;
    // The C library assigns these u32s to ints; we do the same conversion.
    o.max_qp = b.max_qp as c_int;
    o.max_qp_wr = b.max_qp_wr as c_int;
    o.device_cap_flags = b.device_cap_flags;
    o.max_sge = b.max_sge as c_int;
    o.max_sge_rd = b.max_sge_rd as c_int;
    o.max_cq = b.max_cq as c_int;
    o.max_cqe = b.max_cqe as c_int;
    o.max_mr = b.max_mr as c_int;
    o.max_pd = b.max_pd as c_int;
    o.max_qp_rd_atom = b.max_qp_rd_atom as c_int;
    o.max_ee_rd_atom = b.max_ee_rd_atom as c_int;
    o.max_res_rd_atom = b.max_res_rd_atom as c_int;
    o.max_qp_init_rd_atom = b.max_qp_init_rd_atom as c_int;
    o.max_ee_init_rd_atom = b.max_ee_init_rd_atom as c_int;
    o.atomic_cap = b.atomic_cap as c_int;
    o.max_ee = b.max_ee as c_int;
    o.max_rdd = b.max_rdd as c_int;
    o.max_mw = b.max_mw as c_int;
    o.max_raw_ipv6_qp = b.max_raw_ipv6_qp as c_int;
    o.max_raw_ethy_qp = b.max_raw_ethy_qp as c_int;
    o.max_mcast_grp = b.max_mcast_grp as c_int;
    o.max_mcast_qp_attach = b.max_mcast_qp_attach as c_int;
    o.max_total_mcast_qp_attach = b.max_total_mcast_qp_attach as c_int;
    o.max_ah = b.max_ah as c_int;
    o.max_fmr = b.max_fmr as c_int;
    o.max_map_per_fmr = b.max_map_per_fmr as c_int;
    o.max_srq = b.max_srq as c_int;
    o.max_srq_wr = b.max_srq_wr as c_int;
    o.max_srq_sge = b.max_srq_sge as c_int;
    o.max_pkeys = b.max_pkeys;
    o.local_ca_ack_delay = b.local_ca_ack_delay;
    o.phys_port_cnt = b.phys_port_cnt;

    macro_rules! has {
        ($field:ident) => {
            resp_len >= offset_of!(ib_uverbs_ex_query_device_resp, $field) + size_of_val(&resp.$field)
        };
    }
    // The fields the response carries and the attributes take as they are.
    macro_rules! copy {
        ($($field:ident => $to:ident),*) => {
            $(if has!($field) {
                a.$to = resp.$field;
            })*
        };
    }
    copy!(
        timestamp_mask => completion_timestamp_mask,
        hca_core_clock => hca_core_clock,
        device_cap_flags_ex => device_cap_flags_ex,
        max_wq_type_rq => max_wq_type_rq,
        raw_packet_caps => raw_packet_caps,
        max_dm_size => max_dm_size,
        xrc_odp_caps => xrc_odp_caps
    );
    if has!(odp_caps) {
        a.odp_caps.general_caps = resp.odp_caps.general_caps;
        a.odp_caps.rc_odp_caps = resp.odp_caps.per_transport_caps.rc_odp_caps;
        a.odp_caps.uc_odp_caps = resp.odp_caps.per_transport_caps.uc_odp_caps;
        a.odp_caps.ud_odp_caps = resp.odp_caps.per_transport_caps.ud_odp_caps;
    }
    // The structs the attributes take field by field, under the same names.
    macro_rules! copy_fields {
        ($($field:ident { $($sub:ident),* })*) => {
            $(if has!($field) {
                $(a.$field.$sub = resp.$field.$sub;)*
            })*
        };
    }
    copy_fields!(
        rss_caps { supported_qpts, max_rwq_indirection_tables, max_rwq_indirection_table_size }
        tm_caps { max_rndv_hdr_size, max_num_tags, flags, max_ops, max_sge }
    );
    if has!(cq_moderation_caps) {
        a.cq_mod_caps.max_cq_count = resp.cq_moderation_caps.max_cq_moderation_count;
        a.cq_mod_caps.max_cq_period = resp.cq_moderation_caps.max_cq_moderation_period;
    }
    a.phys_port_cnt_ex = if num_ports != 0 {
        num_ports
    } else {
        u32::from(a.orig_attr.phys_port_cnt)
    };
    a
}

/// Asks the kernel: the extended command when the caller's struct has room
/// for extended fields, the legacy one otherwise or when the kernel lacks
/// the extended one. Returns the response and how much of it is valid.
fn query_device(fd: c_int, want_ex: bool) -> Result<(ib_uverbs_ex_query_device_resp, usize), Errno> {
    if want_ex {
        match command::write_ex_cmd(
            fd,
            ib_uverbs_ex_query_device {
                comp_mask: 0,
                reserved: 0,
            },
        ) {
            Ok(resp) => {
                let len = valid_ex_len(resp.response_length)?;
                return Ok((resp, len));
            }
            Err(Errno::EOPNOTSUPP | Errno::ENOSYS) => {}
            Err(e) => return Err(e),
        }
    }
    let base = command::write_cmd(
        fd,
        ib_uverbs_query_device {
            response: 0,
            driver_data: [],
        },
    )?;
    let mut resp: ib_uverbs_ex_query_device_resp = zerocopy::FromZeros::new_zeroed();
    resp.base = base;
    Ok((resp, size_of_val(&base)))
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
        // SAFETY: input, when given, points to the caller's input struct.
        if let Some(input) = unsafe { input.as_ref() } {
            if input.comp_mask != 0 {
                return Errno::EINVAL.code();
            }
        }
        if attr.is_null() || attr_size < size_of::<ibv_device_attr>() {
            return Errno::EINVAL.code();
        }
        // SAFETY: libibverbs passes a context our alloc_context made.
        let Some(ctx) = (unsafe { RxeContext::from_ibv_context(context) }) else {
            return Errno::EINVAL.code();
        };
        // SAFETY: a context's device is the one our alloc_device made.
        let num_ports = unsafe { RxeDevice::from_ibv_device(ctx.device()) }.map_or(0, |d| d.num_ports);

        let (resp, resp_len) = match query_device(ctx.cmd_fd(), attr_size > size_of::<ibv_device_attr>()) {
            Ok(r) => r,
            Err(e) => return e.code(),
        };
        let full = device_attr_from(&resp, resp_len, num_ports);
        // Fields past the caller's attr_size do not exist for it; bytes past
        // our struct (a newer caller) stay zero, as libibverbs' memset leaves them.
        let n = attr_size.min(size_of::<ibv_device_attr_ex>());
        // SAFETY: the caller's buffer holds attr_size bytes (>= n); `full` is
        // a local of size_of::<ibv_device_attr_ex>() >= n; they do not overlap.
        unsafe {
            ptr::write_bytes(attr.cast::<u8>(), 0, attr_size);
            ptr::copy_nonoverlapping(ptr::from_ref(&full).cast::<u8>(), attr.cast::<u8>(), n);
        }
        0
    })
}

/// Where rdma-core v49+ puts `active_speed_ex` in `struct ibv_port_attr`:
/// right after the 52 bytes every release has.
const ACTIVE_SPEED_EX_OFFSET: usize = size_of::<ibv_port_attr>();

/// The QUERY_PORT method of the ioctl interface, as libibverbs'
/// `ibv_cmd_query_port` asks it first: the legacy answer plus
/// `port_cap_flags2` and (Linux 6.6+) `active_speed_ex`. The kernel writes
/// what its struct has; the rest stays zero.
fn query_port_ioctl(fd: c_int, port_num: u8) -> Result<ib_uverbs_query_port_resp_ex, Errno> {
    let mut resp = ib_uverbs_query_port_resp_ex::new_zeroed();
    let attrs = [
        command::attr_in_const(UVERBS_ATTR_QUERY_PORT_PORT_NUM as u16, u64::from(port_num)),
        command::attr_out(
            UVERBS_ATTR_QUERY_PORT_RESP as u16,
            core::ptr::from_mut(&mut resp) as usize as u64,
            size_of::<ib_uverbs_query_port_resp_ex>() as u16,
        ),
    ];
    let mut cmd = IoctlCmd::new(
        UVERBS_OBJECT_DEVICE as u16,
        UVERBS_METHOD_QUERY_PORT as u16,
        RDMA_DRIVER_RXE,
        attrs,
    )?;
    command::ioctl_cmd(fd, &mut cmd)?;
    if !command::output_valid(&cmd.attrs[1]) {
        return Err(Errno::EPROTO);
    }
    Ok(resp)
}

/// `verbs_context_ops.query_port`. libibverbs always passes a buffer of its
/// own `sizeof(struct ibv_port_attr)`, zeroed, which is at least our 52 bytes.
pub(crate) unsafe extern "C" fn query_port(
    context: *mut ibv_context,
    port_num: u8,
    port_attr: *mut ibv_port_attr,
) -> c_int {
    boundary::guard("query_port", Errno::EIO.code(), || {
        // SAFETY: libibverbs passes a context our alloc_context made.
        let Some(ctx) = (unsafe { RxeContext::from_ibv_context(context) }) else {
            return Errno::EINVAL.code();
        };
        // SAFETY: see above: at least size_of::<ibv_port_attr>() writable bytes.
        let Some(attr) = (unsafe { port_attr.as_mut() }) else {
            return Errno::EINVAL.code();
        };
        let (r, ex) = match query_port_ioctl(ctx.cmd_fd(), port_num) {
            Ok(ex) => (ex.legacy_resp, Some(ex)),
            // A kernel without the method (before the ioctl interface had
            // it): the write() command, as libibverbs' ibv_cmd_query_port.
            Err(Errno::ENOTTY | Errno::EOPNOTSUPP | Errno::EPROTONOSUPPORT) => {
                let cmd = ib_uverbs_query_port {
                    response: 0,
                    port_num,
                    reserved: [0; 7],
                    driver_data: [],
                };
                match command::write_cmd(ctx.cmd_fd(), cmd) {
                    Ok(r) => (r, None),
                    Err(e) => return e.code(),
                }
            }
            Err(e) => return e.code(),
        };
        let Ok(gid_tbl_len) = c_int::try_from(r.gid_tbl_len) else {
            return Errno::EPROTO.code();
        };
        attr.state = c_int::from(r.state);
        attr.max_mtu = c_int::from(r.max_mtu);
        attr.active_mtu = c_int::from(r.active_mtu);
        attr.gid_tbl_len = gid_tbl_len;
        attr.port_cap_flags = r.port_cap_flags;
        attr.max_msg_sz = r.max_msg_sz;
        attr.bad_pkey_cntr = r.bad_pkey_cntr;
        attr.qkey_viol_cntr = r.qkey_viol_cntr;
        attr.pkey_tbl_len = r.pkey_tbl_len;
        attr.lid = r.lid;
        attr.sm_lid = r.sm_lid;
        attr.lmc = r.lmc;
        attr.max_vl_num = r.max_vl_num;
        attr.sm_sl = r.sm_sl;
        attr.subnet_timeout = r.subnet_timeout;
        attr.init_type_reply = r.init_type_reply;
        attr.active_width = r.active_width;
        attr.active_speed = r.active_speed;
        attr.phys_state = r.phys_state;
        attr.link_layer = r.link_layer;
        attr.flags = r.flags;
        // What only the ioctl method answers (the write command has no room).
        if let Some(ex) = ex {
            attr.port_cap_flags2 = ex.port_cap_flags2;
            if ctx.layout.port_attr_has_active_speed_ex() {
                // SAFETY: libibverbs hands us a buffer of its own
                // sizeof(struct ibv_port_attr) (`__lib_query_port`), which
                // from v49 on ends with the u32 active_speed_ex at offset 52.
                unsafe {
                    port_attr
                        .cast::<u8>()
                        .add(ACTIVE_SPEED_EX_OFFSET)
                        .cast::<u32>()
                        .write_unaligned(ex.active_speed_ex)
                };
            }
        }
        0
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::FromZeros;

    fn sample() -> ib_uverbs_ex_query_device_resp {
        let mut r = ib_uverbs_ex_query_device_resp::new_zeroed();
        r.base.fw_ver = (1 << 32) | (2 << 16) | 3;
        r.base.max_qp = 0x10000;
        r.base.phys_port_cnt = 1;
        r.base.max_pkeys = 64;
        r.response_length = size_of::<ib_uverbs_ex_query_device_resp>() as u32;
        r.device_cap_flags_ex = 0x1234_5678_9abc;
        r.odp_caps.general_caps = 7;
        r.max_dm_size = 99;
        r.xrc_odp_caps = 5;
        r
    }

    #[test]
    fn fw_ver_is_formatted_like_the_stock_provider() {
        let mut buf = [1 as c_char; 64];
        format_fw_ver((1 << 32) | (2 << 16) | 3, &mut buf);
        assert_eq!(&buf[..6], &[b'1', b'.', b'2', b'.', b'3', 0].map(|b| b as c_char));
        assert!(buf[6..].iter().all(|&c| c == 0));
        format_fw_ver(u64::MAX, &mut buf);
        let s: Vec<u8> = buf
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| u8::from_ne_bytes(c.to_ne_bytes()))
            .collect();
        assert_eq!(s, b"65535.65535.65535");
    }

    #[test]
    fn ex_response_length_is_checked_and_clamped() {
        assert_eq!(valid_ex_len(0), Err(Errno::EPROTO));
        assert_eq!(valid_ex_len(EX_RESP_MIN as u32 - 1), Err(Errno::EPROTO));
        assert_eq!(valid_ex_len(EX_RESP_MIN as u32), Ok(EX_RESP_MIN));
        assert_eq!(valid_ex_len(304), Ok(304));
        assert_eq!(valid_ex_len(u32::MAX), Ok(304));
    }

    #[test]
    fn full_response_fills_legacy_and_extended_fields() {
        let a = device_attr_from(&sample(), 304, 0);
        assert_eq!(a.orig_attr.max_qp, 0x10000);
        assert_eq!(a.orig_attr.max_pkeys, 64);
        assert_eq!(a.device_cap_flags_ex, 0x1234_5678_9abc);
        assert_eq!(a.odp_caps.general_caps, 7);
        assert_eq!(a.max_dm_size, 99);
        assert_eq!(a.xrc_odp_caps, 5);
        assert_eq!(a.phys_port_cnt_ex, 1, "falls back to phys_port_cnt");
        assert_eq!(device_attr_from(&sample(), 304, 3).phys_port_cnt_ex, 3, "sysfs wins");
    }

    #[test]
    fn fields_beyond_the_valid_length_are_not_used() {
        let legacy = device_attr_from(&sample(), 176, 0);
        assert_eq!(legacy.orig_attr.max_qp, 0x10000);
        assert_eq!(
            (
                legacy.device_cap_flags_ex,
                legacy.odp_caps.general_caps,
                legacy.max_dm_size
            ),
            (0, 0, 0)
        );
        // A response that stops just before max_dm_size keeps everything before it.
        let cut = offset_of!(ib_uverbs_ex_query_device_resp, max_dm_size);
        let partial = device_attr_from(&sample(), cut, 0);
        assert_eq!(partial.device_cap_flags_ex, 0x1234_5678_9abc);
        assert_eq!((partial.max_dm_size, partial.xrc_odp_caps), (0, 0));
    }

    #[test]
    fn entries_reject_null_and_bad_sizes_without_touching_memory() {
        // SAFETY: ibv_device_attr_ex is plain C data; all-zero is valid.
        let mut attr: ibv_device_attr_ex = unsafe { core::mem::zeroed() };
        let bad_input = ibv_query_device_ex_input { comp_mask: 1 };
        // SAFETY: every pointer is null or valid; the checks come first.
        unsafe {
            assert_eq!(
                query_device_ex(ptr::null_mut(), &bad_input, &mut attr, 400),
                Errno::EINVAL.code()
            );
            assert_eq!(
                query_device_ex(ptr::null_mut(), ptr::null(), &mut attr, 100),
                Errno::EINVAL.code()
            );
            assert_eq!(
                query_device_ex(ptr::null_mut(), ptr::null(), ptr::null_mut(), 400),
                Errno::EINVAL.code()
            );
            assert_eq!(
                query_device_ex(ptr::null_mut(), ptr::null(), &mut attr, 400),
                Errno::EINVAL.code()
            );
            assert_eq!(query_port(ptr::null_mut(), 1, ptr::null_mut()), Errno::EINVAL.code());
        }
    }
}
