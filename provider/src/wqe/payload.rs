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

/// Writes one SGE at the start of a payload area, the data path's common
/// case: no loop, and no length check (the caller's). `ibv_sge` and the
/// kernel's `rxe_sge` are the same 16 bytes, so it is one copy.
///
/// # Safety
/// `out` is at least [`SGE_SIZE`] bytes long.
#[inline(always)]
pub(super) unsafe fn write_one_sge(s: &ibv_sge, out: &mut [u8]) {
    const {
        assert!(size_of::<ibv_sge>() == SGE_SIZE);
        assert!(core::mem::offset_of!(ibv_sge, addr) == core::mem::offset_of!(rxe_sge, addr));
        assert!(core::mem::offset_of!(ibv_sge, length) == core::mem::offset_of!(rxe_sge, length));
        assert!(core::mem::offset_of!(ibv_sge, lkey) == core::mem::offset_of!(rxe_sge, lkey));
    };
    debug_assert!(out.len() >= SGE_SIZE);
    // SAFETY: per the contract the first SGE_SIZE bytes of out are ours to
    // write; s is SGE_SIZE readable bytes with no padding (the assertions:
    // a u64 and two u32s), laid out as rxe_sge is; the two do not overlap
    // (out is a ring slot, s the caller's).
    unsafe { core::ptr::copy_nonoverlapping(core::ptr::from_ref(s).cast::<u8>(), out.as_mut_ptr(), SGE_SIZE) };
}

#[inline(always)]
pub(super) fn kernel_sge(s: &ibv_sge) -> rxe_sge {
    rxe_sge {
        addr: s.addr,
        length: s.length,
        lkey: s.lkey,
    }
}
