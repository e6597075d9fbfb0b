//! A verbs memory registration ([`RawMr`]) and its deregistration, for IND2MemoryRegion
//! (`mr.rs`) and for the adapter, which keeps the regions released while windows were still bound
//! to them ([`DeferredRegions`]) until they can go.

#![forbid(unsafe_code)]

use std::sync::Mutex;

use crate::status::NdStatus;
use crate::sync::lock;

pub(crate) use super::RawMr;

/// `windows_bound`: a window has been bound to this registration (so the kernel's EINVAL can
/// mean "windows still bound").
pub(super) fn deregister(mr: &RawMr, windows_bound: bool) -> Result<(), NdStatus> {
    match mr.deregister() {
        0 => Ok(()),
        e => Err(deregister_status(e.abs(), windows_bound)),
    }
}

/// Deregister's code for an errno of ibv_dereg_mr. The kernel refuses to deregister an MR that
/// memory windows are bound to (IBA 10.6.7.2.6): rxe answers EINVAL (`rxe_dereg_mr`: "mr has
/// mw's bound"), other drivers EBUSY; the MR is live and the call well-formed, so either is
/// ND_DEVICE_BUSY, the code IND2MemoryRegion.md gives for "still has memory windows bound"
/// (and Microsoft's ndmrderegister test expects). EINVAL means that only where a window has
/// been bound to the registration; elsewhere it keeps its own code.
fn deregister_status(errno: i32, windows_bound: bool) -> NdStatus {
    match errno {
        libc::EBUSY => NdStatus::ND_DEVICE_BUSY,
        libc::EINVAL if windows_bound => NdStatus::ND_DEVICE_BUSY,
        e => crate::status::from_errno(e),
    }
}

/// Regions released while windows were bound to them, which the kernel refuses to deregister
/// (IBA 10.6.7.2.6). Windows' last Release of a region has no result to report a refusal
/// with, and the region is the provider's to free; here the verbs MR stays registered (the
/// windows keep working) until a window bound to it is deallocated (its Release, or the release of
/// the QP it was bound through) or the adapter goes, each of which tries these again.
#[derive(Default)]
pub(crate) struct DeferredRegions {
    regions: Mutex<Vec<RawMr>>,
}

impl DeferredRegions {
    pub(super) fn defer(&self, mr: RawMr) {
        lock(&self.regions).push(mr);
    }

    /// Deregisters the regions that no window holds any more; the others stay. `last`: the
    /// adapter is going, so one still refused is logged (the device's close frees it).
    pub(super) fn retry(&self, last: bool) {
        let mut regions = lock(&self.regions);
        if regions.is_empty() {
            return;
        }
        regions.retain(|mr| match deregister(mr, true) {
            Ok(()) => false,
            Err(NdStatus::ND_DEVICE_BUSY) if !last => true,
            Err(status) => {
                log::error!("ibv_dereg_mr of a region released with windows bound: {status}");
                false
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_region_with_windows_bound_is_device_busy() {
        assert_eq!(deregister_status(libc::EINVAL, true), NdStatus::ND_DEVICE_BUSY);
        assert_eq!(deregister_status(libc::EBUSY, true), NdStatus::ND_DEVICE_BUSY);
        assert_eq!(deregister_status(libc::EBUSY, false), NdStatus::ND_DEVICE_BUSY);
        assert_eq!(deregister_status(libc::EIO, true), crate::status::from_errno(libc::EIO));
    }

    #[test]
    fn einval_without_a_window_ever_bound_keeps_its_code() {
        assert_eq!(deregister_status(libc::EINVAL, false), NdStatus::ND_INVALID_PARAMETER);
    }
}
