//! The device object of `alloc_device` / `uninit_device` (the entries are in
//! `entry::context`).

#![forbid(unsafe_code)]

use core::ffi::CStr;

use log::info;

use crate::errno::Errno;
use crate::libibverbs::device_abi::{verbs_device, verbs_sysfs_dev};
use crate::libibverbs::runtime;
use crate::lifecycle::try_box;
use crate::logger;

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
    /// The device for the sysfs record libibverbs matched to us (`None`:
    /// given NULL, `EINVAL`); `ENODEV` when libibverbs was not found at
    /// load time. `vdev` is the blank `verbs_device` it starts with.
    pub(crate) fn claim(sysfs: Option<&verbs_sysfs_dev>, vdev: verbs_device) -> Result<Box<RxeDevice>, Errno> {
        let sysfs = sysfs.ok_or(Errno::EINVAL)?;
        if runtime::get().is_none() {
            return Err(Errno::ENODEV);
        }
        // `verbs_sysfs_dev.num_ports` (v35 on: every layout served).
        let num_ports = sysfs.num_ports;
        let dev = try_box(RxeDevice {
            vdev,
            abi_version: sysfs.abi_ver,
            num_ports,
        })?;
        logger::for_device(&c_name(&sysfs.ibdev_name), || {
            info!(
                "claimed the device (driver id {}, uverbs ABI {}, {} port(s))",
                sysfs.driver_id, sysfs.abi_ver, num_ports
            )
        });
        Ok(dev)
    }
}

/// A fixed-size C name buffer as text, stopping at the first NUL.
pub(crate) fn c_name(buf: &[core::ffi::c_char]) -> String {
    let bytes: Vec<u8> = buf.iter().map(|&c| u8::from_ne_bytes(c.to_ne_bytes())).collect();
    match CStr::from_bytes_until_nul(&bytes) {
        Ok(s) => s.to_string_lossy().into_owned(),
        Err(_) => String::from_utf8_lossy(&bytes).into_owned(),
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
}
