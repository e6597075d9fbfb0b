//! What the Win32 calls share: the types and constants of their signatures, and the wait on a
//! condition variable until a deadline.

#![forbid(unsafe_code)]

use parking_lot::{Condvar, MutexGuard};
use std::ffi::c_void;
use std::time::{Duration, Instant};

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
pub(super) fn timeout(ms: u32) -> Option<Duration> {
    (ms != INFINITE).then(|| Duration::from_millis(u64::from(ms)))
}

/// Waits on `cv` until `ready` says so or the deadline passes; the guard comes back either way.
pub(super) fn wait_until<T>(
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
