//! The kube-apiserver of one virtual cluster: its flags, starting it detached, adopting
//! one that is already running, stopping it, and asking whether it is ready.
//!
//! It is kept lean: no controller manager or scheduler runs beside it, so the admission
//! plugins that only make sense with them (ServiceAccount needs the token controller),
//! or that watch objects nobody in a lab tenant uses (webhooks, admission policies,
//! quota, storage and ingress classes), are off, as are priority-and-fairness (its
//! configuration controller writes every few seconds), the endpoint reconciler (there is
//! one replica and no kube-proxy), profiling and etcd compaction (the host's API server
//! already compacts the shared etcd). `GOMEMLIMIT` keeps the Go heap small.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::certs::ClusterPki;
use super::record::Record;
use crate::process::{self, PidRecord, Stopped};

/// The soft memory limit of each virtual cluster's API server (Go's `GOMEMLIMIT`).
pub const GO_MEMORY_LIMIT: &str = "128MiB";

/// Admission plugins on by default that a lab tenant's API server does without.
pub const DISABLED_ADMISSION_PLUGINS: &[&str] = &[
    "ServiceAccount",
    "ResourceQuota",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionWebhook",
    "DefaultStorageClass",
    "DefaultIngressClass",
    "StorageObjectInUseProtection",
    "PersistentVolumeClaimResize",
    "RuntimeClass",
    "PodTopologyLabels",
    "NodeDeclaredFeatureValidator",
];

/// How long an API server gets to exit after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// Where one virtual cluster's API server keeps its files.
#[derive(Debug, Clone)]
pub struct ApiServerFiles {
    /// The cluster's directory.
    pub dir: PathBuf,
}

impl ApiServerFiles {
    /// The files in `dir`.
    #[must_use]
    pub fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
        }
    }

    /// The PKI.
    #[must_use]
    pub fn pki(&self) -> ClusterPki {
        ClusterPki::new(&self.dir.join("pki"))
    }

    /// The log (previous run: `.log.1`).
    #[must_use]
    pub fn log(&self) -> PathBuf {
        self.dir.join("apiserver.log")
    }

    /// The pid file.
    #[must_use]
    pub fn pid_file(&self) -> PathBuf {
        self.dir.join("apiserver.pid")
    }
}

/// The command line of the API server of `record`, program first.
#[must_use]
pub fn command_line(
    record: &Record,
    files: &ApiServerFiles,
    bin: &Path,
    etcd: &str,
) -> Vec<String> {
    let pki = files.pki();
    let p = |path: PathBuf| path.display().to_string();
    vec![
        bin.display().to_string(),
        "kube-apiserver".into(),
        format!("--etcd-servers={etcd}"),
        format!("--etcd-prefix={}", record.etcd_prefix),
        "--etcd-compaction-interval=0".into(),
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={}", record.port),
        format!("--tls-cert-file={}", p(pki.serving_cert())),
        format!("--tls-private-key-file={}", p(pki.serving_key())),
        format!("--client-ca-file={}", p(pki.ca_cert())),
        "--authorization-mode=RBAC".into(),
        format!(
            "--service-cluster-ip-range={}",
            crate::components::SERVICE_CIDR
        ),
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
        format!("--service-account-key-file={}", p(pki.sa_pub())),
        format!("--service-account-signing-key-file={}", p(pki.sa_key())),
        "--allow-privileged=true".into(),
        format!(
            "--disable-admission-plugins={}",
            DISABLED_ADMISSION_PLUGINS.join(",")
        ),
        "--enable-priority-and-fairness=false".into(),
        "--endpoint-reconciler-type=none".into(),
        "--profiling=false".into(),
    ]
}

/// The running API server of `files` when its command line is `expected` and its binary
/// was not rebuilt since; a process that is running otherwise is stopped. `None` when
/// nothing (usable) runs.
///
/// # Errors
/// When a stale process cannot be stopped.
pub fn adopt(files: &ApiServerFiles, expected: &[String]) -> io::Result<Option<PidRecord>> {
    let Some(record) = PidRecord::read(&files.pid_file()).filter(PidRecord::is_alive) else {
        return Ok(None);
    };
    let current = process::cmdline(record.pid).as_deref() == Some(expected)
        && !process::executable_replaced(record.pid);
    if current {
        return Ok(Some(record));
    }
    tracing::info!(
        "the API server in {} runs an old binary or other flags; restarting it",
        files.dir.display()
    );
    stop(files)?;
    Ok(None)
}

/// Starts the API server detached (its own process group, so it outlives a restart of the
/// stand-in and is adopted by the next one).
///
/// # Errors
/// When it cannot be started.
pub fn start(files: &ApiServerFiles, command: &[String]) -> io::Result<PidRecord> {
    let mut args = vec![format!("GOMEMLIMIT={GO_MEMORY_LIMIT}")];
    args.extend(command.iter().cloned());
    process::spawn(
        Path::new("env"),
        &args,
        &files.dir,
        &files.log(),
        &files.pid_file(),
    )
}

/// Stops the API server (SIGTERM, then SIGKILL).
///
/// # Errors
/// When it survives SIGKILL.
pub fn stop(files: &ApiServerFiles) -> io::Result<Stopped> {
    process::stop(&files.pid_file(), STOP_GRACE)
}

/// Stops the API server of every virtual cluster under `root` (`gpufleet-lab down`).
/// Returns the ones that were running, and the errors of those that would not stop.
#[must_use]
pub fn stop_all(root: &Path) -> (Vec<PathBuf>, Vec<(PathBuf, io::Error)>) {
    let mut stopped = Vec::new();
    let mut failed = Vec::new();
    let Ok(entries) = std::fs::read_dir(root) else {
        return (stopped, failed);
    };
    for dir in entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()) {
        match stop(&ApiServerFiles::new(&dir)) {
            Ok(Stopped::WasNotRunning) => {}
            Ok(_) => stopped.push(dir),
            Err(e) => failed.push((dir, e)),
        }
    }
    (stopped, failed)
}

/// Asks `/readyz` once, trusting only the cluster's own CA.
///
/// # Errors
/// A one-line reason when it is not ready.
pub async fn check_ready(port: u16, files: &ApiServerFiles) -> Result<(), String> {
    let body = crate::components::https_get(port, "/readyz", &files.pki().ca_cert()).await?;
    if body.trim() == "ok" {
        Ok(())
    } else {
        Err(format!("/readyz says {}", body.trim()))
    }
}

/// A free loopback port that is none of `taken`.
///
/// # Errors
/// When no port can be bound.
pub fn pick_port(taken: &[u16]) -> io::Result<u16> {
    for _ in 0..20 {
        // The lab's own picker avoids the kernel's ephemeral range.
        let candidates = crate::ports::Ports::allocate()?.all();
        if let Some(p) = candidates.into_iter().find(|p| !taken.contains(p)) {
            return Ok(p);
        }
    }
    Err(io::Error::other("no free loopback port"))
}

/// Whether `port` can be bound right now.
#[must_use]
pub fn port_free(port: u16) -> bool {
    port != 0 && TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).is_ok()
}

/// Deletes every key under `prefix` from the etcd at `etcd_port` through its JSON
/// gateway (`POST /v3/kv/deleterange`): a forgotten virtual cluster leaves no data behind.
///
/// # Errors
/// When etcd cannot be reached or refuses.
pub async fn wipe_etcd_prefix(etcd_port: u16, prefix: &str) -> Result<(), String> {
    let from = format!("{}/", prefix.trim_end_matches('/'));
    // The first key after every key starting with `<prefix>/`: `/` + 1 is `0`.
    let to = format!("{}0", prefix.trim_end_matches('/'));
    let body = serde_json::json!({
        "key": STANDARD.encode(from),
        "range_end": STANDARD.encode(to),
    })
    .to_string();
    let request = format!(
        "POST /v3/kv/deleterange HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, etcd_port)).await?;
        stream.write_all(request.as_bytes()).await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        Ok::<_, io::Error>(response)
    };
    let response = tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .map_err(|_| "etcd did not answer within 10s".to_string())?
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&response);
    match text.lines().next() {
        Some(status) if status.split_whitespace().nth(1) == Some("200") => Ok(()),
        status => Err(format!("etcd answered {status:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_keep_the_cluster_on_its_port_prefix_and_certificates() {
        let r = Record::new("vc-a", "a", "u-1", 23456);
        let files = ApiServerFiles::new(Path::new("/lab/vcluster/vc-a_a"));
        let cmd = command_line(
            &r,
            &files,
            Path::new("/bin/gpufleet-kube"),
            "http://127.0.0.1:1",
        );
        assert_eq!(cmd[..2], ["/bin/gpufleet-kube", "kube-apiserver"]);
        for want in [
            "--secure-port=23456",
            "--etcd-prefix=/vcluster/u-1",
            "--bind-address=127.0.0.1",
            "--client-ca-file=/lab/vcluster/vc-a_a/pki/ca.crt",
        ] {
            assert!(cmd.iter().any(|a| a == want), "{want} missing from {cmd:?}");
        }
        let disabled = cmd
            .iter()
            .find_map(|a| a.strip_prefix("--disable-admission-plugins="))
            .expect("admission flag");
        assert!(disabled.split(',').any(|p| p == "ServiceAccount"));
    }

    #[test]
    fn stop_all_stops_every_clusters_process() {
        let root = tempfile::tempdir().expect("tempdir");
        let mut records = Vec::new();
        for name in ["vc-a_a", "vc-b_b"] {
            let files = ApiServerFiles::new(&root.path().join(name));
            std::fs::create_dir_all(&files.dir).expect("dir");
            let args = ["600".to_string()];
            records.push(
                process::spawn(
                    Path::new("sleep"),
                    &args,
                    &files.dir,
                    &files.log(),
                    &files.pid_file(),
                )
                .expect("spawn"),
            );
        }
        std::fs::create_dir_all(root.path().join("vc-c_c")).expect("a stopped cluster");
        let (stopped, failed) = stop_all(root.path());
        assert_eq!(stopped.len(), 2);
        assert!(failed.is_empty());
        assert!(records.iter().all(|r| !r.is_alive()));
    }

    #[test]
    fn picked_ports_avoid_the_taken_ones() {
        let first = pick_port(&[]).expect("port");
        let second = pick_port(&[first]).expect("port");
        assert_ne!(first, second);
    }
}
