//! The Win32 calls' exports: on events (CreateEventA/W, SetEvent, ResetEvent,
//! WaitForSingleObject(Ex), WaitForMultipleObjects(Ex)), on completion ports
//! (CreateIoCompletionPort: a new port, or an overlapped file bound to one;
//! GetQueuedCompletionStatus(Ex), PostQueuedCompletionStatus), CloseHandle, and the thread's
//! GetLastError / SetLastError. The objects are `event.rs`, `port.rs` and `handles.rs`.

use std::ffi::c_void;
use std::sync::Arc;

use super::common::{
    Bool, Handle, ERROR_ABANDONED_WAIT_0, ERROR_INVALID_HANDLE, ERROR_INVALID_PARAMETER, INVALID_HANDLE_VALUE,
    MAXIMUM_WAIT_OBJECTS, WAIT_FAILED, WAIT_OBJECT_0, WAIT_TIMEOUT,
};
use super::errors::{bool_result, last_error, set_last_error, win32_error};
use super::event::wait_multiple;
use super::handles::{close, create_event, event, insert, lookup, overlapped_file, table, Object};
use super::port::{Got, Packet, Port};
use crate::nd2::boundary;
use crate::status::NdStatus;

#[no_mangle]
pub extern "C" fn GetLastError() -> u32 {
    boundary("GetLastError", 0, last_error)
}

#[no_mangle]
pub extern "C" fn SetLastError(error: u32) {
    boundary("SetLastError", (), || set_last_error(error))
}

/// Closing a port wakes the threads that wait on it (ERROR_ABANDONED_WAIT_0).
#[no_mangle]
pub extern "C" fn CloseHandle(handle: Handle) -> Bool {
    boundary("CloseHandle", 0, || close(handle))
}

// The exports above, at the version node ND_SHIM_0 (crate::exports).
crate::exports::version_node!("GetLastError", "SetLastError", "CloseHandle");

// Events.

/// CreateEventA and CreateEventW, which differ only in the (unsupported) name's characters.
macro_rules! create_event_export {
    ($export:ident, $char:ty) => {
        /// # Safety
        /// The arguments are the Win32 function's; `attributes` and `name` must be NULL.
        #[no_mangle]
        pub unsafe extern "C" fn $export(
            attributes: *mut c_void,
            manual_reset: Bool,
            initial: Bool,
            name: *const $char,
        ) -> Handle {
            boundary(stringify!($export), std::ptr::null_mut(), || {
                create_event(attributes, manual_reset, initial, name.is_null())
            })
        }
    };
}

create_event_export!(CreateEventA, u8);
create_event_export!(CreateEventW, u16);

#[no_mangle]
pub extern "C" fn SetEvent(handle: Handle) -> Bool {
    boundary("SetEvent", 0, || match event(handle) {
        Some(event) => {
            event.set();
            1
        }
        None => bool_result(false, ERROR_INVALID_HANDLE),
    })
}

#[no_mangle]
pub extern "C" fn ResetEvent(handle: Handle) -> Bool {
    boundary("ResetEvent", 0, || match event(handle) {
        Some(event) => {
            event.reset();
            1
        }
        None => bool_result(false, ERROR_INVALID_HANDLE),
    })
}

/// Events only (what ND programs wait on); any other handle is WAIT_FAILED.
#[no_mangle]
pub extern "C" fn WaitForSingleObject(handle: Handle, ms: u32) -> u32 {
    boundary("WaitForSingleObject", WAIT_FAILED, || match event(handle) {
        Some(event) if event.wait(ms) => WAIT_OBJECT_0,
        Some(_) => WAIT_TIMEOUT,
        None => {
            set_last_error(ERROR_INVALID_HANDLE);
            WAIT_FAILED
        }
    })
}

/// As WaitForSingleObject: there are no APCs, so an alertable wait never returns
/// WAIT_IO_COMPLETION.
#[no_mangle]
pub extern "C" fn WaitForSingleObjectEx(handle: Handle, ms: u32, _alertable: Bool) -> u32 {
    WaitForSingleObject(handle, ms)
}

/// Events only, as WaitForSingleObject. Wait-any returns WAIT_OBJECT_0 + the lowest index
/// signalled (an auto-reset event is taken); wait-all returns WAIT_OBJECT_0 once all are
/// signalled together, taking them at once. `count` 0 or above MAXIMUM_WAIT_OBJECTS, a NULL
/// array, or the same event twice in a wait-all is WAIT_FAILED with ERROR_INVALID_PARAMETER; a
/// handle that names no event is WAIT_FAILED with ERROR_INVALID_HANDLE.
///
/// # Safety
/// `handles` is NULL or readable for `count` handles.
#[no_mangle]
pub unsafe extern "C" fn WaitForMultipleObjects(count: u32, handles: *const Handle, wait_all: Bool, ms: u32) -> u32 {
    boundary("WaitForMultipleObjects", WAIT_FAILED, || {
        let failed = |error| {
            set_last_error(error);
            WAIT_FAILED
        };
        if count == 0 || count > MAXIMUM_WAIT_OBJECTS || handles.is_null() {
            return failed(ERROR_INVALID_PARAMETER);
        }
        // SAFETY: non-NULL and readable for `count` handles (the caller's promise).
        let handles = unsafe { std::slice::from_raw_parts(handles, count as usize) };
        let mut events = Vec::with_capacity(handles.len());
        for &handle in handles {
            match event(handle) {
                Some(event) => events.push(event),
                None => return failed(ERROR_INVALID_HANDLE),
            }
        }
        let all = wait_all != 0;
        if all {
            let mut seen: Vec<usize> = events.iter().map(|e| Arc::as_ptr(e) as usize).collect();
            seen.sort_unstable();
            if seen.windows(2).any(|w| w[0] == w[1]) {
                return failed(ERROR_INVALID_PARAMETER);
            }
        }
        match wait_multiple(&events, all, ms) {
            Some(index) => WAIT_OBJECT_0 + index,
            None => WAIT_TIMEOUT,
        }
    })
}

/// As WaitForMultipleObjects (no APCs: never WAIT_IO_COMPLETION).
///
/// # Safety
/// As WaitForMultipleObjects.
#[no_mangle]
pub unsafe extern "C" fn WaitForMultipleObjectsEx(
    count: u32,
    handles: *const Handle,
    wait_all: Bool,
    ms: u32,
    _alertable: Bool,
) -> u32 {
    // SAFETY: forwarded.
    unsafe { WaitForMultipleObjects(count, handles, wait_all, ms) }
}

// The exports above, at the version node ND_SHIM_0 (crate::exports).
crate::exports::version_node!(
    "CreateEventA",
    "CreateEventW",
    "SetEvent",
    "ResetEvent",
    "WaitForSingleObject",
    "WaitForSingleObjectEx",
    "WaitForMultipleObjects",
    "WaitForMultipleObjectsEx",
);

// Completion ports.

/// `file` INVALID_HANDLE_VALUE: a new port (`existing` must be NULL). Otherwise `file` must be an
/// overlapped file, bound to `existing` (or to a new port when NULL) with `key`; the port's
/// handle is returned. A file is bound once.
#[no_mangle]
pub extern "C" fn CreateIoCompletionPort(file: Handle, existing: Handle, key: usize, _threads: u32) -> Handle {
    boundary("CreateIoCompletionPort", std::ptr::null_mut(), || {
        let fail = |error| {
            set_last_error(error);
            std::ptr::null_mut()
        };
        if file as usize == INVALID_HANDLE_VALUE {
            if !existing.is_null() {
                return fail(ERROR_INVALID_PARAMETER);
            }
            return insert(Object::Port(Arc::default()));
        }
        let Some(file) = overlapped_file(file) else {
            return fail(ERROR_INVALID_HANDLE);
        };
        if file.port().is_some() {
            return fail(ERROR_INVALID_PARAMETER);
        }
        let (port, handle) = if existing.is_null() {
            let port: Arc<Port> = Arc::default();
            (Arc::clone(&port), insert(Object::Port(port)))
        } else {
            match lookup(existing) {
                Some(Object::Port(port)) => (port, existing),
                _ => return fail(ERROR_INVALID_HANDLE),
            }
        };
        if !file.bind(port, key) {
            // Another thread bound it meanwhile: the port made for this call goes.
            if existing.is_null() {
                table().remove(handle);
            }
            return fail(ERROR_INVALID_PARAMETER);
        }
        handle
    })
}

/// The port behind `handle` and the first packet it gives within `ms`; or the FALSE of a bad
/// handle (ERROR_INVALID_HANDLE), a timeout (WAIT_TIMEOUT) or a port closed meanwhile
/// (ERROR_ABANDONED_WAIT_0), the thread's last error set.
fn wait_on_port(handle: Handle, ms: u32) -> Result<(Arc<Port>, Packet), Bool> {
    let Some(Object::Port(port)) = lookup(handle) else {
        return Err(bool_result(false, ERROR_INVALID_HANDLE));
    };
    match port.wait(ms) {
        Got::Packet(packet) => Ok((port, packet)),
        Got::Timeout => Err(bool_result(false, WAIT_TIMEOUT)),
        Got::Abandoned => Err(bool_result(false, ERROR_ABANDONED_WAIT_0)),
    }
}

/// # Safety
/// The out pointers are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn GetQueuedCompletionStatus(
    port: Handle,
    bytes: *mut u32,
    key: *mut usize,
    overlapped: *mut *mut c_void,
    ms: u32,
) -> Bool {
    boundary("GetQueuedCompletionStatus", 0, || {
        // SAFETY: each out pointer is NULL or writable (the caller's promise).
        let (bytes, key, overlapped) = unsafe { (bytes.as_mut(), key.as_mut(), overlapped.as_mut()) };
        // NULL unless a packet comes.
        let overlapped = overlapped.map(|overlapped| {
            *overlapped = std::ptr::null_mut();
            overlapped
        });
        let packet = match wait_on_port(port, ms) {
            Ok((_, packet)) => packet,
            Err(failed) => return failed,
        };
        if let Some(bytes) = bytes {
            *bytes = packet.bytes;
        }
        if let Some(key) = key {
            *key = packet.key;
        }
        if let Some(overlapped) = overlapped {
            *overlapped = packet.overlapped as *mut c_void;
        }
        if packet.status.0 < 0 {
            return bool_result(false, win32_error(packet.status));
        }
        1
    })
}

/// OVERLAPPED_ENTRY of minwinbase.h.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OverlappedEntry {
    pub completion_key: usize,
    pub overlapped: *mut c_void,
    /// The packet's status (sign-extended, as OVERLAPPED.Internal).
    pub internal: usize,
    pub bytes: u32,
}

/// Removes up to `count` packets, waiting (up to `ms`) for the first: TRUE with `*removed` >= 1.
/// A failed operation's packet is returned like any other (its status in the entry's Internal
/// and in its OVERLAPPED's); FALSE only for a timeout (WAIT_TIMEOUT), a port closed meanwhile
/// (ERROR_ABANDONED_WAIT_0), a bad handle or bad arguments. No APCs: `alertable` changes nothing.
///
/// # Safety
/// `entries` is NULL or writable for `count` entries; `removed` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn GetQueuedCompletionStatusEx(
    port: Handle,
    entries: *mut OverlappedEntry,
    count: u32,
    removed: *mut u32,
    ms: u32,
    _alertable: Bool,
) -> Bool {
    boundary("GetQueuedCompletionStatusEx", 0, || {
        // SAFETY: `removed` is NULL or writable, `entries` NULL or writable for `count` entries
        // (the caller's promises).
        let (removed, entries) = unsafe {
            let entries = (!entries.is_null()).then(|| std::slice::from_raw_parts_mut(entries, count as usize));
            (removed.as_mut(), entries)
        };
        let removed = removed.map(|removed| {
            *removed = 0;
            removed
        });
        let (Some(entries), Some(removed)) = (entries.filter(|e| !e.is_empty()), removed) else {
            return bool_result(false, ERROR_INVALID_PARAMETER);
        };
        let (port, first) = match wait_on_port(port, ms) {
            Ok(got) => got,
            Err(failed) => return failed,
        };
        let more = port.take_more(entries.len() - 1);
        for (i, (packet, entry)) in std::iter::once(first).chain(more).zip(entries.iter_mut()).enumerate() {
            *entry = OverlappedEntry {
                completion_key: packet.key,
                overlapped: packet.overlapped as *mut c_void,
                internal: packet.status.0 as isize as usize,
                bytes: packet.bytes,
            };
            *removed = i as u32 + 1;
        }
        1
    })
}

#[no_mangle]
pub extern "C" fn PostQueuedCompletionStatus(port: Handle, bytes: u32, key: usize, overlapped: *mut c_void) -> Bool {
    boundary("PostQueuedCompletionStatus", 0, || match lookup(port) {
        Some(Object::Port(port)) => {
            port.post(Packet {
                bytes,
                key,
                overlapped: overlapped as usize,
                status: NdStatus::ND_SUCCESS,
            });
            1
        }
        _ => bool_result(false, ERROR_INVALID_HANDLE),
    })
}

// The exports above, at the version node ND_SHIM_0 (crate::exports).
crate::exports::version_node!(
    "CreateIoCompletionPort",
    "GetQueuedCompletionStatus",
    "GetQueuedCompletionStatusEx",
    "PostQueuedCompletionStatus",
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nd2::pump;
    use crate::nd2::win32::*;
    use std::time::{Duration, Instant};

    // Events.

    #[test]
    fn auto_reset_event_releases_one_wait() {
        let _pump = pump::exclusive_for_test();
        let event = new_event(false, true);
        assert_eq!(WaitForSingleObject(event, 0), WAIT_OBJECT_0);
        assert_eq!(WaitForSingleObject(event, 0), WAIT_TIMEOUT);
        assert_eq!(CloseHandle(event), 1);
    }

    fn new_event(manual: bool, initial: bool) -> Handle {
        create_event(std::ptr::null_mut(), Bool::from(manual), Bool::from(initial), true)
    }

    fn wait_many(handles: &[Handle], all: bool, ms: u32) -> u32 {
        // SAFETY: a live slice.
        unsafe { WaitForMultipleObjects(handles.len() as u32, handles.as_ptr(), Bool::from(all), ms) }
    }

    #[test]
    fn wait_any_takes_the_lowest_signalled_index() {
        let _pump = pump::exclusive_for_test();
        let h = [new_event(false, false), new_event(true, true), new_event(false, true)];
        assert_eq!(wait_many(&h, false, 0), WAIT_OBJECT_0 + 1);
        // Manual-reset: still signalled.
        assert_eq!(wait_many(&h, false, 0), WAIT_OBJECT_0 + 1);
        assert_eq!(ResetEvent(h[1]), 1);
        assert_eq!(wait_many(&h, false, 0), WAIT_OBJECT_0 + 2);
        // Auto-reset: taken by the wait.
        assert_eq!(wait_many(&h, false, 0), WAIT_TIMEOUT);
        let started = Instant::now();
        assert_eq!(wait_many(&h, false, 30), WAIT_TIMEOUT);
        assert!(started.elapsed() >= Duration::from_millis(30));
        // The Ex form, alertable or not, is the same wait.
        assert_eq!(SetEvent(h[0]), 1);
        // SAFETY: a live array.
        let got = unsafe { WaitForMultipleObjectsEx(3, h.as_ptr(), 0, 0, 1) };
        assert_eq!(got, WAIT_OBJECT_0);
        assert_eq!(SetEvent(h[2]), 1);
        assert_eq!(WaitForSingleObjectEx(h[2], 0, 1), WAIT_OBJECT_0);
        assert_eq!(WaitForSingleObjectEx(h[2], 0, 0), WAIT_TIMEOUT);
        for h in h {
            assert_eq!(CloseHandle(h), 1);
        }
    }

    #[test]
    fn wait_all_takes_all_at_once_or_none() {
        let _pump = pump::exclusive_for_test();
        let h = [new_event(false, true), new_event(true, false), new_event(false, true)];
        assert_eq!(wait_many(&h, true, 0), WAIT_TIMEOUT);
        // Nothing was taken by the failed wait-all.
        assert_eq!(WaitForSingleObject(h[0], 0), WAIT_OBJECT_0);
        assert_eq!(SetEvent(h[0]), 1);
        assert_eq!(SetEvent(h[1]), 1);
        assert_eq!(wait_many(&h, true, 0), WAIT_OBJECT_0);
        // The auto-reset ones were taken, the manual one stays.
        assert_eq!(WaitForSingleObject(h[0], 0), WAIT_TIMEOUT);
        assert_eq!(WaitForSingleObject(h[2], 0), WAIT_TIMEOUT);
        assert_eq!(WaitForSingleObject(h[1], 0), WAIT_OBJECT_0);
        for h in h {
            assert_eq!(CloseHandle(h), 1);
        }
    }

    #[test]
    fn wait_multiple_bad_arguments() {
        let _pump = pump::exclusive_for_test();
        let e = new_event(true, true);
        assert_eq!(wait_many(&[], false, 0), WAIT_FAILED);
        assert_eq!(GetLastError(), ERROR_INVALID_PARAMETER);
        // SAFETY: NULL is checked.
        let got = unsafe { WaitForMultipleObjects(1, std::ptr::null(), 0, 0) };
        assert_eq!(got, WAIT_FAILED);
        assert_eq!(GetLastError(), ERROR_INVALID_PARAMETER);
        assert_eq!(wait_many(&[e; 65], false, 0), WAIT_FAILED);
        assert_eq!(GetLastError(), ERROR_INVALID_PARAMETER);
        // The same event twice: fine for wait-any, not for wait-all.
        assert_eq!(wait_many(&[e, e], false, 0), WAIT_OBJECT_0);
        assert_eq!(wait_many(&[e, (e as usize | 1) as Handle], true, 0), WAIT_FAILED);
        assert_eq!(GetLastError(), ERROR_INVALID_PARAMETER);
        let port = CreateIoCompletionPort(INVALID_HANDLE_VALUE as Handle, std::ptr::null_mut(), 0, 0);
        assert_eq!(wait_many(&[e, port], false, 0), WAIT_FAILED);
        assert_eq!(GetLastError(), ERROR_INVALID_HANDLE);
        assert_eq!(CloseHandle(port), 1);
        assert_eq!(CloseHandle(e), 1);
        assert_eq!(wait_many(&[e], false, 0), WAIT_FAILED);
        assert_eq!(GetLastError(), ERROR_INVALID_HANDLE);
    }

    #[test]
    fn wait_multiple_wakes_on_another_threads_set() {
        let _pump = pump::exclusive_for_test();
        let h = [new_event(false, false), new_event(false, false)];
        let (a, b) = (h[0] as usize, h[1] as usize);
        let waiter = std::thread::spawn(move || {
            let any = wait_many(&[a as Handle, b as Handle], false, INFINITE);
            let all = wait_many(&[a as Handle, b as Handle], true, 5000);
            (any, all)
        });
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(SetEvent(h[1]), 1);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(SetEvent(h[0]), 1);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(SetEvent(h[1]), 1);
        assert_eq!(waiter.join().unwrap(), (WAIT_OBJECT_0 + 1, WAIT_OBJECT_0));
        for h in h {
            assert_eq!(WaitForSingleObject(h, 0), WAIT_TIMEOUT);
            assert_eq!(CloseHandle(h), 1);
        }
    }

    // Completion ports.

    #[test]
    fn port_timeout_and_failed_packet() {
        let _pump = pump::exclusive_for_test();
        let port = CreateIoCompletionPort(INVALID_HANDLE_VALUE as Handle, std::ptr::null_mut(), 0, 0);
        assert!(!port.is_null());
        let (mut bytes, mut key, mut ov) = (7u32, 7usize, 1 as *mut c_void);
        // SAFETY: live locals.
        let got = unsafe { GetQueuedCompletionStatus(port, &mut bytes, &mut key, &mut ov, 0) };
        assert_eq!((got, GetLastError(), ov), (0, WAIT_TIMEOUT, std::ptr::null_mut()));
        let Some(Object::Port(p)) = lookup(port) else {
            panic!("not a port")
        };
        p.post(Packet {
            bytes: 0,
            key: 5,
            overlapped: 0x1000,
            status: NdStatus::ND_CANCELED,
        });
        // SAFETY: live locals.
        let got = unsafe { GetQueuedCompletionStatus(port, &mut bytes, &mut key, &mut ov, INFINITE) };
        assert_eq!((got, GetLastError(), key, ov as usize), (0, 995, 5, 0x1000));
        assert_eq!(PostQueuedCompletionStatus(port, 3, 9, std::ptr::null_mut()), 1);
        // SAFETY: live locals.
        let got = unsafe { GetQueuedCompletionStatus(port, &mut bytes, &mut key, &mut ov, INFINITE) };
        assert_eq!((got, bytes, key), (1, 3, 9));
        assert_eq!(CloseHandle(port), 1);
        // A closed handle names nothing.
        // SAFETY: live locals.
        let got = unsafe { GetQueuedCompletionStatus(port, &mut bytes, &mut key, &mut ov, 0) };
        assert_eq!((got, GetLastError()), (0, ERROR_INVALID_HANDLE));
    }

    #[test]
    fn a_file_binds_to_one_port() {
        let _pump = pump::exclusive_for_test();
        let file = insert(Object::File(Arc::default()));
        let port = CreateIoCompletionPort(file, std::ptr::null_mut(), 1, 0);
        assert!(!port.is_null());
        assert!(CreateIoCompletionPort(file, port, 2, 0).is_null());
        assert_eq!(GetLastError(), ERROR_INVALID_PARAMETER);
        let event = new_event(true, false);
        assert!(CreateIoCompletionPort(event, port, 2, 0).is_null());
        assert_eq!(GetLastError(), ERROR_INVALID_HANDLE);
        for h in [file, port, event] {
            assert_eq!(CloseHandle(h), 1);
        }
    }

    fn new_port() -> Handle {
        CreateIoCompletionPort(INVALID_HANDLE_VALUE as Handle, std::ptr::null_mut(), 0, 0)
    }

    fn get_ex(port: Handle, entries: &mut [OverlappedEntry], ms: u32) -> (Bool, u32, u32) {
        let mut removed = 99;
        // SAFETY: live locals.
        let ok = unsafe {
            GetQueuedCompletionStatusEx(port, entries.as_mut_ptr(), entries.len() as u32, &mut removed, ms, 0)
        };
        (ok, removed, if ok == 0 { GetLastError() } else { 0 })
    }

    #[test]
    fn get_queued_completion_status_ex_takes_what_is_queued() {
        let _pump = pump::exclusive_for_test();
        let port = new_port();
        let blank = OverlappedEntry {
            completion_key: 0,
            overlapped: std::ptr::null_mut(),
            internal: 7,
            bytes: 7,
        };
        let mut entries = [blank; 4];
        assert_eq!(get_ex(port, &mut entries, 0), (0, 0, WAIT_TIMEOUT));
        for i in 0..6u32 {
            assert_eq!(
                PostQueuedCompletionStatus(port, i, 10 + i as usize, (0x1000 * i as usize) as *mut c_void),
                1
            );
        }
        let Some(Object::Port(p)) = lookup(port) else {
            panic!("not a port")
        };
        p.post(Packet {
            bytes: 0,
            key: 77,
            overlapped: 0x7000,
            status: NdStatus::ND_CANCELED,
        });
        assert_eq!(get_ex(port, &mut entries, INFINITE), (1, 4, 0));
        let keys: Vec<usize> = entries.iter().map(|e| e.completion_key).collect();
        assert_eq!(keys, [10, 11, 12, 13]);
        assert_eq!(
            (entries[3].bytes, entries[3].overlapped as usize, entries[3].internal),
            (3, 0x3000, 0)
        );
        // The rest, a failed operation's packet included: TRUE, its status in Internal.
        assert_eq!(get_ex(port, &mut entries, INFINITE), (1, 3, 0));
        assert_eq!(entries[2].completion_key, 77);
        assert_eq!(entries[2].internal, 0xFFFF_FFFF_C000_0120);
        // Bad arguments.
        assert_eq!(get_ex(port, &mut [], 0), (0, 0, ERROR_INVALID_PARAMETER));
        // SAFETY: NULL is checked.
        let ok = unsafe { GetQueuedCompletionStatusEx(port, entries.as_mut_ptr(), 1, std::ptr::null_mut(), 0, 0) };
        assert_eq!((ok, GetLastError()), (0, ERROR_INVALID_PARAMETER));
        assert_eq!(CloseHandle(port), 1);
        assert_eq!(get_ex(port, &mut entries, 0), (0, 0, ERROR_INVALID_HANDLE));
    }

    #[test]
    fn closing_a_port_wakes_its_waiters() {
        let _pump = pump::exclusive_for_test();
        let port = new_port();
        let raw = port as usize;
        let waiters: Vec<_> = (0..2)
            .map(|i| {
                std::thread::spawn(move || {
                    let port = raw as Handle;
                    if i == 0 {
                        let (mut bytes, mut key, mut ov) = (0u32, 0usize, 1 as *mut c_void);
                        // SAFETY: live locals.
                        let ok = unsafe { GetQueuedCompletionStatus(port, &mut bytes, &mut key, &mut ov, INFINITE) };
                        (ok, GetLastError(), ov as usize)
                    } else {
                        let mut entries = [OverlappedEntry {
                            completion_key: 0,
                            overlapped: std::ptr::null_mut(),
                            internal: 0,
                            bytes: 0,
                        }];
                        let (ok, removed, error) = get_ex(port, &mut entries, INFINITE);
                        (ok, error, removed as usize)
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(CloseHandle(port), 1);
        for waiter in waiters {
            assert_eq!(waiter.join().unwrap(), (0, ERROR_ABANDONED_WAIT_0, 0));
        }
    }
}
