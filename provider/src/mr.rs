//! Memory regions: `reg_mr`, `rereg_mr`, `dereg_mr`, and the probe that tells
//! libibverbs whether the kernel takes the optional access flags.
//!
//! `ibv_reg_mr` clears `IBV_ACCESS_OPTIONAL_RANGE` before calling us unless
//! `verbs_device.core_support` has `IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS`.
//! Stock providers get that bit from the ioctl GET_CONTEXT; our write
//! GET_CONTEXT has no such output, so right after it we ask the kernel with
//! the ioctl `UVERBS_METHOD_QUERY_CONTEXT` (the write interface has no
//! equivalent). A kernel without that method is also one whose `reg_mr`
//! rejects the optional bits with EINVAL, so leaving `core_support` at 0 there
//! is what makes libibverbs strip them: the behaviour of the stock provider.
//!
//! `advise_mr` (`ibv_advise_mr`: ODP prefetch) is the stock rxe provider's
//! since rdma-core v59.0, where it is libibverbs' `ibv_cmd_advise_mr`: the
//! ioctl `UVERBS_METHOD_ADVISE_MR` of `UVERBS_OBJECT_MR` with the PD's
//! handle, the advice, the flags and the SGE list, nothing checked in user
//! space. We send the same call, so the kernel judges the arguments as it
//! does for stock: flags beyond `IB_UVERBS_ADVISE_MR_FLAG_FLUSH`, an empty or
//! misaligned list, `EINVAL`; an advice rxe does not know, or a kernel
//! without ODP, `EOPNOTSUPP`; an lkey not in the PD, `EINVAL`. `ops` offers
//! it only on the releases whose stock provider does.
//!
//! `rereg_mr` issues the kernel's REREG_MR. The stock rxe provider has no
//! rereg op (libibverbs' default fails with EOPNOTSUPP); kernels whose rxe
//! lacks `rereg_user_mr` refuse the command with EOPNOTSUPP too, and newer
//! ones (PD and access changes) do it.
//!
//! The entries are in `entry::objects`.

#![forbid(unsafe_code)]

use core::ffi::{c_int, c_void};
use core::ptr::{self, NonNull};
use std::os::fd::RawFd;

use kernel_abi::{
    ib_uverbs_dereg_mr, ib_uverbs_reg_mr, ib_uverbs_reg_mr_resp, ib_uverbs_rereg_mr, ib_uverbs_rereg_mr_resp,
    IB_USER_VERBS_CMD_REG_MR, IB_USER_VERBS_CMD_REREG_MR, RDMA_DRIVER_RXE, UVERBS_ATTR_ADVISE_MR_ADVICE,
    UVERBS_ATTR_ADVISE_MR_FLAGS, UVERBS_ATTR_ADVISE_MR_PD_HANDLE, UVERBS_ATTR_ADVISE_MR_SGE_LIST,
    UVERBS_ATTR_QUERY_CONTEXT_CORE_SUPPORT, UVERBS_METHOD_ADVISE_MR, UVERBS_METHOD_QUERY_CONTEXT, UVERBS_OBJECT_DEVICE,
    UVERBS_OBJECT_MR,
};
use log::debug;

use crate::command::{self, impl_write_cmd, IoctlCmd};
use crate::errno::Errno;
use crate::libibverbs::control_objects::{ibv_mr, verbs_mr, IBV_MR_TYPE_MR};
use crate::libibverbs::device_context::ibv_context;
use crate::libibverbs::qp::ibv_sge;
use crate::lifecycle::{Creating, HandedBox, Kept};
use crate::pd::{self, DomainUse, OnPd, RxePd};

/// Our MR. `verbs_mr` must stay first: libibverbs hands it back to us.
#[repr(C)]
pub(crate) struct RxeMr {
    vmr: verbs_mr,
    /// The parent domain it is registered on, if any (a user of it).
    domain: DomainUse,
}

impl_write_cmd!(ib_uverbs_reg_mr, IB_USER_VERBS_CMD_REG_MR, ib_uverbs_reg_mr_resp);

impl_write_cmd!(ib_uverbs_rereg_mr, IB_USER_VERBS_CMD_REREG_MR, ib_uverbs_rereg_mr_resp);

/// `IBV_ACCESS_ON_DEMAND`
const IBV_ACCESS_ON_DEMAND: c_int = 0x40;
/// `IBV_REREG_MR_CHANGE_PD`
const IBV_REREG_MR_CHANGE_PD: c_int = 2;

/// The length the kernel is given. With on-demand paging, `SIZE_MAX` and a
/// null address ask for an implicit MR over the whole address space, which
/// the kernel spells `u64::MAX`; `SIZE_MAX` with an address is an error.
pub(crate) fn reg_length(addr: usize, length: usize, access: c_int) -> Result<u64, Errno> {
    if access & IBV_ACCESS_ON_DEMAND != 0 && length == usize::MAX {
        return if addr == 0 { Ok(u64::MAX) } else { Err(Errno::EINVAL) };
    }
    Ok(length as u64)
}

/// The REREG_MR command for these arguments (libibverbs validated `flags`).
/// The new PD is sent only when the PD changes, and must then be given.
pub(crate) fn rereg_cmd(
    mr_handle: u32,
    flags: c_int,
    new_pd_handle: Option<u32>,
    addr: usize,
    length: usize,
    access: c_int,
) -> Result<ib_uverbs_rereg_mr, Errno> {
    let pd_handle = if flags & IBV_REREG_MR_CHANGE_PD != 0 {
        new_pd_handle.ok_or(Errno::EINVAL)?
    } else {
        0
    };
    Ok(ib_uverbs_rereg_mr {
        response: 0,
        mr_handle,
        flags: flags as u32,
        start: addr as u64,
        length: length as u64,
        hca_va: addr as u64,
        pd_handle,
        access_flags: access as u32,
        driver_data: [],
    })
}

/// Asks the kernel for its core support bits, which `alloc_context` stores
/// in the device, where `ibv_reg_mr` looks (see the module comment). `None`
/// on any failure, which leaves the bits at 0: the kernel then predates them.
pub(crate) fn probe_core_support(ctx: &ibv_context) -> Option<u64> {
    let mut core_support: u64 = 0;
    let addr = ptr::from_mut(&mut core_support) as usize as u64;
    let attr = command::attr_out(UVERBS_ATTR_QUERY_CONTEXT_CORE_SUPPORT as u16, addr, 8);
    let result = IoctlCmd::new(
        UVERBS_OBJECT_DEVICE as u16,
        UVERBS_METHOD_QUERY_CONTEXT as u16,
        RDMA_DRIVER_RXE,
        [attr],
    )
    .and_then(|mut cmd| command::ioctl_cmd(ctx.cmd_fd, &mut cmd).map(|()| command::output_valid(&cmd.attrs[0])));
    match result {
        Ok(true) => {
            debug!("kernel core support bits {core_support:#x}");
            return Some(core_support);
        }
        Ok(false) => debug!("QUERY_CONTEXT did not report core support"),
        Err(errno) => debug!("QUERY_CONTEXT failed (errno {errno}): no optional MR access"),
    }
    None
}

/// `reg_mr`: fills what `ibv_cmd_reg_mr` fills.
pub(crate) fn reg_mr(
    on: Option<OnPd<'_>>,
    addr: *mut c_void,
    length: usize,
    hca_va: u64,
    access: c_int,
) -> Result<NonNull<RxeMr>, Errno> {
    let on = on.ok_or(Errno::EINVAL)?;
    let p = &on.pd.pd;
    let cmd = ib_uverbs_reg_mr {
        response: 0,
        start: addr as u64,
        length: reg_length(addr as usize, length, access)?,
        hca_va,
        pd_handle: p.handle,
        access_flags: access as u32,
        driver_data: [],
    };
    let fd = on.fd?;
    let obj = RxeMr {
        vmr: verbs_mr {
            ibv_mr: ibv_mr {
                context: p.context,
                pd: on.ptr,
                addr,
                length,
                handle: 0,
                lkey: 0,
                rkey: 0,
            },
            mr_type: IBV_MR_TYPE_MR,
            access,
        },
        domain: DomainUse::on(Some(on.pd)),
    };
    let mut vmr = Creating::new(obj, "MR", fd, command::destroy_kernel::<ib_uverbs_dereg_mr>)?;
    let resp = command::write_cmd(fd, cmd)?;
    vmr.created(resp.mr_handle);
    let m = &mut vmr.get_mut().vmr.ibv_mr;
    m.handle = resp.mr_handle;
    m.lkey = resp.lkey;
    m.rkey = resp.rkey;
    Ok(vmr.finish())
}

/// `rereg_mr` of `mr` (with the command fd of its context). `access` in the
/// `verbs_mr` stays what it was at registration: `ibv_dereg_mr` decides from
/// it whether to undo the fork protection that `ibv_reg_mr` applied then.
pub(crate) fn rereg_mr(
    mr: Option<(&mut RxeMr, Result<RawFd, Errno>)>,
    flags: c_int,
    new_pd: Option<&RxePd>,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> Result<(), Errno> {
    let (mr, fd) = mr.ok_or(Errno::EINVAL)?;
    let m = &mut mr.vmr;
    let cmd = rereg_cmd(
        m.ibv_mr.handle,
        flags,
        new_pd.map(|p| p.pd.handle),
        addr as usize,
        length,
        access,
    )?;
    let resp = command::write_cmd(fd?, cmd)?;
    m.ibv_mr.lkey = resp.lkey;
    m.ibv_mr.rkey = resp.rkey;
    if let (true, Some(p)) = (flags & IBV_REREG_MR_CHANGE_PD != 0, new_pd) {
        m.ibv_mr.context = p.pd.context;
        // The MR now uses the new PD (a parent domain, perhaps) and not the old.
        mr.domain = DomainUse::on(Some(p));
    }
    Ok(())
}

/// The ADVISE_MR call `ibv_cmd_advise_mr` makes: the attributes in its
/// order, the advice widened to the 8 bytes of a constant, the list by
/// address (`num_sge` elements of 16 bytes).
pub(crate) fn advise_cmd(
    pd_handle: u32,
    advice: u32,
    flags: u32,
    sg_list: *const ibv_sge,
    num_sge: u32,
) -> Result<IoctlCmd<4>, Errno> {
    let attrs = [
        command::attr_in_obj(UVERBS_ATTR_ADVISE_MR_PD_HANDLE as u16, pd_handle),
        command::attr_in_const(UVERBS_ATTR_ADVISE_MR_ADVICE as u16, u64::from(advice)),
        command::attr_in_u32(UVERBS_ATTR_ADVISE_MR_FLAGS as u16, flags),
        command::attr_in_array::<ibv_sge>(UVERBS_ATTR_ADVISE_MR_SGE_LIST as u16, sg_list as usize as u64, num_sge)?,
    ];
    IoctlCmd::new(
        UVERBS_OBJECT_MR as u16,
        UVERBS_METHOD_ADVISE_MR as u16,
        RDMA_DRIVER_RXE,
        attrs,
    )
}

/// `advise_mr`: the list is read by the kernel only (a bad address is its
/// `EFAULT`), never by us.
pub(crate) fn advise_mr(
    on: Option<OnPd<'_>>,
    advice: u32,
    flags: u32,
    sg_list: *const ibv_sge,
    num_sge: u32,
) -> Result<(), Errno> {
    // A parent domain carries its protection domain's handle.
    let on = on.ok_or(Errno::EINVAL)?;
    let mut cmd = advise_cmd(on.pd.pd.handle, advice, flags, sg_list, num_sge)?;
    command::ioctl_cmd(on.fd?, &mut cmd)
}

/// `dereg_mr` (`fd`: its context's): the MR is freed only when the kernel
/// let it go.
pub(crate) fn dereg_mr(mr: HandedBox<RxeMr>, fd: Result<RawFd, Errno>) -> Result<(), Kept<RxeMr>> {
    let handle = mr.get().vmr.ibv_mr.handle;
    pd::destroy_object::<ib_uverbs_dereg_mr, _>(mr, fd, handle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_demand_whole_address_space_is_the_kernels_implicit_mr() {
        assert_eq!(reg_length(0x1000, 4096, 0), Ok(4096));
        assert_eq!(reg_length(0, usize::MAX, IBV_ACCESS_ON_DEMAND), Ok(u64::MAX));
        assert_eq!(
            reg_length(0x1000, usize::MAX, IBV_ACCESS_ON_DEMAND | 1),
            Err(Errno::EINVAL)
        );
        // Without ODP the length goes as given; the kernel judges it.
        assert_eq!(reg_length(0x1000, usize::MAX, 1), Ok(usize::MAX as u64));
    }

    #[test]
    fn rereg_sends_the_new_pd_only_when_the_pd_changes() {
        let c = rereg_cmd(7, 4, Some(9), 0, 0, 1).unwrap(); // CHANGE_ACCESS
        assert_eq!((c.mr_handle, c.flags, c.pd_handle, c.access_flags), (7, 4, 0, 1));
        let c = rereg_cmd(7, IBV_REREG_MR_CHANGE_PD, Some(9), 0, 0, 0).unwrap();
        assert_eq!((c.flags, c.pd_handle), (2, 9));
        assert_eq!(
            rereg_cmd(7, IBV_REREG_MR_CHANGE_PD, None, 0, 0, 0).err(),
            Some(Errno::EINVAL)
        );
        let c = rereg_cmd(7, 1, None, 0x5000, 8192, 0).unwrap(); // CHANGE_TRANSLATION
        assert_eq!((c.start, c.length, c.hca_va), (0x5000, 8192, 0x5000));
    }
}
