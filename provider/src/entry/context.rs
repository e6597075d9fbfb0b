//! The C entries of `verbs_device_ops`: `alloc_device`, `uninit_device` and
//! `alloc_context`, which installs `ops`' tables (so this module sits above
//! `ops`, and the context ops themselves are in `entry::objects`); and the
//! raw accessors of the context and the device libibverbs hands back.

use core::ffi::{c_int, c_void};
use core::mem::{size_of, MaybeUninit};
use core::ptr;

use kernel_abi::RDMA_DRIVER_RXE;

use crate::boundary;
use crate::context::{self, RxeContext};
use crate::device::{self, RxeDevice};
use crate::errno::Errno;
use crate::libibverbs::device_abi::{verbs_device, verbs_sysfs_dev};
use crate::libibverbs::device_context::{ibv_context, ibv_device};
use crate::libibverbs::private_context::verbs_context;
use crate::libibverbs::runtime;
use crate::ops;

impl RxeContext {
    /// # Safety
    /// `ctx` is an `ibv_context` our `alloc_context` returned and that has not
    /// been freed (true for every context libibverbs passes to our ops).
    pub(crate) unsafe fn from_ibv_context<'a>(ctx: *mut ibv_context) -> Option<&'a RxeContext> {
        // SAFETY: per the contract, ctx is the first field of a live RxeContext.
        unsafe { ctx.cast::<RxeContext>().as_ref() }
    }

    /// The uverbs command fd.
    pub(crate) fn cmd_fd(&self) -> c_int {
        self.fixed_fields().0
    }

    /// The device the context was opened on.
    pub(crate) fn device(&self) -> *mut ibv_device {
        self.fixed_fields().1
    }

    /// `cmd_fd` and `device`: written by libibverbs before the context was
    /// handed out, never after.
    #[inline]
    fn fixed_fields(&self) -> (c_int, *mut ibv_device) {
        let ctx = self.ibv_ctx.get();
        // SAFETY: fields libibverbs wrote before the context was handed out
        // and never writes after; each read alone, as libibverbs writes
        // other fields (its mutex, the async event state) meanwhile.
        unsafe { ((*ctx).cmd_fd, (*ctx).device) }
    }
}

impl RxeDevice {
    /// # Safety
    /// `dev` is the `ibv_device` of a device our `alloc_device` made (true for
    /// every device libibverbs passes to our own ops), alive for `'a`.
    pub(crate) unsafe fn from_ibv_device<'a>(dev: *const ibv_device) -> Option<&'a RxeDevice> {
        // SAFETY: per the contract, dev is the first field of a live RxeDevice.
        unsafe { dev.cast::<RxeDevice>().as_ref() }
    }
}

/// `verbs_device_ops.alloc_device`: libibverbs matched a device to us.
pub(crate) unsafe extern "C" fn alloc_device(sysfs_dev: *mut verbs_sysfs_dev) -> *mut verbs_device {
    boundary::guard("alloc_device", ptr::null_mut(), || {
        // SAFETY: libibverbs passes its live sysfs record (or we reject null).
        // An all-zero verbs_device is what C's calloc gives the stock
        // provider: null pointers, zero counters, no ops.
        let (sysfs, vdev) = unsafe { (sysfs_dev.as_ref(), MaybeUninit::<verbs_device>::zeroed().assume_init()) };
        match RxeDevice::claim(sysfs, vdev) {
            Ok(dev) => Box::into_raw(dev).cast::<verbs_device>(),
            Err(e) => boundary::fail_ptr(e),
        }
    })
}

/// `verbs_device_ops.uninit_device`: the last reference to the device went.
pub(crate) unsafe extern "C" fn uninit_device(vdev: *mut verbs_device) {
    boundary::guard("uninit_device", (), || {
        if vdev.is_null() {
            return;
        }
        // SAFETY: every verbs_device libibverbs hands back to this op was made
        // by alloc_device above as a Box<RxeDevice>, and is released once.
        drop(unsafe { Box::from_raw(vdev.cast::<RxeDevice>()) });
    })
}

/// `verbs_device_ops.alloc_context`: a context whose ops are
/// `ops::ops_table(layout)` for the running library's layout. Owns `cmd_fd`:
/// closes it on failure.
pub(crate) unsafe extern "C" fn alloc_context(
    device: *mut ibv_device,
    cmd_fd: c_int,
    _private_data: *mut c_void,
) -> *mut verbs_context {
    boundary::guard("alloc_context", ptr::null_mut(), || {
        let lib = match runtime::get() {
            Some(lib) if !device.is_null() => lib,
            _ => {
                // cmd_fd was handed to us to own; nobody else closes it.
                let _ = nix::unistd::close(cmd_fd);
                boundary::set_errno(Errno::EINVAL);
                return ptr::null_mut();
            }
        };
        let layout = lib.layout;
        let prefix = layout.verbs_context_prefix();

        // SAFETY: device is the ibv_device libibverbs passed us; the size
        // covers this layout's verbs_context (prefix + ibv_context) and ours. The
        // result is a fresh allocation of that many bytes whose ibv_context
        // starts at `prefix` (the last verbs_context member); calloc'd and
        // 8-aligned, and prefix is a multiple of 8.
        let (base, ctx) = unsafe {
            let base = lib.init_and_alloc_context(device, cmd_fd, prefix + size_of::<RxeContext>(), RDMA_DRIVER_RXE);
            if base.is_null() {
                return ptr::null_mut(); // libibverbs closed cmd_fd and set errno
            }
            (base, &mut *base.cast::<u8>().add(prefix).cast::<RxeContext>())
        };
        ctx.layout = layout;

        // Not shared yet: ours alone until open returns.
        let ibv_ctx = ctx.ibv_ctx.get_mut();
        let core_support = match context::start(ibv_ctx) {
            Ok(bits) => bits,
            Err(errno) => {
                // SAFETY: base came from init_and_alloc_context and is not shared
                // yet; uninit closes cmd_fd/async_fd, then the calloc'd block goes.
                unsafe {
                    lib.uninit_context(base);
                    libc::free(base);
                }
                boundary::set_errno(errno);
                return ptr::null_mut();
            }
        };
        // SAFETY: ibv_ctx.device is the ibv_device at the start of the
        // verbs_device our alloc_device made, alive while any context is (a
        // plain store of the core support bits, as libibverbs' own GET_CONTEXT
        // makes it); base is a live verbs_context of this library and the table
        // matches its layout; device is the live ibv_device libibverbs passed us
        // (checked non-null above).
        let device_name = unsafe {
            if let Some(bits) = core_support {
                ptr::addr_of_mut!((*ibv_ctx.device.cast::<verbs_device>()).core_support).write(bits);
            }
            lib.set_ops(base, ops::ops_table(layout));
            device::c_name(&(*device).name)
        };
        context::log_opened(&device_name, ibv_ctx);
        base.cast::<verbs_context>()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_device_ops_refuse_null_and_a_process_without_libibverbs() {
        let fd = nix::unistd::dup(2).unwrap();
        // SAFETY: null is an accepted input of each (NULL, ignored, refused
        // before use).
        let (device, context) = unsafe {
            uninit_device(ptr::null_mut());
            (
                alloc_device(ptr::null_mut()),
                alloc_context(ptr::null_mut(), fd, ptr::null_mut()),
            )
        };
        assert!(device.is_null() && context.is_null());
        // alloc_context owns the fd: closed on failure.
        assert_eq!(
            nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFD),
            Err(nix::errno::Errno::EBADF)
        );
    }
}
