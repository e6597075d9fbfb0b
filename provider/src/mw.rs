//! Memory windows: `alloc_mw` / `dealloc_mw` (types 1 and 2; the kernel
//! judges the type, as it does for the stock provider). `bind_mw` posts a
//! BIND_MW work request and arrives with the QP send path. The entries are
//! in `entry::objects`.

#![forbid(unsafe_code)]

use core::ffi::c_int;
use core::ptr::NonNull;
use std::os::fd::RawFd;

use kernel_abi::{ib_uverbs_alloc_mw, ib_uverbs_alloc_mw_resp, ib_uverbs_dealloc_mw, IB_USER_VERBS_CMD_ALLOC_MW};

use crate::command::{self, impl_write_cmd};
use crate::errno::Errno;
use crate::libibverbs::control_objects::ibv_mw;
use crate::lifecycle::{Creating, HandedBox, Kept};
use crate::pd::{self, DomainUse, OnPd};

/// Our window. `ibv_mw` must stay first: libibverbs hands it back to us.
#[repr(C)]
pub(crate) struct RxeMw {
    mw: ibv_mw,
    /// The parent domain it was created on, if any (a user of it).
    domain: DomainUse,
}

impl_write_cmd!(ib_uverbs_alloc_mw, IB_USER_VERBS_CMD_ALLOC_MW, ib_uverbs_alloc_mw_resp);

/// The command's 8-bit `mw_type`: a value that does not fit is refused
/// rather than truncated into a valid type.
fn wire_mw_type(mw_type: c_int) -> Result<u8, Errno> {
    u8::try_from(mw_type).map_err(|_| Errno::EINVAL)
}

/// `alloc_mw`: fills what `ibv_cmd_alloc_mw` fills.
pub(crate) fn alloc_mw(on: Option<OnPd<'_>>, mw_type: c_int) -> Result<NonNull<RxeMw>, Errno> {
    let on = on.ok_or(Errno::EINVAL)?;
    let t = wire_mw_type(mw_type)?;
    let fd = on.fd?;
    let obj = RxeMw {
        mw: ibv_mw {
            context: on.pd.pd.context,
            pd: on.ptr,
            rkey: 0,
            handle: 0,
            r#type: mw_type,
        },
        domain: DomainUse::on(Some(on.pd)),
    };
    let mut mw = Creating::new(obj, "MW", fd, command::destroy_kernel::<ib_uverbs_dealloc_mw>)?;
    let cmd = ib_uverbs_alloc_mw {
        response: 0,
        pd_handle: on.pd.pd.handle,
        mw_type: t,
        reserved: [0; 3],
        driver_data: [],
    };
    let r = command::write_cmd(fd, cmd)?;
    mw.created(r.mw_handle);
    let m = &mut mw.get_mut().mw;
    m.handle = r.mw_handle;
    m.rkey = r.rkey;
    Ok(mw.finish())
}

/// `dealloc_mw` (`fd`: its context's): the window is freed only when the
/// kernel let it go.
pub(crate) fn dealloc_mw(mw: HandedBox<RxeMw>, fd: Result<RawFd, Errno>) -> Result<(), Kept<RxeMw>> {
    let handle = mw.get().mw.handle;
    pd::destroy_object::<ib_uverbs_dealloc_mw, _>(mw, fd, handle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mw_types_go_to_the_kernel_unless_they_would_be_truncated() {
        assert_eq!(wire_mw_type(1), Ok(1));
        assert_eq!(wire_mw_type(2), Ok(2));
        assert_eq!(wire_mw_type(3), Ok(3)); // the kernel refuses it, as for stock
        assert_eq!(wire_mw_type(257), Err(Errno::EINVAL));
        assert_eq!(wire_mw_type(-1), Err(Errno::EINVAL));
    }
}
