//! ND2_SGE and what posting to a QP and to an SRQ shares: the caller's SGE array as verbs SGEs,
//! and verbs' post return as an HRESULT.
//!
//! ND2_SGE { Buffer, BufferLength, MemoryRegionToken } has the layout of `struct ibv_sge`
//! { addr, length, lkey } on LP64, so the caller's array is handed to verbs as it is. SGEs are
//! not checked against their region here: the device checks them, and one outside its region
//! completes with ND_ACCESS_VIOLATION (IBV_WC_LOC_PROT_ERR), as on Windows.

use std::ffi::c_void;

use rdma_mummy_sys as ffi;

use super::{code, HResult, ND_INVALID_PARAMETER, ND_SUCCESS};

/// ND2_SGE.
#[repr(C)]
pub struct Nd2Sge {
    pub buffer: *mut c_void,
    pub buffer_length: u32,
    pub memory_region_token: u32,
}

const _: () = assert!(std::mem::size_of::<Nd2Sge>() == std::mem::size_of::<ffi::ibv_sge>());
const _: () = assert!(std::mem::offset_of!(Nd2Sge, buffer) == std::mem::offset_of!(ffi::ibv_sge, addr));
const _: () = assert!(std::mem::offset_of!(Nd2Sge, buffer_length) == std::mem::offset_of!(ffi::ibv_sge, length));
const _: () = assert!(std::mem::offset_of!(Nd2Sge, memory_region_token) == std::mem::offset_of!(ffi::ibv_sge, lkey));

/// The caller's SGE array as verbs SGEs (the same layout, see the module docs): NULL is allowed
/// only with no entries. A shared view: the array is the caller's and const (two threads may post
/// the same one at once, as C allows), and verbs only reads the list its work request points to
/// (`sg_list` is `struct ibv_sge *` for want of a `const` in the C API: the posts take
/// [`sg_list_ptr`] of this).
///
/// # Safety
/// `sge` is NULL or readable for `n` entries for the returned lifetime.
pub(super) unsafe fn sge_list<'a>(sge: *const Nd2Sge, n: u32) -> Result<&'a [ffi::ibv_sge], HResult> {
    match (sge.is_null(), n) {
        (_, 0) => Ok(&[]),
        (true, _) => Err(ND_INVALID_PARAMETER),
        // SAFETY: non-NULL and readable for n entries (the caller's promise); ibv_sge has
        // Nd2Sge's layout (asserted above).
        (false, n) => Ok(unsafe { std::slice::from_raw_parts(sge.cast::<ffi::ibv_sge>(), n as usize) }),
    }
}

/// A work request's `sg_list` for `list`: verbs' posts read it and never write it.
pub(super) fn sg_list_ptr(list: &[ffi::ibv_sge]) -> *mut ffi::ibv_sge {
    list.as_ptr().cast_mut()
}

/// A verbs post's return as the entry's result: 0 is ND_SUCCESS; a positive errno or, for a
/// negative return, errno itself, is that error's code.
pub(super) fn post_result(ret: i32) -> Result<HResult, HResult> {
    match ret {
        0 => Ok(ND_SUCCESS),
        e if e > 0 => Err(code(crate::status::from_errno(e))),
        _ => Err(code(crate::sys::last_error())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two threads turning the same const array into lists at once (as two posts of one array
    /// do) share it: both see the caller's entries, and the array is not changed.
    #[test]
    fn one_const_array_posted_from_two_threads_is_shared_not_borrowed_mutably() {
        let array: [Nd2Sge; 2] = [
            Nd2Sge {
                buffer: 0x1000 as *mut c_void,
                buffer_length: 64,
                memory_region_token: 7,
            },
            Nd2Sge {
                buffer: 0x2000 as *mut c_void,
                buffer_length: 32,
                memory_region_token: 8,
            },
        ];
        let shared = array.as_ptr() as usize;
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(move || {
                    for _ in 0..1000 {
                        // SAFETY: the array lives for the scope, readable for two entries.
                        let list = unsafe { sge_list(shared as *const Nd2Sge, 2) }.unwrap();
                        assert_eq!(sg_list_ptr(list) as usize, shared, "the caller's array, not a copy");
                        assert_eq!(
                            (list[0].addr, list[0].length, list[0].lkey, list[1].lkey),
                            (0x1000, 64, 7, 8)
                        );
                    }
                });
            }
        });
        // SAFETY: NULL with no entries, and with some.
        unsafe {
            assert!(sge_list(std::ptr::null(), 0).unwrap().is_empty());
            assert_eq!(sge_list(std::ptr::null(), 1).err(), Some(ND_INVALID_PARAMETER));
        }
    }
}
