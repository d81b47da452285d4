//! The Go peer provider every start-up and plan figure stands beside.

use std::process::Command;

use gpufleet_acceptance::Workdir;

/// A Go provider on terraform-plugin-framework (`bench/peer`), built with `go build` into
/// `target/peer`: the peer every start-up and plan figure stands beside. `None`, with the
/// reason printed, when Go cannot build it here.
pub(crate) fn peer_binary() -> Option<std::path::PathBuf> {
    static PEER: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    PEER.get_or_init(|| {
        let root = gpufleet_acceptance::workspace_root();
        let dir = root.join("target").join("peer");
        let binary = dir.join("terraform-provider-peer");
        let out = Command::new("go")
            .current_dir(root.join("bench").join("peer"))
            .args(["build", "-o"])
            .arg(&binary)
            .arg(".")
            .output();
        match out {
            Ok(o) if o.status.success() => Some(binary),
            Ok(o) => {
                println!(
                    "peer: not built: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                println!("peer: not built: cannot run go: {e}");
                None
            }
        }
    })
    .clone()
}

/// A work directory for the peer provider on `main_tf`.
pub(crate) fn peer_workdir(main_tf: &str, binary: &std::path::Path) -> Workdir {
    let wd = Workdir::without_provider(main_tf);
    let dir = binary.parent().expect("the peer binary has a directory");
    let config = format!(
        "provider_installation {{\n  dev_overrides {{\n    \"gpufleet/peer\" = \"{}\"\n  }}\n  direct {{}}\n}}\n",
        dir.display()
    );
    std::fs::write(wd.cli_config_path(), config).expect("write the peer's CLI configuration");
    wd
}
