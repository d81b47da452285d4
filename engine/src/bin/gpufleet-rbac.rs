//! `gpufleet-rbac`: writes `deploy/rbac/clusterrole.yaml`, the provider's least-privilege
//! ClusterRole, from the rights the code uses (see `gpufleet_engine::backends::kube::rbac`).
//!
//! ```text
//! cargo run -p gpufleet-engine --bin gpufleet-rbac            # rewrite it
//! cargo run -p gpufleet-engine --bin gpufleet-rbac -- --check # exit 1 if it is stale
//! ```

use std::{path::Path, process::ExitCode};

use gpufleet_engine::backends::kube::rbac;

const FILE: &str = "deploy/rbac/clusterrole.yaml";

fn main() -> ExitCode {
    let check = match std::env::args().nth(1).as_deref() {
        None => false,
        Some("--check") => true,
        Some(other) => {
            eprintln!("gpufleet-rbac: unknown argument {other:?}; usage: gpufleet-rbac [--check]");
            return ExitCode::from(2);
        }
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new("."));
    let path = root.join(FILE);
    let text = rbac::cluster_role_yaml();
    let current = std::fs::read_to_string(&path).ok();
    if current.as_deref() == Some(text.as_str()) {
        println!("gpufleet-rbac: {FILE} is up to date");
        return ExitCode::SUCCESS;
    }
    if check {
        eprintln!(
            "gpufleet-rbac: {FILE} is stale: run `cargo run -p gpufleet-engine --bin gpufleet-rbac`"
        );
        return ExitCode::FAILURE;
    }
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&path, text));
    match written {
        Ok(()) => {
            println!("wrote   {FILE}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gpufleet-rbac: cannot write {}: {e}", path.display());
            ExitCode::FAILURE
        }
    }
}
