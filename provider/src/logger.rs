//! The `log` backend, writing as rdma-core's own providers do.
//!
//! rdma-core's providers log through libibverbs' `__verbs_log` (driver.h's
//! `verbs_err`/`verbs_warn`/`verbs_info`/`verbs_debug`), and libibverbs decides
//! what comes out: `VERBS_LOG_LEVEL` (0 none, 1 error, 2 warn, 3 info,
//! 4 debug; parsed with `strtol(.., 0)`) and `VERBS_LOG_FILE`, which it opens
//! once at start-up; a release build of libibverbs prints nothing without a
//! file. So: silent by default. When the loaded libibverbs exports
//! `__verbs_log` (every release since v35, whatever its private ABI) we hand it
//! our lines; otherwise we do what it would do, with the file opened once here.
//! Every line names what it is about, as rdma-core's `verbs_log` puts the
//! device first: `rxe0: rxe_rs: ...` inside [`for_device`], `rxe_rs: ...` for
//! the provider as a whole (loading, registration).

use core::ffi::{c_char, c_void};
use std::cell::RefCell;
use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::sync::{Mutex, OnceLock};

use log::{Level, LevelFilter, Log, Metadata, Record};

/// `void __verbs_log(struct verbs_context *ctx, uint32_t level, const char *fmt, ...)`.
type VerbsLogFn = unsafe extern "C" fn(*mut c_void, u32, *const c_char, ...);

enum Sink {
    /// libibverbs' own function: it applies the level and owns the file.
    Libibverbs(VerbsLogFn),
    /// No `__verbs_log` in the process: the file `VERBS_LOG_FILE` names.
    File(Mutex<File>),
}

struct VerbsLogger {
    sink: Sink,
}

static LOGGER: OnceLock<VerbsLogger> = OnceLock::new();

thread_local! {
    /// The device the calling thread is working for, named in each line.
    static DEVICE: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Runs `body` with every line it logs naming `device` (an rxe device name).
pub(crate) fn for_device<R>(device: &str, body: impl FnOnce() -> R) -> R {
    let previous = DEVICE.with(|d| d.replace(Some(device.to_owned())));
    // Restores the outer name even if body unwinds (the panic boundary
    // above us catches it and logs, and that line must not name this device).
    struct Restore(Option<String>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0.take();
            DEVICE.with(|d| *d.borrow_mut() = outer);
        }
    }
    let _restore = Restore(previous);
    body()
}

/// `VERBS_LOG_LEVEL` as libibverbs parses it (`strtol(.., 0)`: decimal, `0x`
/// hex or leading-zero octal; junk is 0) as a `log` level filter.
pub(crate) fn level_from_env(value: Option<&str>) -> LevelFilter {
    let Some(v) = value.map(str::trim) else {
        return LevelFilter::Off;
    };
    let parsed = if let Some(hex) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).ok()
    } else if v.len() > 1 && v.starts_with('0') {
        u64::from_str_radix(&v[1..], 8).ok()
    } else {
        v.parse::<u64>().ok()
    };
    match parsed.unwrap_or(0) {
        0 => LevelFilter::Off,
        1 => LevelFilter::Error,
        2 => LevelFilter::Warn,
        3 => LevelFilter::Info,
        _ => LevelFilter::Debug,
    }
}

/// driver.h's `VERBS_LOG_ERR` .. `VERBS_LOG_DEBUG`.
fn verbs_level(level: Level) -> u32 {
    match level {
        Level::Error => 1,
        Level::Warn => 2,
        Level::Info => 3,
        Level::Debug | Level::Trace => 4,
    }
}

/// One log line: the device (when there is one), the provider, the message.
fn line(device: Option<&str>, message: &core::fmt::Arguments<'_>) -> String {
    match device {
        Some(device) => format!("{device}: {}: {message}\n", crate::PROVIDER_NAME),
        None => format!("{}: {message}\n", crate::PROVIDER_NAME),
    }
}

/// libibverbs' `__verbs_log`, if the process has a libibverbs that exports it.
fn find_verbs_log() -> Option<VerbsLogFn> {
    // SAFETY: RTLD_NOLOAD only returns a handle to a library already mapped;
    // we keep its reference for the life of the process.
    let handle = unsafe { libc::dlopen(c"libibverbs.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if handle.is_null() {
        return None;
    }
    // SAFETY: handle is live; the name is a NUL-terminated literal. The
    // symbol's default version is the one in the library's own private ABI.
    let p = unsafe { libc::dlsym(handle, c"__verbs_log".as_ptr()) };
    // SAFETY: __verbs_log has had this prototype since it was added (v35).
    (!p.is_null()).then(|| unsafe { core::mem::transmute::<*mut c_void, VerbsLogFn>(p) })
}

/// Installs the logger once per process (from the load-time constructor).
/// A no-op when nothing would be written, or when another `log` backend is
/// already installed in the process (that one then gets our records).
pub(crate) fn init() {
    let level = level_from_env(std::env::var("VERBS_LOG_LEVEL").ok().as_deref());
    if level == LevelFilter::Off {
        return;
    }
    let sink = match find_verbs_log() {
        Some(f) => Sink::Libibverbs(f),
        None => {
            // What a release libibverbs does: no file, or one it cannot open, is silence.
            let Some(path) = std::env::var_os("VERBS_LOG_FILE") else {
                return;
            };
            let Ok(file) = OpenOptions::new().append(true).create(true).open(path) else {
                return;
            };
            Sink::File(Mutex::new(file))
        }
    };
    let logger = LOGGER.get_or_init(|| VerbsLogger { sink });
    if log::set_logger(logger).is_ok() {
        log::set_max_level(level);
    }
}

impl Log for VerbsLogger {
    fn enabled(&self, metadata: &Metadata) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let text = DEVICE.with(|d| line(d.borrow().as_deref(), record.args()));
        // Logging never fails the verb that logs: write errors are dropped.
        match &self.sink {
            Sink::Libibverbs(verbs_log) => {
                let Ok(text) = CString::new(text.replace('\0', "")) else {
                    return;
                };
                // SAFETY: "%s" takes exactly the one NUL-terminated string
                // passed; __verbs_log does not use ctx (NULL) in any release.
                unsafe {
                    verbs_log(
                        core::ptr::null_mut(),
                        verbs_level(record.level()),
                        c"%s".as_ptr(),
                        text.as_ptr(),
                    )
                };
            }
            Sink::File(file) => {
                if let Ok(mut file) = file.lock() {
                    let _ = file.write_all(text.as_bytes());
                }
            }
        }
    }

    fn flush(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_parsing_follows_strtol_base_0() {
        assert_eq!(level_from_env(None), LevelFilter::Off);
        assert_eq!(level_from_env(Some("0")), LevelFilter::Off);
        assert_eq!(level_from_env(Some("1")), LevelFilter::Error);
        assert_eq!(level_from_env(Some("2")), LevelFilter::Warn);
        assert_eq!(level_from_env(Some("3")), LevelFilter::Info);
        assert_eq!(level_from_env(Some("4")), LevelFilter::Debug);
        assert_eq!(level_from_env(Some("9")), LevelFilter::Debug);
        assert_eq!(level_from_env(Some("0x3")), LevelFilter::Info);
        assert_eq!(level_from_env(Some("04")), LevelFilter::Debug);
        assert_eq!(level_from_env(Some("junk")), LevelFilter::Off);
    }

    #[test]
    fn levels_are_driver_h_values() {
        assert_eq!(verbs_level(Level::Error), 1);
        assert_eq!(verbs_level(Level::Warn), 2);
        assert_eq!(verbs_level(Level::Info), 3);
        assert_eq!(verbs_level(Level::Debug), 4);
        assert_eq!(verbs_level(Level::Trace), 4);
    }

    #[test]
    fn lines_name_the_device_first() {
        assert_eq!(line(Some("rxe0"), &format_args!("opened")), "rxe0: rxe_rs: opened\n");
        assert_eq!(line(None, &format_args!("registered")), "rxe_rs: registered\n");
    }

    #[test]
    fn for_device_names_the_device_only_inside() {
        let current = || DEVICE.with(|d| d.borrow().clone());
        assert_eq!(current(), None);
        for_device("rxe1", || {
            assert_eq!(current().as_deref(), Some("rxe1"));
            for_device("rxe0", || assert_eq!(current().as_deref(), Some("rxe0")));
            assert_eq!(current().as_deref(), Some("rxe1"));
        });
        assert_eq!(current(), None);
        let _ = std::panic::catch_unwind(|| for_device("rxe0", || panic!("unwinds")));
        assert_eq!(current(), None);
    }
}
