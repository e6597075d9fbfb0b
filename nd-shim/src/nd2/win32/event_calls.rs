//! The event calls: CreateEventA/W, SetEvent, ResetEvent, WaitForSingleObject(Ex),
//! WaitForMultipleObjects(Ex).

use parking_lot::{Condvar, Mutex};
use std::ffi::c_void;
use std::sync::Arc;

use super::common::{
    Bool, Handle, ERROR_INVALID_HANDLE, ERROR_INVALID_PARAMETER, ERROR_NOT_SUPPORTED, MAXIMUM_WAIT_OBJECTS,
    WAIT_FAILED, WAIT_OBJECT_0, WAIT_TIMEOUT,
};
use super::errors::{bool_result, set_last_error};
use super::event::{wait_multiple, Event};
use super::handles::{event, insert, Object};
use crate::nd2::boundary;

/// # Safety
/// The arguments are the Win32 function's; `attributes` and `name` must be NULL.
#[no_mangle]
pub unsafe extern "C" fn CreateEventA(
    attributes: *mut c_void,
    manual_reset: Bool,
    initial: Bool,
    name: *const u8,
) -> Handle {
    boundary("CreateEventA", std::ptr::null_mut(), || {
        create_event(attributes, manual_reset, initial, name.is_null())
    })
}

/// # Safety
/// As CreateEventA.
#[no_mangle]
pub unsafe extern "C" fn CreateEventW(
    attributes: *mut c_void,
    manual_reset: Bool,
    initial: Bool,
    name: *const u16,
) -> Handle {
    boundary("CreateEventW", std::ptr::null_mut(), || {
        create_event(attributes, manual_reset, initial, name.is_null())
    })
}

pub(super) fn create_event(attributes: *mut c_void, manual_reset: Bool, initial: Bool, unnamed: bool) -> Handle {
    if !attributes.is_null() || !unnamed {
        // Security attributes and named (cross-process) events have no meaning here.
        set_last_error(ERROR_NOT_SUPPORTED);
        return std::ptr::null_mut();
    }
    insert(Object::Event(Arc::new(Event {
        manual: manual_reset != 0,
        signalled: Mutex::new(initial != 0),
        cv: Condvar::new(),
    })))
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nd2::pump;
    use crate::nd2::win32::*;
    use std::time::{Duration, Instant};

    #[test]
    fn auto_reset_event_releases_one_wait() {
        let _pump = pump::exclusive_for_test();
        let event = create_event(std::ptr::null_mut(), 0, 1, true);
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
}
