//! The files a kubelet manages in a container's `/etc`: `hosts` (the kubelet's
//! `etc-hosts` in the pod's directory), `hostname` and `resolv.conf`, over an `/etc` of the
//! container's own.
//!
//! The lab has no image to take `/etc` from, so the sandbox gets a fresh `tmpfs` with the
//! few host entries a static syncer reads (CA bundle, users, name service switch) bound in
//! read-only. Binding the host's whole `/etc` instead leaves `localhost` unresolvable on a
//! machine without `/etc/hosts` (a fresh debootstrap root has none), and the syncer's
//! controllers fail to listen on `localhost`.

use std::io;
use std::path::{Path, PathBuf};

use super::sandbox::{Mount, MountKind};

/// Host entries the sandbox's `/etc` borrows, when the host has them.
const BORROWED: [&str; 4] = ["ssl", "passwd", "group", "nsswitch.conf"];

/// The kubelet's hosts file for a pod: loopback names, then the pod's own name at its IP.
#[must_use]
pub fn hosts_file(hostname: &str, pod_ip: Option<&str>) -> String {
    let mut text = String::from(
        "# Kubernetes-managed hosts file.\n\
         127.0.0.1\tlocalhost\n\
         ::1\tlocalhost ip6-localhost ip6-loopback\n\
         fe00::0\tip6-localnet\n\
         fe00::0\tip6-mcastprefix\n\
         fe00::1\tip6-allnodes\n\
         fe00::2\tip6-allrouters\n",
    );
    if let Some(ip) = pod_ip.filter(|ip| !ip.is_empty()) {
        text.push_str(&format!("{ip}\t{hostname}\n"));
    }
    text
}

/// Writes the pod's managed files into `dir` and returns the mounts of its `/etc`, in order.
///
/// # Errors
/// When a file cannot be written.
pub fn prepare(
    dir: &Path,
    hostname: &str,
    pod_ip: Option<&str>,
    host_etc: &Path,
) -> io::Result<Vec<Mount>> {
    let hosts = dir.join("etc-hosts");
    std::fs::write(&hosts, hosts_file(hostname, pod_ip))?;
    let name = dir.join("etc-hostname");
    std::fs::write(&name, format!("{hostname}\n"))?;
    let mut mounts = vec![Mount {
        source: PathBuf::new(),
        target: "/etc".into(),
        kind: MountKind::Tmpfs,
    }];
    for entry in BORROWED {
        let source = host_etc.join(entry);
        if source.exists() {
            mounts.push(Mount::bind(source, &format!("/etc/{entry}"), true));
        }
    }
    // As with dnsPolicy Default: the node's resolver configuration.
    let resolv = host_etc.join("resolv.conf");
    if resolv.is_file() {
        mounts.push(Mount::bind(resolv, "/etc/resolv.conf", true));
    }
    mounts.push(Mount::bind(hosts, "/etc/hosts", false));
    mounts.push(Mount::bind(name, "/etc/hostname", false));
    Ok(mounts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hosts_file_names_localhost_and_the_pod() {
        let text = hosts_file("prod-0", Some("10.0.0.7"));
        assert!(text.contains("127.0.0.1\tlocalhost\n"), "{text}");
        assert!(text.ends_with("10.0.0.7\tprod-0\n"), "{text}");
        assert!(!hosts_file("prod-0", None).contains("prod-0"));
    }

    #[test]
    fn etc_is_fresh_with_the_managed_files_over_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let host = tempfile::tempdir().expect("tempdir");
        std::fs::write(host.path().join("passwd"), "root:x:0:0::/root:/bin/sh\n").expect("w");
        let mounts = prepare(dir.path(), "dev-0", None, host.path()).expect("prepare");
        let targets: Vec<_> = mounts.iter().map(|m| m.target.as_str()).collect();
        assert_eq!(
            targets,
            ["/etc", "/etc/passwd", "/etc/hosts", "/etc/hostname"]
        );
        assert_eq!(mounts[0].kind, MountKind::Tmpfs);
        assert_eq!(mounts[1].kind, MountKind::BindReadOnly);
        let hosts = std::fs::read_to_string(dir.path().join("etc-hosts")).expect("read");
        assert!(hosts.contains("localhost"));
    }
}
