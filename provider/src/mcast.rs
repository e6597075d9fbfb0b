//! Multicast: `attach_mcast` / `detach_mcast` of a UD QP to a group (the
//! entries are in `entry::objects`).

#![forbid(unsafe_code)]

use std::os::fd::RawFd;

use kernel_abi::{
    ib_uverbs_attach_mcast, ib_uverbs_detach_mcast, IB_USER_VERBS_CMD_ATTACH_MCAST, IB_USER_VERBS_CMD_DETACH_MCAST,
};

use crate::command::{self, WriteReq};
use crate::errno::Errno;
use crate::libibverbs::control_objects::{ibv_gid, ibv_qp};

impl WriteReq for ib_uverbs_attach_mcast {
    const ID: u32 = IB_USER_VERBS_CMD_ATTACH_MCAST;
}

impl WriteReq for ib_uverbs_detach_mcast {
    const ID: u32 = IB_USER_VERBS_CMD_DETACH_MCAST;
}

/// A multicast verb's QP, with the command fd of its context.
pub(crate) type OnQp<'a> = (&'a ibv_qp, Result<RawFd, Errno>);

/// The QP handle and fd, and the group's GID, from the arguments of the
/// entry (the QP with the command fd of its context).
fn args(qp: Option<OnQp<'_>>, gid: Option<&ibv_gid>) -> Result<(RawFd, u32, [u8; 16]), Errno> {
    let (Some((q, fd)), Some(g)) = (qp, gid) else {
        return Err(Errno::EINVAL);
    };
    Ok((fd?, q.handle, g.bytes()))
}

/// A verb that sends its command (`$cmd`: the QP's handle, the group's GID and the LID).
macro_rules! mcast_verb {
    ($name:ident, $cmd:ident) => {
        #[doc = concat!("`", stringify!($name), "`.")]
        pub(crate) fn $name(qp: Option<OnQp<'_>>, gid: Option<&ibv_gid>, lid: u16) -> Result<(), Errno> {
            let (fd, qp_handle, gid) = args(qp, gid)?;
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
        assert_eq!(attach_mcast(None, Some(&gid), 0), Err(Errno::EINVAL));
        assert_eq!(detach_mcast(None, None, 0), Err(Errno::EINVAL));
    }
}
