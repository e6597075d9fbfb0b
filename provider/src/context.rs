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
//!
//! The entries (`alloc_context`, `free_context`) and the raw accessors of
//! [`RxeContext`] are in `entry::context` and `entry::objects`.

#![forbid(unsafe_code)]

use core::cell::UnsafeCell;
use core::ffi::c_int;

use kernel_abi::ib_uverbs_get_context;
use log::{debug, info};

use crate::command;
use crate::errno::Errno;
use crate::libibverbs::device_context::ibv_context;
use crate::libibverbs::layout::Layout;
use crate::{logger, mr};

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

/// What opening a context asks of the kernel once libibverbs made it: the
/// ucontext (`GET_CONTEXT`), then the core support bits `ibv_reg_mr` reads
/// (`mr::probe_core_support`; `None`: leave the device's at 0).
pub(crate) fn start(ctx: &mut ibv_context) -> Result<Option<u64>, Errno> {
    if let Err(errno) = get_context(ctx) {
        debug!("GET_CONTEXT failed: errno {errno}");
        return Err(errno);
    }
    Ok(mr::probe_core_support(ctx))
}

/// Logs the context `alloc_context` opened on `device_name`.
pub(crate) fn log_opened(device_name: &str, ctx: &ibv_context) {
    logger::for_device(device_name, || {
        info!(
            "opened context: cmd_fd {}, async_fd {}, {} completion vector(s)",
            ctx.cmd_fd, ctx.async_fd, ctx.num_comp_vectors
        )
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::libibverbs::private_context::verbs_context;
    use core::mem::{offset_of, size_of};

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
