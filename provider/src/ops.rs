//! The verbs tables: which of our functions libibverbs calls for each op of
//! a context (`alloc_context`, in `entry::context`, installs them). The one
//! module that knows every verbs module; none of them imports it.

#![forbid(unsafe_code)]

use core::ffi::c_void;

use crate::entry::{self, cq, objects};
use crate::libibverbs::layout::Layout;
use crate::libibverbs::private_context;
use crate::libibverbs::private_context_releases::{ops_table_for, ContextLayout};
use crate::libibverbs::runtime;

/// The ops we implement for rdma-core v36..v58, in the v36..v58 table; the
/// running library's own table is built from ours by op name
/// (`private_context_releases`). Everything else stays NULL, so libibverbs keeps its
/// dummy op for it (EOPNOTSUPP).
const OPS_BASE: private_context::verbs_context_ops = private_context::verbs_context_ops {
    free_context: Some(objects::free_context),
    query_device_ex: Some(objects::query_device_ex),
    query_port: Some(objects::query_port),
    create_cq: Some(cq::create_cq),
    create_cq_ex: Some(cq::create_cq_ex),
    destroy_cq: Some(cq::destroy_cq),
    poll_cq: Some(cq::poll_cq),
    req_notify_cq: Some(cq::req_notify_cq),
    resize_cq: Some(cq::resize_cq),
    alloc_pd: Some(objects::alloc_pd),
    dealloc_pd: Some(objects::dealloc_pd),
    alloc_td: Some(objects::alloc_td),
    dealloc_td: Some(objects::dealloc_td),
    alloc_parent_domain: Some(objects::alloc_parent_domain),
    reg_mr: Some(objects::reg_mr),
    rereg_mr: Some(objects::rereg_mr),
    dereg_mr: Some(objects::dereg_mr),
    alloc_mw: Some(objects::alloc_mw),
    dealloc_mw: Some(objects::dealloc_mw),
    create_ah: Some(objects::create_ah),
    destroy_ah: Some(objects::destroy_ah),
    attach_mcast: Some(objects::attach_mcast),
    detach_mcast: Some(objects::detach_mcast),
    create_qp: Some(entry::qp::create_qp),
    create_qp_ex: Some(entry::qp::create_qp_ex),
    query_qp: Some(entry::qp::query_qp),
    modify_qp: Some(entry::qp::modify_qp),
    destroy_qp: Some(entry::qp::destroy_qp),
    post_send: Some(entry::qp::post_send),
    post_recv: Some(entry::qp::post_recv),
    bind_mw: Some(entry::qp::bind_mw),
    create_srq: Some(entry::srq::create_srq),
    create_srq_ex: Some(entry::srq::create_srq_ex),
    modify_srq: Some(entry::srq::modify_srq),
    query_srq: Some(entry::srq::query_srq),
    destroy_srq: Some(entry::srq::destroy_srq),
    post_srq_recv: Some(entry::srq::post_srq_recv),
    ..private_context::verbs_context_ops::EMPTY
};

static OPS_V36: private_context::verbs_context_ops = OPS_BASE;

/// From v59.0 the stock rxe provider also offers `advise_mr` (rdma-core
/// 5e49611e0, "rxe: Enable ibv_advise_mr(3)"); the slot exists since long
/// before v36, so on v36..v58 we leave it NULL as stock does.
static OPS_V59: private_context::verbs_context_ops = private_context::verbs_context_ops {
    advise_mr: Some(objects::advise_mr),
    ..OPS_BASE
};

/// Our ops for a library of this layout family. [`ContextLayout::V36`] is
/// exactly v36..v58, the releases whose stock provider has no `advise_mr`,
/// and the tables are built once per family, so the choice is keyed on it.
fn ours_for(context: ContextLayout) -> &'static private_context::verbs_context_ops {
    match context {
        ContextLayout::V36 => &OPS_V36,
        ContextLayout::V59 | ContextLayout::V62 | ContextLayout::V64 | ContextLayout::V65 => &OPS_V59,
    }
}

/// The ops table for a library of `layout`, as `verbs_set_ops` takes it.
pub(crate) fn ops_table(layout: Layout) -> *const c_void {
    ops_table_for(layout.context, runtime::v36_slots(ours_for(layout.context))).cast()
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    /// The table's slots as addresses (0 for NULL).
    fn addresses(t: &private_context::verbs_context_ops) -> [usize; 76] {
        runtime::v36_slots(t).map(|slot| slot.map_or(0, |f| f as usize))
    }

    #[test]
    fn ops_table_sets_only_what_is_implemented() {
        let t = &OPS_V36;
        assert!(t.free_context.is_some() && t.query_device_ex.is_some() && t.query_port.is_some());
        let slots = addresses(t);
        use private_context::verbs_context_ops as O;
        let mut expected: Vec<usize> = [
            offset_of!(O, free_context),
            offset_of!(O, query_device_ex),
            offset_of!(O, query_port),
            offset_of!(O, create_cq),
            offset_of!(O, create_cq_ex),
            offset_of!(O, destroy_cq),
            offset_of!(O, poll_cq),
            offset_of!(O, req_notify_cq),
            offset_of!(O, resize_cq),
            offset_of!(O, alloc_pd),
            offset_of!(O, dealloc_pd),
            offset_of!(O, alloc_td),
            offset_of!(O, dealloc_td),
            offset_of!(O, alloc_parent_domain),
            offset_of!(O, reg_mr),
            offset_of!(O, rereg_mr),
            offset_of!(O, dereg_mr),
            offset_of!(O, alloc_mw),
            offset_of!(O, dealloc_mw),
            offset_of!(O, create_ah),
            offset_of!(O, destroy_ah),
            offset_of!(O, attach_mcast),
            offset_of!(O, detach_mcast),
            offset_of!(O, create_qp),
            offset_of!(O, create_qp_ex),
            offset_of!(O, query_qp),
            offset_of!(O, modify_qp),
            offset_of!(O, destroy_qp),
            offset_of!(O, post_send),
            offset_of!(O, post_recv),
            offset_of!(O, bind_mw),
            offset_of!(O, create_srq),
            offset_of!(O, create_srq_ex),
            offset_of!(O, modify_srq),
            offset_of!(O, query_srq),
            offset_of!(O, destroy_srq),
            offset_of!(O, post_srq_recv),
        ]
        .iter()
        .map(|off| off / size_of::<usize>())
        .collect();
        expected.sort_unstable();
        let set: Vec<usize> = (0..76).filter(|&i| slots[i] != 0).collect();
        assert_eq!(set, expected);
        // Spot checks against the alphabetical order: alloc_pd (6th),
        // free_context (40th), query_port (61st).
        assert!(set.contains(&5) && set.contains(&39) && set.contains(&60));
    }

    #[test]
    fn advise_mr_is_offered_from_v59_as_stock_offers_it() {
        assert!(OPS_V36.advise_mr.is_none());
        assert!(OPS_V59.advise_mr.is_some());
        // Otherwise the two tables are the same.
        let (v36, v59) = (addresses(&OPS_V36), addresses(&OPS_V59));
        let differ: Vec<usize> = (0..76).filter(|&i| v36[i] != v59[i]).collect();
        assert_eq!(differ, [offset_of!(private_context::verbs_context_ops, advise_mr) / 8]);
        for layout in crate::libibverbs::private_context_releases::ALL {
            let table = layout.ops_table(runtime::v36_slots(ours_for(layout)));
            let at = layout.op_names().iter().position(|n| *n == "advise_mr").unwrap();
            assert_eq!(table[at].is_some(), layout != ContextLayout::V36, "{layout:?}");
        }
    }
}
