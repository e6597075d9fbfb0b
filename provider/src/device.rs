//! The device object: `alloc_device` / `uninit_device`.

use core::ffi::CStr;
use core::mem::MaybeUninit;
use core::ptr;

use log::info;

use crate::errno::Errno;
use crate::libibverbs::device_abi::{verbs_device, verbs_sysfs_dev};
use crate::libibverbs::device_context::ibv_device;
use crate::libibverbs::runtime;
use crate::lifecycle::try_box;
use crate::{boundary, logger};

/// Our device. `verbs_device` must come first: libibverbs hands us
/// `&vdev.device` and we get back to this struct by a cast.
#[repr(C)]
pub(crate) struct RxeDevice {
    pub vdev: verbs_device,
    /// The kernel uverbs ABI version of this device (sysfs `abi_version`).
    pub abi_version: u32,
    /// Ports as sysfs reported them; 0 when that libibverbs does not say.
    pub num_ports: u32,
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
        let Some(sysfs) = (unsafe { sysfs_dev.as_ref() }) else {
            boundary::set_errno(Errno::EINVAL);
            return ptr::null_mut();
        };
        if runtime::get().is_none() {
            boundary::set_errno(Errno::ENODEV);
            return ptr::null_mut();
        }
        // `verbs_sysfs_dev.num_ports` (v35 on: every layout served).
        let num_ports = sysfs.num_ports;
        // SAFETY: an all-zero verbs_device is what C's calloc gives the stock
        // provider: null pointers, zero counters, no ops.
        let vdev = unsafe { MaybeUninit::<verbs_device>::zeroed().assume_init() };
        let dev = match try_box(RxeDevice {
            vdev,
            abi_version: sysfs.abi_ver,
            num_ports,
        }) {
            Ok(dev) => dev,
            Err(e) => {
                boundary::set_errno(e);
                return ptr::null_mut();
            }
        };
        logger::for_device(&c_name(&sysfs.ibdev_name), || {
            info!(
                "claimed the device (driver id {}, uverbs ABI {}, {} port(s))",
                sysfs.driver_id, sysfs.abi_ver, num_ports
            )
        });
        Box::into_raw(dev).cast::<verbs_device>()
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

/// A fixed-size C name buffer as text, stopping at the first NUL.
pub(crate) fn c_name(buf: &[core::ffi::c_char]) -> String {
    // SAFETY: c_char and u8 have the same size and alignment.
    let bytes = unsafe { core::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), buf.len()) };
    match CStr::from_bytes_until_nul(bytes) {
        Ok(s) => s.to_string_lossy().into_owned(),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_struct_starts_with_verbs_device() {
        assert_eq!(core::mem::offset_of!(RxeDevice, vdev), 0);
    }

    #[test]
    fn c_name_stops_at_nul_and_survives_a_full_buffer() {
        let mut buf = [0 as core::ffi::c_char; 8];
        for (d, s) in buf.iter_mut().zip(b"rxe0") {
            *d = *s as core::ffi::c_char;
        }
        assert_eq!(c_name(&buf), "rxe0");
        let full = [b'a' as core::ffi::c_char; 4];
        assert_eq!(c_name(&full), "aaaa");
    }

    #[test]
    fn alloc_device_rejects_null_and_refuses_without_libibverbs() {
        // SAFETY: null is an accepted input and yields NULL.
        assert!(unsafe { alloc_device(ptr::null_mut()) }.is_null());
        // SAFETY: null is accepted and ignored.
        unsafe { uninit_device(ptr::null_mut()) };
    }
}
