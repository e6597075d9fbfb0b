//! The one errno type: what kernel commands fail with, what every internal
//! step returns in `Err`, and what the entry helpers in `ffi` turn
//! into a verb's failure (errno set, NULL or the code returned).

/// A positive errno value, as verbs return them.
pub type Errno = i32;
