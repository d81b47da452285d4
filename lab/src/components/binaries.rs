//! Where the emulator binaries are, built first when this crate's sources are at hand.

use std::path::{Path, PathBuf};

/// The file name of the Netris emulator's binary.
pub const NETRIS_BIN_NAME: &str = "netris-emulator";

/// The file name of the BCM emulator's binary.
pub const BCM_BIN_NAME: &str = "bcm-emulator";

/// The file name of the vCluster kubelet's binary.
pub const VCLUSTER_BIN_NAME: &str = crate::vcluster::BIN_NAME;

/// Where the `netris-emulator` binary is, building it first when this crate's sources
/// are at hand.
///
/// `$GPUFLEET_LAB_NETRIS_BIN` wins. Otherwise the binary is looked for in cargo's profile
/// directory of the running executable: its own directory (`target/debug/gpufleet-lab`),
/// or the parent of `deps/` for a test binary (`target/debug/deps/…`), where cargo does
/// not build another package's binaries. When the crate's manifest exists (a checkout),
/// `cargo build -p gpufleet-lab --bin netris-emulator` runs first into that target
/// directory and profile (a no-op when it is fresh), so the binary is never stale.
///
/// # Errors
/// When no binary can be found or built; the message says what was tried.
pub fn netris_binary() -> Result<PathBuf, String> {
    emulator_binary(NETRIS_BIN_NAME, "GPUFLEET_LAB_NETRIS_BIN")
}

/// Where the `bcm-emulator` binary is, building it first when this crate's sources are
/// at hand; `$GPUFLEET_LAB_BCM_BIN` wins. Located and built like [`netris_binary`].
///
/// # Errors
/// When no binary can be found or built; the message says what was tried.
pub fn bcm_binary() -> Result<PathBuf, String> {
    emulator_binary(BCM_BIN_NAME, "GPUFLEET_LAB_BCM_BIN")
}

/// Where the `vcluster-kubelet` binary is, building it first when this crate's sources
/// are at hand; `$GPUFLEET_LAB_VCLUSTER_BIN` wins. Located and built like
/// [`netris_binary`].
///
/// # Errors
/// When no binary can be found or built; the message says what was tried.
pub fn vcluster_binary() -> Result<PathBuf, String> {
    emulator_binary(VCLUSTER_BIN_NAME, "GPUFLEET_LAB_VCLUSTER_BIN")
}

/// An emulator binary of this crate: `$env_var`, else cargo's profile directory of the
/// running executable, built there first when the sources are at hand.
fn emulator_binary(bin_name: &str, env_var: &str) -> Result<PathBuf, String> {
    if let Some(bin) = std::env::var_os(env_var) {
        return Ok(PathBuf::from(bin));
    }
    let exe = std::env::current_exe().map_err(|e| format!("current executable: {e}"))?;
    let dir = exe
        .parent()
        .ok_or("the current executable has no directory")?;
    let profile_dir = if dir.file_name().is_some_and(|n| n == "deps") {
        dir.parent().unwrap_or(dir)
    } else {
        dir
    };
    let candidate = profile_dir.join(bin_name);
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let mut build_error = None;
    if manifest.is_file() {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = std::process::Command::new(cargo);
        cmd.args(["build", "-q", "-p", "gpufleet-lab", "--bin", bin_name])
            .arg("--manifest-path")
            .arg(&manifest)
            .stdin(std::process::Stdio::null());
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        if let Some(target) = profile_dir.parent() {
            cmd.env("CARGO_TARGET_DIR", target);
        }
        match cmd.output() {
            Ok(out) if out.status.success() => {}
            Ok(out) => {
                build_error = Some(format!(
                    "cargo build --bin {bin_name} failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            Err(e) => build_error = Some(format!("cannot run cargo: {e}")),
        }
    }
    if candidate.is_file() {
        if let Some(e) = build_error {
            tracing::warn!("{e}; using {} as it is", candidate.display());
        }
        return Ok(candidate);
    }
    Err(format!(
        "{bin_name} is not at {} ({}); build it with `cargo build -p gpufleet-lab --bin \
         {bin_name}` or set {env_var}",
        candidate.display(),
        build_error.unwrap_or_else(|| "no sources to build it from".into())
    ))
}
