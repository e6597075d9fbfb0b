//! IND2MemoryRegion: registers the caller's own memory (ibv_reg_mr on the adapter's PD).
//! Register and Deregister are overlapped as on Windows: they fail inline or return ND_PENDING
//! with the OVERLAPPED already completed (registration is synchronous in verbs). The vtable and
//! C entries are in `entry_data`.
#![forbid(unsafe_code)]

use crate::sync::lock;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rdma_mummy_sys as ffi;

use super::adapter::AdapterBody;
use super::data_verbs::{reg_mr, CallerBuffer, RegionBind};
use super::overlapped::{CallerOverlapped, Request};
use super::registration::{deregister, RawMr};
use super::win32::OverlappedFile;
use super::{code, HResult, Overlapped, ND_PENDING};
use crate::status::NdStatus;

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

pub(crate) struct MrBody {
    adapter: Arc<AdapterBody>,
    file: Arc<OverlappedFile>,
    mr: Mutex<Option<RawMr>>,
    /// The registered MR's keys, rkey << 32 | lkey (0 while unregistered): set under `mr`'s
    /// lock by Register and Deregister, read without it by GetLocalToken and GetRemoteToken,
    /// which a program calls on every Send and Receive (a token does not change while
    /// registered).
    tokens: AtomicU64,
    /// Binds of a window to this region between their read of the MR (under `mr`'s lock) and
    /// the return of their post ([`MrBody::begin_bind`]): Deregister answers ND_DEVICE_BUSY while
    /// one is there (a window is being bound to the region).
    binds: AtomicU32,
    /// A window has been bound to the current registration (set by [`MrBody::begin_bind`] under
    /// `mr`'s lock, cleared by Register): only then is the kernel's EINVAL at deregistration
    /// "windows still bound".
    windows_bound: AtomicBool,
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
            binds: AtomicU32::new(0),
            windows_bound: AtomicBool::new(false),
        }
    }

    /// The registered MR, for binding a window to it: counted as a Bind in progress until the
    /// returned guard drops (after the post). A Bind racing a Deregister either counts itself
    /// first (the Deregister is then ND_DEVICE_BUSY, as with the window bound) or comes after it
    /// and finds none (None: ND_INVALID_PARAMETER); it never reads a freed MR.
    pub(super) fn begin_bind(&self) -> Option<RegionBind<'_>> {
        let slot = lock(&self.mr);
        let raw = slot.as_ref()?.0;
        self.binds.fetch_add(1, Ordering::Relaxed);
        self.windows_bound.store(true, Ordering::Relaxed);
        Some(RegionBind::new(&self.binds, raw))
    }

    /// (lkey, rkey), or zeros while unregistered. No lock and nothing that can panic: the
    /// token entries call it outside their panic boundary.
    pub(super) fn keys(&self) -> (u32, u32) {
        let tokens = self.tokens.load(Ordering::Acquire);
        (tokens as u32, (tokens >> 32) as u32)
    }
}

impl Drop for MrBody {
    /// The last Release deregisters. A region that windows are still bound to (Microsoft's
    /// ndrpingpong releases its region before its window, after a Deregister that was
    /// ND_DEVICE_BUSY) cannot be deregistered yet: it is handed to the adapter, which
    /// deregisters it once the windows are gone ([`super::registration::DeferredRegions`]).
    fn drop(&mut self) {
        if let Some(mr) = lock(&self.mr).take() {
            match deregister(&mr, *self.windows_bound.get_mut()) {
                Ok(()) => {}
                Err(NdStatus::ND_DEVICE_BUSY) => {
                    log::debug!("region released with windows bound: deregistered when they are gone");
                    self.adapter.deferred_regions.defer(mr);
                }
                Err(status) => log::error!("ibv_dereg_mr at the region's release: {status}"),
            }
        }
    }
}

impl Overlapped for MrBody {
    /// Register and Deregister finish before they return: nothing is ever left to cancel.
    fn cancel(&self) {}
}

/// Register's argument checks, in the order Microsoft's ndmrinvalidbuffer test fixes: a NULL
/// buffer is ND_INVALID_PARAMETER (even with length 0), then a length of 0
/// ND_INVALID_BUFFER_SIZE; unknown flags and a length over MaxRegistrationSize are
/// ND_INVALID_PARAMETER (IND2MemoryRegion.md).
pub(super) fn check_register(buffer: *const c_void, len: usize, flags: u32, max_len: usize) -> Result<(), NdStatus> {
    if buffer.is_null() || flags & !KNOWN_FLAGS != 0 {
        return Err(NdStatus::ND_INVALID_PARAMETER);
    }
    if len == 0 {
        return Err(NdStatus::ND_INVALID_BUFFER_SIZE);
    }
    if len > max_len {
        return Err(NdStatus::ND_INVALID_PARAMETER);
    }
    Ok(())
}

/// Runs an MR call whose request is started: its failure is left in the OVERLAPPED's Internal
/// and returned inline; success completes the request (ND_PENDING, already complete).
fn finish(request: Request, result: Result<(), NdStatus>) -> Result<HResult, HResult> {
    match result {
        Ok(()) => {
            request.complete(NdStatus::ND_SUCCESS, 0);
            Ok(ND_PENDING)
        }
        Err(status) => {
            request.fail(code(status));
            Err(code(status))
        }
    }
}

impl MrBody {
    /// IND2MemoryRegion::Register.
    pub(super) fn register(&self, buffer: CallerBuffer, flags: u32, ov: CallerOverlapped) -> Result<HResult, HResult> {
        let mr = self;
        let request = ov.start(&mr.file)?;
        let result =
            check_register(buffer.ptr(), buffer.len(), flags, mr.adapter.info.max_registration_size).and_then(|()| {
                let mut slot = lock(&mr.mr);
                if slot.is_some() {
                    return Err(NdStatus::ND_INVALID_DEVICE_STATE);
                }
                let (raw, lkey, rkey) = reg_mr(&mr.adapter.adapter, &buffer, access_flags(flags))?;
                *slot = Some(raw);
                mr.windows_bound.store(false, Ordering::Relaxed);
                mr.tokens.store(pack_tokens(lkey, rkey), Ordering::Release);
                Ok(())
            });
        finish(request, result)
    }

    /// IND2MemoryRegion::Deregister. ND_DEVICE_BUSY while windows are bound to the region, or
    /// while a Bind of a window to it is being posted on another thread; then the region stays
    /// registered and usable (same tokens), and a later Deregister (after the windows are
    /// invalidated or released) succeeds. Any other holder of the region (a call in progress, a
    /// concurrent Deregister) makes no difference.
    pub(super) fn deregister(&self, ov: CallerOverlapped) -> Result<HResult, HResult> {
        let mr = self;
        let request = ov.start(&mr.file)?;
        let mut slot = lock(&mr.mr);
        let Some(raw) = slot.as_ref() else {
            drop(slot);
            return finish(request, Err(NdStatus::ND_INVALID_DEVICE_STATE));
        };
        // A Bind counts itself under this lock before it reads the MR, and a Bind that comes
        // after this finds no MR: none is left posting once the count is 0 here. Acquire pairs
        // with their Release: their posts happen before the MR is freed.
        if mr.binds.load(Ordering::Acquire) != 0 {
            drop(slot);
            return finish(request, Err(NdStatus::ND_DEVICE_BUSY));
        }
        let result = deregister(raw, mr.windows_bound.load(Ordering::Relaxed));
        if result.is_ok() {
            *slot = None;
            mr.tokens.store(0, Ordering::Release);
        }
        drop(slot);
        finish(request, result)
    }
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

    #[test]
    fn register_argument_codes_in_microsofts_order() {
        let buffer = [0u8; 16];
        let p = buffer.as_ptr().cast::<c_void>();
        let null = std::ptr::null::<c_void>();
        let max = 1 << 20;
        let flags = ND_MR_FLAG_ALLOW_LOCAL_WRITE;
        // ndmrinvalidbuffer: NULL with length 0 is ND_INVALID_PARAMETER, a buffer with length 0
        // ND_INVALID_BUFFER_SIZE.
        assert_eq!(check_register(null, 0, flags, max), Err(NdStatus::ND_INVALID_PARAMETER));
        assert_eq!(
            check_register(null, 16, flags, max),
            Err(NdStatus::ND_INVALID_PARAMETER)
        );
        assert_eq!(check_register(p, 0, flags, max), Err(NdStatus::ND_INVALID_BUFFER_SIZE));
        assert_eq!(check_register(p, 16, 0x10, max), Err(NdStatus::ND_INVALID_PARAMETER));
        assert_eq!(
            check_register(p, max + 1, flags, max),
            Err(NdStatus::ND_INVALID_PARAMETER)
        );
        assert_eq!(check_register(p, 16, KNOWN_FLAGS, max), Ok(()));
        assert_eq!(check_register(p, 16, 0, max), Ok(()));
        assert_eq!(check_register(p, max, flags, max), Ok(()));
    }
}
