//! BindIoCompletionCallback's thread pool: one completion port of the shim's own (no handle names
//! it) and up to [`THREADS`] worker threads that take its packets and call the bound callback, as
//! Windows' thread pool does with its port.
//!
//! Binding an overlapped file gives it the pool's port with the callback's address as its key, so
//! a request's completion posts to the pool's port as it posts to a program's port
//! (`overlapped.rs`); a worker waits in [`Port::wait`] as a thread in GetQueuedCompletionStatus
//! does (it takes the leader role of `pump.rs` when it is free, so a program whose only waiters
//! are the pool's threads has its completion channels read by them), and calls the key with the
//! packet's NTSTATUS as `dwErrorCode`, its byte count (the OVERLAPPED's InternalHigh) and the
//! OVERLAPPED.
//!
//! Lifetime. The workers start at the first bind (all of them: a callback that blocks leaves the
//! others to run the next ones). When the last bound file is released (its last object and its
//! handle gone, so every packet of its requests is already queued) each worker is sent a quit
//! packet behind those packets, and ends at it unless a file was bound meanwhile: the pool's
//! threads live exactly while a bound file does or its callbacks are still to run. They are
//! threads of the shim's (`liveness::spawn`), so DllCanUnloadNow says S_FALSE until they have
//! exited. A later bind starts them again.

use parking_lot::Mutex;
use std::ffi::c_void;
use std::sync::{Arc, OnceLock};

use super::boundary;
use super::win32::{
    bool_result, overlapped_file, Bool, Got, Handle, OverlappedFile, Port, ERROR_INVALID_HANDLE,
    ERROR_INVALID_PARAMETER, ERROR_NOT_ENOUGH_MEMORY, INFINITE,
};

/// The pool's worker threads.
pub(crate) const THREADS: usize = 4;

/// The key of a quit packet (a callback's address is never 0).
const QUIT: usize = 0;

struct Pool {
    port: Arc<Port>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Bound files not yet released.
    bound: usize,
    /// Worker threads running.
    threads: usize,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool {
        port: Arc::default(),
        state: Mutex::default(),
    })
}

/// LPOVERLAPPED_COMPLETION_ROUTINE: `(dwErrorCode, dwNumberOfBytesTransfered, lpOverlapped)`.
pub type Callback = unsafe extern "C" fn(error: u32, bytes: u32, overlapped: *mut c_void);

/// Binds an overlapped file to the shim's thread pool (thread_pool.rs): each completion of a
/// request on the file then calls `function` on one of the pool's threads with the request's
/// NTSTATUS as `dwErrorCode` (0 for success, 0xC0000120 STATUS_CANCELLED, ...: OVERLAPPED.Internal,
/// not a Win32 error), its byte count (InternalHigh) and the OVERLAPPED. `flags` not 0, a NULL
/// `function`, or a file bound already (by this or CreateIoCompletionPort) is FALSE with
/// ERROR_INVALID_PARAMETER; a handle that is no overlapped file of IND2Adapter::CreateOverlappedFile
/// is FALSE with ERROR_INVALID_HANDLE.
#[no_mangle]
pub extern "C" fn BindIoCompletionCallback(file: Handle, function: Option<Callback>, flags: u32) -> Bool {
    boundary("BindIoCompletionCallback", 0, || {
        let Some(function) = function.filter(|_| flags == 0) else {
            return bool_result(false, ERROR_INVALID_PARAMETER);
        };
        let Some(file) = overlapped_file(file) else {
            return bool_result(false, ERROR_INVALID_HANDLE);
        };
        match bind(&file, function) {
            Ok(()) => 1,
            Err(BindError::Bound) => bool_result(false, ERROR_INVALID_PARAMETER),
            Err(BindError::NoThreads) => bool_result(false, ERROR_NOT_ENOUGH_MEMORY),
        }
    })
}

// The export above, at the version node ND_SHIM_0 (crate::exports).
crate::exports::version_node!("BindIoCompletionCallback",);

/// Why a bind failed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum BindError {
    /// The file is bound already (to a port of the program's or to the pool).
    Bound,
    /// No worker thread could be started.
    NoThreads,
}

/// Binds `file` to the pool with `callback`, starting the workers if none runs.
pub(crate) fn bind(file: &OverlappedFile, callback: Callback) -> Result<(), BindError> {
    let pool = pool();
    let mut state = pool.state.lock();
    if file.port().is_some() {
        return Err(BindError::Bound);
    }
    while state.threads < THREADS {
        // A thread of the shim's (liveness::spawn): DllCanUnloadNow waits for its exit.
        match crate::liveness::spawn("nd2-io-pool", move || work(pool)) {
            Ok(_) => state.threads += 1,
            Err(e) if state.threads == 0 => {
                log::error!("nd2: BindIoCompletionCallback: no pool thread: {e}");
                return Err(BindError::NoThreads);
            }
            Err(e) => {
                log::warn!(
                    "nd2: BindIoCompletionCallback: {} pool threads, not {THREADS}: {e}",
                    state.threads
                );
                break;
            }
        }
    }
    // A concurrent CreateIoCompletionPort may have bound it since the check above. The file keeps
    // its membership until its last holder is gone; the membership's drop counts it out.
    if !file.bind_keeping(Arc::clone(&pool.port), callback as usize, Box::new(Membership)) {
        return Err(BindError::Bound);
    }
    state.bound += 1;
    Ok(())
}

/// A bound file's membership of the pool, kept by the file: dropped with it.
struct Membership;

impl Drop for Membership {
    fn drop(&mut self) {
        released();
    }
}

/// A file bound to the pool was released (its [`Membership`] dropped): with none left, the workers are told to end
/// once the packets queued before now have had their callbacks.
fn released() {
    let pool = pool();
    let mut state = pool.state.lock();
    state.bound -= 1;
    if state.bound == 0 {
        for _ in 0..state.threads {
            pool.port.post(super::win32::Packet {
                bytes: 0,
                key: QUIT,
                overlapped: 0,
                status: crate::status::NdStatus::ND_SUCCESS,
            });
        }
    }
}

/// A worker: takes the pool's packets, calls each one's callback, and ends at a quit packet that
/// finds no bound file.
fn work(pool: &'static Pool) {
    loop {
        let packet = match pool.port.wait(INFINITE) {
            Got::Packet(packet) => packet,
            // The pool's port has no handle: it is never closed, and an infinite wait does not
            // time out.
            Got::Timeout | Got::Abandoned => continue,
        };
        if packet.key == QUIT {
            let mut state = pool.state.lock();
            if state.bound == 0 {
                state.threads -= 1;
                return;
            }
            continue;
        }
        // SAFETY: the key of a packet on the pool's port other than QUIT is the address of the
        // callback a file was bound with (`bind`: only there are files given this port), a
        // `Callback`, which has a usize's size; the program keeps its code loaded while its
        // requests may complete (BindIoCompletionCallback's rule).
        let callback: Callback = unsafe { std::mem::transmute::<usize, Callback>(packet.key) };
        // SAFETY: the program's callback, with the arguments Windows' pool gives it: the
        // OVERLAPPED is the program's, live until its callback has run.
        unsafe { callback(packet.status.0 as u32, packet.bytes, packet.overlapped as *mut c_void) };
    }
}

#[cfg(test)]
mod tests {
    use super::super::overlapped::Request;
    use super::super::provider::can_unload;
    use super::super::win32::{
        insert, CloseHandle, CreateEventA, CreateIoCompletionPort, GetLastError, Object, INVALID_HANDLE_VALUE,
    };
    use super::*;
    use crate::status::NdStatus;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    /// What the callbacks saw: (error, bytes, overlapped, thread), in call order.
    static SEEN: parking_lot::Mutex<Vec<(u32, u32, usize, std::thread::ThreadId)>> =
        parking_lot::Mutex::new(Vec::new());
    static CALLS: AtomicUsize = AtomicUsize::new(0);

    unsafe extern "C" fn record(error: u32, bytes: u32, overlapped: *mut c_void) {
        SEEN.lock()
            .push((error, bytes, overlapped as usize, std::thread::current().id()));
        CALLS.fetch_add(1, Ordering::SeqCst);
    }

    fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
        let started = Instant::now();
        while !done() {
            assert!(started.elapsed() < Duration::from_secs(10), "{what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// OVERLAPPED of ndwinbase.h.
    #[repr(C)]
    struct Ov([usize; 4]);

    unsafe extern "C" fn ignore(_error: u32, _bytes: u32, _overlapped: *mut c_void) {}

    #[test]
    fn bind_io_completion_callback_rules() {
        let _serial = crate::liveness::serial_for_test();
        let _pump = super::super::pump::exclusive_for_test();
        let file = insert(Object::File(Arc::default()));
        let f: Option<Callback> = Some(ignore);
        assert_eq!(BindIoCompletionCallback(file, f, 1), 0);
        assert_eq!(GetLastError(), ERROR_INVALID_PARAMETER);
        assert_eq!(BindIoCompletionCallback(file, None, 0), 0);
        assert_eq!(GetLastError(), ERROR_INVALID_PARAMETER);
        // SAFETY: no attributes, no name.
        let event = unsafe { CreateEventA(std::ptr::null_mut(), 1, 0, std::ptr::null()) };
        let port = CreateIoCompletionPort(INVALID_HANDLE_VALUE as Handle, std::ptr::null_mut(), 0, 0);
        for h in [
            std::ptr::null_mut(),
            INVALID_HANDLE_VALUE as Handle,
            0x1234 as Handle,
            event,
            port,
        ] {
            assert_eq!(BindIoCompletionCallback(h, f, 0), 0);
            assert_eq!(GetLastError(), ERROR_INVALID_HANDLE);
        }
        assert_eq!(BindIoCompletionCallback(file, f, 0), 1);
        // Bound once: neither a second bind nor a port.
        assert_eq!(BindIoCompletionCallback(file, f, 0), 0);
        assert_eq!(GetLastError(), ERROR_INVALID_PARAMETER);
        assert!(CreateIoCompletionPort(file, port, 1, 0).is_null());
        assert_eq!(GetLastError(), ERROR_INVALID_PARAMETER);
        // A file bound to a port is not bound to the pool.
        let other = insert(Object::File(Arc::default()));
        assert_eq!(CreateIoCompletionPort(other, port, 1, 0), port);
        assert_eq!(BindIoCompletionCallback(other, f, 0), 0);
        assert_eq!(GetLastError(), ERROR_INVALID_PARAMETER);
        assert!(!can_unload());
        for h in [file, other, port, event] {
            assert_eq!(CloseHandle(h), 1);
        }
        // The bound file's handle was its last holder: the pool's threads end.
        let started = Instant::now();
        while !can_unload() {
            assert!(started.elapsed() < Duration::from_secs(10));
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn completions_call_the_callback_on_pool_threads_which_end_with_the_last_file() {
        let _serial = crate::liveness::serial_for_test();
        let _pump = super::super::pump::exclusive_for_test();
        SEEN.lock().clear();
        CALLS.store(0, Ordering::SeqCst);
        let file: Arc<OverlappedFile> = Arc::default();
        bind(&file, record).unwrap();
        assert!(!can_unload());
        assert_eq!(bind(&file, record), Err(BindError::Bound));
        let mut ovs: Vec<Box<Ov>> = (0..3).map(|_| Box::new(Ov([0; 4]))).collect();
        let statuses = [
            (NdStatus::ND_SUCCESS, 64),
            (NdStatus::ND_CANCELED, 0),
            (NdStatus::ND_CONNECTION_REFUSED, 0),
        ];
        for (ov, (status, bytes)) in ovs.iter_mut().zip(statuses) {
            let p = std::ptr::addr_of_mut!(**ov).cast::<c_void>();
            // SAFETY: a live box, kept until the callbacks ran.
            let request = unsafe { Request::start(p, &file) }.unwrap();
            request.complete(status, bytes);
        }
        wait_for("three callbacks", || CALLS.load(Ordering::SeqCst) == 3);
        let mut seen = SEEN.lock().clone();
        seen.sort_by_key(|s| s.2);
        let mut expect: Vec<(u32, u32, usize)> = ovs
            .iter()
            .zip(statuses)
            .map(|(ov, (status, bytes))| (status.0 as u32, bytes, std::ptr::addr_of!(**ov) as usize))
            .collect();
        expect.sort_by_key(|e| e.2);
        let got: Vec<(u32, u32, usize)> = seen.iter().map(|s| (s.0, s.1, s.2)).collect();
        assert_eq!(got, expect);
        assert!(seen.iter().all(|s| s.3 != std::thread::current().id()));
        // The last bound file goes: the workers end.
        drop(file);
        wait_for("the pool's threads to end", can_unload);
        // A later bind starts them again.
        let again: Arc<OverlappedFile> = Arc::default();
        bind(&again, record).unwrap();
        assert!(!can_unload());
        drop(again);
        wait_for("the pool's threads to end again", can_unload);
    }

    #[test]
    fn a_callback_may_block_while_another_runs() {
        let _serial = crate::liveness::serial_for_test();
        let _pump = super::super::pump::exclusive_for_test();
        static GATE: (parking_lot::Mutex<bool>, parking_lot::Condvar) =
            (parking_lot::Mutex::new(false), parking_lot::Condvar::new());
        static RAN: AtomicUsize = AtomicUsize::new(0);
        unsafe extern "C" fn blocking(error: u32, _bytes: u32, _overlapped: *mut c_void) {
            if error == 0 {
                let mut open = GATE.0.lock();
                while !*open {
                    GATE.1.wait(&mut open);
                }
            }
            RAN.fetch_add(1, Ordering::SeqCst);
        }
        let file: Arc<OverlappedFile> = Arc::default();
        bind(&file, blocking).unwrap();
        let mut first = Box::new(Ov([0; 4]));
        let mut second = Box::new(Ov([0; 4]));
        // SAFETY: live boxes, kept until the callbacks ran.
        let a = unsafe { Request::start(std::ptr::addr_of_mut!(*first).cast(), &file) }.unwrap();
        // SAFETY: as above.
        let b = unsafe { Request::start(std::ptr::addr_of_mut!(*second).cast(), &file) }.unwrap();
        a.complete(NdStatus::ND_SUCCESS, 0);
        b.complete(NdStatus::ND_CANCELED, 0);
        // The second runs on another worker while the first blocks.
        wait_for("the second callback", || RAN.load(Ordering::SeqCst) == 1);
        *GATE.0.lock() = true;
        GATE.1.notify_all();
        wait_for("the first callback", || RAN.load(Ordering::SeqCst) == 2);
        drop(file);
        wait_for("the pool's threads to end", can_unload);
    }
}
