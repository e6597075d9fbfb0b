//! The Win32 handles that ND2 completions drive, exported by libnd_shim with Win32 semantics:
//! events (CreateEventA/W, SetEvent, ResetEvent, WaitForSingleObject), I/O completion ports
//! (CreateIoCompletionPort, GetQueuedCompletionStatus, PostQueuedCompletionStatus), the adapter's
//! overlapped files (IND2Adapter::CreateOverlappedFile, bound to a port with
//! CreateIoCompletionPort), CloseHandle, and the thread's GetLastError/SetLastError.
//!
//! A HANDLE is a number in one process-wide table, a multiple of 4: as on Windows, the low two
//! bits of a handle are ignored, so `hEvent | 1` (ND's "signal the event, post nothing to the
//! port") names the same event, and a closed handle's value comes back later for a new object
//! (here only after REUSE_AFTER other handles were closed).
//!
//! Their locks and condition variables are parking_lot's: a completion signals an event or posts
//! a packet whether or not a thread waits for it, and parking_lot's notify is a load when none
//! does, where std's futex condition variable makes a system call every time.

use parking_lot::{Condvar, Mutex, MutexGuard};
use std::cell::Cell;
use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use super::{boundary, pump};
use crate::status::NdStatus;

pub type Handle = *mut c_void;
pub type Bool = i32;

pub const INFINITE: u32 = u32::MAX;
pub const WAIT_OBJECT_0: u32 = 0;
pub const WAIT_TIMEOUT: u32 = 258;
pub const WAIT_FAILED: u32 = u32::MAX;
pub const ERROR_INVALID_HANDLE: u32 = 6;
pub const ERROR_INVALID_PARAMETER: u32 = 87;
pub const ERROR_NOT_SUPPORTED: u32 = 50;
/// `INVALID_HANDLE_VALUE`, `(HANDLE)-1`.
const INVALID_HANDLE_VALUE: usize = usize::MAX;

/// How long a wait may last: `INFINITE` is `None`.
fn timeout(ms: u32) -> Option<Duration> {
    (ms != INFINITE).then(|| Duration::from_millis(u64::from(ms)))
}

/// Waits on `cv` until `ready` says so or the deadline passes; the guard comes back either way.
fn wait_until<T>(
    cv: &Condvar,
    guard: &mut MutexGuard<'_, T>,
    deadline: Option<Instant>,
    mut ready: impl FnMut(&mut T) -> bool,
) -> bool {
    loop {
        if ready(guard) {
            return true;
        }
        match deadline {
            None => cv.wait(guard),
            Some(deadline) => {
                if Instant::now() >= deadline {
                    return false;
                }
                cv.wait_until(guard, deadline);
            }
        }
    }
}

/// A Win32 event: manual-reset stays signalled until ResetEvent; auto-reset releases one waiter.
pub(crate) struct Event {
    manual: bool,
    signalled: Mutex<bool>,
    cv: Condvar,
}

impl Event {
    pub(crate) fn set(&self) {
        self.set_unkicked();
        pump::kick();
    }

    /// Sets the event without waking the leader: the caller calls [`pump::kick`] (or fences
    /// and calls [`pump::kick_fenced`]) once its changes are all made.
    pub(crate) fn set_unkicked(&self) {
        *self.signalled.lock() = true;
        if self.manual {
            self.cv.notify_all();
        } else {
            self.cv.notify_one();
        }
    }

    fn reset(&self) {
        *self.signalled.lock() = false;
    }

    fn wait(&self, ms: u32) -> bool {
        let deadline = timeout(ms).map(|t| Instant::now() + t);
        let manual = self.manual;
        let take = move |signalled: &mut bool| {
            let was = *signalled;
            if was && !manual {
                *signalled = false;
            }
            was
        };
        if ms != 0 {
            // The leader reads the completion channels itself (pump.rs): one wake-up per event.
            if let Some(leader) = pump::lead() {
                return leader.wait_until(deadline, || take(&mut self.signalled.lock()));
            }
        }
        wait_until(&self.cv, &mut self.signalled.lock(), deadline, take)
    }
}

/// One completion packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Packet {
    pub(crate) bytes: u32,
    pub(crate) key: usize,
    /// The OVERLAPPED's address (0 for a packet posted without one).
    pub(crate) overlapped: usize,
    /// The operation's status; a failure makes GetQueuedCompletionStatus return FALSE.
    pub(crate) status: NdStatus,
}

/// An I/O completion port: a FIFO of packets.
#[derive(Default)]
pub(crate) struct Port {
    packets: Mutex<VecDeque<Packet>>,
    cv: Condvar,
}

impl Port {
    pub(crate) fn post(&self, packet: Packet) {
        self.post_unkicked(packet);
        pump::kick();
    }

    /// Posts without waking the leader, as [`Event::set_unkicked`].
    pub(crate) fn post_unkicked(&self, packet: Packet) {
        self.packets.lock().push_back(packet);
        self.cv.notify_one();
    }

    pub(crate) fn get(&self, ms: u32) -> Option<Packet> {
        let deadline = timeout(ms).map(|t| Instant::now() + t);
        if ms != 0 {
            // The leader reads the completion channels itself (pump.rs): one wake-up per event.
            // Its first look at the queue comes before any wait.
            if let Some(leader) = pump::lead() {
                let mut got = None;
                leader.wait_until(deadline, || {
                    got = self.packets.lock().pop_front();
                    got.is_some()
                });
                return got;
            }
        }
        let mut packets = self.packets.lock();
        wait_until(&self.cv, &mut packets, deadline, |p| !p.is_empty());
        packets.pop_front()
    }
}

/// The file an ND2 object's overlapped requests complete on: bound to at most one port, with the
/// key CreateIoCompletionPort gave (once: read without a lock or a count at every completion).
#[derive(Default)]
pub(crate) struct OverlappedFile {
    port: OnceLock<(Arc<Port>, usize)>,
}

impl OverlappedFile {
    pub(crate) fn port(&self) -> Option<&(Arc<Port>, usize)> {
        self.port.get()
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
struct Table {
    slots: Vec<Option<Object>>,
    /// Closed slots, oldest first.
    free: VecDeque<usize>,
}

const REUSE_AFTER: usize = 64;
/// The first handle's slot number: handles are multiples of 4 from 0x104 on (never NULL, never
/// INVALID_HANDLE_VALUE).
const FIRST_SLOT: usize = 0x41;

fn table() -> MutexGuard<'static, Table> {
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
        let slot = match slot {
            Some(slot) => {
                self.slots[slot] = Some(object);
                slot
            }
            None => {
                self.slots.push(Some(object));
                self.slots.len() - 1
            }
        };
        ((slot + FIRST_SLOT) << 2) as Handle
    }

    fn get(&self, handle: Handle) -> Option<&Object> {
        self.slots.get(slot(handle)?)?.as_ref()
    }

    fn remove(&mut self, handle: Handle) -> Option<Object> {
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

thread_local! {
    static LAST_ERROR: Cell<u32> = const { Cell::new(0) };
}

pub(crate) fn set_last_error(error: u32) {
    LAST_ERROR.with(|e| e.set(error));
}

/// The Win32 error a failed operation's packet sets (RtlNtStatusToDosError for ND's codes).
pub(crate) fn win32_error(status: NdStatus) -> u32 {
    match status {
        NdStatus::ND_SUCCESS => 0,
        NdStatus::ND_CANCELED => 995,                // ERROR_OPERATION_ABORTED
        NdStatus::ND_IO_TIMEOUT => 121,              // ERROR_SEM_TIMEOUT
        NdStatus::ND_BUFFER_OVERFLOW => 234,         // ERROR_MORE_DATA
        NdStatus::ND_ACCESS_VIOLATION => 998,        // ERROR_NOACCESS
        NdStatus::ND_INVALID_PARAMETER => 87,        // ERROR_INVALID_PARAMETER
        NdStatus::ND_INVALID_BUFFER_SIZE => 1784,    // ERROR_INVALID_USER_BUFFER
        NdStatus::ND_CONNECTION_REFUSED => 1225,     // ERROR_CONNECTION_REFUSED
        NdStatus::ND_NETWORK_UNREACHABLE => 1231,    // ERROR_NETWORK_UNREACHABLE
        NdStatus::ND_HOST_UNREACHABLE => 1232,       // ERROR_HOST_UNREACHABLE
        NdStatus::ND_CONNECTION_ABORTED => 1236,     // ERROR_CONNECTION_ABORTED
        NdStatus::ND_CONNECTION_INVALID => 1229,     // ERROR_CONNECTION_INVALID
        NdStatus::ND_CONNECTION_ACTIVE => 1230,      // ERROR_CONNECTION_ACTIVE
        NdStatus::ND_INSUFFICIENT_RESOURCES => 1450, // ERROR_NO_SYSTEM_RESOURCES
        _ => 317,                                    // ERROR_MR_MID_NOT_FOUND: no mapping
    }
}

fn bool_result(ok: bool, error: u32) -> Bool {
    if !ok {
        set_last_error(error);
    }
    Bool::from(ok)
}

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

fn create_event(attributes: *mut c_void, manual_reset: Bool, initial: Bool, unnamed: bool) -> Handle {
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

#[no_mangle]
pub extern "C" fn CloseHandle(handle: Handle) -> Bool {
    boundary("CloseHandle", 0, || {
        let removed = table().remove(handle).is_some();
        bool_result(removed, ERROR_INVALID_HANDLE)
    })
}

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
        if file.port.set((port, key)).is_err() {
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
        let Some(packet) = port.get(ms) else {
            return bool_result(false, WAIT_TIMEOUT);
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

#[no_mangle]
pub extern "C" fn GetLastError() -> u32 {
    boundary("GetLastError", 0, || LAST_ERROR.with(Cell::get))
}

#[no_mangle]
pub extern "C" fn SetLastError(error: u32) {
    boundary("SetLastError", (), || set_last_error(error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn low_two_bits_of_a_handle_are_ignored() {
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

    #[test]
    fn auto_reset_event_releases_one_wait() {
        let event = create_event(std::ptr::null_mut(), 0, 1, true);
        assert_eq!(WaitForSingleObject(event, 0), WAIT_OBJECT_0);
        assert_eq!(WaitForSingleObject(event, 0), WAIT_TIMEOUT);
        assert_eq!(CloseHandle(event), 1);
    }

    #[test]
    fn port_timeout_and_failed_packet() {
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
}
