//! The provider the Windows way (NetworkDirectSPI.md, "Instantiating a NetworkDirect provider"):
//! `DllGetClassObject(CLSID_NdShimProvider, IID_IClassFactory)` gives a class factory whose
//! `CreateInstance(NULL, IID_IND2Provider)` gives an IND2Provider: QueryAddressList,
//! ResolveAddress (an address of an RDMA device to its adapter's id) and OpenAdapter (that id to
//! an IND2Adapter, as NdOpenAdapter). `DllCanUnloadNow` is S_FALSE while anything of the shim's
//! lives or a LockServer(TRUE) holds (ndutil unloads a provider when it says S_OK): an object
//! (every COM object, a factory or provider as much as an adapter, CQ, QP, SRQ, MR, window,
//! connector or listener, from its creation to its last Release) or a thread of the shim's (the
//! adapters' event and relay threads, BindIoCompletionCallback's pool threads, the disconnect
//! flush timer), each counted by a [`crate::liveness::LiveGuard`]. A thread's guard goes as its
//! body returns; the runtime's exit path that follows is code of this library too, so the threads
//! are spawned by [`crate::liveness::spawn`], which keeps their handles, and DllCanUnloadNow joins
//! the finished ones before it says S_OK.
//!
//! The C entries (the exports and the two vtables) are `entry_connection.rs`.

#![forbid(unsafe_code)]

use std::ffi::c_void;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicIsize, Ordering};

use super::adapter::{adapter_id, write_address_list_sized};
use super::support::rdma_addresses;
use super::{
    give, iids, ind2_adapter, Class, Guid, HResult, E_NOINTERFACE, E_POINTER, ND_INVALID_ADDRESS, ND_INVALID_PARAMETER,
    ND_SUCCESS,
};

/// CLASS_E_NOAGGREGATION: CreateInstance with an outer object.
pub(super) const CLASS_E_NOAGGREGATION: HResult = 0x8004_0110_u32 as i32;
/// CLASS_E_CLASSNOTAVAILABLE: DllGetClassObject for a CLSID this library does not serve.
pub(super) const CLASS_E_CLASSNOTAVAILABLE: HResult = 0x8004_0111_u32 as i32;
pub(super) const S_FALSE: HResult = 1;

/// LockServer(TRUE) calls not yet matched by LockServer(FALSE).
pub(super) static LOCKS: AtomicIsize = AtomicIsize::new(0);

/// Nothing of the shim's lives ([`crate::liveness::idle`]) and no LockServer lock holds:
/// DllCanUnloadNow's S_OK.
pub(crate) fn can_unload() -> bool {
    LOCKS.load(Ordering::Acquire) <= 0 && crate::liveness::idle()
}

/// The class factory.
pub(crate) struct FactoryBody;

/// IND2Provider.
pub(crate) struct ProviderBody;

/// A new object of `T` for `iid`, or E_NOINTERFACE (`*out` NULL then); NULL pointers are
/// E_POINTER (COM's rule for these entries).
fn create<T: Class>(
    iid: Option<Guid>,
    out: Option<&mut *mut c_void>,
    body: impl FnOnce() -> T,
) -> Result<HResult, HResult> {
    let out = out.ok_or(E_POINTER)?;
    *out = std::ptr::null_mut();
    let iid = iid.ok_or(E_POINTER)?;
    // give checks the IID before it makes the body.
    give(Some(iid), Some(out), || Ok(body()))
}

/// DllGetClassObject: the class factory, or the provider itself for IID_IND2Provider (ndutil
/// asks for it directly).
pub(super) fn get_class_object(
    clsid: Option<Guid>,
    iid: Option<Guid>,
    out: Option<&mut *mut c_void>,
) -> Result<HResult, HResult> {
    let out = out.ok_or(E_POINTER)?;
    *out = std::ptr::null_mut();
    let (Some(clsid), Some(wanted)) = (clsid, iid) else {
        return Err(E_POINTER);
    };
    if clsid != iids::CLSID_NdShimProvider {
        return Err(CLASS_E_CLASSNOTAVAILABLE);
    }
    if ProviderBody::IIDS.iter().any(|known| **known == wanted) && wanted != iids::IID_IUnknown {
        return create(iid, Some(out), || ProviderBody);
    }
    create(iid, Some(out), || FactoryBody)
}

/// IClassFactory::CreateInstance (`aggregated`: an outer object was given).
pub(super) fn create_instance(
    aggregated: bool,
    iid: Option<Guid>,
    out: Option<&mut *mut c_void>,
) -> Result<HResult, HResult> {
    let out = out.map(|out| {
        *out = std::ptr::null_mut();
        out
    });
    if aggregated {
        return Err(CLASS_E_NOAGGREGATION);
    }
    create(iid, out, || ProviderBody)
}

/// IClassFactory::LockServer.
pub(super) fn lock_server(lock: bool) -> HResult {
    if lock {
        LOCKS.fetch_add(1, Ordering::AcqRel);
    } else {
        LOCKS.fetch_sub(1, Ordering::AcqRel);
    }
    ND_SUCCESS
}

/// IND2Provider::QueryAddressList: every RDMA address.
pub(super) fn query_address_list(len: &mut u32, list: &mut [u8]) -> HResult {
    write_address_list_sized(&rdma_addresses(), list, len)
}

/// The RDMA address whose adapter has `id`.
fn address_of(id: u64) -> Option<SocketAddr> {
    rdma_addresses().into_iter().find(|a| adapter_id(a.ip()) == id)
}

/// IND2Provider::ResolveAddress: the id of the adapter with the address `addr`.
pub(super) fn resolve_address(addr: Result<SocketAddr, HResult>, id: Option<&mut u64>) -> Result<HResult, HResult> {
    let ip = addr?.ip();
    let id = id.ok_or(ND_INVALID_PARAMETER)?;
    if !rdma_addresses().iter().any(|a| a.ip() == ip) {
        return Err(ND_INVALID_ADDRESS);
    }
    *id = adapter_id(ip);
    Ok(ND_SUCCESS)
}

/// IND2Provider::OpenAdapter.
pub(super) fn open_adapter(iid: Option<Guid>, id: u64, out: Option<&mut *mut c_void>) -> Result<HResult, HResult> {
    let (Some(out), Some(wanted)) = (out, iid) else {
        return Err(ND_INVALID_PARAMETER);
    };
    *out = std::ptr::null_mut();
    if wanted != iids::IID_IND2Adapter {
        return Err(E_NOINTERFACE);
    }
    // IND2Provider.md: an id no ResolveAddress gave is ND_INVALID_PARAMETER.
    let addr = address_of(id).ok_or(ND_INVALID_PARAMETER)?;
    ind2_adapter::new_object(iid, addr.ip(), Some(out))
}

#[cfg(test)]
mod tests {
    use super::super::entry_connection::DllCanUnloadNow;
    use super::*;
    use crate::liveness::{serial_for_test, spawn};

    #[test]
    fn a_thread_of_the_shim_holds_the_library_until_it_has_exited() {
        let _serial = serial_for_test();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        spawn("nd-shim-test", move || {
            let _ = rx.recv();
        })
        .unwrap();
        assert_eq!(DllCanUnloadNow(), S_FALSE);
        drop(tx);
        let start = std::time::Instant::now();
        while DllCanUnloadNow() != ND_SUCCESS {
            assert!(start.elapsed().as_secs() < 10, "the thread never ended");
            std::thread::yield_now();
        }
        assert!(crate::liveness::idle(), "joined");
    }
}
