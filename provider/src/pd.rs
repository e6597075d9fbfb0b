//! Protection domains: `alloc_pd` / `dealloc_pd`, as `ibv_cmd_alloc_pd` and
//! `ibv_cmd_dealloc_pd` do them on the write interface; thread domains
//! (`alloc_td` / `dealloc_td`) and parent domains (`alloc_parent_domain`,
//! freed by `dealloc_pd`), which exist only in the provider, as in mlx5.
//!
//! A parent domain is an `ibv_pd` with its protection domain's handle, so
//! every verb that takes a PD (MR, MW, AH, QP, SRQ) works on it unchanged.
//! What it adds: with a thread domain, the QPs, SRQs and CQs created on it
//! take no lock on their data path ([`lock_for`]); the allocator callbacks
//! and `pd_context` are kept, but rxe's queue memory is the kernel's
//! (mmap'd), so there is nothing of ours for them to allocate and they are
//! never called (mlx5 calls them for its queue buffers and doorbells).

use core::ffi::{c_int, c_void};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, Ordering};
use std::os::fd::RawFd;

use kernel_abi::{
    ib_uverbs_alloc_pd, ib_uverbs_alloc_pd_resp, ib_uverbs_dealloc_pd, IB_USER_VERBS_CMD_ALLOC_PD,
    IB_USER_VERBS_CMD_DEALLOC_PD,
};

use crate::boundary;
use crate::command::{self, impl_write_cmd, WriteReq};
use crate::errno::Errno;
use crate::libibverbs::control_objects::{
    ibv_parent_domain_init_attr, ibv_pd, ibv_td, ibv_td_init_attr, pd_alloc_fn, pd_free_fn,
    IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS, IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC,
    IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT,
};
use crate::libibverbs::device_context::ibv_context;
use crate::lifecycle::{self, try_box, Creating};
use crate::lock::QueueLock;

impl_write_cmd!(ib_uverbs_alloc_pd, IB_USER_VERBS_CMD_ALLOC_PD, ib_uverbs_alloc_pd_resp);

impl WriteReq for ib_uverbs_dealloc_pd {
    const ID: u32 = IB_USER_VERBS_CMD_DEALLOC_PD;
}

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
    protection: NonNull<RxePd>,
    td: Option<NonNull<RxeTd>>,
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
}

/// Our thread domain: only a promise, so only a count of the parent domains
/// that use it (it cannot be freed under them: `EBUSY`).
#[repr(C)]
pub(crate) struct RxeTd {
    td: ibv_td,
    parents: AtomicU32,
}

/// The lock for a QP, SRQ or CQ created on `pd`: none when `pd` is a parent
/// domain with a thread domain.
///
/// # Safety
/// `pd` is null or a live PD our `alloc_pd`/`alloc_parent_domain` made.
pub(crate) unsafe fn lock_for(pd: *const ibv_pd) -> QueueLock {
    // SAFETY: per the contract; pd is at offset 0 of RxePd.
    match unsafe { pd.cast::<RxePd>().as_ref() } {
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
pub(crate) struct DomainUse(Option<NonNull<RxePd>>);

// SAFETY: only the parent domain's atomic counter is touched through it.
unsafe impl Send for DomainUse {}
// SAFETY: as for Send.
unsafe impl Sync for DomainUse {}

impl DomainUse {
    /// No parent domain.
    pub(crate) const fn none() -> DomainUse {
        DomainUse(None)
    }

    /// Counts a user of `pd` when it is a parent domain.
    ///
    /// # Safety
    /// As for [`lock_for`].
    pub(crate) unsafe fn of(pd: *const ibv_pd) -> DomainUse {
        // SAFETY: per the contract.
        match unsafe { pd.cast::<RxePd>().as_ref() } {
            Some(
                p @ RxePd {
                    kind: PdKind::Parent(parent),
                    ..
                },
            ) => {
                parent.users.fetch_add(1, Ordering::Relaxed);
                DomainUse(Some(NonNull::from(p)))
            }
            _ => DomainUse(None),
        }
    }
}

impl Drop for DomainUse {
    fn drop(&mut self) {
        if let Some(p) = self.0 {
            // SAFETY: a parent domain is not freed while it has users, and
            // this is one.
            if let PdKind::Parent(parent) = unsafe { &p.as_ref().kind } {
                parent.users.fetch_sub(1, Ordering::Release);
            }
        }
    }
}

/// Whether `pd` is a parent domain.
///
/// # Safety
/// As for [`lock_for`].
#[cfg(test)]
pub(crate) unsafe fn is_parent_domain(pd: *const ibv_pd) -> bool {
    // SAFETY: per the contract.
    let pd = unsafe { pd.cast::<RxePd>().as_ref() };
    matches!(
        pd,
        Some(RxePd {
            kind: PdKind::Parent(_),
            ..
        })
    )
}

/// The command fd of the context an object belongs to.
pub(crate) fn context_fd(ctx: *const ibv_context) -> Result<RawFd, Errno> {
    // SAFETY: every object libibverbs hands our ops points at the live
    // context it was made in (we set the pointer ourselves); null is refused.
    unsafe { ctx.as_ref() }.map(|c| c.cmd_fd).ok_or(Errno::EINVAL)
}

/// `alloc_pd`.
pub(crate) unsafe extern "C" fn alloc_pd(context: *mut ibv_context) -> *mut ibv_pd {
    boundary::guard("alloc_pd", core::ptr::null_mut(), || {
        let fd = match context_fd(context) {
            Ok(fd) => fd,
            Err(e) => return boundary::fail_ptr(e),
        };
        let obj = RxePd::protection(context, 0);
        let mut pd = match Creating::new(obj, "PD", fd, dealloc_kernel_pd) {
            Ok(c) => c,
            Err(e) => return boundary::fail_ptr(e),
        };
        match command::write_cmd(
            fd,
            ib_uverbs_alloc_pd {
                response: 0,
                driver_data: [],
            },
        ) {
            Ok(resp) => {
                pd.created(resp.pd_handle);
                pd.get_mut().pd.handle = resp.pd_handle;
                pd.finish().as_ptr().cast::<ibv_pd>()
            }
            Err(e) => boundary::fail_ptr(e),
        }
    })
}

/// `dealloc_pd`: the PD is freed only when the kernel let it go; a parent
/// domain is ours alone.
pub(crate) unsafe extern "C" fn dealloc_pd(pd: *mut ibv_pd) -> c_int {
    boundary::guard("dealloc_pd", Errno::EIO.code(), || {
        // SAFETY: libibverbs passes a PD our alloc_pd or alloc_parent_domain
        // made (null refused).
        let (Some(obj), Some(p)) = (NonNull::new(pd.cast::<RxePd>()), unsafe { pd.cast::<RxePd>().as_ref() }) else {
            return boundary::fail_code(Errno::EINVAL);
        };
        match &p.kind {
            PdKind::Parent(parent) => {
                if parent.users.load(Ordering::Acquire) != 0 {
                    return boundary::fail_code(Errno::EBUSY);
                }
                // SAFETY: a parent domain holds a count on its PD and TD,
                // which therefore are alive.
                unsafe {
                    parent.protection.as_ref().release_parent();
                    if let Some(td) = parent.td {
                        td.as_ref().parents.fetch_sub(1, Ordering::Relaxed);
                    }
                }
                // SAFETY: made by Box in alloc_parent_domain; libibverbs
                // does not use it after this call.
                drop(unsafe { Box::from_raw(obj.as_ptr()) });
                0
            }
            PdKind::Protection { parents } => {
                if parents.load(Ordering::Relaxed) != 0 {
                    return boundary::fail_code(Errno::EBUSY);
                }
                let (context, handle) = (p.pd.context, p.pd.handle);
                let dealloc = || context_fd(context).and_then(|fd| dealloc_kernel_pd(fd, handle));
                // SAFETY: made by Creating::finish in alloc_pd, not used after success.
                match unsafe { lifecycle::destroy(obj, dealloc, |()| ()) } {
                    Ok(()) => 0,
                    Err(e) => boundary::fail_code(e),
                }
            }
        }
    })
}

impl RxePd {
    fn release_parent(&self) {
        if let PdKind::Protection { parents } = &self.kind {
            parents.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// `alloc_td`: a thread domain, as mlx5's but without a dedicated doorbell
/// page (rxe's doorbell is a syscall).
pub(crate) unsafe extern "C" fn alloc_td(context: *mut ibv_context, attr: *mut ibv_td_init_attr) -> *mut ibv_td {
    boundary::guard("alloc_td", core::ptr::null_mut(), || {
        // SAFETY: the caller's attributes (null refused).
        let Some(a) = (unsafe { attr.as_ref() }) else {
            return boundary::fail_ptr(Errno::EINVAL);
        };
        if context.is_null() || a.comp_mask != 0 {
            return boundary::fail_ptr(Errno::EINVAL);
        }
        let td = match try_box(RxeTd {
            td: ibv_td { context },
            parents: AtomicU32::new(0),
        }) {
            Ok(td) => td,
            Err(e) => return boundary::fail_ptr(e),
        };
        Box::into_raw(td).cast::<ibv_td>()
    })
}

/// `dealloc_td`: `EBUSY` while a parent domain uses it.
pub(crate) unsafe extern "C" fn dealloc_td(td: *mut ibv_td) -> c_int {
    boundary::guard("dealloc_td", Errno::EIO.code(), || {
        // SAFETY: a TD our alloc_td made (null refused).
        let Some(t) = (unsafe { td.cast::<RxeTd>().as_ref() }) else {
            return Errno::EINVAL.code();
        };
        if t.parents.load(Ordering::Relaxed) != 0 {
            return Errno::EBUSY.code();
        }
        // SAFETY: made by Box in alloc_td; not used after this call.
        drop(unsafe { Box::from_raw(td.cast::<RxeTd>()) });
        0
    })
}

/// `alloc_parent_domain`: checks as libibverbs' `ibv_check_alloc_parent_domain`
/// and mlx5 do (a PD of this context that is not itself a parent domain, a
/// TD of this context or none, known comp_mask bits), then counts itself on
/// the PD and the TD.
pub(crate) unsafe extern "C" fn alloc_parent_domain(
    context: *mut ibv_context,
    attr: *mut ibv_parent_domain_init_attr,
) -> *mut ibv_pd {
    boundary::guard("alloc_parent_domain", core::ptr::null_mut(), || {
        // SAFETY: the caller's attributes (null refused).
        let Some(a) = (unsafe { attr.as_ref() }) else {
            return boundary::fail_ptr(Errno::EINVAL);
        };
        // SAFETY: a PD of ours or null.
        let Some(protection) = (unsafe { a.pd.cast::<RxePd>().as_ref() }) else {
            return boundary::fail_ptr(Errno::EINVAL);
        };
        let PdKind::Protection { parents } = &protection.kind else {
            return boundary::fail_ptr(Errno::EINVAL);
        };
        // SAFETY: a TD of ours or null.
        let td = unsafe { a.td.cast::<RxeTd>().as_ref() };
        if context.is_null()
            || protection.pd.context != context
            || td.is_some_and(|t| t.td.context != context)
            || a.comp_mask
                & !(IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS
                    | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT
                    | IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC)
                != 0
        {
            return boundary::fail_ptr(Errno::EINVAL);
        }
        // Checked after the EINVAL cases so those stay as they were: a CC
        // parent domain (rdma-core 65) is a feature we do not have, which
        // pyverbs (test_buf's cc_pd tests) skips on EOPNOTSUPP, as it does
        // with the stock provider (no alloc_parent_domain at all).
        if a.comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC != 0 {
            return boundary::fail_ptr(Errno::EOPNOTSUPP);
        }
        let with_allocators = a.comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS != 0;
        let parent = ParentDomain {
            users: AtomicU32::new(0),
            protection: NonNull::from(protection),
            td: td.map(NonNull::from),
            alloc: if with_allocators { a.alloc } else { None },
            free: if with_allocators { a.free } else { None },
            pd_context: if a.comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT != 0 {
                a.pd_context
            } else {
                core::ptr::null_mut()
            },
        };
        parents.fetch_add(1, Ordering::Relaxed);
        if let Some(t) = td {
            t.parents.fetch_add(1, Ordering::Relaxed);
        }
        // As ibv_initialize_parent_domain: the PD's context and handle.
        let obj = match try_box(RxePd {
            pd: ibv_pd {
                context,
                handle: protection.pd.handle,
            },
            kind: PdKind::Parent(parent),
        }) {
            Ok(obj) => obj,
            Err(e) => return boundary::fail_ptr(e),
        };
        Box::into_raw(obj).cast::<ibv_pd>()
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
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(Errno::EINVAL.code())
        );
        // SAFETY: as above.
        assert_eq!(unsafe { dealloc_pd(core::ptr::null_mut()) }, Errno::EINVAL.code());
    }

    #[test]
    fn parent_and_thread_domains_count_their_users_and_choose_the_lock() {
        let ctx = 0x1000 as *mut ibv_context;
        let pd = Box::into_raw(Box::new(RxePd::protection(ctx, 7))).cast::<ibv_pd>();
        let mut td_attr = ibv_td_init_attr { comp_mask: 0 };
        // SAFETY: our own objects, made and freed here; the context is
        // never dereferenced by these ops.
        unsafe {
            let td = alloc_td(ctx, &mut td_attr);
            assert!(!td.is_null());
            let mut attr = ibv_parent_domain_init_attr {
                pd,
                td,
                comp_mask: IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT,
                alloc: None,
                free: None,
                pd_context: core::ptr::null_mut(),
            };
            let parent = alloc_parent_domain(ctx, &mut attr);
            assert!(!parent.is_null());
            assert_eq!(((*parent).context, (*parent).handle), (ctx, 7));
            assert!(is_parent_domain(parent) && !is_parent_domain(pd));
            assert!(!lock_for(parent).locks());
            assert!(lock_for(pd).locks());
            // A parent of a parent, a foreign context, unknown bits: EINVAL.
            attr.pd = parent;
            assert!(alloc_parent_domain(ctx, &mut attr).is_null());
            attr.pd = pd;
            assert!(alloc_parent_domain(0x2000 as *mut ibv_context, &mut attr).is_null());
            attr.comp_mask = 1 << 5;
            assert!(alloc_parent_domain(ctx, &mut attr).is_null());
            assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(libc::EINVAL));
            // A CC parent domain (rdma-core 65): not supported, as with stock.
            attr.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC;
            assert!(alloc_parent_domain(ctx, &mut attr).is_null());
            assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(libc::EOPNOTSUPP));
            // Without a TD: locks.
            attr.comp_mask = 0;
            attr.td = core::ptr::null_mut();
            let locked_parent = alloc_parent_domain(ctx, &mut attr);
            assert!(lock_for(locked_parent).locks());
            // In use: EBUSY, before anything reaches the kernel.
            assert_eq!(dealloc_td(td), Errno::EBUSY.code());
            assert_eq!(dealloc_pd(pd), Errno::EBUSY.code());
            // An object on the parent domain holds it until dropped;
            // one on the plain PD holds nothing.
            let (on_parent, on_plain) = (DomainUse::of(parent), DomainUse::of(pd));
            assert_eq!(dealloc_pd(parent), Errno::EBUSY.code());
            drop((on_parent, on_plain));
            assert_eq!(dealloc_pd(parent), 0);
            assert_eq!(dealloc_pd(locked_parent), 0);
            assert_eq!(dealloc_td(td), 0);
            td_attr.comp_mask = 1;
            assert!(alloc_td(ctx, &mut td_attr).is_null());
            drop(Box::from_raw(pd.cast::<RxePd>()));
        }
    }
}
