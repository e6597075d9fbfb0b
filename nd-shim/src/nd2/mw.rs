//! IND2MemoryWindow: a type-2 memory window (ibv_alloc_mw), bound and invalidated through
//! IND2QueuePair::Bind / Invalidate. Its remote token is the rkey of the last bind posted.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use rdma_mummy_sys as ffi;

use super::adapter::AdapterBody;
use super::{code, iids, Class, Guid, HResult, UnknownVtbl};
use crate::sys::last_error;

pub(crate) struct MwBody {
    _adapter: Arc<AdapterBody>,
    pub(super) mw: *mut ffi::ibv_mw,
    /// The rkey the next bind gives out, and after it the window's token.
    rkey: AtomicU32,
}

// SAFETY: an MW handle may be used from any thread; the rkey is atomic.
unsafe impl Send for MwBody {}
// SAFETY: as above.
unsafe impl Sync for MwBody {}

impl MwBody {
    pub(super) fn new(adapter: Arc<AdapterBody>) -> Result<MwBody, HResult> {
        // SAFETY: the PD is live.
        let mw = unsafe { ffi::ibv_alloc_mw(adapter.adapter.inner.pd.0, ffi::ibv_mw_type::IBV_MW_TYPE_2) };
        if mw.is_null() {
            return Err(code(last_error()));
        }
        // SAFETY: just allocated.
        let rkey = unsafe { (*mw).rkey };
        Ok(MwBody {
            _adapter: adapter,
            mw,
            rkey: AtomicU32::new(rkey),
        })
    }

    /// The rkey for a new bind: the key's low byte advanced, as ibv_inc_rkey does.
    pub(super) fn next_rkey(&self) -> u32 {
        let current = self.rkey.load(Ordering::Acquire);
        let next = (current & 0xFFFF_FF00) | (current.wrapping_add(1) & 0xFF);
        self.rkey.store(next, Ordering::Release);
        next
    }

    pub(super) fn rkey(&self) -> u32 {
        self.rkey.load(Ordering::Acquire)
    }
}

impl Drop for MwBody {
    fn drop(&mut self) {
        // SAFETY: allocated by new, freed once.
        if unsafe { ffi::ibv_dealloc_mw(self.mw) } != 0 {
            log::error!("ibv_dealloc_mw: {}", last_error());
        }
    }
}

#[repr(C)]
pub(crate) struct MwVtbl {
    unknown: UnknownVtbl,
    get_remote_token: unsafe extern "C" fn(*mut c_void) -> u32,
}

static VTBL: MwVtbl = MwVtbl {
    unknown: UnknownVtbl::of::<MwBody>(),
    get_remote_token,
};

impl Class for MwBody {
    type Vtbl = MwVtbl;
    const VTBL: &'static MwVtbl = &VTBL;
    const IIDS: &'static [&'static Guid] = &[&iids::IID_IUnknown, &iids::IID_IND2MemoryWindow];
}

unsafe extern "C" fn get_remote_token(this: *mut c_void) -> u32 {
    super::boundary("IND2MemoryWindow::GetRemoteToken", 0, || {
        // SAFETY: the caller's object.
        unsafe { super::this::<MwBody>(this) }.map_or(0, MwBody::rkey)
    })
}
