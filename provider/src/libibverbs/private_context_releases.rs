//! The context layouts of every rdma-core line, as what each adds to the
//! v36..v58 layout of [`private_context`](super::private_context), and the ops table for the running one.
//!
//! Checked against `libibverbs/driver.h` and `verbs.h` of each tag:
//! - `struct verbs_context_ops` is kept alphabetical (C `strcmp` order) and
//!   only ever gains ops: v59.0 `alloc_dmah`, `dealloc_dmah`, `reg_mr_ex`;
//!   v62.0 `dm_export_dmabuf_fd`, `query_port_speed` (no PABI bump: 59 serves
//!   v59..v63 with two layouts); v64.0 `alloc_buf`, `free_buf`; v65.0 (PABI
//!   65) the ten completion-counter ops.
//! - `struct verbs_context` grows downwards: each new private op is pushed in
//!   front of the fields v36 has, so only the prefix before `ibv_context`
//!   changes: v59 3 pointers, v62 4, v64 and v65 6.
//! - Nothing else the provider mirrors changed between v36 and v65
//!   (`verbs_device_ops`, `verbs_device`, `verbs_sysfs_dev`, `verbs_qp`,
//!   `verbs_mr`, `verbs_srq`, the public structs; `ibv_qp_ex` last grew in
//!   v45), nor the prototypes of the four private functions we call.
//!
//! Every slot is a function pointer, so a name list is the whole layout: op
//! `i` sits at `8 * i`. The table libibverbs copies from (`verbs_set_ops`
//! reads it by its own field order and is given no size) is built once per
//! process from our typed v36 table, op by op, by name.

#![forbid(unsafe_code)]

use core::mem::size_of;
use std::sync::OnceLock;

use super::device_context::opaque_fn;
use super::private_context::{verbs_context, verbs_context_ops};

/// The context-level layout family a library uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContextLayout {
    /// rdma-core v36..v58 (PABI 34 from v36, PABI 57): [`private_context`](super::private_context) itself.
    V36,
    /// v59..v61 (PABI 59).
    V59,
    /// v62..v63 (still PABI 59).
    V62,
    /// v64 (PABI 64).
    V64,
    /// v65 (PABI 65).
    V65,
}

/// The ops the layouts after v36 add, in the order the lines added them: v59 the first three,
/// v62 two more, v64 two more, v65 the ten completion-counter ops.
const OPS_ADDED: [&str; 17] = [
    "alloc_dmah",
    "dealloc_dmah",
    "reg_mr_ex",
    "dm_export_dmabuf_fd",
    "query_port_speed",
    "alloc_buf",
    "free_buf",
    "create_comp_cntr",
    "destroy_comp_cntr",
    "inc_comp_cntr",
    "inc_err_comp_cntr",
    "qp_attach_comp_cntr",
    "query_comp_cntr_caps",
    "read_comp_cntr",
    "read_err_comp_cntr",
    "set_comp_cntr",
    "set_err_comp_cntr",
];

/// Every layout, oldest first.
pub const ALL: [ContextLayout; 5] = [
    ContextLayout::V36,
    ContextLayout::V59,
    ContextLayout::V62,
    ContextLayout::V64,
    ContextLayout::V65,
];

impl ContextLayout {
    /// The ops this layout's `verbs_context_ops` has beyond v36's: a prefix of [`OPS_ADDED`],
    /// as each line only ever gains ops.
    fn ops_added(self) -> &'static [&'static str] {
        let count = match self {
            ContextLayout::V36 => 0,
            ContextLayout::V59 => 3,
            ContextLayout::V62 => 5,
            ContextLayout::V64 => 7,
            ContextLayout::V65 => OPS_ADDED.len(),
        };
        &OPS_ADDED[..count]
    }

    /// `struct verbs_context_ops` of this layout: its op names in declaration order.
    pub fn op_names(self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = verbs_context_ops::NAMES.to_vec();
        names.extend_from_slice(self.ops_added());
        // Byte order, as C's strcmp and rdma-core's own sorting.
        names.sort_unstable();
        names
    }

    /// The function pointers `struct verbs_context` has in front of v36's
    /// first field (`query_port`), in declaration order.
    pub fn verbs_context_head(self) -> &'static [&'static str] {
        match self {
            ContextLayout::V36 => &[],
            ContextLayout::V59 => &["reg_mr_ex", "dealloc_dmah", "alloc_dmah"],
            ContextLayout::V62 => &["dm_export_dmabuf_fd", "reg_mr_ex", "dealloc_dmah", "alloc_dmah"],
            ContextLayout::V64 | ContextLayout::V65 => &[
                "free_buf",
                "alloc_buf",
                "dm_export_dmabuf_fd",
                "reg_mr_ex",
                "dealloc_dmah",
                "alloc_dmah",
            ],
        }
    }

    /// `sizeof(struct verbs_context)`.
    pub fn verbs_context_size(self) -> usize {
        self.verbs_context_head().len() * size_of::<opaque_fn>() + size_of::<verbs_context>()
    }

    /// Builds this layout's ops table from `slots` (a v36 table as its slots,
    /// `runtime::v36_slots`), by op name.
    /// Ops v36 does not have stay NULL: we implement none of them.
    pub fn ops_table(self, slots: &[opaque_fn; 76]) -> Box<[opaque_fn]> {
        self.op_names()
            .iter()
            .map(|name| {
                verbs_context_ops::NAMES
                    .iter()
                    .position(|n| n == name)
                    .and_then(|i| slots[i])
            })
            .collect()
    }
}

/// The tables built so far, one per layout (a process has one libibverbs,
/// so in practice one), kept for the life of the process: libibverbs copies
/// from them at every `alloc_context`.
pub fn ops_table_for(layout: ContextLayout, ours: &'static [opaque_fn; 76]) -> *const opaque_fn {
    static TABLES: [OnceLock<Box<[opaque_fn]>>; 5] = [const { OnceLock::new() }; 5];
    let index = ALL.iter().position(|&l| l == layout).expect("ALL lists every layout");
    TABLES[index].get_or_init(|| layout.ops_table(ours)).as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::offset_of;

    #[test]
    fn op_counts_per_layout() {
        let counts: Vec<usize> = ALL.iter().map(|l| l.op_names().len()).collect();
        assert_eq!(counts, [76, 79, 81, 83, 93]);
    }

    #[test]
    fn every_layout_only_adds_ops_and_has_no_duplicates() {
        for pair in ALL.windows(2) {
            let (old, new) = (pair[0].op_names(), pair[1].op_names());
            assert!(
                old.iter().all(|n| new.contains(n)),
                "{:?} drops ops of {:?}",
                pair[1],
                pair[0]
            );
        }
        for layout in ALL {
            let mut names = layout.op_names();
            names.dedup();
            assert_eq!(names.len(), layout.op_names().len(), "{layout:?}");
        }
    }

    #[test]
    fn v36_names_are_the_struct_in_order() {
        let names = ContextLayout::V36.op_names();
        assert_eq!(names, verbs_context_ops::NAMES);
        let at = |name: &str| names.iter().position(|n| *n == name).unwrap() * 8;
        assert_eq!(at("free_context"), offset_of!(verbs_context_ops, free_context));
        assert_eq!(at("query_device_ex"), offset_of!(verbs_context_ops, query_device_ex));
        assert_eq!(at("unimport_pd"), offset_of!(verbs_context_ops, unimport_pd));
    }

    #[test]
    fn newer_tables_carry_our_ops_at_their_own_slots() {
        let mut ours = verbs_context_ops::EMPTY;
        extern "C" fn marker(
            _: *mut super::super::cq::ibv_cq,
            _: core::ffi::c_int,
            _: *mut super::super::cq::ibv_wc,
        ) -> core::ffi::c_int {
            0
        }
        ours.poll_cq = Some(marker);
        for layout in ALL {
            let table = layout.ops_table(super::super::runtime::v36_slots(&ours));
            let names = layout.op_names();
            assert_eq!(table.len(), names.len());
            let set: Vec<&str> = names
                .iter()
                .zip(table.iter())
                .filter(|(_, slot)| slot.is_some())
                .map(|(n, _)| *n)
                .collect();
            assert_eq!(set, ["poll_cq"], "{layout:?}");
        }
        // poll_cq moves: 53 in v36 (0-based), then behind alloc_dmah,
        // dealloc_dmah and (v64) alloc_buf, dm_export_dmabuf_fd, free_buf and
        // (v65) create_comp_cntr, destroy_comp_cntr, inc_*comp_cntr.
        let slot = |l: ContextLayout| l.op_names().iter().position(|n| *n == "poll_cq").unwrap();
        assert_eq!(ALL.map(slot), [53, 55, 56, 58, 62], "poll_cq's slot per layout");
    }

    #[test]
    fn verbs_context_grows_in_front() {
        // x86_64's sizes; the ibv_context at the end is MUTEX_GROWTH larger on aarch64.
        let sizes = ALL.map(ContextLayout::verbs_context_size);
        assert_eq!(sizes, [648, 672, 680, 696, 696].map(|s| s + super::super::MUTEX_GROWTH));
    }
}
