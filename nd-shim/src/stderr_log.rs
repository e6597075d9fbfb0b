//! The logger the C faces install: C and C++ programs cannot install one of the `log` crate's,
//! so the first NDK or ND2 entry that opens something installs one on stderr when
//! `ND_SHIM_LOG` names a level and the process has none. Rust programs that want the same
//! (nd-conformance) call [`init_from_env`] themselves.

#![forbid(unsafe_code)]

use std::io::Write;
use std::sync::Once;

/// Installs the stderr logger at `ND_SHIM_LOG`'s level, once per process.
pub fn init_from_env() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let Some(level) = std::env::var("ND_SHIM_LOG")
            .ok()
            .and_then(|v| v.parse::<log::LevelFilter>().ok())
        else {
            return;
        };
        if log::set_logger(&StderrLogger).is_ok() {
            log::set_max_level(level);
        }
    });
}

struct StderrLogger;

impl log::Log for StderrLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            // One write per line: `eprintln!` writes each formatted piece on its own (stderr has
            // no buffer), so the program's own output could land inside a line of ours.
            let line = format!("nd-shim {} {}: {}\n", record.level(), record.target(), record.args());
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
    }

    fn flush(&self) {}
}
