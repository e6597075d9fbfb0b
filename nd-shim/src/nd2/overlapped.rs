//! ND2's overlapped requests: an operation either fails inline or returns ND_PENDING and then
//! completes exactly once, by [`Request::complete`]: Internal = status, InternalHigh = bytes,
//! the event of `hEvent` signalled, and a packet posted to the port of the object's overlapped
//! file unless `hEvent & 1` (also when the operation finished at once).
//!
//! IND2Overlapped::GetOverlappedResult reads Internal: ND_PENDING while pending; with `wait` it
//! reads the completion channels itself if it can lead (pump.rs), else sleeps on one
//! process-wide condition variable that every completion notifies.

use parking_lot::{Condvar, Mutex};
use std::ffi::c_void;
use std::sync::atomic::{fence, AtomicUsize, Ordering};
use std::sync::Arc;

use super::pump;
use super::win32::{self, OverlappedFile, Packet};
use super::{HResult, ND_INVALID_PARAMETER, ND_PENDING};
use crate::status::NdStatus;

/// OVERLAPPED, as `ndwinbase.h` lays it out.
#[repr(C)]
pub(crate) struct Overlapped {
    internal: usize,
    internal_high: usize,
    offset: u32,
    offset_high: u32,
    h_event: *mut c_void,
}

/// Where GetOverlappedResult(wait) sleeps when it cannot lead (pump.rs): a completion bumps the
/// count and wakes the sleepers, if [`SLEEPERS`] says there are any.
static COMPLETIONS: (Mutex<u64>, Condvar) = (Mutex::new(0), Condvar::new());

/// How many threads sleep (or are about to) on [`COMPLETIONS`]. A completion with none takes no
/// lock: it stores Internal, makes one SeqCst fence (shared with the leader's kick) and reads
/// this; a sleeper counts itself, makes a SeqCst fence and reads Internal: one of the two sees
/// the other (no lost wake-up; the sleeper holds the lock from its check to its wait).
static SLEEPERS: AtomicUsize = AtomicUsize::new(0);

/// Internal, read and written as an atomic: the completing thread and a waiter share it.
///
/// # Safety
/// `ov` is a live OVERLAPPED.
unsafe fn internal<'a>(ov: *mut Overlapped) -> &'a AtomicUsize {
    // SAFETY: a usize field of a live struct, suitably aligned; AtomicUsize has its layout.
    unsafe { &*std::ptr::addr_of_mut!((*ov).internal).cast::<AtomicUsize>() }
}

/// Sign-extended, as Windows stores an NTSTATUS in Internal.
fn to_internal(status: NdStatus) -> usize {
    status.0 as isize as usize
}

/// A request issued with the caller's OVERLAPPED, until it completes: exactly once, by
/// [`Request::complete`], by [`Request::fail`] (an inline failure), or, dropped with neither
/// (a pending request that an error path or a teardown let go), by its drop, as cancelled
/// (ND_CANCELED, STATUS_CANCELLED: the OVERLAPPED completes as Cancel would have completed it).
/// A drop during a panic is the call's inline failure (ND_INTERNAL_ERROR, which the panic
/// boundary returns): Internal holds it, nothing is signalled or posted.
pub(crate) struct Request {
    /// NULL once the request completed (then the drop does nothing).
    ov: *mut Overlapped,
    /// hEvent as it was at issue (the OVERLAPPED may be reused once Internal is final).
    event: usize,
    file: Arc<OverlappedFile>,
}

// SAFETY: the OVERLAPPED belongs to the caller, who keeps it alive until the request completes
// (the Win32 rule) and may have it completed on any thread; the shim writes it once.
unsafe impl Send for Request {}

impl Request {
    /// Starts a request: Internal = ND_PENDING, InternalHigh = 0. A NULL OVERLAPPED is
    /// ND_INVALID_PARAMETER.
    ///
    /// # Safety
    /// `ov` is NULL or a live OVERLAPPED that stays so until the request completes.
    pub(crate) unsafe fn start(ov: *mut c_void, file: &Arc<OverlappedFile>) -> Result<Request, HResult> {
        let ov = ov.cast::<Overlapped>();
        if ov.is_null() {
            return Err(ND_INVALID_PARAMETER);
        }
        // SAFETY: live (the caller's promise).
        let event = unsafe {
            std::ptr::addr_of_mut!((*ov).internal_high).write(0);
            internal(ov).store(to_internal(NdStatus::ND_PENDING), Ordering::Release);
            std::ptr::addr_of!((*ov).h_event).read() as usize
        };
        Ok(Request {
            ov,
            event,
            file: Arc::clone(file),
        })
    }

    /// The call failed inline after the request started: Internal = `status` (not left
    /// ND_PENDING, so GetOverlappedResult reports the failure); nothing is signalled or posted.
    pub(crate) fn fail(mut self, status: HResult) {
        self.fail_once(status);
    }

    pub(crate) fn complete(mut self, status: NdStatus, bytes: u32) {
        self.complete_once(status, bytes);
    }

    fn fail_once(&mut self, status: HResult) {
        let ov = std::mem::replace(&mut self.ov, std::ptr::null_mut());
        if ov.is_null() {
            return;
        }
        // SAFETY: the request's OVERLAPPED is live (the caller's promise at start).
        unsafe { internal(ov).store(status as isize as usize, Ordering::Release) };
    }

    fn complete_once(&mut self, status: NdStatus, bytes: u32) {
        let ov = std::mem::replace(&mut self.ov, std::ptr::null_mut());
        if ov.is_null() {
            return;
        }
        // SAFETY: the request's OVERLAPPED is live until Internal leaves ND_PENDING (below).
        unsafe {
            std::ptr::addr_of_mut!((*ov).internal_high).write(bytes as usize);
            internal(ov).store(to_internal(status), Ordering::Release);
        }
        // Internal is final before the event is set and the packet posted (a thread woken by
        // either reads it). Neither wakes the leader by itself: one fence and one check below
        // for all three changes.
        // No event (hEvent NULL, or only its flag bit) needs no look-up in the handle table.
        if self.event & !3 != 0 {
            if let Some(event) = win32::event((self.event & !3) as *mut c_void) {
                event.set_unkicked();
            }
        }
        if self.event & 1 == 0 {
            if let Some((port, key)) = self.file.port() {
                port.post_unkicked(Packet {
                    bytes,
                    key: *key,
                    overlapped: ov as usize,
                    status,
                });
            }
        }
        // Pairs with the sleepers' fence in `result` and the leader's in Leader::wait_until.
        fence(Ordering::SeqCst);
        if SLEEPERS.load(Ordering::Relaxed) != 0 {
            let (count, cv) = &COMPLETIONS;
            *count.lock() += 1;
            cv.notify_all();
        }
        pump::kick_fenced();
    }
}

/// The caller's OVERLAPPED as an entry received it: a request is started on it later, once the
/// call's checks passed (or never, if one failed first).
pub(crate) struct CallerOverlapped(*mut c_void);

impl CallerOverlapped {
    /// # Safety
    /// `ov` is NULL or a live OVERLAPPED that stays so until a request started on it completes.
    pub(crate) unsafe fn new(ov: *mut c_void) -> CallerOverlapped {
        CallerOverlapped(ov)
    }

    /// [`Request::start`] on it: a NULL OVERLAPPED is ND_INVALID_PARAMETER.
    pub(crate) fn start(self, file: &Arc<OverlappedFile>) -> Result<Request, HResult> {
        // SAFETY: the promise of `new`.
        unsafe { Request::start(self.0, file) }
    }
}

impl Drop for Request {
    /// A completed request's drop is one comparison, inline (its file's count aside).
    #[inline]
    fn drop(&mut self) {
        if !self.ov.is_null() {
            self.dropped_pending();
        }
    }
}

impl Request {
    /// Dropped without completing: cancelled, or the inline failure of a panicking call.
    #[cold]
    #[inline(never)]
    fn dropped_pending(&mut self) {
        if std::thread::panicking() {
            self.fail_once(super::ND_INTERNAL_ERROR);
        } else {
            self.complete_once(NdStatus::ND_CANCELED, 0);
        }
    }
}

/// IND2Overlapped::GetOverlappedResult: the status in Internal; with `wait`, once it is final.
///
/// # Safety
/// `ov` is NULL or a live OVERLAPPED.
pub(crate) unsafe fn result(ov: *mut c_void, wait: bool) -> HResult {
    let ov = ov.cast::<Overlapped>();
    if ov.is_null() {
        return ND_INVALID_PARAMETER;
    }
    // SAFETY: live (the caller's promise).
    let internal = unsafe { internal(ov) };
    let status = || internal.load(Ordering::Acquire) as HResult;
    if !wait || status() != ND_PENDING {
        let status = status();
        if status == ND_PENDING {
            // A poll: if nobody reads the completion channels, the relay does (pump.rs).
            pump::polled();
        }
        return status;
    }
    if let Some(leader) = pump::lead() {
        leader.wait_until(None, || status() != ND_PENDING);
        return status();
    }
    let _follower = pump::follow();
    let (count, cv) = &COMPLETIONS;
    let mut guard = count.lock();
    SLEEPERS.fetch_add(1, Ordering::Relaxed);
    // Pairs with the completer's fence (SLEEPERS): it sees this sleeper, or the check below sees
    // its Internal; it notifies under the lock, which this thread holds until it waits.
    fence(Ordering::SeqCst);
    while status() == ND_PENDING {
        cv.wait(&mut guard);
    }
    SLEEPERS.fetch_sub(1, Ordering::Relaxed);
    status()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An OVERLAPPED for a test, never freed: a request on it is live for good, so its
    /// methods are safe. Its address (provenance exposed), so that threads can share it.
    #[derive(Clone, Copy)]
    struct Leaked(usize);

    impl Leaked {
        fn new(h_event: *mut c_void) -> Leaked {
            let ov = Box::new(Overlapped {
                internal: 0,
                internal_high: 0,
                offset: 0,
                offset_high: 0,
                h_event,
            });
            Leaked(Box::into_raw(ov).expose_provenance())
        }

        fn ptr(self) -> *mut c_void {
            std::ptr::with_exposed_provenance_mut(self.0)
        }

        fn start(self, file: &Arc<OverlappedFile>) -> Result<Request, HResult> {
            // SAFETY: never freed.
            unsafe { Request::start(self.ptr(), file) }
        }

        fn result(self, wait: bool) -> HResult {
            // SAFETY: never freed.
            unsafe { result(self.ptr(), wait) }
        }

        fn internal(self) -> usize {
            // SAFETY: never freed.
            unsafe { internal(self.ptr().cast()) }.load(Ordering::Acquire)
        }

        /// InternalHigh, once the request completed (on this thread, or one joined since).
        fn internal_high(self) -> usize {
            // SAFETY: never freed; written before the completion this thread has seen.
            unsafe { std::ptr::addr_of!((*self.ptr().cast::<Overlapped>()).internal_high).read() }
        }
    }

    /// A new overlapped file bound under `key` to a new completion port, and that port.
    fn file_on_port(key: usize) -> (Arc<OverlappedFile>, Arc<win32::Port>) {
        let file: Arc<OverlappedFile> = Arc::default();
        let port_handle = win32::CreateIoCompletionPort(usize::MAX as *mut c_void, std::ptr::null_mut(), 0, 0);
        let file_handle = win32::insert(win32::Object::File(Arc::clone(&file)));
        assert_eq!(
            win32::CreateIoCompletionPort(file_handle, port_handle, key, 0),
            port_handle
        );
        let Some(win32::Object::Port(port)) = win32::lookup(port_handle) else {
            panic!()
        };
        (file, port)
    }

    /// A request started on an OVERLAPPED with no event, of a file bound under `key` to a new
    /// completion port: the port, the OVERLAPPED and the request.
    fn request_on_port(key: usize) -> (Arc<win32::Port>, Leaked, Request) {
        let (file, port) = file_on_port(key);
        let ov = Leaked::new(std::ptr::null_mut());
        let request = ov.start(&file).unwrap();
        (port, ov, request)
    }

    #[test]
    fn pending_then_final_and_posted_once() {
        let _pump = super::pump::exclusive_for_test();
        let (port, ov, request) = request_on_port(42);
        assert_eq!(ov.result(false), ND_PENDING);
        request.complete(NdStatus::ND_CANCELED, 0);
        assert_eq!(ov.result(true), NdStatus::ND_CANCELED.0);
        assert_eq!(ov.internal(), 0xFFFF_FFFF_C000_0120);
        let packet = port.get(0).unwrap();
        assert_eq!(
            (packet.key, packet.overlapped, packet.status),
            (42, ov.0, NdStatus::ND_CANCELED)
        );
        assert_eq!(port.get(0), None);
    }

    #[test]
    fn event_tagged_with_one_signals_but_posts_nothing() {
        let _pump = super::pump::exclusive_for_test();
        let (file, port) = file_on_port(1);
        // SAFETY: NULL attributes and name.
        let event = unsafe { win32::CreateEventA(std::ptr::null_mut(), 0, 0, std::ptr::null()) };
        let ov = Leaked::new((event as usize | 1) as *mut c_void);
        let request = ov.start(&file).unwrap();
        request.complete(NdStatus::ND_SUCCESS, 64);
        assert_eq!(win32::WaitForSingleObject(event, 0), win32::WAIT_OBJECT_0);
        assert_eq!(ov.internal_high(), 64);
        assert_eq!(port.get(0), None);
    }

    #[test]
    fn inline_failure_leaves_its_code_and_posts_nothing() {
        let _pump = super::pump::exclusive_for_test();
        let (port, ov, request) = request_on_port(1);
        request.fail(NdStatus::ND_CONNECTION_INVALID.0);
        assert_eq!(ov.result(true), NdStatus::ND_CONNECTION_INVALID.0);
        assert_eq!(port.get(0), None);
    }

    /// GetOverlappedResult(TRUE) sleeping on the completions' condition variable (the path of a
    /// thread that cannot lead) is woken by a completion on another thread, however the two
    /// interleave (no lost wake-up: the completion takes no lock when nobody sleeps).
    #[test]
    fn waiting_result_is_woken_by_a_completion_on_another_thread() {
        let _pump = super::pump::exclusive_for_test();
        let file: Arc<OverlappedFile> = Arc::default();
        for round in 0..200 {
            let ov = Leaked::new(std::ptr::null_mut());
            let request = ov.start(&file).unwrap();
            let completer = std::thread::spawn(move || {
                if round % 2 == 0 {
                    std::thread::yield_now();
                }
                request.complete(NdStatus::ND_SUCCESS, round);
            });
            assert_eq!(ov.result(true), NdStatus::ND_SUCCESS.0);
            completer.join().unwrap();
            assert_eq!(ov.internal_high(), round as usize);
        }
        assert_eq!(SLEEPERS.load(Ordering::Relaxed), 0);
    }

    /// A pending request dropped without completing (an error path, a teardown that forgot it)
    /// completes as cancelled: its waiter wakes, its port gets the packet, once.
    #[test]
    fn a_dropped_request_completes_cancelled_once() {
        let _pump = super::pump::exclusive_for_test();
        let (port, ov, request) = request_on_port(7);
        let dropper = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(10));
            drop(request);
        });
        dropper.join().unwrap();
        // A bounded look, not a wait: a request left pending would hang one.
        assert_eq!(ov.result(false), NdStatus::ND_CANCELED.0);
        assert_eq!(ov.result(true), NdStatus::ND_CANCELED.0);
        let packet = port.get(0).unwrap();
        assert_eq!((packet.key, packet.status), (7, NdStatus::ND_CANCELED));
        assert_eq!(port.get(0), None, "once");
    }

    #[test]
    fn null_overlapped_fails_inline() {
        let _pump = super::pump::exclusive_for_test();
        let file: Arc<OverlappedFile> = Arc::default();
        assert_eq!(
            // SAFETY: NULL is allowed.
            unsafe { CallerOverlapped::new(std::ptr::null_mut()) }
                .start(&file)
                .err(),
            Some(ND_INVALID_PARAMETER)
        );
    }
}
