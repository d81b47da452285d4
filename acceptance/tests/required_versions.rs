//! The Terraform versions the modules and examples claim are the versions they work with.
//!
//! Every module under `modules/` and every runnable example (`examples/<name>/main.tf`) says
//! `required_version = ">= <floor>"`: the support matrix's oldest Terraform (README.md), or
//! 1.8 when it calls a provider function, which older releases lack. Each then runs
//! `init -backend=false` and `validate` with every Terraform CLI the support matrix claims
//! (scripts/terraform-1.6, scripts/terraform-1.8 and scripts/terraform; scripts/install-clis
//! installs the older ones): a release the matrix promises it works with must validate it,
//! and an older one must refuse it (by its `required_version`, or on the newer syntax).
//!
//! The documentation snippets under `examples/resources/`, `data-sources/`, `functions/` and
//! `provider/` are fragments of a configuration (they refer to each other's resources and
//! variables) and are checked against the schemas by the engine's tests instead.

use std::path::{Path, PathBuf};
use std::process::Command;

use gpufleet_acceptance::{Workdir, workspace_root};

/// A Terraform release, `(major, minor, patch)`.
type Version = (u32, u32, u32);

/// The first Terraform release with provider-defined functions.
const FUNCTIONS_FROM: Version = (1, 8, 0);

/// The first Terraform release with ephemeral resources.
const EPHEMERAL_FROM: Version = (1, 10, 0);

/// The launchers of the CLIs the support matrix claims.
const LAUNCHERS: &[&str] = &["terraform-1.6", "terraform-1.8", "terraform"];

fn parse_version(s: &str) -> Option<Version> {
    let mut parts = s.trim().trim_start_matches('v').split('.');
    let mut next = || parts.next().map_or(Some(0), |p| p.trim().parse().ok());
    Some((next()?, next()?, next()?))
}

/// The oldest Terraform the README's support matrix claims ("| Terraform CLI | 1.6 and newer").
fn support_floor() -> Version {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).expect("README.md");
    let row = readme
        .lines()
        .find_map(|l| l.strip_prefix("| Terraform CLI | "))
        .expect("the support matrix has a Terraform CLI row");
    let floor = row
        .split_once(" and newer")
        .and_then(|(v, _)| parse_version(v))
        .unwrap_or_else(|| panic!("the Terraform CLI row names no floor: {row}"));
    assert!(
        row.contains("Provider functions need 1.8"),
        "the support matrix should say provider functions need 1.8: {row}"
    );
    assert!(
        row.contains("Ephemeral resources need 1.10"),
        "the support matrix should say ephemeral resources need 1.10: {row}"
    );
    floor
}

/// A module or runnable example: its directory relative to the workspace and its `.tf` files.
struct Config {
    dir: String,
    files: Vec<(String, String)>,
}

impl Config {
    fn text(&self) -> String {
        self.files.iter().map(|(_, t)| t.as_str()).collect()
    }

    /// The floor of `required_version = ">= X.Y.Z"`, the only form the project uses; `None`
    /// when there is none.
    fn required(&self) -> Option<Version> {
        let text = self.text();
        let constraint = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("required_version"))
            .and_then(|rest| rest.split('"').nth(1))?;
        let floor = constraint.strip_prefix(">=").and_then(parse_version);
        assert!(
            floor.is_some(),
            "{}: required_version {constraint:?} is not \">= X.Y.Z\"",
            self.dir
        );
        floor
    }

    /// The oldest Terraform it works with: the support floor, or 1.8 with provider functions.
    fn works_from(&self, floor: Version) -> Version {
        if self.declares_ephemeral_resources() {
            EPHEMERAL_FROM.max(floor)
        } else if self.calls_provider_functions() {
            FUNCTIONS_FROM.max(floor)
        } else {
            floor
        }
    }

    fn declares_ephemeral_resources(&self) -> bool {
        self.text()
            .lines()
            .any(|l| l.trim_start().starts_with("ephemeral \""))
    }

    fn calls_provider_functions(&self) -> bool {
        self.text().contains("provider::gpufleet::")
    }
}

fn tf_files(dir: &Path) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "tf"))
        .map(|p| {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let text = std::fs::read_to_string(&p).expect("read a .tf file");
            (name, text)
        })
        .collect();
    files.sort();
    files
}

/// Every module and every runnable example.
fn configs() -> Vec<Config> {
    let root = workspace_root();
    let mut out = Vec::new();
    for (parent, runnable) in [("modules", false), ("examples", true)] {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join(parent))
            .expect("list")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_dir() && (!runnable || p.join("main.tf").is_file()))
            .collect();
        dirs.sort();
        for dir in dirs {
            let name = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            out.push(Config {
                dir: format!("{parent}/{name}"),
                files: tf_files(&dir),
            });
        }
    }
    out
}

/// The Terraform release a launcher runs.
fn cli_version(launcher: &Path) -> Version {
    let out = Command::new(launcher)
        .arg("version")
        .env("TF_CLI_CONFIG_FILE", "/dev/null")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", launcher.display()));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{} does not run; install it with scripts/install-clis:\n{}",
        launcher.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .find_map(|l| l.strip_prefix("Terraform v"))
        .and_then(parse_version)
        .unwrap_or_else(|| panic!("{} printed no version:\n{text}", launcher.display()))
}

#[test]
fn required_versions_follow_the_support_matrix() {
    let floor = support_floor();
    let mut wrong = Vec::new();
    for c in configs() {
        let want = c.works_from(floor);
        let Some(got) = c.required() else {
            wrong.push(format!("{}: no required_version", c.dir));
            continue;
        };
        if got != want {
            wrong.push(format!(
                "{}: required_version >= {}.{}.{}, but it works from {}.{}.{}{}",
                c.dir,
                got.0,
                got.1,
                got.2,
                want.0,
                want.1,
                want.2,
                if c.declares_ephemeral_resources() {
                    " (it declares an ephemeral resource)"
                } else if c.calls_provider_functions() {
                    " (it calls a provider function)"
                } else {
                    ""
                }
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// `validate` of `tree/<dir>` in `wd` (its CLI configuration, its installed modules) with
/// `launcher`: whether it passed, and what it printed.
fn validate_with(launcher: &Path, wd: &Workdir, dir: &str) -> (bool, String) {
    let out = Command::new(launcher)
        .args([&format!("-chdir=tree/{dir}"), "validate", "-no-color"])
        .current_dir(wd.path())
        .env("TF_CLI_CONFIG_FILE", wd.cli_config_path())
        .env("TF_IN_AUTOMATION", "1")
        .env("CHECKPOINT_DISABLE", "1")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", launcher.display()));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn every_module_and_example_validates_with_every_claimed_cli() {
    let configs = configs();
    let floor = support_floor();
    // One work directory holds the tree, so examples reach ../../modules and modules reach
    // ../platform as they do in the repository. Modules are installed once, by the default
    // CLI: with development overrides, Terraform before 1.15 looks the overridden provider
    // up in the registry on init (see Session::in_workdir), and validate needs no more.
    let wd = Workdir::new("");
    // Every file first: a module's init reads the modules it calls (`../platform`).
    for c in &configs {
        for (name, text) in &c.files {
            wd.write(&format!("tree/{}/{name}", c.dir), text);
        }
    }
    for c in &configs {
        let chdir = format!("-chdir=tree/{}", c.dir);
        wd.run_ok(&[
            &chdir,
            "init",
            "-backend=false",
            "-input=false",
            "-no-color",
        ]);
    }
    let mut failures = Vec::new();
    for launcher in LAUNCHERS {
        let launcher = workspace_root().join("scripts").join(launcher);
        let version = cli_version(&launcher);
        for c in &configs {
            let validate = validate_with(&launcher, &wd, &c.dir);
            let label = format!(
                "{} with Terraform {}.{}.{}",
                c.dir, version.0, version.1, version.2
            );
            // What the support matrix promises, not what the file says.
            if version >= c.works_from(floor) {
                if !validate.0 {
                    failures.push(format!("{label}: validate failed:\n{}", validate.1));
                }
            } else if validate.0 {
                // An older release must not take it. It says "Unsupported Terraform Core
                // version" when it can parse the file, and names the newer syntax (a provider
                // function call, an `ephemeral` block) when it cannot.
                failures.push(format!(
                    "{label}: its required_version should refuse this release:\n{}",
                    validate.1
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
