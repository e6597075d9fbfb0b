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

#![forbid(unsafe_code)]

use core::ptr::NonNull;
use std::os::fd::RawFd;

use crate::errno::Errno;
pub(crate) use crate::libibverbs::runtime::{
    destroy, destroy_owned, try_box, wait_for_acks, wait_for_async_acks, HandedBox, Kept,
};

/// How to undo a kernel object of one kind: its destroy command.
pub(crate) type DestroyFn = fn(RawFd, u32) -> Result<(), Errno>;

/// An object under construction; see the module documentation.
pub(crate) struct Creating<T> {
    /// The object; `None` once handed out. Every pointer handed out
    /// ([`as_ptr`](Self::as_ptr), the kernel's `user_handle`;
    /// [`get_mut`](Self::get_mut); [`finish`](Self::finish)) derives from
    /// its one raw pointer, so none is invalidated when another is made.
    obj: Option<HandedBox<T>>,
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
            obj: Some(HandedBox::new(try_box(obj)?)),
            kind,
            fd,
            destroy,
            handle: None,
        })
    }

    /// The object's final address, for `user_handle`.
    pub(crate) fn as_ptr(&mut self) -> *mut T {
        self.owned().as_ptr()
    }

    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.owned().get_mut()
    }

    fn owned(&mut self) -> &mut HandedBox<T> {
        // Some until finish() or drop, both of which consume the guard.
        self.obj.as_mut().unwrap_or_else(|| unreachable!())
    }

    /// The kernel object exists: from now on dropping the guard undoes it.
    pub(crate) fn created(&mut self, handle: u32) {
        self.handle = Some(handle);
    }

    /// The object is complete; the caller hands it to libibverbs, which
    /// gives it back to the destroy entry.
    pub(crate) fn finish(mut self) -> NonNull<T> {
        self.obj.take().unwrap_or_else(|| unreachable!()).into_raw()
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
            // Never handed out (finish() took no part): freed once.
            Ok(()) => drop(obj),
            Err(e) => self.leak(obj, e),
        }
    }
}

impl<T> Creating<T> {
    /// The undo failed: the object stays allocated, as the kernel may still
    /// name it in events.
    #[cold]
    fn leak(&self, obj: HandedBox<T>, e: Errno) {
        let handle = self.handle.unwrap_or_default();
        let addr = obj.into_raw().as_ptr();
        log::error!(
            "{}: undoing a failed create: destroying handle {handle} failed with errno {e}; \
             leaking the object at {addr:p} ({} bytes), which the kernel may still name in events",
            self.kind,
            size_of::<T>()
        );
        fault::record_leak(addr.cast());
    }
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
    fn the_switch_forces_the_failed_undo() {
        let mut c = Creating::new(1u32, "test", -1, destroy_ok).unwrap();
        let addr = c.as_ptr();
        c.created(1);
        fault::fail_undo(true);
        drop(c);
        fault::fail_undo(false);
        assert_eq!(fault::take_leaked(), vec![addr as usize]);
    }
}
