//! The context: `alloc_context` / `free_context` and the context ops table.
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

use core::ffi::{c_int, c_void};
use core::mem::size_of;
use core::ptr;

use kernel_abi::{ib_uverbs_get_context, RDMA_DRIVER_RXE};
use log::{debug, info};

use crate::command;
use crate::errno::Errno;
use crate::ffi;
use crate::libibverbs::context_layouts::ops_table_for;
use crate::libibverbs::context_v36::{self, verbs_context};
use crate::libibverbs::layout::Layout;
use crate::libibverbs::public::{ibv_context, ibv_device};
use crate::libibverbs::runtime;
use crate::{ah, cq, device, logger, mcast, mr, mw, pd, qp, query, srq};

/// Our context, from `ibv_context` on. `ibv_ctx` must stay first.
#[repr(C)]
pub(crate) struct RxeContext {
    pub ibv_ctx: ibv_context,
    /// The layout of the libibverbs that made this context.
    pub layout: Layout,
}

impl RxeContext {
    /// # Safety
    /// `ctx` is an `ibv_context` our `alloc_context` returned and that has not
    /// been freed (true for every context libibverbs passes to our ops).
    pub(crate) unsafe fn from_ibv_context<'a>(ctx: *mut ibv_context) -> Option<&'a mut RxeContext> {
        // SAFETY: per the contract, ctx is the first field of a live RxeContext.
        unsafe { ctx.cast::<RxeContext>().as_mut() }
    }
}

/// The ops we implement, in the v36..v58 table; the running library's own
/// table is built from it by op name (`context_layouts`). Everything else
/// stays NULL, so libibverbs keeps its dummy op for it (EOPNOTSUPP).
static OPS_V36: context_v36::verbs_context_ops = context_v36::verbs_context_ops {
    free_context: Some(free_context),
    query_device_ex: Some(query::query_device_ex),
    query_port: Some(query::query_port),
    create_cq: Some(cq::create_cq),
    create_cq_ex: Some(cq::create_cq_ex),
    destroy_cq: Some(cq::destroy_cq),
    poll_cq: Some(cq::poll_cq),
    req_notify_cq: Some(cq::req_notify_cq),
    resize_cq: Some(cq::resize_cq),
    alloc_pd: Some(pd::alloc_pd),
    dealloc_pd: Some(pd::dealloc_pd),
    reg_mr: Some(mr::reg_mr),
    rereg_mr: Some(mr::rereg_mr),
    dereg_mr: Some(mr::dereg_mr),
    alloc_mw: Some(mw::alloc_mw),
    dealloc_mw: Some(mw::dealloc_mw),
    create_ah: Some(ah::create_ah),
    destroy_ah: Some(ah::destroy_ah),
    attach_mcast: Some(mcast::attach_mcast),
    detach_mcast: Some(mcast::detach_mcast),
    create_qp: Some(qp::create_qp),
    create_qp_ex: Some(qp::create_qp_ex),
    query_qp: Some(qp::query_qp),
    modify_qp: Some(qp::modify_qp),
    destroy_qp: Some(qp::destroy_qp),
    post_send: Some(qp::post_send),
    post_recv: Some(qp::post_recv),
    bind_mw: Some(qp::bind_mw),
    create_srq: Some(srq::create_srq),
    create_srq_ex: Some(srq::create_srq_ex),
    modify_srq: Some(srq::modify_srq),
    query_srq: Some(srq::query_srq),
    destroy_srq: Some(srq::destroy_srq),
    post_srq_recv: Some(srq::post_srq_recv),
    ..context_v36::verbs_context_ops::EMPTY
};

fn ops_table(layout: Layout) -> *const c_void {
    ops_table_for(layout.context, &OPS_V36).cast()
}

/// `GET_CONTEXT`: the kernel creates the ucontext and, on the write path, the
/// async event file. Fills what `ibv_cmd_get_context` fills.
fn get_context(ctx: &mut ibv_context) -> Result<(), Errno> {
    let resp = command::write_cmd(
        ctx.cmd_fd,
        ib_uverbs_get_context {
            response: 0,
            driver_data: [],
        },
    )?;
    // Store the fd first so that, even if the rest is rejected,
    // verbs_uninit_context closes it.
    ctx.async_fd = c_int::try_from(resp.async_fd).map_err(|_| libc::EPROTO)?;
    ctx.num_comp_vectors = c_int::try_from(resp.num_comp_vectors).map_err(|_| libc::EPROTO)?;
    Ok(())
}

/// `verbs_device_ops.alloc_context`. Owns `cmd_fd`: closes it on failure.
pub(crate) unsafe extern "C" fn alloc_context(
    device: *mut ibv_device,
    cmd_fd: c_int,
    _private_data: *mut c_void,
) -> *mut verbs_context {
    ffi::guard("alloc_context", ptr::null_mut(), || {
        let lib = match runtime::get() {
            Some(lib) if !device.is_null() => lib,
            _ => {
                // SAFETY: cmd_fd was handed to us to own; nobody else closes it.
                unsafe { libc::close(cmd_fd) };
                ffi::set_errno(libc::EINVAL);
                return ptr::null_mut();
            }
        };
        let layout = lib.layout;
        let prefix = layout.verbs_context_prefix();

        // SAFETY: device is the ibv_device libibverbs passed us; the size
        // covers this layout's verbs_context (prefix + ibv_context) and ours.
        let base =
            unsafe { lib.init_and_alloc_context(device, cmd_fd, prefix + size_of::<RxeContext>(), RDMA_DRIVER_RXE) };
        if base.is_null() {
            return ptr::null_mut(); // libibverbs closed cmd_fd and set errno
        }
        // SAFETY: base is a fresh allocation of prefix + size_of::<RxeContext>()
        // bytes whose ibv_context starts at `prefix` (the last verbs_context
        // member); calloc'd and 8-aligned, and prefix is a multiple of 8.
        let ctx = unsafe { &mut *base.cast::<u8>().add(prefix).cast::<RxeContext>() };
        ctx.layout = layout;

        if let Err(errno) = get_context(&mut ctx.ibv_ctx) {
            debug!("GET_CONTEXT failed: errno {errno}");
            // SAFETY: base came from init_and_alloc_context and is not shared
            // yet; uninit closes cmd_fd/async_fd, then the calloc'd block goes.
            unsafe {
                lib.uninit_context(base);
                libc::free(base);
            }
            ffi::set_errno(errno);
            return ptr::null_mut();
        }

        mr::probe_core_support(&ctx.ibv_ctx);

        // SAFETY: base is a live verbs_context of this library; the table
        // matches its layout.
        unsafe { lib.set_ops(base, ops_table(layout)) };
        // SAFETY: device is the live ibv_device libibverbs passed us (checked non-null above).
        let device_name = device::c_name(unsafe { &(*device).name });
        logger::for_device(&device_name, || {
            info!(
                "opened context: cmd_fd {}, async_fd {}, {} completion vector(s)",
                ctx.ibv_ctx.cmd_fd, ctx.ibv_ctx.async_fd, ctx.ibv_ctx.num_comp_vectors
            )
        });
        base.cast::<verbs_context>()
    })
}

/// `free_context`, from `ibv_close_device`.
unsafe extern "C" fn free_context(ibctx: *mut ibv_context) {
    ffi::guard("free_context", (), || {
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

    #[test]
    fn ops_table_sets_only_what_is_implemented() {
        let t = &OPS_V36;
        assert!(t.free_context.is_some() && t.query_device_ex.is_some() && t.query_port.is_some());
        // SAFETY: verbs_context_ops is 76 pointer-sized Option<fn> slots.
        let slots: &[usize; 76] = unsafe { &*ptr::from_ref(t).cast::<[usize; 76]>() };
        use context_v36::verbs_context_ops as O;
        let mut expected: Vec<usize> = [
            offset_of!(O, free_context),
            offset_of!(O, query_device_ex),
            offset_of!(O, query_port),
            offset_of!(O, create_cq),
            offset_of!(O, create_cq_ex),
            offset_of!(O, destroy_cq),
            offset_of!(O, poll_cq),
            offset_of!(O, req_notify_cq),
            offset_of!(O, resize_cq),
            offset_of!(O, alloc_pd),
            offset_of!(O, dealloc_pd),
            offset_of!(O, reg_mr),
            offset_of!(O, rereg_mr),
            offset_of!(O, dereg_mr),
            offset_of!(O, alloc_mw),
            offset_of!(O, dealloc_mw),
            offset_of!(O, create_ah),
            offset_of!(O, destroy_ah),
            offset_of!(O, attach_mcast),
            offset_of!(O, detach_mcast),
            offset_of!(O, create_qp),
            offset_of!(O, create_qp_ex),
            offset_of!(O, query_qp),
            offset_of!(O, modify_qp),
            offset_of!(O, destroy_qp),
            offset_of!(O, post_send),
            offset_of!(O, post_recv),
            offset_of!(O, bind_mw),
            offset_of!(O, create_srq),
            offset_of!(O, create_srq_ex),
            offset_of!(O, modify_srq),
            offset_of!(O, query_srq),
            offset_of!(O, destroy_srq),
            offset_of!(O, post_srq_recv),
        ]
        .iter()
        .map(|off| off / size_of::<usize>())
        .collect();
        expected.sort_unstable();
        let set: Vec<usize> = (0..76).filter(|&i| slots[i] != 0).collect();
        assert_eq!(set, expected);
        // Spot checks against the alphabetical order: alloc_pd (6th),
        // free_context (40th), query_port (61st).
        assert!(set.contains(&5) && set.contains(&39) && set.contains(&60));
    }

    #[test]
    fn alloc_context_without_libibverbs_fails_and_closes_the_fd() {
        // SAFETY: dup of stderr has no memory-safety preconditions.
        let fd = unsafe { libc::dup(2) };
        assert!(fd >= 0);
        // SAFETY: a null device is rejected before use.
        let r = unsafe { alloc_context(ptr::null_mut(), fd, ptr::null_mut()) };
        assert!(r.is_null());
        // SAFETY: fcntl on a closed fd just fails with EBADF.
        assert_eq!(unsafe { libc::fcntl(fd, libc::F_GETFD) }, -1);
    }
}
