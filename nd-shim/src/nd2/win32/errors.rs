//! The thread's last error (GetLastError, SetLastError: `calls.rs`) and the Win32 error of an ND
//! status.

#![forbid(unsafe_code)]

use std::cell::Cell;

use super::common::Bool;
use crate::status::NdStatus;

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

pub(crate) fn last_error() -> u32 {
    LAST_ERROR.with(Cell::get)
}
