//! Building `gpufleet-kube`, the Go multi-call binary with the control plane, when it is
//! missing or stale.
//!
//! The binary is shared by every lab and test run on the machine (building it takes tens
//! of minutes cold on 2 cores, about a minute warm): by default it lives at
//! `<workspace>/target/gpufleet-kube/gpufleet-kube` (`$CARGO_TARGET_DIR` is honoured), or
//! wherever `$GPUFLEET_LAB_BIN` says. Next to it, `gpufleet-kube.stamp` holds a SHA-256 of
//! the Go sources it was built from (`lab/kube/*.go`, `go.mod`, `go.sum`, `build.sh`); when
//! that differs from the sources now, the binary is stale and is rebuilt with
//! `lab/kube/build.sh` (a binary without a stamp was built by someone else and is used as
//! it is), whose progress is streamed to stderr and kept in
//! `gpufleet-kube.build.log`. A lock file makes concurrent builders wait for one build.
//!
//! Only building needs Go: a fresh binary is used without it.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::lock::FileLock;

/// What to tell a user who has no (or too old a) Go toolchain.
pub const GO_INSTALL_HINT: &str = "the lab needs Go 1.26 or newer: install it from your distribution or https://go.dev/dl and put `go` on PATH";

/// The oldest Go that builds `lab/kube` (its go.mod says 1.26).
pub const MIN_GO: (u32, u32) = (1, 26);

/// Why `gpufleet-kube` could not be had.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// `go` is not on PATH.
    #[error("{GO_INSTALL_HINT}")]
    GoMissing,
    /// `go` is older than [`MIN_GO`].
    #[error("{GO_INSTALL_HINT} (found {found})")]
    GoTooOld {
        /// What `go env GOVERSION` said.
        found: String,
    },
    /// There is no binary and no source to build it from.
    #[error(
        "failed to find gpufleet-kube: {bin} does not exist and there is no Go source at {src} to build it from (set GPUFLEET_LAB_BIN to a built binary, or GPUFLEET_LAB_KUBE_SRC to lab/kube)"
    )]
    NoSource {
        /// The binary looked for.
        bin: PathBuf,
        /// The source directory looked in.
        src: PathBuf,
    },
    /// A file operation around the build failed.
    #[error("failed to {what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// `build.sh` failed.
    #[error(
        "failed to build {}: build.sh exited with {status}; full output in {log}; last lines:\n{tail}",
        log.file_stem().map_or_else(String::new, |n| n.to_string_lossy().trim_end_matches(".build").to_owned())
    )]
    Failed {
        /// Its exit status.
        status: String,
        /// The build log.
        log: PathBuf,
        /// The last lines of output.
        tail: String,
    },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> BuildError {
    let what = what.into();
    move |source| BuildError::Io { what, source }
}

/// Where the Go source is: `$GPUFLEET_LAB_KUBE_SRC`, else `lab/kube` of the workspace this
/// crate was built from.
#[must_use]
pub fn source_dir() -> PathBuf {
    std::env::var_os("GPUFLEET_LAB_KUBE_SRC").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("kube"),
        PathBuf::from,
    )
}

/// The workspace root this crate was built in.
#[must_use]
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// Cargo's target directory: `$CARGO_TARGET_DIR` (relative to the workspace), else
/// `<workspace>/target`.
#[must_use]
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => workspace_root().join(dir),
        None => workspace_root().join("target"),
    }
}

/// Where the shared binary is: `$GPUFLEET_LAB_BIN`, else
/// `<target>/gpufleet-kube/gpufleet-kube`.
#[must_use]
pub fn default_binary() -> PathBuf {
    std::env::var_os("GPUFLEET_LAB_BIN").map_or_else(
        || target_dir().join("gpufleet-kube").join("gpufleet-kube"),
        PathBuf::from,
    )
}

/// Where the lab's vCluster build is (a directory holding `vcluster` and `kine`):
/// `$GPUFLEET_LAB_VCLUSTER_DIR`, else `<target>/vcluster/vcluster-build`.
#[must_use]
pub fn vcluster_dir() -> PathBuf {
    build_dir("GPUFLEET_LAB_VCLUSTER_DIR", "vcluster")
}

/// `$<var>`, else `<target>/<name>/<name>-build`: where a build of upstream programs goes.
fn build_dir(var: &str, name: &str) -> PathBuf {
    std::env::var_os(var).map_or_else(
        || target_dir().join(name).join(format!("{name}-build")),
        PathBuf::from,
    )
}

/// Where the source of a build of upstream programs is: `lab/<name>` of this workspace.
fn source_of(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(name)
}

/// The vCluster release the lab builds and runs: the one gpufleet renders and documents (a
/// test holds the two equal, so the lab never runs another release than the provider asks).
pub const VCLUSTER_VERSION: &str = "0.36.0";

/// Builds vCluster's syncer and kine (lab/vcluster/build.sh) into `dir` when missing or
/// stale.
///
/// # Errors
/// As [`ensure`].
pub fn ensure_vcluster(dir: &Path) -> Result<Option<Duration>, BuildError> {
    ensure_with(
        dir,
        &source_of("vcluster"),
        &[("VCLUSTER_VERSION", VCLUSTER_VERSION)],
    )
}

/// The Kubernetes minor of `gpufleet-kube` (`lab/kube`): the lab's own control plane, and
/// the virtual clusters that ask for it.
pub const KUBE_MINOR: &str = "1.36";

/// Older Kubernetes minors the lab builds for virtual control planes only
/// (`lab/kube-<minor>`), so a virtual cluster runs the version it asks for.
pub const OLDER_KUBE_MINORS: &[&str] = &["1.35"];

/// Where the build of an older minor is: `<target>/kube-<minor>/kube-<minor>`.
#[must_use]
pub fn older_kube_binary(minor: &str) -> PathBuf {
    let name = format!("kube-{minor}");
    target_dir().join(&name).join(name)
}

/// Builds every older minor's control plane (`lab/kube-<minor>/build.sh`) when missing or
/// stale; returns the time the builds took, or `None` when none was needed.
///
/// # Errors
/// As [`ensure`].
pub fn ensure_older_kubes() -> Result<Option<Duration>, BuildError> {
    let mut took: Option<Duration> = None;
    for minor in OLDER_KUBE_MINORS {
        let name = format!("kube-{minor}");
        if let Some(t) = ensure(&older_kube_binary(minor), &source_of(&name))? {
            took = Some(took.unwrap_or_default() + t);
        }
    }
    Ok(took)
}

/// The Kubeflow MPI Operator release the lab builds and runs (`lab/mpi-operator/build.sh`):
/// gpufleet's multi-node benchmarks are `MPIJob`s of its `kubeflow.org/v2beta1` API.
pub const MPI_OPERATOR_VERSION: &str = "v0.8.0";

/// Where the lab's MPI Operator build is (a directory holding `mpi-operator` and
/// `mpijobs-crd.yaml`): `$GPUFLEET_LAB_MPI_OPERATOR_DIR`, else
/// `<target>/mpi-operator/mpi-operator-build`.
#[must_use]
pub fn mpi_operator_dir() -> PathBuf {
    build_dir("GPUFLEET_LAB_MPI_OPERATOR_DIR", "mpi-operator")
}

/// Builds the MPI Operator's controller and takes its CRD (lab/mpi-operator/build.sh) into
/// `dir` when missing or stale.
///
/// # Errors
/// As [`ensure`].
pub fn ensure_mpi_operator(dir: &Path) -> Result<Option<Duration>, BuildError> {
    ensure_with(
        dir,
        &source_of("mpi-operator"),
        &[("MPI_OPERATOR_VERSION", MPI_OPERATOR_VERSION)],
    )
}

/// The Karpenter release the lab builds and runs (`lab/karpenter/build.sh`): the controller
/// with its KWOK cloud provider, and the CRDs of that release.
pub const KARPENTER_VERSION: &str = "v1.8.0";

/// Where the lab's Karpenter build is (a directory holding `karpenter-kwok`, `crds/` and its
/// RBAC): `$GPUFLEET_LAB_KARPENTER_DIR`, else `<target>/karpenter/karpenter-build`.
#[must_use]
pub fn karpenter_dir() -> PathBuf {
    build_dir("GPUFLEET_LAB_KARPENTER_DIR", "karpenter")
}

/// Builds Karpenter's KWOK controller and takes its CRDs and RBAC (lab/karpenter/build.sh)
/// into `dir` when missing or stale.
///
/// # Errors
/// As [`ensure`].
pub fn ensure_karpenter(dir: &Path) -> Result<Option<Duration>, BuildError> {
    ensure_with(
        dir,
        &source_of("karpenter"),
        &[("KARPENTER_VERSION", KARPENTER_VERSION)],
    )
}

/// `<bin>` + suffix, e.g. `gpufleet-kube.stamp`.
fn sibling(bin: &Path, suffix: &str) -> PathBuf {
    let mut s = bin.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// The stamp file next to the binary.
#[must_use]
pub fn stamp_file(bin: &Path) -> PathBuf {
    sibling(bin, ".stamp")
}

/// The build log next to the binary.
#[must_use]
pub fn build_log(bin: &Path) -> PathBuf {
    sibling(bin, ".build.log")
}

/// SHA-256 (hex) over the names and contents of the files the binary is built from:
/// `*.go`, `go.mod`, `go.sum` and `build.sh` in `src`, in name order.
///
/// # Errors
/// When the directory or a file cannot be read.
pub fn source_hash(src: &Path) -> io::Result<String> {
    let mut names: Vec<String> = std::fs::read_dir(src)?
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".go") || n == "go.mod" || n == "go.sum" || n == "build.sh")
        .collect();
    names.sort();
    if !names.iter().any(|n| n == "go.mod" || n == "build.sh") {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{} has no go.mod or build.sh", src.display()),
        ));
    }
    let mut ctx = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256);
    for name in &names {
        let contents = std::fs::read(src.join(name))?;
        ctx.update(name.as_bytes());
        ctx.update(&[0]);
        ctx.update(&(contents.len() as u64).to_le_bytes());
        ctx.update(&contents);
    }
    Ok(ctx
        .finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// Whether the binary can be used as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Freshness {
    /// It exists and was built from the current sources.
    UpToDate,
    /// It does not exist.
    Missing,
    /// It exists but the sources changed since it was built here.
    Stale,
    /// It exists with no stamp: it was not built by the lab (say, `GPUFLEET_LAB_BIN`
    /// points at a binary built by hand), so it is used as it is and never overwritten.
    Unstamped,
    /// It exists and there are no sources to compare with: used as it is.
    NoSource,
}

/// Compares the binary's stamp with the sources.
#[must_use]
pub fn freshness(bin: &Path, src: &Path) -> Freshness {
    freshness_with(bin, src, &[])
}

/// [`freshness`] of a build given `env` (see [`ensure_with`]).
#[must_use]
pub fn freshness_with(bin: &Path, src: &Path, env: &[(&str, &str)]) -> Freshness {
    let exists = bin.exists();
    match stamp_of(src, env) {
        Err(_) if exists => Freshness::NoSource,
        Err(_) => Freshness::Missing,
        Ok(_) if !exists => Freshness::Missing,
        Ok(hash) => match std::fs::read_to_string(stamp_file(bin)) {
            Ok(stamp) if stamp.trim() == hash => Freshness::UpToDate,
            Ok(_) => Freshness::Stale,
            Err(_) => Freshness::Unstamped,
        },
    }
}

/// Finds `go` on PATH.
#[must_use]
pub fn find_go() -> Option<PathBuf> {
    find_go_in(std::env::var_os("PATH").as_deref())
}

/// Finds `go` in the directories of a PATH value.
fn find_go_in(path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    std::env::split_paths(path?)
        .map(|dir| dir.join("go"))
        .find(|candidate| candidate.is_file())
}

/// Checks that Go is there and new enough; returns its version (`go1.26.8`).
///
/// # Errors
/// [`BuildError::GoMissing`] or [`BuildError::GoTooOld`].
pub fn check_go() -> Result<String, BuildError> {
    check_go_in(std::env::var_os("PATH").as_deref())
}

fn check_go_in(path: Option<&std::ffi::OsStr>) -> Result<String, BuildError> {
    let go = find_go_in(path).ok_or(BuildError::GoMissing)?;
    let out = Command::new(&go)
        .args(["env", "GOVERSION"])
        .stdin(Stdio::null())
        .output()
        .map_err(|_| BuildError::GoMissing)?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    match parse_go_version(&version) {
        Some(v) if v >= MIN_GO => Ok(version),
        _ => Err(BuildError::GoTooOld { found: version }),
    }
}

/// `go1.26.8` → (1, 26).
fn parse_go_version(v: &str) -> Option<(u32, u32)> {
    let rest = v.strip_prefix("go")?;
    let mut parts = rest.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Makes sure an up-to-date binary is at `bin`, building it from `src` if it is missing
/// or stale. Returns how long the build took, or `None` when no build was needed.
///
/// # Errors
/// When Go is missing, there is nothing to build from, or the build fails.
pub fn ensure(bin: &Path, src: &Path) -> Result<Option<Duration>, BuildError> {
    ensure_with_path(bin, src, &[], std::env::var_os("PATH").as_deref())
}

/// [`ensure`] for a build that takes settings from its environment (`env`, which
/// `build.sh` is given); they are part of the stamp, so a changed setting rebuilds.
///
/// # Errors
/// As [`ensure`].
pub fn ensure_with(
    bin: &Path,
    src: &Path,
    env: &[(&str, &str)],
) -> Result<Option<Duration>, BuildError> {
    ensure_with_path(bin, src, env, std::env::var_os("PATH").as_deref())
}

/// The stamp of `src` built with `env`.
fn stamp_of(src: &Path, env: &[(&str, &str)]) -> io::Result<String> {
    let mut hash = source_hash(src)?;
    for (k, v) in env {
        hash.push_str(&format!(" {k}={v}"));
    }
    Ok(hash)
}

/// [`ensure`], looking for Go in the given PATH value.
fn ensure_with_path(
    bin: &Path,
    src: &Path,
    env: &[(&str, &str)],
    path: Option<&std::ffi::OsStr>,
) -> Result<Option<Duration>, BuildError> {
    let name = bin.file_name().map_or_else(
        || "the lab's Go build".into(),
        |n| n.to_string_lossy().into_owned(),
    );
    match freshness_with(bin, src, env) {
        Freshness::UpToDate | Freshness::NoSource => return Ok(None),
        Freshness::Unstamped => {
            tracing::info!(
                "using {} as it is: it has no {} (it was not built by gpufleet-lab)",
                bin.display(),
                stamp_file(bin).display()
            );
            return Ok(None);
        }
        Freshness::Missing if !src.join("go.mod").is_file() && !src.join("build.sh").is_file() => {
            return Err(BuildError::NoSource {
                bin: bin.to_path_buf(),
                src: src.to_path_buf(),
            });
        }
        Freshness::Missing | Freshness::Stale => {}
    }
    let go = check_go_in(path)?;
    let lock_path = sibling(bin, ".lock");
    let _lock = FileLock::acquire(&lock_path, || {
        tracing::info!(
            "another process is building {name}; waiting for it (lock {})",
            lock_path.display()
        );
    })
    .map_err(io_err(format!("lock {}", lock_path.display())))?;
    // Someone else may have built it while this process waited.
    let state = freshness_with(bin, src, env);
    if state == Freshness::UpToDate {
        return Ok(None);
    }
    let hash = stamp_of(src, env).map_err(io_err(format!("read {}", src.display())))?;
    tracing::info!(
        "building {name} ({}) with {go} from {} -> {}; a cold build downloads its modules and compiles thousands of packages: minutes on 2 cores",
        if state == Freshness::Missing {
            "missing"
        } else {
            "stale"
        },
        src.display(),
        bin.display()
    );
    let started = Instant::now();
    build(bin, src, env)?;
    std::fs::write(stamp_file(bin), format!("{hash}\n"))
        .map_err(io_err(format!("write {}", stamp_file(bin).display())))?;
    let took = started.elapsed();
    tracing::info!("built {name} in {:.1}s", took.as_secs_f64());
    Ok(Some(took))
}

/// Runs `build.sh <bin>.tmp`, streaming its output, then moves the result (a file, or a
/// directory of several) into place.
fn build(bin: &Path, src: &Path, env: &[(&str, &str)]) -> Result<(), BuildError> {
    if let Some(parent) = bin.parent() {
        std::fs::create_dir_all(parent).map_err(io_err(format!("create {}", parent.display())))?;
    }
    let tmp = sibling(bin, ".tmp");
    let log_path = build_log(bin);
    let log = File::create(&log_path).map_err(io_err(format!("create {}", log_path.display())))?;
    let log = Arc::new(Mutex::new(log));
    let tail = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut child = Command::new("bash")
        .arg(src.join("build.sh"))
        .arg(&tmp)
        .envs(env.iter().copied())
        .current_dir(src)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io_err(format!("run {}", src.join("build.sh").display())))?;
    let mut readers = Vec::new();
    let streams: [Option<Box<dyn io::Read + Send>>; 2] = [
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn io::Read + Send>),
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn io::Read + Send>),
    ];
    let prefix = format!(
        "{} build",
        bin.file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
    );
    for stream in streams.into_iter().flatten() {
        let (log, tail, prefix) = (log.clone(), tail.clone(), prefix.clone());
        readers.push(std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                // Straight to the process's stderr (not `eprintln!`), so progress shows
                // even inside `cargo test`, whose capture only catches the print macros.
                let _ = writeln!(io::stderr().lock(), "{prefix} | {line}");
                if let Ok(mut f) = log.lock() {
                    let _ = writeln!(f, "{line}");
                }
                if let Ok(mut t) = tail.lock() {
                    t.push(line);
                    let excess = t.len().saturating_sub(30);
                    t.drain(..excess);
                }
            }
        }));
    }
    let status = child.wait().map_err(io_err("wait for build.sh"))?;
    for r in readers {
        let _ = r.join();
    }
    if !status.success() {
        let _ = std::fs::remove_file(&tmp);
        let _ = std::fs::remove_dir_all(&tmp);
        let tail = tail.lock().map(|t| t.join("\n")).unwrap_or_default();
        return Err(BuildError::Failed {
            status: status.to_string(),
            log: log_path,
            tail,
        });
    }
    if bin.is_dir() {
        std::fs::remove_dir_all(bin).map_err(io_err(format!("remove {}", bin.display())))?;
    }
    std::fs::rename(&tmp, bin).map_err(io_err(format!(
        "move {} to {}",
        tmp.display(),
        bin.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lab_runs_the_vcluster_release_the_provider_renders() {
        assert_eq!(
            VCLUSTER_VERSION,
            gpufleet_engine::resources::virtual_cluster::versions::VCLUSTER_VERSION
        );
    }

    fn fake_source(dir: &Path) {
        std::fs::write(dir.join("go.mod"), "module x\n").expect("go.mod");
        std::fs::write(dir.join("main.go"), "package main\n").expect("main.go");
        std::fs::write(dir.join("README.md"), "not hashed\n").expect("readme");
    }

    #[test]
    fn freshness_follows_the_sources() {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = dir.path().join("src");
        std::fs::create_dir(&src).expect("src");
        fake_source(&src);
        let bin = dir.path().join("bin/gpufleet-kube");
        assert_eq!(freshness(&bin, &src), Freshness::Missing);

        std::fs::create_dir_all(bin.parent().expect("parent")).expect("bin dir");
        std::fs::write(&bin, "binary").expect("bin");
        assert_eq!(
            freshness(&bin, &src),
            Freshness::Unstamped,
            "built by someone else"
        );

        std::fs::write(stamp_file(&bin), "0000\n").expect("old stamp");
        assert_eq!(freshness(&bin, &src), Freshness::Stale);

        let hash = source_hash(&src).expect("hash");
        std::fs::write(stamp_file(&bin), format!("{hash}\n")).expect("stamp");
        assert_eq!(freshness(&bin, &src), Freshness::UpToDate);

        std::fs::write(src.join("README.md"), "changed, but not a build input").expect("w");
        assert_eq!(freshness(&bin, &src), Freshness::UpToDate);

        std::fs::write(src.join("main.go"), "package main // changed\n").expect("w");
        assert_eq!(freshness(&bin, &src), Freshness::Stale);

        assert_eq!(
            freshness(&bin, &dir.path().join("nowhere")),
            Freshness::NoSource
        );
    }

    #[test]
    fn a_binary_built_elsewhere_is_used_and_never_overwritten() {
        let dir = tempfile::tempdir().expect("tempdir");
        fake_source(dir.path());
        let bin = dir.path().join("prebuilt");
        std::fs::write(&bin, "someone's binary").expect("bin");
        let no_go = dir.path().join("empty");
        std::fs::create_dir(&no_go).expect("dir");
        assert_eq!(
            ensure_with_path(&bin, dir.path(), &[], Some(no_go.as_os_str())).expect("ensure"),
            None
        );
        assert_eq!(std::fs::read(&bin).expect("bin"), b"someone's binary");
    }

    #[test]
    fn an_up_to_date_binary_needs_no_go() {
        let dir = tempfile::tempdir().expect("tempdir");
        fake_source(dir.path());
        let bin = dir.path().join("gpufleet-kube");
        std::fs::write(&bin, "binary").expect("bin");
        let hash = source_hash(dir.path()).expect("hash");
        std::fs::write(stamp_file(&bin), hash).expect("stamp");
        assert_eq!(ensure(&bin, dir.path()).expect("ensure"), None);
    }

    #[test]
    fn nothing_to_build_from_is_a_clear_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = ensure(&dir.path().join("bin"), &dir.path().join("src")).expect_err("no source");
        assert!(err.to_string().contains("GPUFLEET_LAB_BIN"), "{err}");
    }

    #[test]
    fn go_versions() {
        assert_eq!(parse_go_version("go1.26.8"), Some((1, 26)));
        assert_eq!(parse_go_version("go1.27rc1"), Some((1, 27)));
        assert_eq!(parse_go_version("devel"), None);
        assert!(parse_go_version("go1.25.3") < Some(MIN_GO));
    }

    #[test]
    fn a_stale_or_missing_binary_without_go_says_how_to_install_go() {
        let dir = tempfile::tempdir().expect("tempdir");
        fake_source(dir.path());
        let bin = dir.path().join("bin/gpufleet-kube");
        let no_go = dir.path().join("empty");
        std::fs::create_dir(&no_go).expect("dir");
        let err = ensure_with_path(&bin, dir.path(), &[], Some(no_go.as_os_str()))
            .expect_err("no go on PATH");
        assert!(matches!(err, BuildError::GoMissing), "{err}");
        assert!(err.to_string().contains("https://go.dev/dl"), "{err}");
    }

    #[test]
    fn the_go_hint_says_how_to_install_it() {
        let msg = BuildError::GoMissing.to_string();
        assert!(msg.contains("Go 1.26 or newer") && msg.contains("https://go.dev/dl"));
    }

    #[test]
    fn the_real_sources_hash() {
        // lab/kube is in the repository: its hash is what the stamp is compared with.
        let hash = source_hash(&source_dir()).expect("lab/kube hashes");
        assert_eq!(hash.len(), 64);
    }

    #[test]
    fn the_minors_named_here_are_the_ones_the_go_modules_build() {
        let pinned = |dir: &str| {
            let go_mod = std::fs::read_to_string(source_of(dir).join("go.mod")).expect("go.mod");
            go_mod
                .lines()
                .find_map(|l| l.trim().strip_prefix("k8s.io/kubernetes v"))
                .map(|v| v.splitn(3, '.').take(2).collect::<Vec<_>>().join("."))
                .expect("k8s.io/kubernetes in go.mod")
        };
        assert_eq!(pinned("kube"), KUBE_MINOR);
        for minor in OLDER_KUBE_MINORS {
            assert_eq!(pinned(&format!("kube-{minor}")), *minor);
        }
    }
}
