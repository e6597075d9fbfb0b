//! `<rdma/ib_user_verbs.h>`: the write() command channel. A command is an `ib_uverbs_cmd_hdr`
//! (plus an `ib_uverbs_ex_cmd_hdr` for `IB_USER_VERBS_EX_CMD_*`), then the request body; the
//! kernel writes the response to the address in the body's `response` field. Also the
//! completion record (`ib_uverbs_wc`).
//!
//! The header is split by object into one file each, all re-exported here: the constants,
//! the context/device/PD/MR commands with the command headers, CQs, QPs, and SRQs.

use crate::layout::TypeLayout;

mod consts;
mod context;
mod cq;
mod qp;
mod srq;

pub use consts::*;
pub use context::*;
pub use cq::*;
pub use qp::*;
pub use srq::*;

/// The `LAYOUTS` tables of the files above, which [`LAYOUTS`] joins into one.
const PARTS: &[&[TypeLayout]] = &[context::LAYOUTS, cq::LAYOUTS, qp::LAYOUTS, srq::LAYOUTS];

/// The Rust layout of every type declared in this module, for the C layout test.
pub const LAYOUTS: &[TypeLayout] = &join::<{ total_len(PARTS) }>(PARTS);

const fn total_len(parts: &[&[TypeLayout]]) -> usize {
    let mut len = 0;
    let mut p = 0;
    while p < parts.len() {
        len += parts[p].len();
        p += 1;
    }
    len
}

const fn join<const N: usize>(parts: &[&[TypeLayout]]) -> [TypeLayout; N] {
    let mut out = [parts[0][0]; N];
    let mut at = 0;
    let mut p = 0;
    while p < parts.len() {
        let mut i = 0;
        while i < parts[p].len() {
            out[at] = parts[p][i];
            at += 1;
            i += 1;
        }
        p += 1;
    }
    out
}
