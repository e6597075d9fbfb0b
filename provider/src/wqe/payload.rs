//! The payload area after a send or receive WQE's header: the SGE list, or
//! the inline bytes themselves.

use kernel_abi::rxe_sge;
use zerocopy::IntoBytes;

use crate::libibverbs::qp::*;

use super::limits::SGE_SIZE;

/// Copies the bytes the SGEs point at, back to back, to the start of `out`.
///
/// # Safety
/// Every SGE describes `length` readable bytes at `addr`, and their total
/// fits `out` (both checked or promised by the caller).
pub(super) unsafe fn copy_inline(sges: &[ibv_sge], out: &mut [u8]) {
    let mut at = 0usize;
    for s in sges {
        let len = s.length as usize;
        if len == 0 {
            continue;
        }
        // SAFETY: per the contract the source is readable for len bytes; it
        // is the caller's buffer, never the ring slot we write.
        let src = unsafe { core::slice::from_raw_parts(s.addr as usize as *const u8, len) };
        out[at..at + len].copy_from_slice(src);
        at += len;
    }
}

/// Writes SGEs into a payload area (which the caller sized for them).
/// Always inlined: its few instructions for the one-SGE case are on the
/// data path, and a call costs more than they do (the library's and the
/// test binary's code units would otherwise decide differently).
#[inline(always)]
pub(super) fn write_sges(sges: &[ibv_sge], out: &mut [u8]) {
    let put = |s: &ibv_sge, chunk: &mut [u8]| {
        chunk.copy_from_slice(
            rxe_sge {
                addr: s.addr,
                length: s.length,
                lkey: s.lkey,
            }
            .as_bytes(),
        );
    };
    match (sges, out.get_mut(..SGE_SIZE)) {
        // The common case, without the set-up of the (unrolled) loop.
        ([one], Some(chunk)) => put(one, chunk),
        _ => sges
            .iter()
            .zip(out.chunks_exact_mut(SGE_SIZE))
            .for_each(|(s, chunk)| put(s, chunk)),
    }
}
