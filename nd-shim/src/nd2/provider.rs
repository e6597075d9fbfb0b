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

use std::ffi::c_void;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicIsize, Ordering};

use super::adapter::{adapter_id, write_address_list};
use super::support::rdma_addresses;
use super::{
    give, hr_boundary, iids, ind2_adapter, read_sockaddr, this, Class, Guid, HResult, UnknownVtbl, E_NOINTERFACE,
    E_POINTER, ND_INVALID_ADDRESS, ND_INVALID_PARAMETER, ND_SUCCESS,
};

/// CLASS_E_NOAGGREGATION: CreateInstance with an outer object.
const CLASS_E_NOAGGREGATION: HResult = 0x8004_0110_u32 as i32;
/// CLASS_E_CLASSNOTAVAILABLE: DllGetClassObject for a CLSID this library does not serve.
const CLASS_E_CLASSNOTAVAILABLE: HResult = 0x8004_0111_u32 as i32;
const S_FALSE: HResult = 1;

/// LockServer(TRUE) calls not yet matched by LockServer(FALSE).
static LOCKS: AtomicIsize = AtomicIsize::new(0);

/// Nothing of the shim's lives ([`crate::liveness::idle`]) and no LockServer lock holds:
/// DllCanUnloadNow's S_OK.
pub(crate) fn can_unload() -> bool {
    LOCKS.load(Ordering::Acquire) <= 0 && crate::liveness::idle()
}

/// The class factory.
pub(crate) struct FactoryBody;

#[repr(C)]
pub(crate) struct FactoryVtbl {
    unknown: UnknownVtbl,
    create_instance: unsafe extern "C" fn(*mut c_void, *mut c_void, *const Guid, *mut *mut c_void) -> HResult,
    lock_server: unsafe extern "C" fn(*mut c_void, i32) -> HResult,
}

static FACTORY_VTBL: FactoryVtbl = FactoryVtbl {
    unknown: UnknownVtbl::of::<FactoryBody>(),
    create_instance,
    lock_server,
};

impl Class for FactoryBody {
    type Vtbl = FactoryVtbl;
    const VTBL: &'static FactoryVtbl = &FACTORY_VTBL;
    const IIDS: &'static [&'static Guid] = &[&iids::IID_IUnknown, &iids::IID_IClassFactory];
}

/// IND2Provider.
pub(crate) struct ProviderBody;

#[repr(C)]
pub(crate) struct ProviderVtbl {
    unknown: UnknownVtbl,
    query_address_list: unsafe extern "C" fn(*mut c_void, *mut c_void, *mut u32) -> HResult,
    resolve_address: unsafe extern "C" fn(*mut c_void, *const libc::sockaddr, u32, *mut u64) -> HResult,
    open_adapter: unsafe extern "C" fn(*mut c_void, *const Guid, u64, *mut *mut c_void) -> HResult,
}

static PROVIDER_VTBL: ProviderVtbl = ProviderVtbl {
    unknown: UnknownVtbl::of::<ProviderBody>(),
    query_address_list,
    resolve_address,
    open_adapter,
};

impl Class for ProviderBody {
    type Vtbl = ProviderVtbl;
    const VTBL: &'static ProviderVtbl = &PROVIDER_VTBL;
    const IIDS: &'static [&'static Guid] = &[&iids::IID_IUnknown, &iids::IID_IND2Provider];
}

/// A new object of `T` for `iid`, or E_NOINTERFACE (`*out` NULL then); NULL pointers are
/// E_POINTER (COM's rule for these entries).
///
/// # Safety
/// `iid` is NULL or a GUID; `out` NULL or writable.
unsafe fn create<T: Class>(
    iid: *const Guid,
    out: *mut *mut c_void,
    body: impl FnOnce() -> T,
) -> Result<HResult, HResult> {
    if out.is_null() {
        return Err(E_POINTER);
    }
    // SAFETY: non-NULL, writable (the caller's promise).
    unsafe { out.write(std::ptr::null_mut()) };
    if iid.is_null() {
        return Err(E_POINTER);
    }
    // SAFETY: as above; give checks the IID before it makes the body.
    unsafe { give(iid, out, || Ok(body())) }
}

/// # Safety
/// `clsid` and `iid` are NULL or GUIDs; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn DllGetClassObject(clsid: *const Guid, iid: *const Guid, out: *mut *mut c_void) -> HResult {
    hr_boundary("DllGetClassObject", || {
        crate::stderr_log::init_from_env();
        if out.is_null() {
            return Err(E_POINTER);
        }
        // SAFETY: non-NULL, writable (the caller's promise).
        unsafe { out.write(std::ptr::null_mut()) };
        if clsid.is_null() || iid.is_null() {
            return Err(E_POINTER);
        }
        // SAFETY: non-NULL, a GUID (the caller's promise).
        if unsafe { clsid.read_unaligned() } != iids::CLSID_NdShimProvider {
            return Err(CLASS_E_CLASSNOTAVAILABLE);
        }
        // SAFETY: as above.
        let wanted = unsafe { iid.read_unaligned() };
        if ProviderBody::IIDS.iter().any(|known| **known == wanted) && wanted != iids::IID_IUnknown {
            // The provider itself (ndutil asks for IID_IND2Provider directly).
            // SAFETY: the caller's IID and out pointer.
            return unsafe { create(iid, out, || ProviderBody) };
        }
        // SAFETY: the caller's IID and out pointer.
        unsafe { create(iid, out, || FactoryBody) }
    })
}

#[no_mangle]
pub extern "C" fn DllCanUnloadNow() -> HResult {
    super::boundary("DllCanUnloadNow", S_FALSE, || {
        if can_unload() {
            ND_SUCCESS
        } else {
            S_FALSE
        }
    })
}

unsafe extern "C" fn create_instance(
    this: *mut c_void,
    outer: *mut c_void,
    iid: *const Guid,
    out: *mut *mut c_void,
) -> HResult {
    hr_boundary("IClassFactory::CreateInstance", || {
        // SAFETY: the caller's object.
        unsafe { self::this::<FactoryBody>(this)? };
        if !out.is_null() {
            // SAFETY: non-NULL, writable (the caller's promise).
            unsafe { out.write(std::ptr::null_mut()) };
        }
        if !outer.is_null() {
            return Err(CLASS_E_NOAGGREGATION);
        }
        // SAFETY: the caller's IID and out pointer.
        unsafe { create(iid, out, || ProviderBody) }
    })
}

unsafe extern "C" fn lock_server(this: *mut c_void, lock: i32) -> HResult {
    hr_boundary("IClassFactory::LockServer", || {
        // SAFETY: the caller's object.
        unsafe { self::this::<FactoryBody>(this)? };
        if lock != 0 {
            LOCKS.fetch_add(1, Ordering::AcqRel);
        } else {
            LOCKS.fetch_sub(1, Ordering::AcqRel);
        }
        Ok(ND_SUCCESS)
    })
}

unsafe extern "C" fn query_address_list(this: *mut c_void, list: *mut c_void, len: *mut u32) -> HResult {
    hr_boundary("IND2Provider::QueryAddressList", || {
        // SAFETY: the caller's object.
        unsafe { self::this::<ProviderBody>(this)? };
        if len.is_null() {
            return Err(ND_INVALID_PARAMETER);
        }
        // SAFETY: non-NULL (the caller's promise).
        let mut size = unsafe { len.read() } as usize;
        // SAFETY: `list` is NULL or writable for `size` bytes (the caller's promise).
        let hr = unsafe { write_address_list(&rdma_addresses(), list, &mut size) };
        // SAFETY: as above.
        unsafe { len.write(u32::try_from(size).unwrap_or(u32::MAX)) };
        Ok(hr)
    })
}

/// The RDMA address whose adapter has `id`.
fn address_of(id: u64) -> Option<SocketAddr> {
    rdma_addresses().into_iter().find(|a| adapter_id(a.ip()) == id)
}

unsafe extern "C" fn resolve_address(
    this: *mut c_void,
    addr: *const libc::sockaddr,
    len: u32,
    id: *mut u64,
) -> HResult {
    hr_boundary("IND2Provider::ResolveAddress", || {
        // SAFETY: the caller's object.
        unsafe { self::this::<ProviderBody>(this)? };
        // SAFETY: the caller's address.
        let ip = unsafe { read_sockaddr(addr, len as usize)? }.ip();
        if id.is_null() {
            return Err(ND_INVALID_PARAMETER);
        }
        if !rdma_addresses().iter().any(|a| a.ip() == ip) {
            return Err(ND_INVALID_ADDRESS);
        }
        // SAFETY: non-NULL, writable (the caller's promise).
        unsafe { id.write(adapter_id(ip)) };
        Ok(ND_SUCCESS)
    })
}

unsafe extern "C" fn open_adapter(this: *mut c_void, iid: *const Guid, id: u64, out: *mut *mut c_void) -> HResult {
    hr_boundary("IND2Provider::OpenAdapter", || {
        // SAFETY: the caller's object.
        unsafe { self::this::<ProviderBody>(this)? };
        if out.is_null() || iid.is_null() {
            return Err(ND_INVALID_PARAMETER);
        }
        // SAFETY: non-NULL, writable (the caller's promise).
        unsafe { out.write(std::ptr::null_mut()) };
        // SAFETY: non-NULL, a GUID (the caller's promise).
        if unsafe { iid.read_unaligned() } != iids::IID_IND2Adapter {
            return Err(E_NOINTERFACE);
        }
        // IND2Provider.md: an id no ResolveAddress gave is ND_INVALID_PARAMETER.
        let addr = address_of(id).ok_or(ND_INVALID_PARAMETER)?;
        ind2_adapter::new_object(iid, addr.ip(), out)
    })
}

// The exports above, at the version node ND_SHIM_0 (crate::exports).
crate::exports::version_node!("DllGetClassObject", "DllCanUnloadNow",);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::liveness::{serial_for_test, spawn};

    fn release(object: *mut c_void) {
        // SAFETY: an object of ours; its vtable starts with IUnknown's.
        unsafe {
            let vtbl = *object.cast::<*const UnknownVtbl>();
            ((*vtbl).release)(object);
        }
    }

    /// An object of the shim's, of no class in particular (as an adapter, CQ or QP).
    struct Thing;

    static THING_VTBL: UnknownVtbl = UnknownVtbl::of::<Thing>();

    impl Class for Thing {
        type Vtbl = UnknownVtbl;
        const VTBL: &'static UnknownVtbl = &THING_VTBL;
        const IIDS: &'static [&'static Guid] = &[&iids::IID_IUnknown];
    }

    #[test]
    fn any_object_holds_the_library_until_its_last_release() {
        let _serial = serial_for_test();
        assert_eq!(DllCanUnloadNow(), ND_SUCCESS);
        let object = super::super::Com::create(std::sync::Arc::new(Thing)).cast::<c_void>();
        assert_eq!(DllCanUnloadNow(), S_FALSE);
        // SAFETY: a live object of ours.
        unsafe { super::super::add_ref::<Thing>(object) };
        release(object);
        assert_eq!(DllCanUnloadNow(), S_FALSE, "one reference is left");
        release(object);
        assert_eq!(DllCanUnloadNow(), ND_SUCCESS);
    }

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

    #[test]
    fn factory_gives_providers_and_counts_them() {
        let _serial = serial_for_test();
        let mut factory: *mut c_void = std::ptr::null_mut();
        // SAFETY: live locals and statics.
        let hr = unsafe { DllGetClassObject(&iids::IID_IND2Adapter, &iids::IID_IClassFactory, &mut factory) };
        assert_eq!((hr, factory.is_null()), (CLASS_E_CLASSNOTAVAILABLE, true));
        // SAFETY: as above.
        let hr = unsafe { DllGetClassObject(&iids::CLSID_NdShimProvider, &iids::IID_IClassFactory, &mut factory) };
        assert_eq!(hr, ND_SUCCESS);
        assert_eq!(DllCanUnloadNow(), S_FALSE);
        let mut provider: *mut c_void = std::ptr::null_mut();
        // SAFETY: a factory of ours, live locals.
        unsafe {
            assert_eq!(
                create_instance(factory, factory, &iids::IID_IND2Provider, &mut provider),
                CLASS_E_NOAGGREGATION
            );
            assert_eq!(
                create_instance(factory, std::ptr::null_mut(), &iids::IID_INDProvider, &mut provider),
                E_NOINTERFACE
            );
            assert!(provider.is_null());
            assert_eq!(lock_server(factory, 1), ND_SUCCESS);
            assert_eq!(
                create_instance(factory, std::ptr::null_mut(), &iids::IID_IND2Provider, &mut provider),
                ND_SUCCESS
            );
        }
        release(factory);
        assert_eq!(DllCanUnloadNow(), S_FALSE);
        // SAFETY: a provider of ours, live locals.
        unsafe {
            let mut id = 0u64;
            assert_eq!(
                resolve_address(provider, std::ptr::null(), 16, &mut id),
                ND_INVALID_PARAMETER
            );
            let mut out: *mut c_void = std::ptr::null_mut();
            assert_eq!(
                open_adapter(provider, &iids::IID_INDAdapter, 0, &mut out),
                E_NOINTERFACE
            );
            assert_eq!(
                open_adapter(provider, &iids::IID_IND2Adapter, 0xdead, &mut out),
                ND_INVALID_PARAMETER
            );
        }
        release(provider);
        // A lock still holds, and then none.
        assert_eq!(DllCanUnloadNow(), S_FALSE);
        LOCKS.fetch_sub(1, Ordering::AcqRel);
        assert_eq!(DllCanUnloadNow(), ND_SUCCESS);
    }
}
