//! What the integration tests share (`mod common;` in each).

use std::process::{Command, Stdio};

/// Whether `tool` runs here (`tool --version` succeeds): a test that needs a host tool skips,
/// saying so, where it does not.
pub fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
