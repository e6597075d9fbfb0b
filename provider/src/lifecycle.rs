//! One shape for the provider objects that stand for kernel objects (CQ,
//! QP, SRQ, AH, MW, MR, PD): how they are created, undone and destroyed.
//!
//! Creating one is: box the object (its address is what the kernel gets as
//! `user_handle` and hands back in events), issue the create command, then
//! finish the object (map rings, check the response). [`Creating`] owns the
//! box through all of it. Once [`Creating::created`] recorded the kernel's
//! handle, dropping the guard (any `?` after that point) undoes the kernel
//! object, and the policy is decided here, once:
//!
//! - the undo succeeded: the kernel forgot the address, the memory is freed;
//! - the undo failed: the kernel may still report events carrying the
//!   address, so the memory is leaked and the leak logged, never freed.
//!
//! [`destroy`] is the other end: the kernel's destroy first (on failure the
//! object stays alive and usable, as libibverbs expects), then the wait until
//! the application acknowledged every event the kernel reported
//! ([`wait_for_acks`]), then the free. A device that was removed
//! (disassociated) answers every destroy with EIO; with
//! `RDMAV_ALLOW_DISASSOC_DESTROY` set, libibverbs' `ibv_cmd_destroy_*` take
//! that as success without the wait (`verbs_is_destroy_err`), and so do we, so
//! a program can free everything after `IBV_EVENT_DEVICE_FATAL`.
//!
//! The box is allocated fallibly ([`try_box`]): without memory a create
//! fails with `ENOMEM`, as the stock provider's `calloc` failing does, where
//! `Box::new` would abort the process.
//!
//! Tests can force the failed-undo path with `fault::fail_undo` (test
//! builds only: the switch does not exist in the shipped library).

use core::ptr::NonNull;
use std::alloc::Layout;
use std::os::fd::RawFd;

use crate::errno::Errno;
use crate::libibverbs::runtime;

/// `Box::new(value)` that fails with `ENOMEM` when the allocator has no
/// memory, where `Box::new` aborts the process. Every create path boxes
/// through here (the stable stand-in for `Box::try_new`).
pub(crate) fn try_box<T>(value: T) -> Result<Box<T>, Errno> {
    // SAFETY: the global allocator's alloc, with the layout it is given.
    unsafe { try_box_with(value, |layout| std::alloc::alloc(layout)) }
}

/// [`try_box`] with the allocation made by `alloc`.
///
/// # Safety
/// `alloc` returns null or memory of the global allocator for the layout it
/// is given (what `Box` frees).
unsafe fn try_box_with<T>(value: T, alloc: impl FnOnce(Layout) -> *mut u8) -> Result<Box<T>, Errno> {
    let layout = Layout::new::<T>();
    if layout.size() == 0 {
        // Nothing to allocate.
        return Ok(Box::new(value));
    }
    let ptr = alloc(layout).cast::<T>();
    if ptr.is_null() {
        return Err(Errno::ENOMEM);
    }
    // SAFETY: ptr is a fresh allocation of T's layout (non-null, aligned, of
    // the global allocator, by the caller's word): written once, then owned
    // by the Box, which frees it with that layout.
    unsafe {
        ptr.write(value);
        Ok(Box::from_raw(ptr))
    }
}

/// How to undo a kernel object of one kind: its destroy command.
pub(crate) type DestroyFn = fn(RawFd, u32) -> Result<(), Errno>;

/// An object under construction; see the module documentation.
pub(crate) struct Creating<T> {
    /// The object, from `Box::into_raw`; `None` once handed out. A raw
    /// pointer, not a `Box`: every pointer handed out ([`as_ptr`](Self::as_ptr),
    /// the kernel's `user_handle`; [`get_mut`](Self::get_mut);
    /// [`finish`](Self::finish)) derives from it, so none is invalidated
    /// when another is made (moving or leaking a `Box` asserts unique
    /// access and invalidates the pointers taken before: Stacked Borrows).
    obj: Option<NonNull<T>>,
    kind: &'static str,
    fd: RawFd,
    destroy: DestroyFn,
    /// The kernel's handle, once the kernel object exists.
    handle: Option<u32>,
}

impl<T> Creating<T> {
    /// Boxes `obj` ([`try_box`]: `ENOMEM` without memory); `kind` names the
    /// object in logs; `destroy` undoes the kernel object on `fd` by its
    /// handle.
    pub(crate) fn new(obj: T, kind: &'static str, fd: RawFd, destroy: DestroyFn) -> Result<Creating<T>, Errno> {
        Ok(Creating {
            obj: Some(NonNull::from(Box::leak(try_box(obj)?))),
            kind,
            fd,
            destroy,
            handle: None,
        })
    }

    /// The object's final address, for `user_handle`.
    pub(crate) fn as_ptr(&mut self) -> *mut T {
        self.raw().as_ptr()
    }

    pub(crate) fn get_mut(&mut self) -> &mut T {
        // SAFETY: from Box::leak, owned by this guard until finish() or drop
        // (both consume it); &mut self makes this the only access.
        unsafe { self.raw().as_mut() }
    }

    fn raw(&self) -> NonNull<T> {
        // Some until finish() or drop, both of which consume the guard.
        self.obj.unwrap_or_else(|| unreachable!())
    }

    /// The kernel object exists: from now on dropping the guard undoes it.
    pub(crate) fn created(&mut self, handle: u32) {
        self.handle = Some(handle);
    }

    /// The object is complete; the caller hands it to libibverbs, which
    /// gives it back to the destroy entry.
    pub(crate) fn finish(mut self) -> NonNull<T> {
        self.obj.take().unwrap_or_else(|| unreachable!())
    }
}

impl<T> Drop for Creating<T> {
    fn drop(&mut self) {
        let Some(obj) = self.obj.take() else { return };
        let undone = match self.handle {
            None => Ok(()),
            Some(_) if fault::undo_fails() => Err(Errno::EIO),
            Some(handle) => (self.destroy)(self.fd, handle),
        };
        match undone {
            // SAFETY: from Box::leak in new(), never handed out (finish()
            // took no part), freed once.
            Ok(()) => drop(unsafe { Box::from_raw(obj.as_ptr()) }),
            Err(e) => self.leak(obj, e),
        }
    }
}

impl<T> Creating<T> {
    /// The undo failed: the object stays allocated, as the kernel may still
    /// name it in events.
    #[cold]
    fn leak(&self, obj: NonNull<T>, e: Errno) {
        let handle = self.handle.unwrap_or_default();
        let addr = obj.as_ptr();
        log::error!(
            "{}: undoing a failed create: destroying handle {handle} failed with errno {e}; \
             leaking the object at {addr:p} ({} bytes), which the kernel may still name in events",
            self.kind,
            size_of::<T>()
        );
        fault::record_leak(addr.cast());
    }
}

/// Destroys a live object: `destroy` (the kernel command) first, then `wait`
/// with its answer, then the free. On a failed destroy the object stays.
///
/// # Safety
/// `obj` came from [`Creating::finish`] and is not used after a successful
/// return (libibverbs forgets it when the destroy verb succeeds).
pub(crate) unsafe fn destroy<T, R>(
    obj: NonNull<T>,
    destroy: impl FnOnce() -> Result<R, Errno>,
    wait: impl FnOnce(&R),
) -> Result<(), Errno> {
    let gone_device_frees = runtime::get().is_some_and(|l| l.allow_disassociate_destroy);
    // SAFETY: forwarded.
    unsafe { destroy_with(obj, destroy, wait, gone_device_frees) }
}

/// [`destroy`], with libibverbs' `RDMAV_ALLOW_DISASSOC_DESTROY` switch given:
/// `gone_device_frees` makes an EIO from the kernel a success without `wait`.
///
/// # Safety
/// As for [`destroy`].
unsafe fn destroy_with<T, R>(
    obj: NonNull<T>,
    destroy: impl FnOnce() -> Result<R, Errno>,
    wait: impl FnOnce(&R),
    gone_device_frees: bool,
) -> Result<(), Errno> {
    match destroy() {
        Ok(gone) => wait(&gone),
        Err(Errno::EIO) if gone_device_frees => {
            log::debug!("destroy: the device is gone (EIO); freed, as RDMAV_ALLOW_DISASSOC_DESTROY asks");
        }
        Err(e) => return Err(e),
    }
    // SAFETY: a Box leaked by Creating::finish (contract), freed once, after
    // the kernel let the object go (or the device went) and every event
    // naming it was acked.
    drop(unsafe { Box::from_raw(obj.as_ptr()) });
    Ok(())
}

/// Blocks until `acked()` holds, re-checking it under `mutex` each time
/// `cond` is signalled: libibverbs counts acknowledged events
/// (`ibv_ack_async_event`, `ibv_ack_cq_events`) under the object's mutex and
/// broadcasts its cond, as `ibv_cmd_destroy_*` expect. Called after the
/// kernel's destroy, whose answer says how many events it reported.
///
/// # Safety
/// `mutex` and `cond` are the initialised pthread objects of a live
/// libibverbs object; `acked` reads its counters (under the mutex).
pub(crate) unsafe fn wait_for_acks(
    mutex: *mut libc::pthread_mutex_t,
    cond: *mut libc::pthread_cond_t,
    acked: impl Fn() -> bool,
) {
    // SAFETY: per the contract.
    unsafe {
        libc::pthread_mutex_lock(mutex);
        while !acked() {
            libc::pthread_cond_wait(cond, mutex);
        }
        libc::pthread_mutex_unlock(mutex);
    }
}

/// [`wait_for_acks`] for an object with libibverbs' one async-event count
/// (`ibv_qp`, `ibv_srq`): waits until `events_completed` reaches `reported`.
///
/// # Safety
/// `mutex`, `cond` and `completed` are fields of one live libibverbs object
/// whose pthread objects are initialised.
pub(crate) unsafe fn wait_for_async_acks(
    mutex: *mut libc::pthread_mutex_t,
    cond: *mut libc::pthread_cond_t,
    completed: *mut u32,
    reported: u32,
) {
    // SAFETY: per the contract; the count is read under the mutex, volatile
    // because libibverbs writes it from another thread between our reads.
    unsafe { wait_for_acks(mutex, cond, || core::ptr::read_volatile(completed) == reported) }
}

/// The test-only fault-injection switch for the failed-undo path.
///
/// In test builds, `fail_undo` makes every undo on the calling thread fail
/// as if the kernel's destroy had (errno `EIO`), and leaked objects are
/// recorded per thread for the tests to find. In the shipped library the
/// switch is absent and `undo_fails` is the constant `false`.
pub(crate) mod fault {
    #[cfg(test)]
    use std::cell::{Cell, RefCell};

    #[cfg(test)]
    thread_local! {
        static FAIL_UNDO: Cell<bool> = const { Cell::new(false) };
        static LEAKED: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
    }

    /// Makes the undo of every create on this thread fail while `on`.
    #[cfg(test)]
    pub(crate) fn fail_undo(on: bool) {
        FAIL_UNDO.with(|f| f.set(on));
    }

    /// The addresses this thread leaked since the last call.
    #[cfg(test)]
    pub(crate) fn take_leaked() -> Vec<usize> {
        LEAKED.with(|l| core::mem::take(&mut *l.borrow_mut()))
    }

    #[cfg(test)]
    pub(super) fn undo_fails() -> bool {
        FAIL_UNDO.with(Cell::get)
    }

    #[cfg(test)]
    pub(super) fn record_leak(addr: *mut u8) {
        LEAKED.with(|l| l.borrow_mut().push(addr as usize));
    }

    /// A command fd without a kernel behind it: a memfd that takes every
    /// write() whole and answers nothing (responses stay zero), so a create
    /// gets a handle of 0 and an empty ring, fails, and is undone.
    #[cfg(test)]
    pub(crate) struct DeafKernel {
        fd: std::os::fd::OwnedFd,
    }

    #[cfg(test)]
    impl DeafKernel {
        pub(crate) fn new() -> DeafKernel {
            DeafKernel { fd: Self::file() }
        }

        #[cfg(not(miri))]
        fn file() -> std::os::fd::OwnedFd {
            use nix::sys::memfd::{memfd_create, MemFdCreateFlag};
            memfd_create(c"rxe-cmd", MemFdCreateFlag::empty()).unwrap()
        }

        /// Under Miri (which has no memfd): an unlinked temporary file, which
        /// needs `-Zmiri-disable-isolation`.
        #[cfg(miri)]
        fn file() -> std::os::fd::OwnedFd {
            use std::sync::atomic::{AtomicU32, Ordering};
            static N: AtomicU32 = AtomicU32::new(0);
            let path = std::env::temp_dir().join(format!(
                "rxe-cmd-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)
                .unwrap();
            std::fs::remove_file(&path).unwrap();
            f.into()
        }

        pub(crate) fn fd(&self) -> std::os::fd::RawFd {
            use std::os::fd::AsRawFd;
            self.fd.as_raw_fd()
        }

        /// Every byte written so far: the commands, header and body.
        pub(crate) fn written(&self) -> Vec<u8> {
            use std::io::{Read, Seek};
            let mut f = std::fs::File::from(self.fd.try_clone().unwrap());
            f.rewind().unwrap();
            let mut v = Vec::new();
            f.read_to_end(&mut v).unwrap();
            v
        }

        /// The `u64` at `offset` of the body of the first command.
        pub(crate) fn first_body_u64(&self, offset: usize) -> u64 {
            let at = size_of::<kernel_abi::ib_uverbs_cmd_hdr>() + offset;
            let w = self.written();
            u64::from_ne_bytes(w[at..at + 8].try_into().unwrap())
        }
    }

    #[cfg(not(test))]
    #[inline(always)]
    pub(super) fn undo_fails() -> bool {
        false
    }

    #[cfg(not(test))]
    #[inline(always)]
    pub(super) fn record_leak(_addr: *mut u8) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static DESTROYS: AtomicUsize = AtomicUsize::new(0);

    fn destroy_ok(_fd: RawFd, _handle: u32) -> Result<(), Errno> {
        DESTROYS.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn destroy_fails(_fd: RawFd, _handle: u32) -> Result<(), Errno> {
        Err(Errno::EBUSY)
    }

    #[test]
    fn a_failed_allocation_is_enomem_not_an_abort() {
        struct Dropped<'a>(&'a AtomicUsize);
        impl Drop for Dropped<'_> {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        let dropped = AtomicUsize::new(0);
        // SAFETY: the allocator returns null: no memory.
        let r = unsafe { try_box_with(Dropped(&dropped), |_| core::ptr::null_mut()) };
        assert_eq!(r.err(), Some(Errno::ENOMEM));
        // The value was dropped, not leaked.
        assert_eq!(dropped.load(Ordering::Relaxed), 1);
        // SAFETY: the global allocator's alloc.
        let b = unsafe { try_box_with([7u64; 64], |l| std::alloc::alloc(l)) }.unwrap();
        assert_eq!(b[63], 7);
        assert_eq!(*try_box(()).unwrap(), ());
        assert_eq!(*try_box(5u8).unwrap(), 5);
    }

    #[test]
    fn a_removed_device_s_eio_frees_only_when_libibverbs_allows_it() {
        struct Counted<'a>(&'a AtomicUsize);
        impl Drop for Counted<'_> {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        let freed = AtomicUsize::new(0);
        let obj = NonNull::from(Box::leak(Box::new(Counted(&freed))));
        let waited = core::cell::Cell::new(false);
        // SAFETY: obj is a leaked Box; on the failure below it stays ours.
        let r = unsafe { destroy_with(obj, || Err::<(), _>(Errno::EIO), |()| waited.set(true), false) };
        assert_eq!(
            r,
            Err(Errno::EIO),
            "without RDMAV_ALLOW_DISASSOC_DESTROY the object stays"
        );
        assert_eq!(freed.load(Ordering::Relaxed), 0);
        // SAFETY: still live (the failed destroy kept it).
        let r = unsafe { destroy_with(obj, || Err::<(), _>(Errno::EIO), |()| waited.set(true), true) };
        assert_eq!(r, Ok(()), "with it, EIO is the device gone: success");
        assert_eq!(freed.load(Ordering::Relaxed), 1);
        assert!(!waited.get(), "no wait for event acks from a gone device");
        // Another error is never taken for a gone device.
        let obj = NonNull::from(Box::leak(Box::new(Counted(&freed))));
        // SAFETY: as above.
        let r = unsafe { destroy_with(obj, || Err::<(), _>(Errno::EBUSY), |()| (), true) };
        assert_eq!(r, Err(Errno::EBUSY));
        // SAFETY: the failed destroy left it ours.
        drop(unsafe { Box::from_raw(obj.as_ptr()) });
        assert_eq!(freed.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_create_that_fails_before_the_kernel_object_exists_just_frees() {
        let before = DESTROYS.load(Ordering::Relaxed);
        drop(Creating::new(7u64, "test", -1, destroy_ok).unwrap());
        assert_eq!(DESTROYS.load(Ordering::Relaxed), before);
        assert!(fault::take_leaked().is_empty());
    }

    #[test]
    fn a_failed_create_undoes_the_kernel_object_and_frees() {
        let before = DESTROYS.load(Ordering::Relaxed);
        let mut c = Creating::new(7u64, "test", -1, destroy_ok).unwrap();
        c.created(3);
        drop(c);
        assert!(DESTROYS.load(Ordering::Relaxed) > before);
        assert!(fault::take_leaked().is_empty());
    }

    #[test]
    fn a_failed_undo_leaks_and_the_memory_stays_readable() {
        let mut c = Creating::new(0x5eed_u64, "test", -1, destroy_fails).unwrap();
        let addr = c.as_ptr();
        c.created(3);
        drop(c);
        assert_eq!(fault::take_leaked(), vec![addr as usize]);
        // SAFETY: leaked, not freed: what an async event would read.
        assert_eq!(unsafe { addr.read() }, 0x5eed);
    }

    #[test]
    fn the_switch_forces_the_failed_undo() {
        let mut c = Creating::new(1u32, "test", -1, destroy_ok).unwrap();
        let addr = c.as_ptr();
        c.created(1);
        fault::fail_undo(true);
        drop(c);
        fault::fail_undo(false);
        assert_eq!(fault::take_leaked(), vec![addr as usize]);
    }

    #[test]
    fn finish_hands_the_object_out_and_destroy_frees_it_after_the_wait() {
        let mut c = Creating::new(5u32, "test", -1, destroy_fails).unwrap();
        c.created(2);
        let obj = c.finish();
        assert!(fault::take_leaked().is_empty());
        let mut waited = None;
        // SAFETY: from finish; a failed destroy leaves it alive.
        let r = unsafe { destroy(obj, || Err::<u32, _>(Errno::EBUSY), |_| unreachable!()) };
        assert_eq!(r, Err(Errno::EBUSY));
        // SAFETY: still alive after the failed destroy.
        assert_eq!(unsafe { obj.as_ptr().read() }, 5);
        // SAFETY: from finish, not used again.
        let r = unsafe { destroy(obj, || Ok(9u32), |n| waited = Some(*n)) };
        assert_eq!((r, waited), (Ok(()), Some(9)));
    }
}
