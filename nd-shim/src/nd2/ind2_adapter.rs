//! IND2Adapter: opened by NdOpenAdapter over an [`AdapterBody`], it makes the overlapped files
//! and every other object of the face: the top of the face, which nothing else in it imports.

use std::ffi::c_void;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use rdma_mummy_sys as ffi;

use super::adapter::{file, write_address_list, AdapterBody, AdapterInfo2};
use super::cq::CqBody;
use super::ind2_connector::ConnectorBody;
use super::ind2_listener::ListenerBody;
use super::mr::MrBody;
use super::mw::MwBody;
use super::qp::QpBody;
use super::srq::SrqBody;
use super::win32::{self, Handle};
use super::{
    arg, give, hr_boundary, iids, this, Class, Guid, HResult, UnknownVtbl, ND_BUFFER_OVERFLOW, ND_INVALID_PARAMETER,
    ND_SUCCESS,
};
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

#[repr(C)]
pub(crate) struct AdapterVtbl {
    unknown: UnknownVtbl,
    create_overlapped_file: unsafe extern "C" fn(*mut c_void, *mut Handle) -> HResult,
    query: unsafe extern "C" fn(*mut c_void, *mut AdapterInfo2, *mut u32) -> HResult,
    query_address_list: unsafe extern "C" fn(*mut c_void, *mut c_void, *mut u32) -> HResult,
    create_completion_queue:
        unsafe extern "C" fn(*mut c_void, *const Guid, Handle, u32, u16, usize, *mut *mut c_void) -> HResult,
    create_memory_region: unsafe extern "C" fn(*mut c_void, *const Guid, Handle, *mut *mut c_void) -> HResult,
    create_memory_window: unsafe extern "C" fn(*mut c_void, *const Guid, *mut *mut c_void) -> HResult,
    create_shared_receive_queue:
        unsafe extern "C" fn(*mut c_void, *const Guid, Handle, u32, u32, u32, u16, usize, *mut *mut c_void) -> HResult,
    create_queue_pair: unsafe extern "C" fn(
        *mut c_void,
        *const Guid,
        *mut c_void,
        *mut c_void,
        *mut c_void,
        u32,
        u32,
        u32,
        u32,
        u32,
        *mut *mut c_void,
    ) -> HResult,
    create_queue_pair_with_srq: unsafe extern "C" fn(
        *mut c_void,
        *const Guid,
        *mut c_void,
        *mut c_void,
        *mut c_void,
        *mut c_void,
        u32,
        u32,
        u32,
        *mut *mut c_void,
    ) -> HResult,
    create_connector: unsafe extern "C" fn(*mut c_void, *const Guid, Handle, *mut *mut c_void) -> HResult,
    create_listener: unsafe extern "C" fn(*mut c_void, *const Guid, Handle, *mut *mut c_void) -> HResult,
}

static VTBL: AdapterVtbl = AdapterVtbl {
    unknown: UnknownVtbl::of::<AdapterBody>(),
    create_overlapped_file,
    query,
    query_address_list,
    create_completion_queue,
    create_memory_region,
    create_memory_window,
    create_shared_receive_queue,
    create_queue_pair,
    create_queue_pair_with_srq,
    create_connector,
    create_listener,
};

impl Class for AdapterBody {
    type Vtbl = AdapterVtbl;
    const VTBL: &'static AdapterVtbl = &VTBL;
    const IIDS: &'static [&'static Guid] = &[&iids::IID_IUnknown, &iids::IID_IND2Adapter];
}

unsafe extern "C" fn create_overlapped_file(this: *mut c_void, out: *mut Handle) -> HResult {
    hr_boundary("IND2Adapter::CreateOverlappedFile", || {
        // SAFETY: the caller's object.
        let adapter = unsafe { self::this::<AdapterBody>(this)? };
        present(&adapter)?;
        if out.is_null() {
            return Err(ND_INVALID_PARAMETER);
        }
        let handle = win32::insert(win32::Object::File(Arc::default()));
        // SAFETY: non-NULL, writable (the caller's promise).
        unsafe { out.write(handle) };
        Ok(ND_SUCCESS)
    })
}

unsafe extern "C" fn query(this: *mut c_void, info: *mut AdapterInfo2, len: *mut u32) -> HResult {
    hr_boundary("IND2Adapter::Query", || {
        // SAFETY: the caller's object.
        let adapter = unsafe { self::this::<AdapterBody>(this)? };
        if len.is_null() {
            return Err(ND_INVALID_PARAMETER);
        }
        let need = std::mem::size_of::<AdapterInfo2>() as u32;
        // SAFETY: non-NULL, readable and writable (the caller's promise).
        let have = unsafe { len.read() };
        // SAFETY: as above.
        unsafe { len.write(need) };
        if info.is_null() || have < need {
            return Ok(ND_BUFFER_OVERFLOW);
        }
        // SAFETY: non-NULL, writable for `need` bytes (checked against the caller's size).
        unsafe { info.write_unaligned(adapter.info) };
        Ok(ND_SUCCESS)
    })
}

unsafe extern "C" fn query_address_list(this: *mut c_void, list: *mut c_void, len: *mut u32) -> HResult {
    hr_boundary("IND2Adapter::QueryAddressList", || {
        // SAFETY: the caller's object.
        let adapter = unsafe { self::this::<AdapterBody>(this)? };
        if len.is_null() {
            return Err(ND_INVALID_PARAMETER);
        }
        // SAFETY: non-NULL (the caller's promise).
        let mut size = unsafe { len.read() } as usize;
        // Every address of the adapter's device, not only the one it was opened with.
        let mut addrs = super::adapter::rdma_addresses_where(|ctx| adapter.adapter.is_device(ctx));
        if addrs.is_empty() {
            addrs.push(SocketAddr::new(adapter.local_ip(), 0));
        }
        // SAFETY: `list` is writable for `size` bytes (the caller's promise).
        let hr = unsafe { write_address_list(&addrs, list, &mut size) };
        // SAFETY: as above.
        unsafe { len.write(u32::try_from(size).unwrap_or(u32::MAX)) };
        Ok(hr)
    })
}

unsafe extern "C" fn create_completion_queue(
    this: *mut c_void,
    iid: *const Guid,
    file: Handle,
    depth: u32,
    _group: u16,
    _affinity: usize,
    out: *mut *mut c_void,
) -> HResult {
    hr_boundary("IND2Adapter::CreateCompletionQueue", || {
        // SAFETY: the caller's object.
        let adapter = unsafe { super::object::<AdapterBody>(this)? }.arc()?;
        present(&adapter)?;
        within(&[(depth, adapter.info.max_completion_queue_depth, 3)])?;
        let file = self::file(file)?;
        // SAFETY: the caller's IID and out pointer.
        unsafe { give(iid, out, || CqBody::new(adapter, file, depth)) }
    })
}

unsafe extern "C" fn create_memory_region(
    this: *mut c_void,
    iid: *const Guid,
    file: Handle,
    out: *mut *mut c_void,
) -> HResult {
    hr_boundary("IND2Adapter::CreateMemoryRegion", || {
        // SAFETY: the caller's object.
        let adapter = unsafe { super::object::<AdapterBody>(this)? }.arc()?;
        present(&adapter)?;
        let file = self::file(file)?;
        // SAFETY: the caller's IID and out pointer.
        unsafe { give(iid, out, || Ok(MrBody::new(adapter, file))) }
    })
}

unsafe extern "C" fn create_memory_window(this: *mut c_void, iid: *const Guid, out: *mut *mut c_void) -> HResult {
    hr_boundary("IND2Adapter::CreateMemoryWindow", || {
        // SAFETY: the caller's object.
        let adapter = unsafe { super::object::<AdapterBody>(this)? }.arc()?;
        present(&adapter)?;
        // SAFETY: the caller's IID and out pointer.
        unsafe { give(iid, out, || MwBody::new(adapter)) }
    })
}

#[allow(clippy::too_many_arguments)] // the interface's
unsafe extern "C" fn create_shared_receive_queue(
    this: *mut c_void,
    iid: *const Guid,
    file: Handle,
    depth: u32,
    max_sge: u32,
    threshold: u32,
    _group: u16,
    _affinity: usize,
    out: *mut *mut c_void,
) -> HResult {
    hr_boundary("IND2Adapter::CreateSharedReceiveQueue", || {
        // SAFETY: the caller's object.
        let adapter = unsafe { super::object::<AdapterBody>(this)? }.arc()?;
        present(&adapter)?;
        let info = &adapter.info;
        within(&[
            (depth, info.max_shared_receive_queue_depth, 3),
            (max_sge, info.max_receive_sge, 4),
        ])?;
        let file = self::file(file)?;
        // SAFETY: the caller's IID and out pointer.
        unsafe { give(iid, out, || SrqBody::new(adapter, file, depth, max_sge, threshold)) }
    })
}

#[allow(clippy::too_many_arguments)] // the interface's
unsafe extern "C" fn create_queue_pair(
    this: *mut c_void,
    iid: *const Guid,
    receive_cq: *mut c_void,
    initiator_cq: *mut c_void,
    context: *mut c_void,
    receive_depth: u32,
    initiator_depth: u32,
    max_receive_sge: u32,
    max_initiator_sge: u32,
    inline_size: u32,
    out: *mut *mut c_void,
) -> HResult {
    hr_boundary("IND2Adapter::CreateQueuePair", || {
        // SAFETY: the caller's object.
        let adapter = unsafe { super::object::<AdapterBody>(this)? }.arc()?;
        present(&adapter)?;
        // SAFETY: the caller's objects, checked by kind.
        let (rcq, icq) = unsafe { (arg::<CqBody>(receive_cq)?, arg::<CqBody>(initiator_cq)?) };
        let info = &adapter.info;
        within(&[
            (receive_depth, info.max_receive_queue_depth, 5),
            (initiator_depth, info.max_initiator_queue_depth, 6),
            (max_receive_sge, info.max_receive_sge, 7),
            (max_initiator_sge, info.max_initiator_sge, 8),
            (inline_size, info.max_inline_data_size, 9),
        ])?;
        let cap = ffi::ibv_qp_cap {
            max_send_wr: initiator_depth,
            max_recv_wr: receive_depth,
            max_send_sge: max_initiator_sge,
            max_recv_sge: max_receive_sge,
            max_inline_data: inline_size,
        };
        // SAFETY: the caller's IID and out pointer.
        unsafe { give(iid, out, || QpBody::new(adapter, rcq, icq, None, context as usize, cap)) }
    })
}

#[allow(clippy::too_many_arguments)] // the interface's
unsafe extern "C" fn create_queue_pair_with_srq(
    this: *mut c_void,
    iid: *const Guid,
    receive_cq: *mut c_void,
    initiator_cq: *mut c_void,
    srq: *mut c_void,
    context: *mut c_void,
    initiator_depth: u32,
    max_initiator_sge: u32,
    inline_size: u32,
    out: *mut *mut c_void,
) -> HResult {
    hr_boundary("IND2Adapter::CreateQueuePairWithSrq", || {
        // SAFETY: the caller's object.
        let adapter = unsafe { super::object::<AdapterBody>(this)? }.arc()?;
        present(&adapter)?;
        // SAFETY: the caller's objects, checked by kind.
        let (rcq, icq, srq) = unsafe {
            (
                arg::<CqBody>(receive_cq)?,
                arg::<CqBody>(initiator_cq)?,
                arg::<SrqBody>(srq)?,
            )
        };
        let info = &adapter.info;
        within(&[
            (initiator_depth, info.max_initiator_queue_depth, 6),
            (max_initiator_sge, info.max_initiator_sge, 7),
            (inline_size, info.max_inline_data_size, 8),
        ])?;
        let cap = ffi::ibv_qp_cap {
            max_send_wr: initiator_depth,
            max_recv_wr: 0,
            max_send_sge: max_initiator_sge,
            max_recv_sge: 0,
            max_inline_data: inline_size,
        };
        // SAFETY: the caller's IID and out pointer.
        unsafe {
            give(iid, out, || {
                QpBody::new(adapter, rcq, icq, Some(srq), context as usize, cap)
            })
        }
    })
}

unsafe extern "C" fn create_connector(
    this: *mut c_void,
    iid: *const Guid,
    file: Handle,
    out: *mut *mut c_void,
) -> HResult {
    hr_boundary("IND2Adapter::CreateConnector", || {
        // SAFETY: the caller's object.
        let adapter = unsafe { super::object::<AdapterBody>(this)? }.arc()?;
        present(&adapter)?;
        let file = self::file(file)?;
        // SAFETY: the caller's IID and out pointer.
        unsafe { give(iid, out, || Ok(ConnectorBody::new(adapter, file))) }
    })
}

unsafe extern "C" fn create_listener(
    this: *mut c_void,
    iid: *const Guid,
    file: Handle,
    out: *mut *mut c_void,
) -> HResult {
    hr_boundary("IND2Adapter::CreateListener", || {
        // SAFETY: the caller's object.
        let adapter = unsafe { super::object::<AdapterBody>(this)? }.arc()?;
        present(&adapter)?;
        let file = self::file(file)?;
        // SAFETY: the caller's IID and out pointer.
        unsafe { give(iid, out, || Ok(ListenerBody::new(adapter, file))) }
    })
}

/// NdOpenAdapter's object.
pub(super) fn new_object(iid: *const Guid, ip: IpAddr, out: *mut *mut c_void) -> Result<HResult, HResult> {
    // SAFETY: the caller's IID and out pointer (NdOpenAdapter's promise).
    unsafe { give(iid, out, || AdapterBody::open(ip)) }
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
