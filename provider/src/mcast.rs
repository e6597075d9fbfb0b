//! Multicast: `attach_mcast` / `detach_mcast` of a UD QP to a group.

use core::ffi::c_int;

use kernel_abi::{
    ib_uverbs_attach_mcast, ib_uverbs_detach_mcast, IB_USER_VERBS_CMD_ATTACH_MCAST, IB_USER_VERBS_CMD_DETACH_MCAST,
};

use crate::boundary;
use crate::command::{self, WriteReq};
use crate::errno::Errno;
use crate::libibverbs::control_objects::{ibv_gid, ibv_qp};
use crate::pd::context_fd;

impl WriteReq for ib_uverbs_attach_mcast {
    const ID: u32 = IB_USER_VERBS_CMD_ATTACH_MCAST;
}

impl WriteReq for ib_uverbs_detach_mcast {
    const ID: u32 = IB_USER_VERBS_CMD_DETACH_MCAST;
}

/// The QP handle and fd, and the group's GID, from the C arguments.
fn args(qp: *mut ibv_qp, gid: *const ibv_gid) -> Result<(i32, u32, [u8; 16]), Errno> {
    // SAFETY: libibverbs passes a QP of ours and the caller's GID (nulls refused).
    let (Some(q), Some(g)) = (unsafe { qp.as_ref() }, unsafe { gid.as_ref() }) else {
        return Err(Errno::EINVAL);
    };
    // SAFETY: every arm of ibv_gid is plain bytes.
    Ok((context_fd(q.context)?, q.handle, unsafe { g.raw }))
}

/// An entry point that sends its verb's command (`$cmd`: the QP's handle, the group's GID and the
/// LID) for the QP and group libibverbs passes: 0, or the errno.
macro_rules! mcast_verb {
    ($name:ident, $cmd:ident) => {
        #[doc = concat!("`", stringify!($name), "`.")]
        pub(crate) unsafe extern "C" fn $name(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
            boundary::guard(stringify!($name), Errno::EIO.code(), || {
                let r = args(qp, gid).and_then(|(fd, qp_handle, gid)| {
                    command::write_req(
                        fd,
                        $cmd {
                            gid,
                            qp_handle,
                            mlid: lid,
                            reserved: 0,
                            driver_data: [],
                        },
                    )
                });
                r.map_or_else(boundary::fail_code, |()| 0)
            })
        }
    };
}

mcast_verb!(attach_mcast, ib_uverbs_attach_mcast);
mcast_verb!(detach_mcast, ib_uverbs_detach_mcast);

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::IntoBytes;

    #[test]
    fn attach_is_gid_handle_and_lid_without_response() {
        let cmd = ib_uverbs_attach_mcast {
            gid: [0xff; 16],
            qp_handle: 3,
            mlid: 0xc001,
            reserved: 0,
            driver_data: [],
        };
        let mut buf = [0u8; 64];
        let n = command::frame_write(&mut buf, ib_uverbs_attach_mcast::ID, cmd.as_bytes(), 0).unwrap();
        assert_eq!(n, 32);
        assert_eq!(&buf[..8], &[30, 0, 0, 0, 8, 0, 0, 0]);
        assert_eq!(&buf[8..24], &[0xff; 16]);
        assert_eq!(u32::from_ne_bytes(buf[24..28].try_into().unwrap()), 3);
        assert_eq!(u16::from_ne_bytes([buf[28], buf[29]]), 0xc001);
    }

    #[test]
    fn null_arguments_are_einval() {
        let gid = ibv_gid { raw: [0; 16] };
        assert_eq!(
            // SAFETY: null QP is refused before use.
            unsafe { attach_mcast(core::ptr::null_mut(), &gid, 0) },
            Errno::EINVAL.code()
        );
        // SAFETY: as above.
        let detached = unsafe { detach_mcast(core::ptr::null_mut(), core::ptr::null(), 0) };
        assert_eq!(detached, Errno::EINVAL.code());
    }
}
