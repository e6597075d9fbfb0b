//! The completion port calls: CreateIoCompletionPort (a new port, or an overlapped file bound to
//! one), GetQueuedCompletionStatus(Ex), PostQueuedCompletionStatus.

use std::ffi::c_void;
use std::sync::Arc;

use super::common::{
    Bool, Handle, ERROR_ABANDONED_WAIT_0, ERROR_INVALID_HANDLE, ERROR_INVALID_PARAMETER, INVALID_HANDLE_VALUE,
    WAIT_TIMEOUT,
};
use super::errors::{bool_result, set_last_error, win32_error};
use super::handles::{insert, lookup, overlapped_file, table, Object};
use super::port::{Got, Packet, Port};
use crate::nd2::boundary;
use crate::status::NdStatus;

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
        if !overlapped.is_null() {
            // SAFETY: non-NULL, writable (the caller's promise); NULL unless a packet comes.
            unsafe { overlapped.write(std::ptr::null_mut()) };
        }
        let Some(Object::Port(port)) = lookup(port) else {
            return bool_result(false, ERROR_INVALID_HANDLE);
        };
        let packet = match port.wait(ms) {
            Got::Packet(packet) => packet,
            Got::Timeout => return bool_result(false, WAIT_TIMEOUT),
            Got::Abandoned => return bool_result(false, ERROR_ABANDONED_WAIT_0),
        };
        // SAFETY: each out pointer is NULL or writable (the caller's promise).
        unsafe {
            if !bytes.is_null() {
                bytes.write(packet.bytes);
            }
            if !key.is_null() {
                key.write(packet.key);
            }
            if !overlapped.is_null() {
                overlapped.write(packet.overlapped as *mut c_void);
            }
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
        if !removed.is_null() {
            // SAFETY: non-NULL, writable (the caller's promise).
            unsafe { removed.write(0) };
        }
        if entries.is_null() || count == 0 || removed.is_null() {
            return bool_result(false, ERROR_INVALID_PARAMETER);
        }
        let Some(Object::Port(port)) = lookup(port) else {
            return bool_result(false, ERROR_INVALID_HANDLE);
        };
        let first = match port.wait(ms) {
            Got::Packet(packet) => packet,
            Got::Timeout => return bool_result(false, WAIT_TIMEOUT),
            Got::Abandoned => return bool_result(false, ERROR_ABANDONED_WAIT_0),
        };
        let more = port.take_more(count as usize - 1);
        for (i, packet) in std::iter::once(first).chain(more).enumerate() {
            let entry = OverlappedEntry {
                completion_key: packet.key,
                overlapped: packet.overlapped as *mut c_void,
                internal: packet.status.0 as isize as usize,
                bytes: packet.bytes,
            };
            // SAFETY: i < count, and `entries` is writable for `count` entries; `removed` as above.
            unsafe {
                entries.add(i).write(entry);
                removed.write(i as u32 + 1);
            }
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
    use crate::nd2::win32::event_calls::create_event;
    use crate::nd2::win32::*;
    use std::time::Duration;

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
        let event = create_event(std::ptr::null_mut(), 1, 0, true);
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
