//! The handle table (a HANDLE is a slot number, its low two bits ignored), the objects it holds,
//! the adapter's overlapped files, and what CloseHandle and CreateEvent do (their exports:
//! `calls.rs`).

#![forbid(unsafe_code)]

use parking_lot::{Condvar, Mutex, MutexGuard};
use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::{Arc, OnceLock};

use super::common::{Bool, Handle, ERROR_INVALID_HANDLE, ERROR_NOT_SUPPORTED};
use super::errors::{bool_result, set_last_error};
use super::event::Event;
use super::port::Port;
use crate::nd2::int_map::store_in_slot;

/// The file an ND2 object's overlapped requests complete on: bound to at most one port, with the
/// key CreateIoCompletionPort gave (once: read without a lock or a count at every completion).
#[derive(Default)]
pub(crate) struct OverlappedFile {
    port: OnceLock<(Arc<Port>, usize)>,
    /// What the binder keeps with the file until its last holder is gone (BindIoCompletionCallback's
    /// membership of its pool, whose drop lets the pool's threads end: thread_pool.rs).
    _kept: OnceLock<Box<dyn Send + Sync>>,
}

impl OverlappedFile {
    pub(crate) fn port(&self) -> Option<&(Arc<Port>, usize)> {
        self.port.get()
    }

    /// Binds the file to `port` with `key`; false if it is bound already.
    pub(crate) fn bind(&self, port: Arc<Port>, key: usize) -> bool {
        self.port.set((port, key)).is_ok()
    }

    /// Binds the file to `port` with `key`, keeping `kept` as long as the file lives; false (and
    /// `kept` dropped) if it is bound already.
    pub(crate) fn bind_keeping(&self, port: Arc<Port>, key: usize, kept: Box<dyn Send + Sync>) -> bool {
        self.bind(port, key) && self._kept.set(kept).is_ok()
    }
}

#[derive(Clone)]
pub(crate) enum Object {
    Event(Arc<Event>),
    Port(Arc<Port>),
    File(Arc<OverlappedFile>),
}

/// The handle table: a slot per handle, found by the handle's value (no hashing on the wait
/// path). A closed handle's slot is reused, as Windows reuses handle values, but only once
/// REUSE_AFTER other handles were closed after it, so that a handle used just after its close
/// still names nothing.
#[derive(Default)]
pub(super) struct Table {
    slots: Vec<Option<Object>>,
    /// Closed slots, oldest first.
    free: VecDeque<usize>,
}

const REUSE_AFTER: usize = 64;
/// The first handle's slot number: handles are multiples of 4 from 0x104 on (never NULL, never
/// INVALID_HANDLE_VALUE).
const FIRST_SLOT: usize = 0x41;

pub(super) fn table() -> MutexGuard<'static, Table> {
    static TABLE: OnceLock<Mutex<Table>> = OnceLock::new();
    TABLE.get_or_init(Mutex::default).lock()
}

/// The slot a handle value names, if it can name one: the low two bits are the caller's.
fn slot(handle: Handle) -> Option<usize> {
    (handle as usize >> 2).checked_sub(FIRST_SLOT)
}

impl Table {
    fn insert(&mut self, object: Object) -> Handle {
        let slot = if self.free.len() > REUSE_AFTER {
            self.free.pop_front()
        } else {
            None
        };
        let slot = store_in_slot(&mut self.slots, slot, object);
        ((slot + FIRST_SLOT) << 2) as Handle
    }

    fn get(&self, handle: Handle) -> Option<&Object> {
        self.slots.get(slot(handle)?)?.as_ref()
    }

    pub(super) fn remove(&mut self, handle: Handle) -> Option<Object> {
        let slot = slot(handle)?;
        let object = self.slots.get_mut(slot)?.take()?;
        self.free.push_back(slot);
        Some(object)
    }
}

pub(crate) fn insert(object: Object) -> Handle {
    table().insert(object)
}

pub(crate) fn lookup(handle: Handle) -> Option<Object> {
    table().get(handle).cloned()
}

pub(crate) fn event(handle: Handle) -> Option<Arc<Event>> {
    match lookup(handle)? {
        Object::Event(event) => Some(event),
        _ => None,
    }
}

pub(crate) fn overlapped_file(handle: Handle) -> Option<Arc<OverlappedFile>> {
    match lookup(handle)? {
        Object::File(file) => Some(file),
        _ => None,
    }
}

/// CloseHandle. Closing a port wakes the threads that wait on it (ERROR_ABANDONED_WAIT_0).
pub(crate) fn close(handle: Handle) -> Bool {
    let removed = table().remove(handle);
    if let Some(Object::Port(port)) = &removed {
        port.close();
    }
    bool_result(removed.is_some(), ERROR_INVALID_HANDLE)
}

/// CreateEventA/W (`unnamed`: the name is NULL).
pub(crate) fn create_event(attributes: *mut c_void, manual_reset: Bool, initial: Bool, unnamed: bool) -> Handle {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nd2::pump;
    use crate::nd2::win32::*;

    #[test]
    fn low_two_bits_of_a_handle_are_ignored() {
        let _pump = pump::exclusive_for_test();
        let event = create_event(std::ptr::null_mut(), 1, 0, true);
        assert!(!event.is_null());
        assert_eq!(event as usize & 3, 0);
        let tagged = (event as usize | 1) as Handle;
        assert_eq!(SetEvent(tagged), 1);
        assert_eq!(WaitForSingleObject(event, 0), WAIT_OBJECT_0);
        assert_eq!(CloseHandle(tagged), 1);
        assert_eq!(SetEvent(event), 0);
        assert_eq!(GetLastError(), ERROR_INVALID_HANDLE);
    }

    #[test]
    fn a_closed_handle_is_not_reused_at_once() {
        let _pump = pump::exclusive_for_test();
        let closed = create_event(std::ptr::null_mut(), 1, 0, true);
        assert_eq!(CloseHandle(closed), 1);
        let created: Vec<Handle> = (0..8).map(|_| create_event(std::ptr::null_mut(), 1, 0, true)).collect();
        assert!(created.iter().all(|&h| h != closed && !h.is_null()));
        assert_eq!(SetEvent(closed), 0);
        assert_eq!(GetLastError(), ERROR_INVALID_HANDLE);
        for h in created {
            assert_eq!(CloseHandle(h), 1);
        }
        // Values that name no slot at all.
        for h in [0usize, 4, 0x100, usize::MAX & !3] {
            assert_eq!(CloseHandle(h as Handle), 0);
        }
    }
}
