//! The one panic boundary of the crate.
//!
//! Every `extern "C"` function libibverbs can call runs its body through
//! [`guard`], so no unwind ever crosses into C: a panic is logged and turned
//! into the function's failure value (NULL, an errno, or nothing).
#![forbid(unsafe_code)]

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::errno::Errno;

/// Runs `body`; if it panics, logs and returns `on_panic` instead.
///
/// `AssertUnwindSafe` is sound here because after a panic we never look at the
/// state `body` was touching again: the caller gets a failure value and any
/// half-built object is leaked rather than used.
///
/// Inlined into each entry: `catch_unwind` costs nothing until something
/// panics (the body runs inline, the handler is a landing pad), while a
/// call would make every entry pass its arguments through the stack.
#[inline(always)]
pub(crate) fn guard<R>(entry: &'static str, on_panic: R, body: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(value) => value,
        Err(payload) => {
            log_panic(entry, payload);
            on_panic
        }
    }
}

/// Logs and drops the payload: taken by value, so the entry's landing pad
/// keeps nothing alive across the call (no stack slot in its frame).
#[cold]
#[inline(never)]
fn log_panic(entry: &str, payload: Box<dyn core::any::Any + Send>) {
    let what = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(non-string panic)");
    log::error!("{entry}: internal error, failing the call: {what}");
}

/// Sets the calling thread's `errno`, which libibverbs and its callers read
/// after a provider entry returned NULL.
pub(crate) fn set_errno(errno: Errno) {
    nix::errno::Errno::set_raw(errno.code());
}

/// The failure of a verb that returns an object: errno set, NULL returned.
pub(crate) fn fail_ptr<T>(errno: Errno) -> *mut T {
    set_errno(errno);
    core::ptr::null_mut()
}

/// The failure of a verb that returns an int: errno set and returned.
pub(crate) fn fail_code(errno: Errno) -> core::ffi::c_int {
    set_errno(errno);
    errno.code()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_passes_values_through() {
        assert_eq!(guard("t", -1, || 7), 7);
    }

    #[test]
    fn guard_turns_a_panic_into_the_failure_value() {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let r = guard("t", Errno::EIO, || -> Errno { panic!("boom") });
        std::panic::set_hook(prev);
        assert_eq!(r, Errno::EIO);
    }
}
