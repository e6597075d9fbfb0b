//! Compares the provider's mirrors of libibverbs' structs with the C compiler's layout of the
//! real `libibverbs-dev` headers of every line Debian ships (bookworm: rdma-core 44, trixie: 56,
//! sid: 65), field by field: size, alignment, and the offset of every member C names on the
//! record (anonymous members flattened). Both directions: a Rust field C lacks and a C member no
//! Rust field covers both fail.
//!
//! Release-dependent structs are compared with what the provider would use for that release:
//! `verbs_context` with its `ContextLayout` (the fields in front of v36's), `ibv_qp_ex` with
//! `QpExLayout` (`wr_atomic_write` from v44, `wr_flush` from v45).
//!
//! `driver.h` (`verbs_context_ops`, `verbs_device_ops`, `verbs_sysfs_dev`, ...) is rdma-core's
//! internal provider header: no Debian package installs it. Its structs carry the offsets
//! recorded from rdma-core's tags in their `c_struct!` declarations (asserted at compile time);
//! what depends on the release (the ops tables, `verbs_qp`) is checked in `driver_h_facts`.
//!
//! The headers come from the rig's cache (`tests/rig/fetch-headers.sh`); no network here.
//!
//! Built for aarch64 (tests/check.sh runs it with `--target aarch64-unknown-linux-gnu`, under
//! qemu-aarch64), the test compares the aarch64 mirrors with clang's aarch64 layout of the arm64
//! headers (`c_headers`).

use core::mem::{align_of, offset_of, size_of};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use rxe_rs::libibverbs::control_objects::*;
use rxe_rs::libibverbs::cq::*;
use rxe_rs::libibverbs::device_context::*;
use rxe_rs::libibverbs::layout::{Layout, KNOWN_PABIS};
use rxe_rs::libibverbs::private_context;
use rxe_rs::libibverbs::private_context_releases::ContextLayout;
use rxe_rs::libibverbs::qp::*;
use rxe_rs::libibverbs::srq::*;
use rxe_rs::libibverbs::MUTEX_GROWTH;

#[path = "../../kernel-abi/tests/common/c_headers.rs"]
mod c_headers;
use c_headers::{CKind, CRecord, SUITES};

/// One Rust mirror and where its C original is.
struct Mirror {
    rust: &'static str,
    kind: CKind,
    /// The C record (`struct ibv_wc`), or for an anonymous C type the named record holding it.
    c_record: &'static str,
    /// For an anonymous C type: its access path inside `c_record` (`wr.rdma`).
    c_path: Option<&'static str>,
    size: usize,
    align: usize,
    /// Rust field, the C members it stands for (its own name unless renamed), offset.
    fields: Vec<(&'static str, Vec<&'static str>, usize)>,
}

/// `mirror!(struct ibv_wc { wr_id, ex = ["imm_data", "invalidated_rkey"], ... })`: every field
/// of the Rust struct must be listed (the destructuring pattern has no `..`, so a field added
/// to the mirror and not here does not compile). `= [..]` names the C members a field stands
/// for when the names differ (an anonymous C union held by one named Rust field).
macro_rules! mirror {
    (@fields $ty:ident { $($field:ident $(= [$($c:literal),+])?),* $(,)? }) => {
        vec![$((
            stringify!($field).trim_start_matches("r#"),
            {
                #[allow(unused_mut)]
                let mut names: Vec<&'static str> = vec![$($($c),+)?];
                if names.is_empty() {
                    names.push(stringify!($field).trim_start_matches("r#"));
                }
                names
            },
            offset_of!($ty, $field),
        )),*]
    };
    (struct $ty:ident $(in $rec:literal at $path:literal)? { $($body:tt)* }) => {{
        #[allow(dead_code)]
        fn listed_fields_are_all_fields(v: &$ty) {
            mirror!(@destructure v $ty { $($body)* });
        }
        mirror!(@make Struct, $ty, concat!("struct ", stringify!($ty)) $(, $rec, $path)?; $($body)*)
    }};
    (union $ty:ident $(in $rec:literal at $path:literal)? { $($body:tt)* }) => {{
        mirror!(@make Union, $ty, concat!("union ", stringify!($ty)) $(, $rec, $path)?; $($body)*)
    }};
    (@destructure $v:ident $ty:ident { $($field:ident $(= [$($c:literal),+])?),* $(,)? }) => {
        let $ty { $($field: _),* } = $v;
    };
    (@make $kind:ident, $ty:ident, $own:expr; $($body:tt)*) => {
        Mirror {
            rust: stringify!($ty),
            kind: CKind::$kind,
            c_record: $own,
            c_path: None,
            size: size_of::<$ty>(),
            align: align_of::<$ty>(),
            fields: mirror!(@fields $ty { $($body)* }),
        }
    };
    (@make $kind:ident, $ty:ident, $own:expr, $rec:literal, $path:literal; $($body:tt)*) => {
        Mirror {
            rust: stringify!($ty),
            kind: CKind::$kind,
            c_record: $rec,
            c_path: Some($path),
            size: size_of::<$ty>(),
            align: align_of::<$ty>(),
            fields: mirror!(@fields $ty { $($body)* }),
        }
    };
}

/// Every mirror of a `verbs.h` struct whose layout is the same in every release.
fn mirrors() -> Vec<Mirror> {
    vec![
        mirror!(struct _ibv_device_ops { _dummy1, _dummy2 }),
        mirror!(struct ibv_device { _ops, node_type, transport_type, name, dev_name, dev_path, ibdev_path }),
        mirror!(struct ibv_context { device, ops, cmd_fd, async_fd, num_comp_vectors, mutex, abi_compat }),
        mirror!(struct ibv_device_attr {
            fw_ver, node_guid, sys_image_guid, max_mr_size, page_size_cap, vendor_id, vendor_part_id, hw_ver,
            max_qp, max_qp_wr, device_cap_flags, max_sge, max_sge_rd, max_cq, max_cqe, max_mr, max_pd,
            max_qp_rd_atom, max_ee_rd_atom, max_res_rd_atom, max_qp_init_rd_atom, max_ee_init_rd_atom,
            atomic_cap, max_ee, max_rdd, max_mw, max_raw_ipv6_qp, max_raw_ethy_qp, max_mcast_grp,
            max_mcast_qp_attach, max_total_mcast_qp_attach, max_ah, max_fmr, max_map_per_fmr, max_srq,
            max_srq_wr, max_srq_sge, max_pkeys, local_ca_ack_delay, phys_port_cnt,
        }),
        mirror!(struct ibv_odp_caps {
            general_caps,
            rc_odp_caps = ["per_transport_caps", "per_transport_caps.rc_odp_caps"],
            uc_odp_caps = ["per_transport_caps.uc_odp_caps"],
            ud_odp_caps = ["per_transport_caps.ud_odp_caps"],
        }),
        mirror!(struct ibv_tso_caps { max_tso, supported_qpts }),
        mirror!(struct ibv_rss_caps {
            supported_qpts, max_rwq_indirection_tables, max_rwq_indirection_table_size, rx_hash_fields_mask,
            rx_hash_function,
        }),
        mirror!(struct ibv_packet_pacing_caps { qp_rate_limit_min, qp_rate_limit_max, supported_qpts }),
        mirror!(struct ibv_tm_caps { max_rndv_hdr_size, max_num_tags, flags, max_ops, max_sge }),
        mirror!(struct ibv_cq_moderation_caps { max_cq_count, max_cq_period }),
        mirror!(struct ibv_pci_atomic_caps { fetch_add, compare_swap, swap }),
        mirror!(struct ibv_device_attr_ex {
            orig_attr, comp_mask, odp_caps, completion_timestamp_mask, hca_core_clock, device_cap_flags_ex,
            tso_caps, rss_caps, max_wq_type_rq, packet_pacing_caps, raw_packet_caps, tm_caps, cq_mod_caps,
            max_dm_size, pci_atomic_caps, xrc_odp_caps, phys_port_cnt_ex,
        }),
        mirror!(struct ibv_query_device_ex_input { comp_mask }),
        mirror!(struct ibv_port_attr {
            state, max_mtu, active_mtu, gid_tbl_len, port_cap_flags, max_msg_sz, bad_pkey_cntr, qkey_viol_cntr,
            pkey_tbl_len, lid, sm_lid, lmc, max_vl_num, sm_sl, subnet_timeout, init_type_reply, active_width,
            active_speed, phys_state, link_layer, flags, port_cap_flags2,
        }),
        mirror!(struct ibv_comp_channel { context, fd, refcnt }),
        mirror!(struct ibv_cq {
            context, channel, cq_context, handle, cqe, mutex, cond, comp_events_completed, async_events_completed,
        }),
        mirror!(struct ibv_poll_cq_attr { comp_mask }),
        mirror!(struct ibv_wc {
            wr_id, status, opcode, vendor_err, byte_len, ex = ["imm_data", "invalidated_rkey"], qp_num, src_qp,
            wc_flags, pkey_index, slid, sl, dlid_path_bits,
        }),
        mirror!(struct ibv_cq_ex {
            context, channel, cq_context, handle, cqe, mutex, cond, comp_events_completed, async_events_completed,
            comp_mask, status, wr_id, start_poll, next_poll, end_poll, read_opcode, read_vendor_err, read_byte_len,
            read_imm_data, read_qp_num, read_src_qp, read_wc_flags, read_slid, read_sl, read_dlid_path_bits,
            read_completion_ts, read_cvlan, read_flow_tag, read_tm_info, read_completion_wallclock_ns,
        }),
        mirror!(struct ibv_cq_init_attr_ex {
            cqe, cq_context, channel, comp_vector, wc_flags, comp_mask, flags, parent_domain,
        }),
        mirror!(struct ibv_pd { context, handle }),
        mirror!(struct ibv_mr { context, pd, addr, length, handle, lkey, rkey }),
        mirror!(struct ibv_mw { context, pd, rkey, handle, r#type }),
        mirror!(struct ibv_gid_global in "union ibv_gid" at "global" { subnet_prefix, interface_id }),
        mirror!(union ibv_gid { raw, global }),
        mirror!(struct ibv_global_route { dgid, flow_label, sgid_index, hop_limit, traffic_class }),
        mirror!(struct ibv_ah_attr { grh, dlid, sl, src_path_bits, static_rate, is_global, port_num }),
        mirror!(struct ibv_ah { context, pd, handle }),
        mirror!(struct ibv_qp {
            context, qp_context, pd, send_cq, recv_cq, srq, handle, qp_num, state, qp_type, mutex, cond,
            events_completed,
        }),
        mirror!(struct ibv_sge { addr, length, lkey }),
        mirror!(struct ibv_qp_cap { max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data }),
        mirror!(struct ibv_qp_init_attr { qp_context, send_cq, recv_cq, srq, cap, qp_type, sq_sig_all }),
        mirror!(struct ibv_rx_hash_conf { rx_hash_function, rx_hash_key_len, rx_hash_key, rx_hash_fields_mask }),
        mirror!(struct ibv_qp_init_attr_ex {
            qp_context, send_cq, recv_cq, srq, cap, qp_type, sq_sig_all, comp_mask, pd, xrcd, create_flags,
            max_tso_header, rwq_ind_tbl, rx_hash_conf, source_qpn, send_ops_flags,
        }),
        mirror!(struct ibv_qp_attr {
            qp_state, cur_qp_state, path_mtu, path_mig_state, qkey, rq_psn, sq_psn, dest_qp_num, qp_access_flags,
            cap, ah_attr, alt_ah_attr, pkey_index, alt_pkey_index, en_sqd_async_notify, sq_draining,
            max_rd_atomic, max_dest_rd_atomic, min_rnr_timer, port_num, timeout, retry_cnt, rnr_retry,
            alt_port_num, alt_timeout, rate_limit,
        }),
        mirror!(struct ibv_send_wr_rdma in "struct ibv_send_wr" at "wr.rdma" { remote_addr, rkey }),
        mirror!(struct ibv_send_wr_atomic in "struct ibv_send_wr" at "wr.atomic" {
            remote_addr, compare_add, swap, rkey,
        }),
        mirror!(struct ibv_send_wr_ud in "struct ibv_send_wr" at "wr.ud" { ah, remote_qpn, remote_qkey }),
        mirror!(union ibv_send_wr_wr in "struct ibv_send_wr" at "wr" { rdma, atomic, ud }),
        mirror!(struct ibv_mw_bind_info { mr, addr, length, mw_access_flags }),
        mirror!(struct ibv_send_wr_bind_mw in "struct ibv_send_wr" at "bind_mw" { mw, rkey, bind_info }),
        mirror!(struct ibv_send_wr_tso in "struct ibv_send_wr" at "tso" { hdr, hdr_sz, mss }),
        mirror!(struct ibv_send_wr {
            wr_id, next, sg_list, num_sge, opcode, send_flags, imm_data = ["imm_data", "invalidate_rkey"], wr,
            remote_srqn = ["qp_type"], ext = ["bind_mw", "tso"],
        }),
        mirror!(struct ibv_data_buf { addr, length }),
        mirror!(struct ibv_recv_wr { wr_id, next, sg_list, num_sge }),
        mirror!(struct ibv_mw_bind { wr_id, send_flags, bind_info }),
        mirror!(struct ibv_srq { context, srq_context, pd, handle, mutex, cond, events_completed }),
        mirror!(struct ibv_srq_attr { max_wr, max_sge, srq_limit }),
        mirror!(struct ibv_srq_init_attr { srq_context, attr }),
        mirror!(struct ibv_tm_cap { max_num_tags, max_ops }),
        mirror!(struct ibv_srq_init_attr_ex {
            srq_context, attr, comp_mask, srq_type, pd, xrcd, cq, tm_cap,
        }),
    ]
}

/// Members a release appended to a struct whose mirror stops before them: (mirror, member,
/// first rdma-core release with it, its size). The provider leaves them as libibverbs zeroed
/// them.
const APPENDED: &[(&str, &str, u32, usize)] = &[
    // v49.0 (XDR speeds). query_port writes it past the mirror (query.rs,
    // ACTIVE_SPEED_EX_OFFSET) from the ioctl QUERY_PORT answer, on v49+ only.
    ("ibv_port_attr", "active_speed_ex", 49, 4),
];

/// The `ibv_qp_ex` callbacks in declaration order: `ibv_qp_ex_base::wr_ops[i]` is the `i`th.
const WR_OPS: [&str; 20] = [
    "wr_atomic_cmp_swp",
    "wr_atomic_fetch_add",
    "wr_bind_mw",
    "wr_local_inv",
    "wr_rdma_read",
    "wr_rdma_write",
    "wr_rdma_write_imm",
    "wr_send",
    "wr_send_imm",
    "wr_send_inv",
    "wr_send_tso",
    "wr_set_ud_addr",
    "wr_set_xrc_srqn",
    "wr_set_inline_data",
    "wr_set_inline_data_list",
    "wr_set_sge",
    "wr_set_sge_list",
    "wr_start",
    "wr_complete",
    "wr_abort",
];

/// One suite's headers laid out by clang, with the rdma-core release they are from.
struct Suite {
    name: &'static str,
    release: u32,
    records: BTreeMap<String, CRecord>,
}

fn suite(name: &'static str) -> Suite {
    let include = c_headers::suite_include(name);
    let versions = c_headers::suite_versions(name);
    // "libibverbs-dev 65.0-1.1" -> 65
    let release = versions
        .split(", ")
        .find_map(|line| line.strip_prefix("libibverbs-dev "))
        .and_then(|v| v.split('.').next())
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("no libibverbs-dev version for {name} in {versions:?}"));
    let mut wanted: BTreeSet<String> = mirrors().iter().map(|m| m.c_record.to_string()).collect();
    wanted.extend(["struct verbs_context".to_string(), "struct ibv_qp_ex".to_string()]);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("c_layout");
    let wanted: Vec<String> = wanted.into_iter().collect();
    let records = c_headers::c_records(&dir, &include, "#include <infiniband/verbs.h>\n", &wanted, name);
    Suite { name, release, records }
}

/// Every member path of `record`, or of the anonymous member at `path` inside it, with
/// offsets from that member's start.
fn c_members<'a>(record: &'a CRecord, path: Option<&str>) -> BTreeMap<&'a str, usize> {
    match path {
        None | Some("") => record.paths.iter().map(|(p, &offset)| (p.as_str(), offset)).collect(),
        Some(path) => {
            let base = record.paths[path];
            let prefix = format!("{path}.");
            record
                .paths
                .iter()
                .filter_map(|(p, &offset)| Some((p.strip_prefix(&prefix)?, offset - base)))
                .collect()
        }
    }
}

/// Compares one Rust field list with the C members (`c`: every member path): each C name a
/// Rust field stands for at the field's offset, and each C member of this level (no `.`)
/// covered by some field. Returns the number of C members compared.
fn compare_fields(
    errors: &mut Vec<String>,
    what: &str,
    rust: &[(&str, Vec<&str>, usize)],
    c: &BTreeMap<&str, usize>,
) -> usize {
    let mut covered = BTreeSet::new();
    let mut compared = 0;
    for (field, c_names, offset) in rust {
        for name in c_names {
            compared += 1;
            covered.insert(*name);
            match c.get(name) {
                Some(c_offset) if c_offset == offset => {}
                Some(c_offset) => errors.push(format!("{what}.{name}: C offset {c_offset}, Rust {field} at {offset}")),
                None => errors.push(format!("{what}: Rust {field} stands for {name}, which C lacks")),
            }
        }
    }
    for name in c.keys().filter(|n| !n.contains('.') && !covered.contains(*n)) {
        errors.push(format!("{what}.{name}: in C, no Rust field"));
    }
    compared
}

/// Structs and fields compared for one suite, and the mismatches.
fn compare_suite(s: &Suite) -> (usize, usize, Vec<String>) {
    let mut errors = Vec::new();
    let (mut structs, mut fields) = (0, 0);
    for m in mirrors() {
        let what = format!(
            "{} ({}: {} in {})",
            m.rust,
            s.name,
            m.c_path.unwrap_or("itself"),
            m.c_record
        );
        let Some(record) = s.records.get(m.c_record.split_once(' ').unwrap().1) else {
            errors.push(format!("{what}: no such record in the headers"));
            continue;
        };
        structs += 1;
        if m.c_path.is_none() && (record.kind, record.align) != (m.kind, m.align) {
            errors.push(format!(
                "{what}: C is {:?} align {}, Rust {:?} align {}",
                record.kind, record.align, m.kind, m.align
            ));
        }
        let mut c = c_members(record, m.c_path);
        let mut rust_size = m.size;
        // Members newer releases append, which the provider leaves as libibverbs zeroed them.
        for &(rust, member, since, size) in APPENDED {
            if rust == m.rust && s.release >= since {
                assert_eq!(
                    c.remove(member),
                    Some(m.size),
                    "{what}: {member} is not right after the mirror"
                );
                rust_size += size;
            }
        }
        if m.c_path.is_none() && record.size != rust_size {
            errors.push(format!(
                "{what}: C size {}, Rust {} with the appended members",
                record.size, rust_size
            ));
        }
        fields += compare_fields(&mut errors, &what, &m.fields, &c);
    }

    // ibv_context_ops: 32 slots of one pointer each.
    {
        let record = &s.records["ibv_context_ops"];
        let offsets: Vec<usize> = record
            .top_level()
            .values()
            .copied()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let expected: Vec<usize> = (0..32).map(|i| i * 8).collect();
        structs += 1;
        fields += offsets.len();
        if offsets != expected || record.size != size_of::<ibv_context_ops>() || record.top_level().len() != 32 {
            errors.push(format!(
                "ibv_context_ops ({}): C offsets {offsets:?}, size {}",
                s.name, record.size
            ));
        }
    }

    // ibv_qp_ex: the shared part, then what the release adds (QpExLayout).
    {
        let qp_ex = QpExLayout::for_release(s.release);
        let record = &s.records["ibv_qp_ex"];
        let mut rust: Vec<(&str, Vec<&str>, usize)> = vec![
            ("qp_base", vec!["qp_base"], offset_of!(ibv_qp_ex_base, qp_base)),
            ("comp_mask", vec!["comp_mask"], offset_of!(ibv_qp_ex_base, comp_mask)),
            ("wr_id", vec!["wr_id"], offset_of!(ibv_qp_ex_base, wr_id)),
            ("wr_flags", vec!["wr_flags"], offset_of!(ibv_qp_ex_base, wr_flags)),
        ];
        for (i, name) in WR_OPS.iter().enumerate() {
            rust.push(("wr_ops[i]", vec![name], offset_of!(ibv_qp_ex_base, wr_ops) + 8 * i));
        }
        let base = size_of::<ibv_qp_ex_base>();
        if qp_ex.has_atomic_write() {
            rust.push(("tail[0]", vec!["wr_atomic_write"], base));
        }
        if qp_ex.qp_ex_size >= base + 16 {
            rust.push(("tail[1]", vec!["wr_flush"], base + 8));
        }
        let what = format!("ibv_qp_ex ({}, v{})", s.name, s.release);
        structs += 1;
        fields += compare_fields(&mut errors, &what, &rust, &c_members(record, None));
        if record.size != qp_ex.qp_ex_size {
            errors.push(format!(
                "{what}: C size {}, QpExLayout {}",
                record.size, qp_ex.qp_ex_size
            ));
        }
    }

    // verbs_context: the release's extra pointers in front of v36's fields.
    {
        let layout = KNOWN_PABIS
            .iter()
            .find_map(|&pabi| Layout::select(pabi, s.release).ok())
            .unwrap_or_else(|| panic!("no layout for v{}", s.release));
        let head = layout.context.verbs_context_head();
        let shift = head.len() * 8;
        let mut rust: Vec<(&str, Vec<&str>, usize)> = head
            .iter()
            .enumerate()
            .map(|(i, name)| (*name, vec![*name], i * 8))
            .collect();
        for (field, names, offset) in v36_verbs_context_fields() {
            rust.push((field, names, offset + shift));
        }
        let record = &s.records["verbs_context"];
        let what = format!("verbs_context ({}, v{}, {:?})", s.name, s.release, layout.context);
        structs += 1;
        fields += compare_fields(&mut errors, &what, &rust, &c_members(record, None));
        if record.size != layout.context.verbs_context_size()
            || layout.verbs_context_prefix() != record.paths["context"]
        {
            errors.push(format!(
                "{what}: C size {}, Rust {}",
                record.size,
                layout.context.verbs_context_size()
            ));
        }
    }
    (structs, fields, errors)
}

fn v36_verbs_context_fields() -> Vec<(&'static str, Vec<&'static str>, usize)> {
    use private_context::verbs_context;
    let m = mirror!(struct verbs_context {
        query_port, advise_mr, alloc_null_mr, read_counters, attach_counters_point_flow, create_counters,
        destroy_counters, reg_dm_mr, alloc_dm, free_dm, modify_flow_action_esp, destroy_flow_action,
        create_flow_action_esp, modify_qp_rate_limit, alloc_parent_domain, dealloc_td, alloc_td, modify_cq,
        post_srq_ops, destroy_rwq_ind_table, create_rwq_ind_table, destroy_wq, modify_wq, create_wq,
        query_rt_values, create_cq_ex, priv_ = ["priv"], query_device_ex, ibv_destroy_flow, ABI_placeholder2,
        ibv_create_flow, ABI_placeholder1, open_qp, create_qp_ex, get_srq_num, create_srq_ex, open_xrcd,
        close_xrcd, _ABI_placeholder3, sz, context,
    });
    m.fields
}

#[test]
fn every_mirror_matches_the_headers_of_every_debian_line() {
    let mut report = Vec::new();
    let mut errors = Vec::new();
    for name in SUITES {
        let s = suite(name);
        let (structs, fields, mut e) = compare_suite(&s);
        report.push(format!(
            "{name} ({}): {structs} structs, {fields} fields",
            c_headers::suite_versions(name)
        ));
        // A comparison that saw little compared nothing.
        assert!(
            structs >= 50 && fields >= 450,
            "{name}: only {structs} structs, {fields} fields"
        );
        errors.append(&mut e);
    }
    println!("{}", report.join("\n"));
    assert!(errors.is_empty(), "{} mismatches:\n{}", errors.len(), errors.join("\n"));
}

#[test]
fn the_lines_debian_ships_are_the_ones_expected() {
    // The releases behind the comparison: if a suite moves to another rdma-core, the layouts
    // the provider selects for it must be looked at again (and this list updated).
    let releases: Vec<u32> = SUITES.iter().map(|name| suite(name).release).collect();
    assert_eq!(releases, [44, 56, 65]);
    let contexts: Vec<ContextLayout> = releases
        .iter()
        .map(|&r| {
            KNOWN_PABIS
                .iter()
                .find_map(|&p| Layout::select(p, r).ok())
                .unwrap()
                .context
        })
        .collect();
    assert_eq!(contexts, [ContextLayout::V36, ContextLayout::V36, ContextLayout::V65]);
}

/// `struct verbs_context_ops` of rdma-core v65.0 (`libibverbs/driver.h`; sid's
/// libibverbs-dev 65.0-1.1 has the same `verbs.h` as that tree), in declaration order.
const OPS_V65: [&str; 93] = [
    "advise_mr",
    "alloc_buf",
    "alloc_dm",
    "alloc_dmah",
    "alloc_mw",
    "alloc_null_mr",
    "alloc_parent_domain",
    "alloc_pd",
    "alloc_td",
    "async_event",
    "attach_counters_point_flow",
    "attach_mcast",
    "bind_mw",
    "close_xrcd",
    "cq_event",
    "create_ah",
    "create_comp_cntr",
    "create_counters",
    "create_cq",
    "create_cq_ex",
    "create_flow",
    "create_flow_action_esp",
    "create_qp",
    "create_qp_ex",
    "create_rwq_ind_table",
    "create_srq",
    "create_srq_ex",
    "create_wq",
    "dealloc_dmah",
    "dealloc_mw",
    "dealloc_pd",
    "dealloc_td",
    "dereg_mr",
    "destroy_ah",
    "destroy_comp_cntr",
    "destroy_counters",
    "destroy_cq",
    "destroy_flow",
    "destroy_flow_action",
    "destroy_qp",
    "destroy_rwq_ind_table",
    "destroy_srq",
    "destroy_wq",
    "detach_mcast",
    "dm_export_dmabuf_fd",
    "free_buf",
    "free_context",
    "free_dm",
    "get_srq_num",
    "import_dm",
    "import_mr",
    "import_pd",
    "inc_comp_cntr",
    "inc_err_comp_cntr",
    "modify_cq",
    "modify_flow_action_esp",
    "modify_qp",
    "modify_qp_rate_limit",
    "modify_srq",
    "modify_wq",
    "open_qp",
    "open_xrcd",
    "poll_cq",
    "post_recv",
    "post_send",
    "post_srq_ops",
    "post_srq_recv",
    "qp_attach_comp_cntr",
    "query_comp_cntr_caps",
    "query_device_ex",
    "query_ece",
    "query_port",
    "query_port_speed",
    "query_qp",
    "query_qp_data_in_order",
    "query_rt_values",
    "query_srq",
    "read_comp_cntr",
    "read_counters",
    "read_err_comp_cntr",
    "reg_dm_mr",
    "reg_dmabuf_mr",
    "reg_mr",
    "reg_mr_ex",
    "req_notify_cq",
    "rereg_mr",
    "resize_cq",
    "set_comp_cntr",
    "set_ece",
    "set_err_comp_cntr",
    "unimport_dm",
    "unimport_mr",
    "unimport_pd",
];

/// The driver.h facts, recorded from rdma-core's tags (driver.h is in no Debian package), with
/// the sizes and offsets clang gave for the struct bodies of each tag compiled against that
/// line's Debian `verbs.h`.
#[test]
fn driver_h_facts() {
    // verbs_context_ops: which of v65's ops each tag lacks.
    let comp_cntr: Vec<&str> = OPS_V65.iter().copied().filter(|n| n.contains("comp_cntr")).collect();
    assert_eq!(comp_cntr.len(), 10, "v65's completion-counter ops");
    let v64: Vec<&str> = OPS_V65.iter().copied().filter(|n| !comp_cntr.contains(n)).collect();
    let v62: Vec<&str> = v64
        .iter()
        .copied()
        .filter(|n| !["alloc_buf", "free_buf"].contains(n))
        .collect();
    let v59: Vec<&str> = v62
        .iter()
        .copied()
        .filter(|n| !["dm_export_dmabuf_fd", "query_port_speed"].contains(n))
        .collect();
    let v36: Vec<&str> = v59
        .iter()
        .copied()
        .filter(|n| !["alloc_dmah", "dealloc_dmah", "reg_mr_ex"].contains(n))
        .collect();
    // (tag, PABI, release, ops)
    let tags: [(&str, u32, u32, &[&str]); 8] = [
        ("v36.0", 34, 36, &v36),
        ("v56.0", 34, 56, &v36),
        ("v57.0", 57, 57, &v36),
        ("v59.0", 59, 59, &v59),
        ("v61.0", 59, 61, &v59),
        ("v62.0", 59, 62, &v62),
        ("v64.0", 64, 64, &v64),
        ("v65.0", 65, 65, &OPS_V65),
    ];
    for (tag, pabi, release, ops) in tags {
        let layout = Layout::select(pabi, release).unwrap_or_else(|e| panic!("{tag}: {e}"));
        assert_eq!(layout.context.op_names(), ops, "verbs_context_ops of {tag}");
    }
    assert_eq!((v36.len(), v59.len(), v62.len(), v64.len()), (76, 79, 81, 83));
    // The typed v36 table is v36.0..v58.2's struct field for field.
    assert_eq!(private_context::verbs_context_ops::NAMES, v36.as_slice());

    // The numbers below are x86_64's. verbs_qp begins with ibv_qp_ex, which holds a
    // pthread_mutex_t: on aarch64 (48 bytes, not 40) all that follows it is MUTEX_GROWTH (8)
    // further (ibv_qp_ex is compared with clang's aarch64 layout above). The other driver.h
    // structs (verbs_srq, verbs_device, ...) carry their offsets in their c_struct!
    // declarations, asserted at compile time.
    let m = MUTEX_GROWTH;
    // verbs_qp (v44.0: 352/360/368; v45.0 to v65.0: 360/368/376): comp_mask, xrcd, size.
    for (release, comp_mask, xrcd, size) in [(44, 352, 360, 368), (56, 360, 368, 376), (65, 360, 368, 376)] {
        let l = QpExLayout::for_release(release);
        assert_eq!(
            (l.comp_mask_offset(), l.xrcd_offset(), l.xrcd_offset() + 8),
            (comp_mask + m, xrcd + m, size + m)
        );
        assert!(size <= size_of::<VerbsQp>());
    }
}
