//! Who holds a turn: this process's holder identity.

use super::PIPELINE_VARIABLES;

/// A holder identity for this process: `<hostname>/<pid>/<random suffix>`, followed by the
/// pipeline run (`TFC_RUN_ID=…`, `CI_PIPELINE_ID=…`, `GITHUB_RUN_ID=…`) when the process runs
/// in one, so an operator can tell whose turn it is. Every call gives a new suffix: two turns
/// in one process are two holders.
pub fn holder_identity() -> String {
    identity(&hostname(), std::process::id(), &random_suffix(), |name| {
        std::env::var(name).ok()
    })
}

pub(super) fn identity(
    hostname: &str,
    pid: u32,
    suffix: &str,
    env: impl Fn(&str) -> Option<String>,
) -> String {
    let mut id = format!("{hostname}/{pid}/{suffix}");
    for name in PIPELINE_VARIABLES {
        if let Some(value) = env(name).filter(|v| !v.trim().is_empty()) {
            id.push_str(&format!(" {name}={}", value.trim()));
        }
    }
    id
}

/// The machine's name, from the kernel on Linux, else the usual variables, else `hostname`.
pub(super) fn hostname() -> String {
    let from_file = || std::fs::read_to_string("/proc/sys/kernel/hostname").ok();
    let from_env = || {
        std::env::var("HOSTNAME")
            .or_else(|_| std::env::var("COMPUTERNAME"))
            .ok()
    };
    let from_command = || {
        std::process::Command::new("hostname")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
    };
    from_file()
        .or_else(from_env)
        .or_else(from_command)
        .map(|h| h.trim().chars().take(63).collect::<String>())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".to_owned())
}

pub(super) fn random_suffix() -> String {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    (0..6)
        .map(|_| char::from(CHARS[fastrand::usize(..CHARS.len())]))
        .collect()
}
