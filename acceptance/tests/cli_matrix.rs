//! The provider with the other CLIs its users run: OpenTofu (built from the Go module proxy)
//! and the oldest Terraform the provider claims, 1.6, plus 1.8, the first with provider
//! functions (scripts/install-clis installs them; scripts/tofu, scripts/terraform-1.6 and
//! scripts/terraform-1.8 run them). Each applies the quickstart against the lab, plans empty,
//! adopts the import example's objects with import blocks, and destroys, leaving every node
//! as it was found; OpenTofu also installs from the release's filesystem mirror with a lock
//! file.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, PoisonError};

use gpufleet_acceptance::{
    Session, Workdir, assert_import_example_adopts, example, workspace_root,
};
use gpufleet_lab::Lab;

/// The quickstart and the import example use fixed tenant names: one CLI at a time.
static TURN: Mutex<()> = Mutex::new(());

/// A launcher under scripts/, which must find its CLI installed.
fn cli(name: &str) -> PathBuf {
    let launcher = workspace_root().join("scripts").join(name);
    let version = Command::new(&launcher)
        .arg("version")
        .env("TF_CLI_CONFIG_FILE", "/dev/null")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", launcher.display()));
    assert!(
        version.status.success(),
        "{} does not run; install it with scripts/install-clis:\n{}",
        launcher.display(),
        String::from_utf8_lossy(&version.stderr)
    );
    launcher
}

fn session(launcher: &Path, main_tf: &str) -> Session {
    Session::in_workdir(
        Workdir::new(main_tf).with_launcher(launcher.to_path_buf()),
        Lab::shared().settings_env(),
    )
}

/// Quickstart apply, empty plan, destroy; then the import example's objects adopted with
/// import blocks, an empty plan, destroy. Every node ends as it was.
fn quickstart_and_import(launcher: &Path) {
    let _turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
    let before = Lab::shared().node_marks().expect("list nodes");

    let quickstart = session(launcher, &example("quickstart"));
    let applied = quickstart.apply();
    assert!(
        applied.contains("Apply complete! Resources: 3 added, 0 changed, 0 destroyed"),
        "{applied}"
    );
    quickstart.assert_plan_empty();
    let pool = quickstart.resource("gpufleet_gpu_node_pool.prod_h100");
    assert_eq!(pool["nodes"].as_array().map(Vec::len), Some(2), "{pool}");
    quickstart.destroy();
    assert_eq!(
        Lab::shared().node_marks().expect("list nodes"),
        before,
        "the quickstart left nodes changed"
    );

    assert_import_example_adopts(&example("import"), |main_tf| session(launcher, main_tf));
    assert_eq!(
        Lab::shared().node_marks().expect("list nodes"),
        before,
        "the import example left nodes changed"
    );
}

#[test]
fn opentofu_applies_the_quickstart_imports_and_destroys() {
    quickstart_and_import(&cli("tofu"));
}

#[test]
fn terraform_1_6_applies_the_quickstart_imports_and_destroys() {
    quickstart_and_import(&cli("terraform-1.6"));
}

const FUNCTIONS: &str = r#"
terraform {
  required_providers {
    gpufleet = { source = "gpufleet/gpufleet" }
  }
}

output "a100_resources" {
  value = [for p in provider::gpufleet::mig_profiles("NVIDIA-A100-SXM4-80GB") : p.resource_name]
}

output "l40s_profiles" {
  value = provider::gpufleet::mig_profiles("NVIDIA-L40S")
}
"#;

#[test]
fn provider_functions_work_in_opentofu_and_terraform_1_8() {
    for name in ["tofu", "terraform-1.8"] {
        // No init: see `Session::in_workdir`.
        let wd = Workdir::new(FUNCTIONS).with_launcher(cli(name));
        wd.run_ok(&["apply", "-auto-approve", "-input=false", "-no-color"]);
        let outputs = wd.output_json();
        let a100 = &outputs["a100_resources"]["value"];
        assert_eq!(
            a100.as_array().and_then(|v| v.first()),
            Some(&serde_json::json!("nvidia.com/mig-1g.10gb")),
            "{name}: {outputs}"
        );
        assert_eq!(
            a100.as_array().and_then(|v| v.last()),
            Some(&serde_json::json!("nvidia.com/mig-7g.80gb")),
            "{name}: {outputs}"
        );
        assert_eq!(
            outputs["l40s_profiles"]["value"],
            serde_json::json!([]),
            "{name}: {outputs}"
        );
    }
}

#[test]
fn opentofu_installs_from_the_release_mirror_with_a_lock_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (out, mirror) = (dir.path().join("dist"), dir.path().join("mirror"));
    let release = Command::new(workspace_root().join("scripts/release"))
        .args(["--debug", "--platforms", "host", "--out"])
        .arg(&out)
        .arg("--mirror")
        .arg(&mirror)
        .output()
        .expect("scripts/release runs");
    assert!(
        release.status.success(),
        "scripts/release failed:\n{}",
        String::from_utf8_lossy(&release.stderr)
    );

    let wd = Workdir::without_provider(&example("catalog")).with_launcher(cli("tofu"));
    // OpenTofu reads the bare source address as registry.opentofu.org/gpufleet/gpufleet.
    wd.init_from_mirror(&mirror, "registry.opentofu.org");
    let plan = wd.run_ok(&["plan", "-input=false", "-no-color"]);
    assert!(plan.contains("Changes to Outputs"), "{plan}");
}
