//! The Win32 handles that ND2 completions drive, exported by libnd_shim with Win32 semantics:
//! events (CreateEventA/W, SetEvent, ResetEvent, WaitForSingleObject(Ex),
//! WaitForMultipleObjects(Ex)), I/O completion ports (CreateIoCompletionPort,
//! GetQueuedCompletionStatus(Ex), PostQueuedCompletionStatus; closing a port wakes its waiters
//! with ERROR_ABANDONED_WAIT_0), the adapter's
//! overlapped files (IND2Adapter::CreateOverlappedFile, bound to a port with
//! CreateIoCompletionPort, or to the shim's thread pool with BindIoCompletionCallback:
//! thread_pool.rs), CloseHandle, and the thread's GetLastError/SetLastError.
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
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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
pub const ERROR_NOT_ENOUGH_MEMORY: u32 = 8;
/// A wait on a completion port that was closed meanwhile.
pub const ERROR_ABANDONED_WAIT_0: u32 = 735;
/// WaitForMultipleObjects' largest count.
pub const MAXIMUM_WAIT_OBJECTS: u32 = 64;
/// `INVALID_HANDLE_VALUE`, `(HANDLE)-1`.
pub(crate) const INVALID_HANDLE_VALUE: usize = usize::MAX;

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
        multi().wake();
    }

    fn reset(&self) {
        *self.signalled.lock() = false;
    }

    /// Takes the event if it is signalled (an auto-reset event is reset): a wait's success.
    fn take(&self) -> bool {
        let mut signalled = self.signalled.lock();
        let was = *signalled;
        if was && !self.manual {
            *signalled = false;
        }
        was
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
        let _follower = (ms != 0).then(pump::follow);
        let taken = wait_until(&self.cv, &mut self.signalled.lock(), deadline, take);
        if !taken && ms == 0 {
            pump::polled();
        }
        taken
    }
}

/// The sleepers of WaitForMultipleObjects that are not the leader: they sleep on one process-wide
/// condition variable, which every SetEvent notifies while one of them waits (a load otherwise).
///
/// No lost wake-up: a sleeper counts itself, then checks its events under each one's lock,
/// holding `lock` from before the check until it sleeps; a setter sets under the event's lock,
/// then reads the count and, if non-zero, notifies under `lock`. The event's lock orders the
/// two: either the check sees the set, or the setter sees the count (and its notify, under
/// `lock`, comes after the sleeper sleeps).
#[derive(Default)]
struct MultiWait {
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    cv: Condvar,
}

fn multi() -> &'static MultiWait {
    static MULTI: OnceLock<MultiWait> = OnceLock::new();
    MULTI.get_or_init(MultiWait::default)
}

impl MultiWait {
    fn wake(&self) {
        if self.sleepers.load(Ordering::SeqCst) != 0 {
            let _held = self.lock.lock();
            self.cv.notify_all();
        }
    }
}

/// WaitForMultipleObjects' check: wait-any takes the first signalled event (lowest index);
/// wait-all takes all of them at once or none (their locks held together, in address order).
fn try_take(events: &[Arc<Event>], all: bool) -> Option<u32> {
    if !all {
        return events.iter().position(|e| e.take()).map(|i| i as u32);
    }
    let mut order: Vec<&Arc<Event>> = events.iter().collect();
    order.sort_by_key(|e| Arc::as_ptr(e) as usize);
    let mut guards: Vec<(bool, MutexGuard<'_, bool>)> = order.iter().map(|e| (e.manual, e.signalled.lock())).collect();
    if !guards.iter().all(|(_, signalled)| **signalled) {
        return None;
    }
    for (manual, signalled) in &mut guards {
        if !*manual {
            **signalled = false;
        }
    }
    Some(0)
}

/// Waits until [`try_take`] succeeds or the deadline passes.
fn wait_multiple(events: &[Arc<Event>], all: bool, ms: u32) -> Option<u32> {
    let deadline = timeout(ms).map(|t| Instant::now() + t);
    if ms != 0 {
        if let Some(leader) = pump::lead() {
            let mut got = None;
            leader.wait_until(deadline, || {
                got = try_take(events, all);
                got.is_some()
            });
            return got;
        }
    }
    let _follower = (ms != 0).then(pump::follow);
    let multi = multi();
    multi.sleepers.fetch_add(1, Ordering::SeqCst);
    let mut got = None;
    wait_until(&multi.cv, &mut multi.lock.lock(), deadline, |_| {
        got = try_take(events, all);
        got.is_some()
    });
    multi.sleepers.fetch_sub(1, Ordering::SeqCst);
    if got.is_none() && ms == 0 {
        pump::polled();
    }
    got
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
    /// Its handle was closed: its waiters return ERROR_ABANDONED_WAIT_0.
    closed: AtomicBool,
}

/// What a wait on a port got.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Got {
    Packet(Packet),
    Timeout,
    /// The port's handle was closed while the thread waited.
    Abandoned,
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

    /// A packet, waiting up to `ms` (tests).
    #[cfg(test)]
    pub(crate) fn get(&self, ms: u32) -> Option<Packet> {
        match self.wait(ms) {
            Got::Packet(packet) => Some(packet),
            _ => None,
        }
    }

    pub(crate) fn wait(&self, ms: u32) -> Got {
        let deadline = timeout(ms).map(|t| Instant::now() + t);
        let closed = || self.closed.load(Ordering::SeqCst);
        if ms != 0 {
            // The leader reads the completion channels itself (pump.rs): one wake-up per event.
            // Its first look at the queue comes before any wait.
            if let Some(leader) = pump::lead() {
                let mut got = None;
                let ready = leader.wait_until(deadline, || {
                    got = self.packets.lock().pop_front();
                    got.is_some() || closed()
                });
                return match got {
                    _ if ready && closed() => self.abandon(got),
                    Some(packet) => Got::Packet(packet),
                    None => Got::Timeout,
                };
            }
        }
        let _follower = (ms != 0).then(pump::follow);
        let mut packets = self.packets.lock();
        wait_until(&self.cv, &mut packets, deadline, |p| !p.is_empty() || closed());
        if closed() {
            drop(packets);
            return self.abandon(None);
        }
        let got = packets.pop_front();
        drop(packets);
        if got.is_none() && ms == 0 {
            pump::polled();
        }
        got.map_or(Got::Timeout, Got::Packet)
    }

    /// A waiter of a closed port leaves with nothing; a packet it took goes back.
    fn abandon(&self, taken: Option<Packet>) -> Got {
        if let Some(packet) = taken {
            self.packets.lock().push_front(packet);
        }
        Got::Abandoned
    }

    /// Up to `max` more packets that are already queued, no wait.
    fn take_more(&self, max: usize) -> Vec<Packet> {
        let mut packets = self.packets.lock();
        let n = max.min(packets.len());
        packets.drain(..n).collect()
    }

    /// CloseHandle of the port: every thread waiting on it returns (ERROR_ABANDONED_WAIT_0).
    fn close(&self) {
        let _packets = self.packets.lock();
        self.closed.store(true, Ordering::SeqCst);
        self.cv.notify_all();
        drop(_packets);
        pump::kick();
    }
}

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

pub(crate) fn bool_result(ok: bool, error: u32) -> Bool {
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

/// Closing a port wakes the threads that wait on it (ERROR_ABANDONED_WAIT_0).
#[no_mangle]
pub extern "C" fn CloseHandle(handle: Handle) -> Bool {
    boundary("CloseHandle", 0, || {
        let removed = table().remove(handle);
        if let Some(Object::Port(port)) = &removed {
            port.close();
        }
        bool_result(removed.is_some(), ERROR_INVALID_HANDLE)
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

#[no_mangle]
pub extern "C" fn GetLastError() -> u32 {
    boundary("GetLastError", 0, || LAST_ERROR.with(Cell::get))
}

#[no_mangle]
pub extern "C" fn SetLastError(error: u32) {
    boundary("SetLastError", (), || set_last_error(error))
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
    "CloseHandle",
    "CreateIoCompletionPort",
    "GetQueuedCompletionStatus",
    "GetQueuedCompletionStatusEx",
    "PostQueuedCompletionStatus",
    "GetLastError",
    "SetLastError",
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn low_two_bits_of_a_handle_are_ignored() {
        let _pump = super::pump::exclusive_for_test();
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
        let _pump = super::pump::exclusive_for_test();
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
        let _pump = super::pump::exclusive_for_test();
        let event = create_event(std::ptr::null_mut(), 0, 1, true);
        assert_eq!(WaitForSingleObject(event, 0), WAIT_OBJECT_0);
        assert_eq!(WaitForSingleObject(event, 0), WAIT_TIMEOUT);
        assert_eq!(CloseHandle(event), 1);
    }

    #[test]
    fn port_timeout_and_failed_packet() {
        let _pump = super::pump::exclusive_for_test();
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
        let _pump = super::pump::exclusive_for_test();
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

    fn new_event(manual: bool, initial: bool) -> Handle {
        create_event(std::ptr::null_mut(), Bool::from(manual), Bool::from(initial), true)
    }

    fn wait_many(handles: &[Handle], all: bool, ms: u32) -> u32 {
        // SAFETY: a live slice.
        unsafe { WaitForMultipleObjects(handles.len() as u32, handles.as_ptr(), Bool::from(all), ms) }
    }

    #[test]
    fn wait_any_takes_the_lowest_signalled_index() {
        let _pump = super::pump::exclusive_for_test();
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
        let _pump = super::pump::exclusive_for_test();
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
        let _pump = super::pump::exclusive_for_test();
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
        let _pump = super::pump::exclusive_for_test();
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
        let _pump = super::pump::exclusive_for_test();
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
        let _pump = super::pump::exclusive_for_test();
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
