//! Protection domains: `alloc_pd` / `dealloc_pd`, as `ibv_cmd_alloc_pd` and
//! `ibv_cmd_dealloc_pd` do them on the write interface; thread domains
//! (`alloc_td` / `dealloc_td`) and parent domains (`alloc_parent_domain`,
//! freed by `dealloc_pd`), which exist only in the provider, as in mlx5.
//!
//! A parent domain is an `ibv_pd` with its protection domain's handle, so
//! every verb that takes a PD (MR, MW, AH, QP, SRQ) works on it unchanged.
//! What it adds: with a thread domain, the QPs, SRQs and CQs created on it
//! take no lock on their data path ([`lock_on`]); the allocator callbacks
//! and `pd_context` are kept, but rxe's queue memory is the kernel's
//! (mmap'd), so there is nothing of ours for them to allocate and they are
//! never called (mlx5 calls them for its queue buffers and doorbells).
//!
//! The entries and the raw access to a PD libibverbs hands us are in
//! `entry::objects`.

#![forbid(unsafe_code)]

use core::ffi::c_void;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, Ordering};
use std::os::fd::RawFd;

use kernel_abi::{
    ib_uverbs_alloc_pd, ib_uverbs_alloc_pd_resp, ib_uverbs_dealloc_mw, ib_uverbs_dealloc_pd, ib_uverbs_dereg_mr,
    ib_uverbs_destroy_ah, IB_USER_VERBS_CMD_ALLOC_PD, IB_USER_VERBS_CMD_DEALLOC_MW, IB_USER_VERBS_CMD_DEALLOC_PD,
    IB_USER_VERBS_CMD_DEREG_MR, IB_USER_VERBS_CMD_DESTROY_AH,
};

use crate::command::{self, impl_destroy_req, impl_write_cmd, DestroyReq};
use crate::errno::Errno;
use crate::libibverbs::control_objects::{
    ibv_parent_domain_init_attr, ibv_pd, ibv_td, ibv_td_init_attr, pd_alloc_fn, pd_free_fn,
    IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS, IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC,
    IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT,
};
use crate::libibverbs::device_context::ibv_context;
use crate::libibverbs::runtime::{CountsHolders, Hold};
use crate::lifecycle::{self, try_box, Creating, HandedBox, Kept};
use crate::lock::QueueLock;

impl_write_cmd!(ib_uverbs_alloc_pd, IB_USER_VERBS_CMD_ALLOC_PD, ib_uverbs_alloc_pd_resp);

// What `destroy_object` sends for a PD and the objects on one.
impl_destroy_req!(ib_uverbs_dealloc_pd, IB_USER_VERBS_CMD_DEALLOC_PD, pd_handle);
impl_destroy_req!(ib_uverbs_dereg_mr, IB_USER_VERBS_CMD_DEREG_MR, mr_handle);
impl_destroy_req!(ib_uverbs_dealloc_mw, IB_USER_VERBS_CMD_DEALLOC_MW, mw_handle);
impl_destroy_req!(ib_uverbs_destroy_ah, IB_USER_VERBS_CMD_DESTROY_AH, ah_handle);

/// Our PD: a protection domain (a kernel object) or a parent domain (ours
/// only). `pd` must stay first: libibverbs hands it back to us.
#[repr(C)]
pub(crate) struct RxePd {
    pub pd: ibv_pd,
    kind: PdKind,
}

enum PdKind {
    /// A kernel PD; `parents` counts the parent domains on it (it cannot be
    /// freed under them: `EBUSY`, as mlx5).
    Protection {
        parents: AtomicU32,
    },
    Parent(ParentDomain),
}

/// What `ibv_alloc_parent_domain` was given, and its users.
struct ParentDomain {
    /// The QPs, SRQs, CQs, MRs, MWs and AHs created on it ([`DomainUse`]):
    /// it cannot be freed under them (`EBUSY`, as mlx5), since libibverbs
    /// and the application keep pointing at it (`qp->pd`, `mr->pd`, ...).
    users: AtomicU32,
    /// Its protection domain and thread domain, which cannot be freed under it.
    #[allow(dead_code)] // held, for its count
    protection: Hold<RxePd>,
    td: Option<Hold<RxeTd>>,
    #[allow(dead_code)] // kept, never called: see the module's comment
    alloc: Option<pd_alloc_fn>,
    #[allow(dead_code)]
    free: Option<pd_free_fn>,
    #[allow(dead_code)]
    pd_context: *mut c_void,
}

impl RxePd {
    /// A protection domain's object (before or without the kernel's handle).
    pub(crate) fn protection(context: *mut ibv_context, handle: u32) -> RxePd {
        RxePd {
            pd: ibv_pd { context, handle },
            kind: PdKind::Protection {
                parents: AtomicU32::new(0),
            },
        }
    }

    /// Whether this is a parent domain.
    pub(crate) fn is_parent(&self) -> bool {
        matches!(self.kind, PdKind::Parent(_))
    }
}

/// A protection domain counts the parent domains on it; a parent domain,
/// the objects created on it.
impl CountsHolders for RxePd {
    fn holders(&self) -> &AtomicU32 {
        match &self.kind {
            PdKind::Protection { parents } => parents,
            PdKind::Parent(parent) => &parent.users,
        }
    }
}

/// Our thread domain: only a promise, so only a count of the parent domains
/// that use it (it cannot be freed under them: `EBUSY`).
#[repr(C)]
pub(crate) struct RxeTd {
    pub td: ibv_td,
    parents: AtomicU32,
}

impl CountsHolders for RxeTd {
    fn holders(&self) -> &AtomicU32 {
        &self.parents
    }
}

/// The PD a verb is given, as its entry reads it: the pointer libibverbs
/// passed (objects keep it as their `pd`), our PD behind it, and the command
/// fd of its context.
pub(crate) struct OnPd<'a> {
    pub ptr: *mut ibv_pd,
    pub pd: &'a RxePd,
    pub fd: Result<RawFd, Errno>,
}

/// The lock for a QP, SRQ or CQ created on `pd` (none given: a lock): none
/// when `pd` is a parent domain with a thread domain.
pub(crate) fn lock_on(pd: Option<&RxePd>) -> QueueLock {
    match pd {
        Some(RxePd {
            kind: PdKind::Parent(ParentDomain { td: Some(_), .. }),
            ..
        }) => QueueLock::unlocked(),
        _ => QueueLock::new(),
    }
}

/// An object's hold on the parent domain it was created on (none
/// for a plain PD), released when the object is dropped; an object leaked
/// because the kernel may still use it keeps its hold.
pub(crate) struct DomainUse(#[allow(dead_code)] Option<Hold<RxePd>>);

impl DomainUse {
    /// No parent domain.
    pub(crate) const fn none() -> DomainUse {
        DomainUse(None)
    }

    /// Counts a user of `pd` when it is a parent domain.
    pub(crate) fn on(pd: Option<&RxePd>) -> DomainUse {
        DomainUse(pd.filter(|p| p.is_parent()).map(Hold::new))
    }
}

/// `alloc_pd` on the context of `fd` (`context`, the object's back pointer).
pub(crate) fn alloc_pd(context: *mut ibv_context, fd: Result<RawFd, Errno>) -> Result<NonNull<RxePd>, Errno> {
    let fd = fd?;
    let mut pd = Creating::new(
        RxePd::protection(context, 0),
        "PD",
        fd,
        command::destroy_kernel::<ib_uverbs_dealloc_pd>,
    )?;
    let resp = command::write_cmd(
        fd,
        ib_uverbs_alloc_pd {
            response: 0,
            driver_data: [],
        },
    )?;
    pd.created(resp.pd_handle);
    pd.get_mut().pd.handle = resp.pd_handle;
    Ok(pd.finish())
}

/// `dealloc_pd`, with `fd` the command fd of the PD's context: a PD is
/// freed only when the kernel let it go; a parent domain is ours alone.
pub(crate) fn dealloc_pd(pd: HandedBox<RxePd>, fd: Result<RawFd, Errno>) -> Result<(), Kept<RxePd>> {
    let p = pd.get();
    let busy = match &p.kind {
        PdKind::Parent(parent) => parent.users.load(Ordering::Acquire) != 0,
        PdKind::Protection { parents } => parents.load(Ordering::Acquire) != 0,
    };
    if busy {
        return Err((Errno::EBUSY, pd));
    }
    if p.is_parent() {
        // Its holds on the PD and the TD go with it.
        drop(pd);
        return Ok(());
    }
    let handle = p.pd.handle;
    destroy_object::<ib_uverbs_dealloc_pd, _>(pd, fd, handle)
}

/// The end of a PD or of an object on one (MR, MW, AH): freed only when the
/// kernel let object `handle` go (command `C`, on `fd`: its context's).
pub(crate) fn destroy_object<C: DestroyReq, T>(
    obj: HandedBox<T>,
    fd: Result<RawFd, Errno>,
    handle: u32,
) -> Result<(), Kept<T>> {
    lifecycle::destroy_owned(
        obj,
        || fd.and_then(|fd| command::destroy_kernel::<C>(fd, handle)),
        |()| (),
    )
}

/// `alloc_td`: a thread domain, as mlx5's but without a dedicated doorbell
/// page (rxe's doorbell is a syscall).
pub(crate) fn alloc_td(context: *mut ibv_context, attr: Option<&ibv_td_init_attr>) -> Result<Box<RxeTd>, Errno> {
    let a = attr.ok_or(Errno::EINVAL)?;
    if context.is_null() || a.comp_mask != 0 {
        return Err(Errno::EINVAL);
    }
    try_box(RxeTd {
        td: ibv_td { context },
        parents: AtomicU32::new(0),
    })
}

/// `dealloc_td`: `EBUSY` while a parent domain uses it.
pub(crate) fn dealloc_td(td: HandedBox<RxeTd>) -> Result<(), Kept<RxeTd>> {
    if td.get().parents.load(Ordering::Acquire) != 0 {
        return Err((Errno::EBUSY, td));
    }
    drop(td);
    Ok(())
}

/// `alloc_parent_domain`: checks as libibverbs' `ibv_check_alloc_parent_domain`
/// and mlx5 do (a PD of this context that is not itself a parent domain, a
/// TD of this context or none, known comp_mask bits), then holds the PD and
/// the TD. `protection` and `td` are what `attr.pd` and `attr.td` point at.
pub(crate) fn alloc_parent_domain(
    context: *mut ibv_context,
    attr: Option<&ibv_parent_domain_init_attr>,
    protection: Option<&RxePd>,
    td: Option<&RxeTd>,
) -> Result<Box<RxePd>, Errno> {
    let a = attr.ok_or(Errno::EINVAL)?;
    let protection = protection.ok_or(Errno::EINVAL)?;
    if protection.is_parent()
        || context.is_null()
        || protection.pd.context != context
        || td.is_some_and(|t| t.td.context != context)
        || a.comp_mask
            & !(IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS
                | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT
                | IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC)
            != 0
    {
        return Err(Errno::EINVAL);
    }
    // Checked after the EINVAL cases so those stay as they were: a CC
    // parent domain (rdma-core 65) is a feature we do not have, which
    // pyverbs (test_buf's cc_pd tests) skips on EOPNOTSUPP, as it does
    // with the stock provider (no alloc_parent_domain at all).
    if a.comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    let with_allocators = a.comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS != 0;
    let parent = ParentDomain {
        users: AtomicU32::new(0),
        protection: Hold::new(protection),
        td: td.map(Hold::new),
        alloc: if with_allocators { a.alloc } else { None },
        free: if with_allocators { a.free } else { None },
        pd_context: if a.comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT != 0 {
            a.pd_context
        } else {
            core::ptr::null_mut()
        },
    };
    // As ibv_initialize_parent_domain: the PD's context and handle.
    try_box(RxePd {
        pd: ibv_pd {
            context,
            handle: protection.pd.handle,
        },
        kind: PdKind::Parent(parent),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_and_thread_domains_count_their_users_and_choose_the_lock() {
        let ctx = 0x1000 as *mut ibv_context;
        let pd = HandedBox::new(Box::new(RxePd::protection(ctx, 7)));
        let td = HandedBox::new(alloc_td(ctx, Some(&ibv_td_init_attr { comp_mask: 0 })).unwrap());
        let mut attr = ibv_parent_domain_init_attr {
            pd: pd.as_ptr().cast(),
            td: td.as_ptr().cast(),
            comp_mask: IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT,
            alloc: None,
            free: None,
            pd_context: core::ptr::null_mut(),
        };
        let with = |attr: &ibv_parent_domain_init_attr, ctx, pd: &HandedBox<RxePd>, td: Option<&HandedBox<RxeTd>>| {
            alloc_parent_domain(ctx, Some(attr), Some(pd.get()), td.map(HandedBox::get))
        };
        let parent = HandedBox::new(with(&attr, ctx, &pd, Some(&td)).unwrap());
        assert_eq!((parent.get().pd.context, parent.get().pd.handle), (ctx, 7));
        assert!(parent.get().is_parent() && !pd.get().is_parent());
        assert!(!lock_on(Some(parent.get())).locks());
        assert!(lock_on(Some(pd.get())).locks());
        assert!(lock_on(None).locks());
        // A parent of a parent, a foreign context, unknown bits: EINVAL.
        assert_eq!(with(&attr, ctx, &parent, Some(&td)).err(), Some(Errno::EINVAL));
        assert_eq!(
            with(&attr, 0x2000 as *mut ibv_context, &pd, Some(&td)).err(),
            Some(Errno::EINVAL)
        );
        attr.comp_mask = 1 << 5;
        assert_eq!(with(&attr, ctx, &pd, Some(&td)).err(), Some(Errno::EINVAL));
        // A CC parent domain (rdma-core 65): not supported, as with stock.
        attr.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC;
        assert_eq!(with(&attr, ctx, &pd, Some(&td)).err(), Some(Errno::EOPNOTSUPP));
        // Without a TD: locks.
        attr.comp_mask = 0;
        let locked_parent = HandedBox::new(with(&attr, ctx, &pd, None).unwrap());
        assert!(lock_on(Some(locked_parent.get())).locks());
        // In use: EBUSY, before anything reaches the kernel.
        let (e, td) = dealloc_td(td).unwrap_err();
        assert_eq!(e, Errno::EBUSY);
        let (e, pd) = dealloc_pd(pd, Err(Errno::EBADF)).unwrap_err();
        assert_eq!(e, Errno::EBUSY);
        // An object on the parent domain holds it until dropped;
        // one on the plain PD holds nothing.
        let (on_parent, on_plain) = (DomainUse::on(Some(parent.get())), DomainUse::on(Some(pd.get())));
        let (e, parent) = dealloc_pd(parent, Err(Errno::EBADF)).unwrap_err();
        assert_eq!(e, Errno::EBUSY);
        drop((on_parent, on_plain));
        assert!(dealloc_pd(parent, Err(Errno::EBADF)).is_ok());
        assert!(dealloc_pd(locked_parent, Err(Errno::EBADF)).is_ok());
        assert!(dealloc_td(td).is_ok());
        assert_eq!(
            alloc_td(ctx, Some(&ibv_td_init_attr { comp_mask: 1 })).err(),
            Some(Errno::EINVAL)
        );
        assert_eq!(alloc_td(ctx, None).err(), Some(Errno::EINVAL));
        // The PD is not a parent domain's any more: the kernel's turn (no fd here).
        assert_eq!(
            dealloc_pd(pd, Err(Errno::EBADF)).err().map(|(e, _)| e),
            Some(Errno::EBADF)
        );
    }
}
