//! The one errno type: what kernel commands fail with, what every internal
//! step returns in `Err`, and what the entry helpers in `boundary` turn
//! into a verb's failure (errno set, NULL or the code returned).

#![forbid(unsafe_code)]

use core::ffi::c_int;
use core::fmt;
use core::num::NonZero;

/// A positive errno value, as verbs return them. A type of its own, so that
/// an errno is never confused with a count or a verb's return code: it
/// becomes a `c_int` only at an entry ([`Errno::code`], [`Errno::negative`],
/// or the helpers in `boundary`). `repr(transparent)`: the same register as the
/// `i32` it wraps, no instruction more; never 0, so a `Result<(), Errno>` is
/// that one register too (0 is `Ok`), tested with one instruction.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Errno(NonZero<c_int>);

/// `raw` as an [`Errno`] in a constant (a zero fails the build).
const fn known(raw: c_int) -> Errno {
    match NonZero::new(raw) {
        Some(v) => Errno(v),
        None => panic!("errno 0"),
    }
}

macro_rules! errnos {
    ($($name:ident),* $(,)?) => {
        impl Errno {
            $(pub const $name: Errno = known(libc::$name);)*
        }
    };
}

errnos!(
    EACCES,
    EBADF,
    EBUSY,
    EINVAL,
    EIO,
    ENODEV,
    ENOENT,
    ENOMEM,
    ENOSPC,
    ENOSYS,
    EOPNOTSUPP,
    EPROTO,
    EAGAIN,
    EFAULT,
    EDEADLK,
    ENOTTY,
    EPROTONOSUPPORT
);

impl Errno {
    /// An errno from the system (a failed syscall's `errno`), or `EIO`
    /// for a value that is not a positive errno.
    pub fn from_raw(raw: c_int) -> Errno {
        match NonZero::new(raw) {
            Some(v) if raw > 0 => Errno(v),
            _ => Errno::EIO,
        }
    }

    /// The errno nix reported for a failed system call.
    pub fn from_nix(e: nix::errno::Errno) -> Errno {
        Errno::from_raw(e as c_int)
    }

    /// The errno of the last failed libc call on this thread.
    pub fn last_os_error() -> Errno {
        Errno::from_raw(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }

    /// The value, as a verb that returns an errno returns it.
    #[inline(always)]
    pub const fn code(self) -> c_int {
        self.0.get()
    }

    /// The value negated, as `poll_cq` returns it.
    #[inline(always)]
    pub const fn negative(self) -> c_int {
        -self.0.get()
    }
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Errno({})", self.0.get())
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}
