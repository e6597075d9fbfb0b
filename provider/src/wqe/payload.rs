//! The payload area after a send or receive WQE's header: the SGE list, or
//! the inline bytes themselves.

#![forbid(unsafe_code)]

use kernel_abi::rxe_sge;
use zerocopy::IntoBytes;

use crate::libibverbs::qp::*;

use super::limits::SGE_SIZE;

/// Writes SGEs into a payload area (which the caller sized for them).
/// Always inlined: its few instructions for the one-SGE case are on the
/// data path, and a call costs more than they do (the library's and the
/// test binary's code units would otherwise decide differently).
#[inline(always)]
pub(crate) fn write_sges(sges: &[ibv_sge], out: &mut [u8]) {
    let put = |s: &ibv_sge, chunk: &mut [u8]| chunk.copy_from_slice(kernel_sge(s).as_bytes());
    match (sges, out.get_mut(..SGE_SIZE)) {
        // The common case, without the set-up of the (unrolled) loop.
        ([one], Some(chunk)) => put(one, chunk),
        _ => sges
            .iter()
            .zip(out.chunks_exact_mut(SGE_SIZE))
            .for_each(|(s, chunk)| put(s, chunk)),
    }
}

#[inline(always)]
pub(crate) fn kernel_sge(s: &ibv_sge) -> rxe_sge {
    rxe_sge {
        addr: s.addr,
        length: s.length,
        lkey: s.lkey,
    }
}
