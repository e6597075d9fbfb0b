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
//!
//! One file a kind: `common.rs` (the types and constants of the signatures), `errors.rs` (the
//! last error), `event.rs` and `port.rs` (the objects), `handles.rs` (the handle table, the
//! overlapped files, what CloseHandle and CreateEvent do), `calls.rs` (the exports: the calls on
//! events and ports, CloseHandle, the last error: the module's unsafe code).

mod calls;
mod common;
mod errors;
mod event;
mod handles;
mod port;

pub use calls::{
    CloseHandle, CreateEventA, CreateEventW, CreateIoCompletionPort, GetLastError, GetQueuedCompletionStatus,
    GetQueuedCompletionStatusEx, OverlappedEntry, PostQueuedCompletionStatus, ResetEvent, SetEvent, SetLastError,
    WaitForMultipleObjects, WaitForMultipleObjectsEx, WaitForSingleObject, WaitForSingleObjectEx,
};
pub use common::{
    Bool, Handle, ERROR_ABANDONED_WAIT_0, ERROR_INVALID_HANDLE, ERROR_INVALID_PARAMETER, ERROR_NOT_ENOUGH_MEMORY,
    ERROR_NOT_SUPPORTED, INFINITE, MAXIMUM_WAIT_OBJECTS, WAIT_FAILED, WAIT_OBJECT_0, WAIT_TIMEOUT,
};
pub(crate) use errors::bool_result;
pub(crate) use handles::{event, insert, overlapped_file, Object, OverlappedFile};
pub(crate) use port::{Got, Packet, Port};
// Used outside win32 by tests only, or not at all: kept at the paths win32.rs gave them.
#[allow(unused_imports)]
pub(crate) use common::INVALID_HANDLE_VALUE;
#[allow(unused_imports)]
pub(crate) use errors::{set_last_error, win32_error};
#[allow(unused_imports)]
pub(crate) use event::Event;
#[allow(unused_imports)]
pub(crate) use handles::lookup;
