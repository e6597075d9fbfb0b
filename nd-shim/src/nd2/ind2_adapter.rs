//! IND2Adapter: opened by NdOpenAdapter over an [`AdapterBody`], it makes the overlapped files
//! and every other object of the face: the top of the face, which nothing else in it imports.
//! Its C entries are `entry_connection.rs`; the methods here take their arguments read.

#![forbid(unsafe_code)]

use std::ffi::c_void;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use rdma_mummy_sys as ffi;

use super::adapter::{file, write_address_list_sized, AdapterBody};
use super::cq::CqBody;
use super::mw::MwBody;
use super::qp::QpBody;
use super::srq::SrqBody;
use super::win32::{self, Handle, OverlappedFile};
use super::{give, Class, Guid, HResult, ND_BUFFER_OVERFLOW, ND_INVALID_PARAMETER, ND_SUCCESS};
use crate::status::NdStatus;

/// ND_DEVICE_REMOVED once the adapter's device is gone (rdma_cm reported its removal): every
/// Create method of IND2Adapter.md lists it, "only cleanup operations ... will succeed".
fn present(adapter: &AdapterBody) -> Result<(), HResult> {
    if adapter.adapter.inner.is_removed() {
        return Err(NdStatus::ND_DEVICE_REMOVED.0);
    }
    Ok(())
}

/// ND_INVALID_PARAMETER_n: IND2Adapter.md's code for a Create argument beyond what Query reports.
const fn param(n: u32) -> HResult {
    NdStatus::ND_INVALID_PARAMETER_1.0 + (n as i32 - 1)
}

/// The limits a Create checks, each with the code its argument gets beyond the limit: a value
/// within every reported maximum is one CreateQueuePair and the others then accept.
fn within(checks: &[(u32, u32, u32)]) -> Result<(), HResult> {
    for &(value, max, n) in checks {
        if value > max {
            return Err(param(n));
        }
    }
    Ok(())
}

/// An object to give out `out` and the objects it is made with, an argument each: an argument that
/// is not of its kind was read as ND_INVALID_PARAMETER, answered after the adapter's own checks.
type Arg<T> = Result<Arc<T>, HResult>;

/// CreateQueuePair's and CreateQueuePairWithSrq's arguments, read.
pub(super) struct NewQp<'a> {
    pub(super) iid: Option<Guid>,
    pub(super) receive_cq: Arg<CqBody>,
    pub(super) initiator_cq: Arg<CqBody>,
    /// `None` for CreateQueuePair.
    pub(super) srq: Option<Arg<SrqBody>>,
    pub(super) context: usize,
    pub(super) cap: ffi::ibv_qp_cap,
    pub(super) out: Option<&'a mut *mut c_void>,
}

impl AdapterBody {
    pub(super) fn create_overlapped_file(&self, out: Option<&mut Handle>) -> Result<HResult, HResult> {
        present(self)?;
        let out = out.ok_or(ND_INVALID_PARAMETER)?;
        *out = win32::insert(win32::Object::File(Arc::default()));
        Ok(ND_SUCCESS)
    }

    /// Query: ND2_ADAPTER_INFO into the caller's `*len` bytes (`info`), or ND_BUFFER_OVERFLOW.
    pub(super) fn query(&self, len: &mut u32, info: &mut [u8]) -> HResult {
        let bytes = self.info.to_bytes();
        *len = bytes.len() as u32;
        match info.get_mut(..bytes.len()) {
            Some(info) => {
                info.copy_from_slice(&bytes);
                ND_SUCCESS
            }
            None => ND_BUFFER_OVERFLOW,
        }
    }

    /// QueryAddressList: every address of the adapter's device, not only the one it was opened
    /// with.
    pub(super) fn query_address_list(&self, len: &mut u32, list: &mut [u8]) -> HResult {
        let mut addrs = super::adapter::rdma_addresses_where(|ctx| self.adapter.is_device(ctx));
        if addrs.is_empty() {
            addrs.push(SocketAddr::new(self.local_ip(), 0));
        }
        write_address_list_sized(&addrs, list, len)
    }

    pub(super) fn create_completion_queue(
        self: Arc<Self>,
        iid: Option<Guid>,
        file: Handle,
        depth: u32,
        out: Option<&mut *mut c_void>,
    ) -> Result<HResult, HResult> {
        present(&self)?;
        within(&[(depth, self.info.max_completion_queue_depth, 3)])?;
        let file = self::file(file)?;
        give(iid, out, || CqBody::new(self, file, depth))
    }

    /// CreateMemoryRegion, CreateConnector and CreateListener: the adapter present and the
    /// overlapped file, then the object `new` makes over both.
    pub(super) fn create_on_file<T: Class>(
        self: Arc<Self>,
        iid: Option<Guid>,
        file: Handle,
        out: Option<&mut *mut c_void>,
        new: fn(Arc<AdapterBody>, Arc<OverlappedFile>) -> T,
    ) -> Result<HResult, HResult> {
        present(&self)?;
        let file = self::file(file)?;
        give(iid, out, || Ok(new(self, file)))
    }

    pub(super) fn create_memory_window(
        self: Arc<Self>,
        iid: Option<Guid>,
        out: Option<&mut *mut c_void>,
    ) -> Result<HResult, HResult> {
        present(&self)?;
        give(iid, out, || MwBody::new(self))
    }

    pub(super) fn create_shared_receive_queue(
        self: Arc<Self>,
        iid: Option<Guid>,
        file: Handle,
        (depth, max_sge, threshold): (u32, u32, u32),
        out: Option<&mut *mut c_void>,
    ) -> Result<HResult, HResult> {
        present(&self)?;
        let info = &self.info;
        within(&[
            (depth, info.max_shared_receive_queue_depth, 3),
            (max_sge, info.max_receive_sge, 4),
        ])?;
        let file = self::file(file)?;
        give(iid, out, || SrqBody::new(self, file, depth, max_sge, threshold))
    }

    /// CreateQueuePair, or CreateQueuePairWithSrq with `qp.srq`: each checks the limits it
    /// takes, with its own parameter numbers.
    pub(super) fn create_queue_pair(self: Arc<Self>, qp: NewQp<'_>) -> Result<HResult, HResult> {
        present(&self)?;
        let (rcq, icq) = (qp.receive_cq?, qp.initiator_cq?);
        let srq = qp.srq.transpose()?;
        let (info, cap) = (&self.info, &qp.cap);
        if srq.is_none() {
            within(&[
                (cap.max_recv_wr, info.max_receive_queue_depth, 5),
                (cap.max_send_wr, info.max_initiator_queue_depth, 6),
                (cap.max_recv_sge, info.max_receive_sge, 7),
                (cap.max_send_sge, info.max_initiator_sge, 8),
                (cap.max_inline_data, info.max_inline_data_size, 9),
            ])?;
        } else {
            within(&[
                (cap.max_send_wr, info.max_initiator_queue_depth, 6),
                (cap.max_send_sge, info.max_initiator_sge, 7),
                (cap.max_inline_data, info.max_inline_data_size, 8),
            ])?;
        }
        let (context, cap) = (qp.context, qp.cap);
        give(qp.iid, qp.out, || QpBody::new(self, rcq, icq, srq, context, cap))
    }
}

/// NdOpenAdapter's object (and IND2Provider::OpenAdapter's).
pub(super) fn new_object(iid: Option<Guid>, ip: IpAddr, out: Option<&mut *mut c_void>) -> Result<HResult, HResult> {
    give(iid, out, || AdapterBody::open(ip))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_codes_by_position() {
        assert_eq!(param(3), NdStatus::ND_INVALID_PARAMETER_3.0);
        assert_eq!(param(9), NdStatus::ND_INVALID_PARAMETER_9.0);
        assert_eq!(within(&[(4, 4, 5), (9, 8, 6)]), Err(NdStatus::ND_INVALID_PARAMETER_6.0));
        assert_eq!(within(&[(4, 4, 5), (8, 8, 6)]), Ok(()));
    }
}
