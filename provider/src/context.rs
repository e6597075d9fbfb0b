//! The context: opening it for `alloc_context`, and `free_context`.
//!
//! libibverbs callocs the context for us (`_verbs_init_and_alloc_context`)
//! with `verbs_context` at offset 0. Its last member is `ibv_context`, which
//! is where [`RxeContext`] begins, so our state sits right after libibverbs'
//! part whatever the size of the (release-dependent) fields before it:
//!
//! ```text
//! | verbs_context fields (layout.verbs_context_prefix()) | ibv_context | our fields |
//! ^ allocation start = verbs_context                     ^ RxeContext
//! ```

use core::cell::UnsafeCell;
use core::ffi::{c_int, c_void};
use core::mem::size_of;
use core::ptr;

use kernel_abi::{ib_uverbs_get_context, RDMA_DRIVER_RXE};
use log::{debug, info};

use crate::boundary;
use crate::command;
use crate::errno::Errno;
use crate::libibverbs::device_context::{ibv_context, ibv_device};
use crate::libibverbs::layout::Layout;
use crate::libibverbs::private_context::verbs_context;
use crate::libibverbs::runtime;
use crate::{device, logger, mr};

/// Our context, from `ibv_context` on. `ibv_ctx` must stay first. Shared by
/// every thread of the application (`&RxeContext`); the `ibv_context` is in
/// an `UnsafeCell` because libibverbs writes some of its fields (its mutex,
/// the async event state) while we hold that reference. Ours read only what
/// is written before the context is handed out.
#[repr(C)]
pub(crate) struct RxeContext {
    pub ibv_ctx: UnsafeCell<ibv_context>,
    /// The layout of the libibverbs that made this context.
    pub layout: Layout,
}

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
        // SAFETY: written by libibverbs before the context was handed out, never after.
        unsafe { (*self.ibv_ctx.get()).cmd_fd }
    }

    /// The device the context was opened on.
    pub(crate) fn device(&self) -> *mut ibv_device {
        // SAFETY: as for cmd_fd.
        unsafe { (*self.ibv_ctx.get()).device }
    }
}

/// `GET_CONTEXT`: the kernel creates the ucontext and, on the write path, the
/// async event file. Fills what `ibv_cmd_get_context` fills. By write(), as
/// libibverbs sends it (its INVOKE_WRITE probe comes only once a context
/// exists): Linux 7.2 refuses it by INVOKE_WRITE (every open failed on sid),
/// where 6.1 and 6.12 took it.
fn get_context(ctx: &mut ibv_context) -> Result<(), Errno> {
    let resp = command::write_cmd_raw(
        ctx.cmd_fd,
        ib_uverbs_get_context {
            response: 0,
            driver_data: [],
        },
    )?;
    // Store the fd first so that, even if the rest is rejected,
    // verbs_uninit_context closes it.
    ctx.async_fd = c_int::try_from(resp.async_fd).map_err(|_| Errno::EPROTO)?;
    ctx.num_comp_vectors = c_int::try_from(resp.num_comp_vectors).map_err(|_| Errno::EPROTO)?;
    Ok(())
}

/// The body of `verbs_device_ops.alloc_context` (the entry is in
/// [`crate::ops`], which knows the ops table): a context whose ops are
/// `ops_table(layout)` for the running library's layout. Owns `cmd_fd`:
/// closes it on failure.
///
/// # Safety
/// `device` is NULL or the live `ibv_device` libibverbs passes.
pub(crate) unsafe fn open(
    device: *mut ibv_device,
    cmd_fd: c_int,
    ops_table: fn(Layout) -> *const c_void,
) -> *mut verbs_context {
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
    // covers this layout's verbs_context (prefix + ibv_context) and ours.
    let base = unsafe { lib.init_and_alloc_context(device, cmd_fd, prefix + size_of::<RxeContext>(), RDMA_DRIVER_RXE) };
    if base.is_null() {
        return ptr::null_mut(); // libibverbs closed cmd_fd and set errno
    }
    // SAFETY: base is a fresh allocation of prefix + size_of::<RxeContext>()
    // bytes whose ibv_context starts at `prefix` (the last verbs_context
    // member); calloc'd and 8-aligned, and prefix is a multiple of 8.
    let ctx = unsafe { &mut *base.cast::<u8>().add(prefix).cast::<RxeContext>() };
    ctx.layout = layout;

    // Not shared yet: ours alone until open returns.
    let ibv_ctx = ctx.ibv_ctx.get_mut();
    if let Err(errno) = get_context(ibv_ctx) {
        debug!("GET_CONTEXT failed: errno {errno}");
        // SAFETY: base came from init_and_alloc_context and is not shared
        // yet; uninit closes cmd_fd/async_fd, then the calloc'd block goes.
        unsafe {
            lib.uninit_context(base);
            libc::free(base);
        }
        boundary::set_errno(errno);
        return ptr::null_mut();
    }

    mr::probe_core_support(ibv_ctx);

    // SAFETY: base is a live verbs_context of this library; the table
    // matches its layout.
    unsafe { lib.set_ops(base, ops_table(layout)) };
    // SAFETY: device is the live ibv_device libibverbs passed us (checked non-null above).
    let device_name = device::c_name(unsafe { &(*device).name });
    logger::for_device(&device_name, || {
        info!(
            "opened context: cmd_fd {}, async_fd {}, {} completion vector(s)",
            ibv_ctx.cmd_fd, ibv_ctx.async_fd, ibv_ctx.num_comp_vectors
        )
    });
    base.cast::<verbs_context>()
}

/// `free_context`, from `ibv_close_device`.
pub(crate) unsafe extern "C" fn free_context(ibctx: *mut ibv_context) {
    boundary::guard("free_context", (), || {
        let Some(lib) = runtime::get() else { return };
        // SAFETY: libibverbs passes a context our alloc_context made.
        let Some(ctx) = (unsafe { RxeContext::from_ibv_context(ibctx) }) else {
            return;
        };
        let prefix = ctx.layout.verbs_context_prefix();
        // SAFETY: the allocation starts `prefix` bytes before ibv_context (see
        // alloc_context); libibverbs is done with it, and we free it once.
        unsafe {
            let base = ibctx.cast::<u8>().sub(prefix).cast::<c_void>();
            lib.uninit_context(base);
            libc::free(base);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::offset_of;

    #[test]
    fn our_context_begins_where_verbs_context_ends_its_prefix() {
        assert_eq!(offset_of!(RxeContext, ibv_ctx), 0);
        assert_eq!(
            offset_of!(verbs_context, context) + size_of::<ibv_context>(),
            size_of::<verbs_context>()
        );
        // Our fields keep 8-byte alignment after the prefix.
        assert_eq!(
            offset_of!(verbs_context, context) % core::mem::align_of::<RxeContext>(),
            0
        );
    }
}
