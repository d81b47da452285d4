//! The sandbox a vCluster pod's process runs in: its own mount, network, UTS, IPC and PID
//! namespaces, a root directory made of the pod's volumes, and the container's command as
//! PID 1.
//!
//! The lab starts it as `unshare … -- vcluster-kubelet sandbox-init --spec <file>`
//! (util-linux's `unshare`, which every Debian system has): `unshare` makes the namespaces
//! and forks; [`init`] then runs inside them, mounts what the spec lists, brings the
//! loopback interface up, changes root and becomes the container's command. `unshare`
//! stays as the sandbox's parent on the host (its pid is the sandbox's), and
//! `--kill-child` ties the two together: when it dies, the kernel kills PID 1 and with it
//! everything in the PID namespace (kine, the API server, the controller manager). The
//! mounts and the network namespace go with the last process.

use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::mount::{MsFlags, mount};
use nix::sys::signal::{Signal, kill};
use nix::unistd::{Pid, chroot, sethostname};
use serde::{Deserialize, Serialize};

use super::netns;

/// What [`init`] sets up, written by the lab as `sandbox.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxSpec {
    /// The directory that becomes `/`.
    pub root: PathBuf,
    /// The host name inside (the pod's name).
    pub hostname: String,
    /// What is mounted under `root`, in order (a parent before what is mounted inside it).
    pub mounts: Vec<Mount>,
    /// The command and its arguments, as the container would run them.
    pub argv: Vec<String>,
    /// The whole environment.
    pub env: Vec<(String, String)>,
    /// The working directory inside.
    pub workdir: String,
    /// A port on the sandbox's loopback to wait for before the command starts: the host
    /// API server, which the lab forwards in only once the network namespace exists (on a
    /// node it is reachable from the first instant).
    #[serde(default)]
    pub wait_for_port: Option<u16>,
}

/// One mount of a sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mount {
    /// What is mounted: a host file or directory (ignored for `proc` and `tmpfs`).
    pub source: PathBuf,
    /// Where, as an absolute path inside the sandbox.
    pub target: String,
    /// How.
    pub kind: MountKind,
}

/// How a [`Mount`] is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MountKind {
    /// A bind mount, writable.
    Bind,
    /// A bind mount, read-only.
    BindReadOnly,
    /// A new `proc` (of the sandbox's PID namespace).
    Proc,
    /// An empty `tmpfs`.
    Tmpfs,
}

impl Mount {
    /// A writable bind mount of `source` at `target`.
    #[must_use]
    pub fn bind(source: impl Into<PathBuf>, target: &str, read_only: bool) -> Self {
        Self {
            source: source.into(),
            target: target.to_owned(),
            kind: if read_only {
                MountKind::BindReadOnly
            } else {
                MountKind::Bind
            },
        }
    }
}

/// Why a sandbox could not be set up or started.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// A step inside the new namespaces failed.
    #[error("failed to {what}: {source}")]
    Setup {
        /// The step.
        what: String,
        /// The error.
        #[source]
        source: io::Error,
    },
}

fn setup(what: impl Into<String>) -> impl FnOnce(io::Error) -> SandboxError {
    let what = what.into();
    move |source| SandboxError::Setup { what, source }
}

fn nix_setup(what: impl Into<String>) -> impl FnOnce(nix::Error) -> SandboxError {
    let f = setup(what);
    move |e| f(io::Error::from(e))
}

/// Inside the new namespaces: mounts, host name, loopback, root, then becomes the
/// command. Returns only on failure.
///
/// # Errors
/// The step that failed.
pub fn init(spec: &SandboxSpec) -> SandboxError {
    match prepare(spec) {
        Ok(()) => {
            let Some((program, args)) = spec.argv.split_first() else {
                return setup("start the container")(io::Error::other("its command is empty"));
            };
            let err = Command::new(program)
                .args(args)
                .env_clear()
                .envs(spec.env.iter().map(|(k, v)| (k, v)))
                .exec();
            setup(format!("run {program}"))(err)
        }
        Err(e) => e,
    }
}

fn prepare(spec: &SandboxSpec) -> Result<(), SandboxError> {
    make_mounts_private()?;
    for m in &spec.mounts {
        mount_one(&spec.root, m)?;
    }
    sethostname(&spec.hostname).map_err(nix_setup("set the host name"))?;
    netns::loopback_up().map_err(setup("bring the loopback interface up"))?;
    if let Some(port) = spec.wait_for_port {
        wait_for_port(port, WAIT_FOR_PORT);
    }
    chroot(&spec.root).map_err(nix_setup(format!("change root to {}", spec.root.display())))?;
    std::env::set_current_dir(&spec.workdir)
        .map_err(setup(format!("change to {}", spec.workdir)))?;
    Ok(())
}

/// How long [`init`] waits for `wait_for_port`; past it the command starts anyway and
/// fails (and is restarted) as it would against an API server that is down.
const WAIT_FOR_PORT: Duration = Duration::from_secs(30);

fn wait_for_port(port: u16, limit: Duration) {
    let deadline = Instant::now() + limit;
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    while Instant::now() < deadline {
        if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Keeps what the sandbox mounts out of the host's mount table. One call makes the whole
/// tree private, except inside a chroot (a fresh root made with debootstrap, say), where `/`
/// is not a mount point and the kernel answers `EINVAL`: then each mount the chroot can see
/// is made private, and the mount the chroot's directory sits on keeps the propagation its
/// maker gave it (private when made with `unshare --propagation private`).
fn make_mounts_private() -> Result<(), SandboxError> {
    let private =
        |point: &str, flags: MsFlags| mount(None::<&str>, point, None::<&str>, flags, None::<&str>);
    match private("/", MsFlags::MS_REC | MsFlags::MS_PRIVATE) {
        Ok(()) => Ok(()),
        Err(Errno::EINVAL) => {
            let table = fs::read_to_string("/proc/self/mountinfo")
                .map_err(setup("read the mount table"))?;
            for point in mount_points(&table) {
                private(&point, MsFlags::MS_PRIVATE)
                    .map_err(nix_setup(format!("make {point} private")))?;
            }
            Ok(())
        }
        Err(e) => Err(nix_setup("make the mount tree private")(e)),
    }
}

/// The mount points of a `/proc/<pid>/mountinfo` table (its fifth field, with the kernel's
/// octal escapes of space, tab, newline and backslash undone).
fn mount_points(mountinfo: &str) -> Vec<String> {
    mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(unescape_octal)
        .collect()
}

fn unescape_octal(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let code = bytes
            .get(i + 1..i + 4)
            .filter(|_| bytes[i] == b'\\')
            .and_then(|d| std::str::from_utf8(d).ok())
            .and_then(|d| u8::from_str_radix(d, 8).ok());
        match code {
            Some(c) => {
                out.push(c);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn mount_one(root: &Path, m: &Mount) -> Result<(), SandboxError> {
    let target = root.join(m.target.trim_start_matches('/'));
    let what = |verb: &str| format!("{verb} {} at {}", m.source.display(), m.target);
    // A file is mounted on a file, anything else on a directory.
    if matches!(m.kind, MountKind::Bind | MountKind::BindReadOnly) && m.source.is_file() {
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent).map_err(setup(what("make the mount point for")))?;
        }
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(&target)
            .map_err(setup(what("make the mount point for")))?;
    } else {
        fs::create_dir_all(&target).map_err(setup(what("make the mount point for")))?;
    }
    match m.kind {
        MountKind::Bind | MountKind::BindReadOnly => {
            mount(
                Some(&m.source),
                &target,
                None::<&str>,
                MsFlags::MS_BIND | MsFlags::MS_REC,
                None::<&str>,
            )
            .map_err(nix_setup(what("bind")))?;
            if m.kind == MountKind::BindReadOnly {
                mount(
                    None::<&str>,
                    &target,
                    None::<&str>,
                    MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY,
                    None::<&str>,
                )
                .map_err(nix_setup(what("make read-only")))?;
            }
        }
        MountKind::Proc => mount(
            Some("proc"),
            &target,
            Some("proc"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            None::<&str>,
        )
        .map_err(nix_setup(format!("mount proc at {}", m.target)))?,
        MountKind::Tmpfs => mount(
            Some("tmpfs"),
            &target,
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some("mode=1777"),
        )
        .map_err(nix_setup(format!("mount a tmpfs at {}", m.target)))?,
    }
    Ok(())
}

/// The `unshare` command line that runs `kubelet_bin sandbox-init --spec <spec_file>` in
/// new namespaces.
#[must_use]
pub fn command(kubelet_bin: &Path, spec_file: &Path) -> Command {
    let mut c = Command::new("unshare");
    c.args([
        "--mount",
        "--net",
        "--uts",
        "--ipc",
        "--pid",
        "--fork",
        "--kill-child=SIGKILL",
        // Made private by `init` itself: `unshare`'s own change fails inside a chroot.
        "--propagation",
        "unchanged",
        "--",
    ])
    .arg(kubelet_bin)
    .arg("sandbox-init")
    .arg("--spec")
    .arg(spec_file);
    c
}

/// Starts a sandbox: `spec` is written next to `log`, the sandbox's output is appended to
/// `log`, and it runs in a process group of its own (so the lab's own signals do not reach
/// it).
///
/// # Errors
/// When the spec or log cannot be written, or `unshare` cannot be started.
pub fn start(
    kubelet_bin: &Path,
    spec: &SandboxSpec,
    spec_file: &Path,
    log: &Path,
) -> io::Result<Child> {
    let text = serde_json::to_vec_pretty(spec).map_err(io::Error::other)?;
    fs::write(spec_file, text)?;
    let out = OpenOptions::new().create(true).append(true).open(log)?;
    command(kubelet_bin, spec_file)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .process_group(0)
        .spawn()
}

/// PID 1 of the sandbox whose `unshare` is `pid`, as the host sees it.
#[must_use]
pub fn first_process(pid: i32) -> Option<i32> {
    let children = fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    children.split_whitespace().next()?.parse().ok()
}

/// Stops the sandbox whose `unshare` is `pid`, as a kubelet stops a container: SIGTERM to
/// its PID 1, and after `grace` SIGKILL (to `unshare`, which takes the whole PID namespace
/// with it). `alive` says whether `unshare` still runs. Returns whether it had to kill.
pub fn stop(pid: i32, grace: Duration, mut alive: impl FnMut() -> bool) -> bool {
    if !alive() {
        return false;
    }
    if let Some(init) = first_process(pid) {
        let _ = kill(Pid::from_raw(init), Signal::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while alive() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    if !alive() {
        return false;
    }
    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

/// Checks that this machine lets the lab make a sandbox's namespaces, by making them once
/// around `true`.
///
/// # Errors
/// What `unshare` said, or that it is missing.
pub fn check_namespaces() -> Result<(), String> {
    let out = Command::new("unshare")
        .args([
            "--mount",
            "--net",
            "--uts",
            "--ipc",
            "--pid",
            "--fork",
            "--propagation",
            "unchanged",
            "--",
            "true",
        ])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("util-linux's unshare could not be run ({e}); Debian: util-linux"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "unshare could not make the namespaces a vCluster pod runs in (run the lab as root, \
         outside an unprivileged container): {}",
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_are_read_from_the_fifth_field_with_escapes_undone() {
        let table = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
63 43 0:39 / /work/my\\040lab rw,relatime shared:1 - ext4 /dev/vda rw
64 43 0:40 / /a\\134b rw - tmpfs tmpfs rw
";
        assert_eq!(
            mount_points(table),
            ["/proc", "/work/my lab", "/a\\b"].map(String::from)
        );
    }

    #[test]
    fn a_backslash_without_three_octal_digits_is_kept() {
        assert_eq!(unescape_octal("/x\\9y\\"), "/x\\9y\\");
    }
}
