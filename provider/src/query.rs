//! `query_device_ex` and `query_port`, issued as write() commands the way the
//! stock rxe provider's path through libibverbs does (`ibv_cmd_query_device_any`,
//! `ibv_cmd_query_port`), with every size from the kernel checked. The entries
//! are in `entry::objects`.

#![forbid(unsafe_code)]

use core::ffi::{c_char, c_int};
use core::mem::{offset_of, size_of};

use kernel_abi::{
    ib_uverbs_ex_query_device, ib_uverbs_ex_query_device_resp, ib_uverbs_query_device, ib_uverbs_query_port,
    ib_uverbs_query_port_resp_ex, RDMA_DRIVER_RXE, UVERBS_ATTR_QUERY_PORT_PORT_NUM, UVERBS_ATTR_QUERY_PORT_RESP,
    UVERBS_METHOD_QUERY_PORT, UVERBS_OBJECT_DEVICE,
};
use zerocopy::FromZeros;

use crate::command::{self, IoctlCmd};
use crate::context::RxeContext;
use crate::errno::Errno;
use crate::libibverbs::device_context::{
    ibv_device_attr, ibv_device_attr_ex, ibv_port_attr, ibv_query_device_ex_input,
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
    // All-zero is what libibverbs' memset gives unfilled fields.
    let mut a = ibv_device_attr_ex::new_zeroed();
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

/// `verbs_context_ops.query_device_ex` (`ibv_query_device` comes here too
/// with `attr_size == sizeof(struct ibv_device_attr)`): the attributes the
/// entry copies into the caller's `attr_size` bytes (`has_attr`: not NULL).
/// `ctx` is the context and its device's port count. The errno is returned
/// (not left in `errno`), as libibverbs' `ibv_cmd_query_device_any`.
pub(crate) fn query_device_ex(
    input: Option<&ibv_query_device_ex_input>,
    has_attr: bool,
    attr_size: usize,
    ctx: Option<(&RxeContext, u32)>,
) -> Result<ibv_device_attr_ex, Errno> {
    if input.is_some_and(|input| input.comp_mask != 0) {
        return Err(Errno::EINVAL);
    }
    if !has_attr || attr_size < size_of::<ibv_device_attr>() {
        return Err(Errno::EINVAL);
    }
    let (ctx, num_ports) = ctx.ok_or(Errno::EINVAL)?;
    let (resp, resp_len) = query_device(ctx.cmd_fd(), attr_size > size_of::<ibv_device_attr>())?;
    Ok(device_attr_from(&resp, resp_len, num_ports))
}

/// Where rdma-core v49+ puts `active_speed_ex` in `struct ibv_port_attr`:
/// right after the 52 bytes every release has.
pub(crate) const ACTIVE_SPEED_EX_OFFSET: usize = size_of::<ibv_port_attr>();

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

/// `verbs_context_ops.query_port`: fills `attr` (the first 52 bytes of
/// libibverbs' buffer, which every release has) and answers the
/// `active_speed_ex` the entry stores past them, for a library whose
/// `ibv_port_attr` has it (v49 on). The errno is returned, not left in `errno`.
pub(crate) fn query_port(
    ctx: Option<&RxeContext>,
    port_num: u8,
    attr: Option<&mut ibv_port_attr>,
) -> Result<Option<u32>, Errno> {
    let (Some(ctx), Some(attr)) = (ctx, attr) else {
        return Err(Errno::EINVAL);
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
            (command::write_cmd(ctx.cmd_fd(), cmd)?, None)
        }
        Err(e) => return Err(e),
    };
    let gid_tbl_len = c_int::try_from(r.gid_tbl_len).map_err(|_| Errno::EPROTO)?;
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
    let Some(ex) = ex else { return Ok(None) };
    attr.port_cap_flags2 = ex.port_cap_flags2;
    Ok(ctx.layout.port_attr_has_active_speed_ex().then_some(ex.active_speed_ex))
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
    fn null_and_bad_sizes_are_einval() {
        let bad_input = ibv_query_device_ex_input { comp_mask: 1 };
        let einval = Some(Errno::EINVAL);
        assert_eq!(query_device_ex(Some(&bad_input), true, 400, None).err(), einval);
        assert_eq!(query_device_ex(None, true, 100, None).err(), einval);
        assert_eq!(query_device_ex(None, false, 400, None).err(), einval);
        assert_eq!(query_device_ex(None, true, 400, None).err(), einval);
        let mut attr = ibv_port_attr::new_zeroed();
        assert_eq!(query_port(None, 1, Some(&mut attr)).err(), einval);
    }
}
