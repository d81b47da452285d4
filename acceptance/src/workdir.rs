//! A temporary Terraform working directory, and the commands run in it.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

use crate::cli_config::{cli_config_text, mirror_cli_config};
use crate::output::{Output, assert_no_consistency_errors};
use crate::{
    CLI_CONFIG_FILE, DEFAULT_TIMEOUT, DEV_OVERRIDES_WARNING, KEEP_ENV, PROVIDER_SOURCE, TF_LOG_ENV,
    TIMEOUT_ENV, provider_binary, terraform_launcher,
};

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

    pub(crate) fn execute(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
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
