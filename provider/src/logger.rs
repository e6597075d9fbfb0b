//! A tiny `log` backend following rdma-core's conventions: `VERBS_LOG_LEVEL`
//! (0 none, 1 error, 2 warn, 3 info, 4 debug; default 0, so quiet) and
//! `VERBS_LOG_FILE` (append to that file; stderr when unset or unopenable).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::sync::Mutex;

use log::{LevelFilter, Log, Metadata, Record};

struct VerbsLogger {
    file: Mutex<Option<File>>,
}

static LOGGER: VerbsLogger = VerbsLogger { file: Mutex::new(None) };

/// Maps `VERBS_LOG_LEVEL` as rdma-core parses it (`strtol(.., 0)`: decimal,
/// `0x` hex or leading-zero octal) to a `log` level filter.
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

/// Installs the logger once per process; a no-op if some other `log` backend
/// is already installed (then that one gets our records).
pub(crate) fn init() {
    let level = level_from_env(std::env::var("VERBS_LOG_LEVEL").ok().as_deref());
    if level == LevelFilter::Off {
        return;
    }
    if let Some(path) = std::env::var_os("VERBS_LOG_FILE") {
        if let Ok(f) = OpenOptions::new().append(true).create(true).open(path) {
            if let Ok(mut slot) = LOGGER.file.lock() {
                *slot = Some(f);
            }
        }
    }
    if log::set_logger(&LOGGER).is_ok() {
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
        let line = format!("{}: {}: {}\n", crate::PROVIDER_NAME, record.level(), record.args());
        // Logging must never fail the verb that logs, so write errors are dropped.
        match self.file.lock() {
            Ok(mut slot) if slot.is_some() => {
                if let Some(f) = slot.as_mut() {
                    let _ = f.write_all(line.as_bytes());
                }
            }
            _ => {
                let _ = std::io::stderr().write_all(line.as_bytes());
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
}
