//! What the stand-in keeps on disk for one virtual cluster, in
//! `<lab>/vcluster/<namespace>_<name>/record.json`: enough to bring the same API server
//! back on the same port with the same data and certificates after a pause or a restart
//! of the stand-in.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One virtual cluster, as remembered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The host namespace.
    pub namespace: String,
    /// The virtual cluster's (and StatefulSet's) name.
    pub name: String,
    /// The StatefulSet's uid: a StatefulSet deleted and created again under the same name
    /// is another virtual cluster, with fresh data.
    pub uid: String,
    /// The API server's loopback port.
    pub port: u16,
    /// The API server's `--etcd-prefix` on the lab's etcd.
    pub etcd_prefix: String,
}

impl Record {
    /// A new record for a StatefulSet; its data lives under an etcd prefix named after
    /// the uid.
    #[must_use]
    pub fn new(namespace: &str, name: &str, uid: &str, port: u16) -> Self {
        Self {
            namespace: namespace.to_string(),
            name: name.to_string(),
            uid: uid.to_string(),
            port,
            etcd_prefix: format!("/vcluster/{uid}"),
        }
    }

    /// `<namespace>/<name>`: how logs and `/status` name it.
    #[must_use]
    pub fn key(&self) -> String {
        key(&self.namespace, &self.name)
    }

    /// Its directory under the stand-in's state directory `root`.
    #[must_use]
    pub fn dir(&self, root: &Path) -> PathBuf {
        cluster_dir(root, &self.namespace, &self.name)
    }

    /// Reads the record in `dir`; `None` when there is none or it is unreadable.
    #[must_use]
    pub fn load(dir: &Path) -> Option<Self> {
        let text = std::fs::read_to_string(dir.join("record.json")).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Writes the record into `dir` (created when missing).
    ///
    /// # Errors
    /// When the directory or file cannot be written.
    pub fn save(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let text = serde_json::to_string_pretty(self).map_err(io::Error::other)?;
        let tmp = dir.join("record.json.tmp");
        std::fs::write(&tmp, text)?;
        std::fs::rename(tmp, dir.join("record.json"))
    }
}

/// `<namespace>/<name>`.
#[must_use]
pub fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// The directory of virtual cluster `namespace/name` under `root`. `_` appears in neither
/// a namespace nor a StatefulSet name, so the directory names cannot collide.
#[must_use]
pub fn cluster_dir(root: &Path, namespace: &str, name: &str) -> PathBuf {
    root.join(format!("{namespace}_{name}"))
}

/// Every record under `root` (each with its directory).
#[must_use]
pub fn load_all(root: &Path) -> Vec<(PathBuf, Record)> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut all: Vec<(PathBuf, Record)> = entries
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| Record::load(&e.path()).map(|r| (e.path(), r)))
        .collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_are_found_again() {
        let root = tempfile::tempdir().expect("tempdir");
        let r = Record::new("vc-a", "a", "1234-5678", 20001);
        assert_eq!(r.etcd_prefix, "/vcluster/1234-5678");
        r.save(&r.dir(root.path())).expect("save");
        let all = load_all(root.path());
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].1, r);
        assert!(all[0].0.ends_with("vc-a_a"));
    }
}
