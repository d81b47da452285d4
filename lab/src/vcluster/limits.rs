//! Kernel limits that many control planes on one machine run into.
//!
//! Every kube-apiserver and controller manager watches its certificate files with inotify,
//! and a kernel's default of 128 inotify instances per user is used up by about twenty
//! virtual clusters: the next API server fails with "too many open files" and its syncer
//! crash-loops. As `kind` and `k3d` advise, the lab raises the limits (it runs as root);
//! where it cannot, it says what to run.

use std::path::Path;

/// The limits the lab wants: `(file under /proc/sys, at least)`.
const INOTIFY: [(&str, u64); 2] = [
    ("fs/inotify/max_user_instances", 8192),
    ("fs/inotify/max_user_watches", 524_288),
];

/// Raises the inotify limits to at least the lab's needs; logs what it did or could not.
pub fn raise_inotify() {
    for (name, want) in INOTIFY {
        let path = Path::new("/proc/sys").join(name);
        let have: Option<u64> = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| t.trim().parse().ok());
        match have {
            Some(have) if have >= want => {}
            _ => match std::fs::write(&path, want.to_string()) {
                Ok(()) => tracing::info!(
                    "raised {} from {} to {want}, for many virtual control planes",
                    name.replace('/', "."),
                    have.map_or_else(|| "?".to_owned(), |h| h.to_string())
                ),
                Err(e) => tracing::warn!(
                    "{} is {}; about twenty virtual clusters exhaust it, and raising it failed ({e}): run `sysctl -w {}={want}`",
                    name.replace('/', "."),
                    have.map_or_else(|| "?".to_owned(), |h| h.to_string()),
                    name.replace('/', ".")
                ),
            },
        }
    }
}
