//! What the emulator binaries (`bcm-emulator`, `netris-emulator`) set up alike.

use tracing_subscriber::EnvFilter;

/// Logs to stderr (stdout carries the `export` lines), at the level `$env_var` says
/// (default `info`), in colour only on a terminal.
pub fn init_logging(env_var: &str) {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env(env_var).unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}
