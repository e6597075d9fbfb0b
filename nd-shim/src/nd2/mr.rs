//! IND2MemoryRegion: registers the caller's own memory (ibv_reg_mr on the adapter's PD).
//! Register and Deregister are overlapped as on Windows: they fail inline or return ND_PENDING
//! with the OVERLAPPED already completed (registration is synchronous in verbs).

use crate::sync::lock;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rdma_mummy_sys as ffi;

use super::adapter::AdapterBody;
use super::overlapped::Request;
use super::win32::OverlappedFile;
use super::{
    code, hr_boundary, iids, this, Class, Guid, HResult, Overlapped, OverlappedVtbl, UnknownVtbl, ND_INVALID_PARAMETER,
    ND_PENDING,
};
use crate::status::NdStatus;
use crate::sys::last_error;

const ND_MR_FLAG_ALLOW_LOCAL_WRITE: u32 = 0x1;
const ND_MR_FLAG_ALLOW_REMOTE_READ: u32 = 0x2;
/// Remote write; its value 0x5 includes local write.
const ND_MR_FLAG_ALLOW_REMOTE_WRITE: u32 = 0x5;
const ND_MR_FLAG_RDMA_READ_SINK: u32 = 0x8;
const ND_MR_FLAG_DO_NOT_SECURE_VM: u32 = 0x8000_0000;
const KNOWN_FLAGS: u32 = ND_MR_FLAG_ALLOW_LOCAL_WRITE
    | ND_MR_FLAG_ALLOW_REMOTE_READ
    | ND_MR_FLAG_ALLOW_REMOTE_WRITE
    | ND_MR_FLAG_RDMA_READ_SINK
    | ND_MR_FLAG_DO_NOT_SECURE_VM;

/// Verbs access flags for ND2 registration flags. Memory windows may be bound to any ND2 region,
/// so every region allows MW binding.
pub(crate) fn access_flags(flags: u32) -> u32 {
    use ffi::ibv_access_flags as A;
    let mut access = A::IBV_ACCESS_MW_BIND.0;
    if flags & (ND_MR_FLAG_ALLOW_LOCAL_WRITE | ND_MR_FLAG_RDMA_READ_SINK) != 0 {
        access |= A::IBV_ACCESS_LOCAL_WRITE.0;
    }
    if flags & ND_MR_FLAG_ALLOW_REMOTE_READ != 0 {
        access |= A::IBV_ACCESS_REMOTE_READ.0;
    }
    if flags & ND_MR_FLAG_ALLOW_REMOTE_WRITE == ND_MR_FLAG_ALLOW_REMOTE_WRITE {
        access |= A::IBV_ACCESS_REMOTE_WRITE.0 | A::IBV_ACCESS_LOCAL_WRITE.0;
    }
    access
}

pub(crate) struct RawMr(pub(crate) *mut ffi::ibv_mr);
// SAFETY: an MR handle may be used from any thread.
unsafe impl Send for RawMr {}

pub(crate) struct MrBody {
    adapter: Arc<AdapterBody>,
    file: Arc<OverlappedFile>,
    mr: Mutex<Option<RawMr>>,
    /// The registered MR's keys, rkey << 32 | lkey (0 while unregistered): set under `mr`'s lock
    /// by Register and Deregister, read without it by GetLocalToken and GetRemoteToken, which a
    /// program calls on every Send and Receive (a token does not change while registered).
    tokens: AtomicU64,
}

fn pack_tokens(lkey: u32, rkey: u32) -> u64 {
    u64::from(rkey) << 32 | u64::from(lkey)
}

impl MrBody {
    pub(super) fn new(adapter: Arc<AdapterBody>, file: Arc<OverlappedFile>) -> MrBody {
        MrBody {
            adapter,
            file,
            mr: Mutex::new(None),
            tokens: AtomicU64::new(0),
        }
    }

    /// The registered MR, for binding a window to it.
    pub(super) fn raw(&self) -> Option<*mut ffi::ibv_mr> {
        lock(&self.mr).as_ref().map(|mr| mr.0)
    }

    /// (lkey, rkey), or zeros while unregistered. No lock and nothing that can panic: the
    /// token entries call it outside their panic boundary.
    fn keys(&self) -> (u32, u32) {
        let tokens = self.tokens.load(Ordering::Acquire);
        (tokens as u32, (tokens >> 32) as u32)
    }
}

fn deregister(mr: RawMr) -> Result<(), NdStatus> {
    // SAFETY: the MR is live and deregistered once (taken out of its slot).
    match unsafe { ffi::ibv_dereg_mr(mr.0) } {
        0 => Ok(()),
        e => Err(crate::status::from_errno(e.abs())),
    }
}

impl Drop for MrBody {
    fn drop(&mut self) {
        if let Some(mr) = lock(&self.mr).take() {
            if let Err(status) = deregister(mr) {
                log::error!("ibv_dereg_mr: {status}");
            }
        }
    }
}

impl Overlapped for MrBody {
    /// Register and Deregister finish before they return: nothing is ever left to cancel.
    fn cancel(&self) {}
}

#[repr(C)]
pub(crate) struct MrVtbl {
    unknown: UnknownVtbl,
    overlapped: OverlappedVtbl,
    register: unsafe extern "C" fn(*mut c_void, *const c_void, usize, u32, *mut c_void) -> HResult,
    deregister: unsafe extern "C" fn(*mut c_void, *mut c_void) -> HResult,
    get_local_token: unsafe extern "C" fn(*mut c_void) -> u32,
    get_remote_token: unsafe extern "C" fn(*mut c_void) -> u32,
}

static VTBL: MrVtbl = MrVtbl {
    unknown: UnknownVtbl::of::<MrBody>(),
    overlapped: OverlappedVtbl::of::<MrBody>(),
    register,
    deregister: deregister_entry,
    get_local_token,
    get_remote_token,
};

impl Class for MrBody {
    type Vtbl = MrVtbl;
    const VTBL: &'static MrVtbl = &VTBL;
    const IIDS: &'static [&'static Guid] = &[
        &iids::IID_IUnknown,
        &iids::IID_IND2Overlapped,
        &iids::IID_IND2MemoryRegion,
    ];
}

unsafe extern "C" fn register(
    this: *mut c_void,
    buffer: *const c_void,
    len: usize,
    flags: u32,
    ov: *mut c_void,
) -> HResult {
    hr_boundary("IND2MemoryRegion::Register", || {
        // SAFETY: the caller's object.
        let mr = unsafe { self::this::<MrBody>(this)? };
        if buffer.is_null() || len == 0 || flags & !KNOWN_FLAGS != 0 || ov.is_null() {
            return Err(ND_INVALID_PARAMETER);
        }
        let mut slot = lock(&mr.mr);
        if slot.is_some() {
            return Err(NdStatus::ND_INVALID_DEVICE_STATE.0);
        }
        // SAFETY: the PD is live; the caller's buffer stays valid while registered (ND's rule).
        let raw = unsafe {
            ffi::ibv_reg_mr(
                mr.adapter.adapter.inner.pd.0,
                buffer.cast_mut(),
                len,
                access_flags(flags) as i32,
            )
        };
        if raw.is_null() {
            return Err(code(last_error()));
        }
        // SAFETY: just registered, live while in the slot.
        let (lkey, rkey) = unsafe { ((*raw).lkey, (*raw).rkey) };
        *slot = Some(RawMr(raw));
        mr.tokens.store(pack_tokens(lkey, rkey), Ordering::Release);
        drop(slot);
        // SAFETY: the caller's OVERLAPPED (checked non-NULL).
        let request = unsafe { Request::start(ov, &mr.file)? };
        request.complete(NdStatus::ND_SUCCESS, 0);
        Ok(ND_PENDING)
    })
}

unsafe extern "C" fn deregister_entry(this: *mut c_void, ov: *mut c_void) -> HResult {
    hr_boundary("IND2MemoryRegion::Deregister", || {
        // SAFETY: the caller's object.
        let mr = unsafe { self::this::<MrBody>(this)? };
        if ov.is_null() {
            return Err(ND_INVALID_PARAMETER);
        }
        let taken = {
            let mut slot = lock(&mr.mr);
            let taken = slot.take().ok_or(NdStatus::ND_INVALID_DEVICE_STATE.0)?;
            mr.tokens.store(0, Ordering::Release);
            taken
        };
        let status = match deregister(taken) {
            Ok(()) => NdStatus::ND_SUCCESS,
            Err(status) => return Err(code(status)),
        };
        // SAFETY: the caller's OVERLAPPED (checked non-NULL).
        unsafe { Request::start(ov, &mr.file)? }.complete(status, 0);
        Ok(ND_PENDING)
    })
}

// The token entries need no panic boundary: the object check and an atomic load cannot panic.
unsafe extern "C" fn get_local_token(this: *mut c_void) -> u32 {
    // SAFETY: the caller's object.
    unsafe { self::this::<MrBody>(this) }.map_or(0, |mr| mr.keys().0)
}

/// The rkey in network byte order, as IND2MemoryRegion.md asks (the peer's Read and Write take it
/// back so: IND2QueuePair's Read/Write turn it into the host-order rkey).
unsafe extern "C" fn get_remote_token(this: *mut c_void) -> u32 {
    // SAFETY: the caller's object.
    unsafe { self::this::<MrBody>(this) }.map_or(0, |mr| mr.keys().1.to_be())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ffi::ibv_access_flags as A;

    #[test]
    fn tokens_pack_and_unpack() {
        let packed = pack_tokens(0x1234_5678, 0x9abc_def0);
        assert_eq!((packed as u32, (packed >> 32) as u32), (0x1234_5678, 0x9abc_def0));
    }

    #[test]
    fn registration_flags_to_access() {
        let bind = A::IBV_ACCESS_MW_BIND.0;
        let local = A::IBV_ACCESS_LOCAL_WRITE.0;
        let read = A::IBV_ACCESS_REMOTE_READ.0;
        let write = A::IBV_ACCESS_REMOTE_WRITE.0;
        assert_eq!(access_flags(0), bind);
        assert_eq!(access_flags(ND_MR_FLAG_ALLOW_LOCAL_WRITE), bind | local);
        assert_eq!(access_flags(ND_MR_FLAG_ALLOW_REMOTE_READ), bind | read);
        assert_eq!(access_flags(ND_MR_FLAG_ALLOW_REMOTE_WRITE), bind | local | write);
        assert_eq!(access_flags(ND_MR_FLAG_RDMA_READ_SINK), bind | local);
    }
}
