//! A host program of the lab in a network namespace of its own (`vcluster-kubelet
//! isolated`), for a program that listens on a port it fixes, so that two labs on one
//! machine can both run it: the MPI Operator serves its health check on port 8080 of every
//! interface.
//!
//! It uses a vCluster pod's sandbox ([`super::sandbox`]) with the host's root, mounts and
//! environment, so the program sees the machine's files as it would on the host, and only
//! its network is its own: the host API server is forwarded in at `127.0.0.1:<api port>`
//! (as a pod reaches the `kubernetes` Service), and one port inside is forwarded out to a
//! host loopback port of the lab's choosing. This process stays on the host as the
//! sandbox's supervisor and exits with the program's exit code; the program shares its
//! process group, so stopping the group (`gpufleet-lab down`) stops both.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use super::forward;
use super::sandbox::{self, SandboxSpec};

/// What to run, and its two forwarded ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Isolated {
    /// Where the sandbox's spec is written.
    pub dir: PathBuf,
    /// The host API server's port on the host's loopback (the same port inside).
    pub api_port: u16,
    /// The host address that leads to `inner_port` inside.
    pub expose: SocketAddr,
    /// The port inside that `expose` leads to.
    pub inner_port: u16,
    /// Set in the program's environment, over the host's.
    pub env: Vec<(String, String)>,
    /// The program and its arguments.
    pub argv: Vec<String>,
}

/// The host's environment with `set` over it.
fn environment(set: &[(String, String)]) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| !set.iter().any(|(name, _)| name == k))
        .collect();
    env.extend(set.iter().cloned());
    env
}

/// Runs the program until it exits; returns its exit code (128 + the signal when a signal
/// ended it).
///
/// # Errors
/// When the sandbox cannot be started or its ports forwarded.
pub async fn run(kubelet_bin: &Path, what: Isolated) -> Result<i32, String> {
    let listener = tokio::net::TcpListener::bind(what.expose)
        .await
        .map_err(|e| format!("failed to listen on {}: {e}", what.expose))?;
    std::fs::create_dir_all(&what.dir)
        .map_err(|e| format!("failed to create {}: {e}", what.dir.display()))?;
    let name = what
        .argv
        .first()
        .and_then(|p| Path::new(p).file_name())
        .map_or_else(|| "isolated".into(), |n| n.to_string_lossy().into_owned());
    let workdir =
        std::env::current_dir().map_or_else(|_| "/".into(), |d| d.to_string_lossy().into_owned());
    let spec = SandboxSpec {
        root: PathBuf::from("/"),
        hostname: name,
        mounts: Vec::new(),
        argv: what.argv.clone(),
        env: environment(&what.env),
        workdir,
        wait_for_port: Some(what.api_port),
    };
    let spec_file = what.dir.join("sandbox.json");
    let text = serde_json::to_vec_pretty(&spec).map_err(|e| e.to_string())?;
    std::fs::write(&spec_file, text)
        .map_err(|e| format!("failed to write {}: {e}", spec_file.display()))?;
    // Its output goes where this process's goes (the component's log), and it stays in
    // this process group.
    let mut command = sandbox::command(kubelet_bin, &spec_file);
    command.stdin(Stdio::null());
    let mut child = tokio::process::Command::from(command)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("failed to start its sandbox: {e}"))?;
    let pid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .ok_or("its sandbox exited at once")?;
    let _forwarders = forward::sandbox(pid, what.api_port, listener, what.inner_port).await?;
    tracing::info!(
        "running {:?} in its own network namespace; {} leads to its port {}",
        what.argv,
        what.expose,
        what.inner_port
    );
    let status = child
        .wait()
        .await
        .map_err(|e| format!("failed to wait for its sandbox: {e}"))?;
    Ok(exit_code(status))
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}
