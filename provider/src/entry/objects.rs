//! The C entries of `verbs_context_ops` for the context and the control-path
//! objects (`free_context`, the queries, PDs and thread and parent domains,
//! MRs, MWs, AHs, multicast), and the raw access to the objects libibverbs
//! hands them: each entry turns its pointers into references once and runs
//! the safe logic of the object's own module.

use core::ffi::c_void;

use crate::boundary;
use crate::context::RxeContext;
use crate::libibverbs::device_context::ibv_context;
use crate::libibverbs::runtime;

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
