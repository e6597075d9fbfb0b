//! Protection domains: `alloc_pd` / `dealloc_pd`, as `ibv_cmd_alloc_pd` and
//! `ibv_cmd_dealloc_pd` do them on the write interface.

use core::ffi::c_int;
use core::ptr::NonNull;
use std::os::fd::RawFd;

use kernel_abi::{
    ib_uverbs_alloc_pd, ib_uverbs_alloc_pd_resp, ib_uverbs_dealloc_pd, IB_USER_VERBS_CMD_ALLOC_PD,
    IB_USER_VERBS_CMD_DEALLOC_PD,
};

use crate::command::{self, impl_write_cmd, WriteReq};
use crate::errno::Errno;
use crate::ffi;
use crate::kobject::{self, Creating};
use crate::libibverbs::objects::ibv_pd;
use crate::libibverbs::public::ibv_context;

impl_write_cmd!(ib_uverbs_alloc_pd, IB_USER_VERBS_CMD_ALLOC_PD, ib_uverbs_alloc_pd_resp);

impl WriteReq for ib_uverbs_dealloc_pd {
    const ID: u32 = IB_USER_VERBS_CMD_DEALLOC_PD;
}

/// The command fd of the context an object belongs to.
pub(crate) fn context_fd(ctx: *const ibv_context) -> Result<RawFd, Errno> {
    // SAFETY: every object libibverbs hands our ops points at the live
    // context it was made in (we set the pointer ourselves); null is refused.
    unsafe { ctx.as_ref() }.map(|c| c.cmd_fd).ok_or(libc::EINVAL)
}

/// `alloc_pd`.
pub(crate) unsafe extern "C" fn alloc_pd(context: *mut ibv_context) -> *mut ibv_pd {
    ffi::guard("alloc_pd", core::ptr::null_mut(), || {
        let fd = match context_fd(context) {
            Ok(fd) => fd,
            Err(e) => return ffi::fail_ptr(e),
        };
        let obj = Box::new(ibv_pd { context, handle: 0 });
        let mut pd = Creating::new(obj, "PD", fd, dealloc_kernel_pd);
        match command::write_cmd(
            fd,
            ib_uverbs_alloc_pd {
                response: 0,
                driver_data: [],
            },
        ) {
            Ok(resp) => {
                pd.created(resp.pd_handle);
                pd.get_mut().handle = resp.pd_handle;
                pd.finish().as_ptr()
            }
            Err(e) => ffi::fail_ptr(e),
        }
    })
}

/// `dealloc_pd`: the PD is freed only when the kernel let it go.
pub(crate) unsafe extern "C" fn dealloc_pd(pd: *mut ibv_pd) -> c_int {
    ffi::guard("dealloc_pd", libc::EIO, || {
        // SAFETY: libibverbs passes a PD our alloc_pd made (null refused).
        let (Some(obj), Some(p)) = (NonNull::new(pd), unsafe { pd.as_ref() }) else {
            return ffi::fail_code(libc::EINVAL);
        };
        let (context, handle) = (p.context, p.handle);
        let dealloc = || context_fd(context).and_then(|fd| dealloc_kernel_pd(fd, handle));
        // SAFETY: made by Creating::finish in alloc_pd, not used after success.
        match unsafe { kobject::destroy(obj, dealloc, |()| ()) } {
            Ok(()) => 0,
            Err(e) => ffi::fail_code(e),
        }
    })
}

fn dealloc_kernel_pd(fd: RawFd, handle: u32) -> Result<(), Errno> {
    command::write_req(fd, ib_uverbs_dealloc_pd { pd_handle: handle })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_objects_are_einval_not_crashes() {
        // SAFETY: null is refused before any use.
        assert!(unsafe { alloc_pd(core::ptr::null_mut()) }.is_null());
        assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(libc::EINVAL));
        // SAFETY: as above.
        assert_eq!(unsafe { dealloc_pd(core::ptr::null_mut()) }, libc::EINVAL);
    }
}
