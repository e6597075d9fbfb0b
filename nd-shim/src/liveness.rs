//! What of nd-shim is alive: its objects (every ND2 COM object, from its creation to its last
//! Release) and its threads (every one the shim starts goes through [`spawn`]). DllCanUnloadNow
//! (nd2/provider.rs) says S_OK only when nothing is ([`idle`]): a loader that unloads the library
//! then finds none of its code still running. Below every face and the engine, which all start
//! threads of the shim's.

#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;

/// Objects and threads of the shim alive ([`LiveGuard`]s).
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// The handles of the threads [`spawn`] started and DllCanUnloadNow (or a later spawn) has not
/// joined yet.
static THREADS: parking_lot::Mutex<Vec<JoinHandle<()>>> = parking_lot::Mutex::new(Vec::new());

/// One count of the shim's live objects and threads, while it lives: DllCanUnloadNow is S_FALSE
/// while any is held. Every COM object holds one from its creation to its last Release (`Com`,
/// nd2/mod.rs); a thread of the shim's holds one from before it is spawned until its body
/// returns ([`spawn`]). A pool of threads of the shim's own (a BindIoCompletionCallback pool)
/// spawns its threads with [`spawn`]; something else that runs the shim's code with no object
/// alive (a timer, a callback queued for later) holds a guard until it is done.
#[must_use = "the count goes when the guard drops"]
pub(crate) struct LiveGuard(());

impl LiveGuard {
    pub(crate) fn new() -> LiveGuard {
        LIVE.fetch_add(1, Ordering::AcqRel);
        LiveGuard(())
    }
}

impl Drop for LiveGuard {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A COM object was made: counted as a [`LiveGuard`] until [`object_released`].
pub(crate) fn object_created() {
    std::mem::forget(LiveGuard::new());
}

/// A COM object's last Release is done (its body's share dropped): its count goes.
pub(crate) fn object_released() {
    drop(LiveGuard(()));
}

/// The unit tests that create objects or threads of the shim (the counts are process-wide) or
/// read the counts run one at a time.
#[cfg(test)]
pub(crate) fn serial_for_test() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Starts a thread of the shim's, named `name`, running `body`: counted ([`LiveGuard`]) from
/// now until `body` returns, its handle kept for DllCanUnloadNow to join (so that a loader
/// that unloads on S_OK finds none of the library's threads still in its exit path). The handles
/// of threads already ended are joined here, so that they do not pile up.
pub(crate) fn spawn(name: &str, body: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    let guard = LiveGuard::new();
    let handle = std::thread::Builder::new().name(name.into()).spawn(move || {
        body();
        // The body's captures are dropped: the last of the shim's work on this thread.
        drop(guard);
    })?;
    let ended = {
        let mut threads = THREADS.lock();
        let (ended, running): (Vec<_>, Vec<_>) = threads.drain(..).partition(JoinHandle::is_finished);
        *threads = running;
        threads.push(handle);
        ended
    };
    for thread in ended {
        // Finished: the join waits only for its exit. Its body never unwinds (each runs inside
        // a panic boundary), so the result is Ok.
        let _ = thread.join();
    }
    Ok(())
}

/// Nothing of the shim's lives: no object, no thread's body; the threads that ran are joined.
/// False while any is there (a thread whose body has returned but whose runtime has not yet
/// marked it finished is still there: a moment later it is not).
pub(crate) fn idle() -> bool {
    if LIVE.load(Ordering::Acquire) != 0 {
        return false;
    }
    let ended: Vec<JoinHandle<()>> = {
        let mut threads = THREADS.lock();
        if !threads.iter().all(JoinHandle::is_finished) {
            return false;
        }
        threads.drain(..).collect()
    };
    for thread in ended {
        let _ = thread.join();
    }
    true
}
