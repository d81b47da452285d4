//! Starting, finding and stopping the lab's background processes.
//!
//! Each component runs detached from the process that started it: in a process group of
//! its own (so a Ctrl-C in the terminal that ran `gpufleet-lab up` does not reach it, and
//! stopping it reaches everything it may have started), with stdin closed and stdout and
//! stderr going to its log file. Its pid and kernel start time go to a pid file; the start
//! time guards against a recycled pid. A process counts as alive while `/proc/<pid>`
//! exists, is not a zombie and has the recorded start time.
//!
//! Stopping sends SIGTERM to the process group, waits, and sends SIGKILL after a timeout.
//!
//! A detached process must not keep file descriptors it happened to inherit (a CI
//! runner's pipe, cargo's jobserver): whoever waits for those to close would wait for the
//! lab. So the program is started through a tiny `bash` launcher that closes every
//! descriptor above stderr and then `exec`s it (same pid, same command line).

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// A process recorded in a pid file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PidRecord {
    /// The process id; also the id of its process group.
    pub pid: i32,
    /// The kernel's start time of the process (field 22 of `/proc/<pid>/stat`, in clock
    /// ticks since boot).
    pub start_time: u64,
}

impl PidRecord {
    /// Reads a pid file written by [`spawn`]. `None` when there is none or it is garbled.
    #[must_use]
    pub fn read(pid_file: &Path) -> Option<Self> {
        let text = std::fs::read_to_string(pid_file).ok()?;
        let mut parts = text.split_whitespace();
        let pid = parts.next()?.parse().ok()?;
        let start_time = parts.next()?.parse().ok()?;
        Some(Self { pid, start_time })
    }

    /// The record of the running process `pid`; `None` when it has already gone.
    #[must_use]
    pub fn of(pid: i32) -> Option<Self> {
        proc_stat(pid).map(|s| Self {
            pid,
            start_time: s.start_time,
        })
    }

    /// Writes the pid file [`PidRecord::read`] reads.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn write(&self, pid_file: &Path) -> io::Result<()> {
        std::fs::write(pid_file, format!("{} {}\n", self.pid, self.start_time))
    }

    /// Whether this very process is still running (not exited, not a zombie, and its
    /// pid not reused by another process).
    #[must_use]
    pub fn is_alive(&self) -> bool {
        match proc_stat(self.pid) {
            Some(stat) => stat.start_time == self.start_time && !matches!(stat.state, 'Z' | 'X'),
            None => false,
        }
    }
}

/// The fields of `/proc/<pid>/stat` the lab uses.
struct ProcStat {
    state: char,
    start_time: u64,
}

/// Reads `/proc/<pid>/stat`. The command name (field 2) is in parentheses and may hold
/// spaces, so the fields are counted from the last `)`.
fn proc_stat(pid: i32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 (state); field 22 (starttime) is fields[19].
    Some(ProcStat {
        state: fields.first()?.chars().next()?,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

/// Closes every inherited descriptor above 2, then becomes `"$@"`.
const CLOSE_FDS_AND_EXEC: &str = r#"for fd in /proc/self/fd/*; do fd=${fd##*/}; case $fd in 0|1|2) ;; *) eval "exec $fd>&-" 2>/dev/null ;; esac; done; exec "$@""#;

/// Starts `program args…` detached: own process group, stdin from /dev/null, stdout and
/// stderr appended to `log_file` (the previous log moves to `<log>.1`), and writes the pid
/// file. Returns the new process's record.
///
/// # Errors
/// When the log or pid file cannot be written or the program cannot be started.
pub fn spawn(
    program: &Path,
    args: &[String],
    cwd: &Path,
    log_file: &Path,
    pid_file: &Path,
) -> io::Result<PidRecord> {
    if log_file.exists() {
        let mut old = log_file.as_os_str().to_owned();
        old.push(".1");
        std::fs::rename(log_file, old)?;
    }
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_file)?;
    let child = Command::new("bash")
        .arg("-c")
        .arg(CLOSE_FDS_AND_EXEC)
        .arg("gpufleet-lab-launcher")
        .arg(program)
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .spawn()?;
    let pid = i32::try_from(child.id()).map_err(io::Error::other)?;
    // The child is not waited for: it outlives this process. (Dropping `Child` neither
    // kills nor waits.)
    drop(child);
    let start_time = proc_stat(pid).map_or(0, |s| s.start_time);
    let record = PidRecord { pid, start_time };
    std::fs::write(pid_file, format!("{pid} {start_time}\n"))?;
    Ok(record)
}

/// What [`stop`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// The process was not running.
    WasNotRunning,
    /// It exited after SIGTERM.
    Terminated,
    /// It did not exit within the timeout and was killed with SIGKILL.
    Killed,
}

/// Stops the process recorded in `pid_file` and everything in its process group: SIGTERM,
/// then SIGKILL when it has not exited after `grace`. Removes the pid file once the
/// process is gone.
///
/// # Errors
/// When the process survives SIGKILL for five seconds (it is then left in place, and the
/// pid file with it).
pub fn stop(pid_file: &Path, grace: Duration) -> io::Result<Stopped> {
    let Some(record) = PidRecord::read(pid_file) else {
        remove_if_exists(pid_file)?;
        return Ok(Stopped::WasNotRunning);
    };
    if !record.is_alive() {
        remove_if_exists(pid_file)?;
        return Ok(Stopped::WasNotRunning);
    }
    let outcome = terminate(&record, grace)?;
    remove_if_exists(pid_file)?;
    Ok(outcome)
}

/// SIGTERM to the group of `record`, SIGKILL after `grace`.
fn terminate(record: &PidRecord, grace: Duration) -> io::Result<Stopped> {
    let group = Pid::from_raw(record.pid);
    // ESRCH (already gone) is fine; anything else is reported below if it stays alive.
    let _ = killpg(group, Signal::SIGTERM);
    if wait_gone(|| record.is_alive(), grace) {
        return Ok(Stopped::Terminated);
    }
    let _ = killpg(group, Signal::SIGKILL);
    if wait_gone(|| record.is_alive(), Duration::from_secs(5)) {
        return Ok(Stopped::Killed);
    }
    Err(io::Error::other(format!(
        "pid {} is still alive after SIGKILL",
        record.pid
    )))
}

/// Polls `alive` until it says no (true) or `timeout` passes (false).
fn wait_gone(alive: impl Fn() -> bool, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if !alive() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn remove_if_exists(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Every live process whose command line contains each of `needles` (e.g. the lab's
/// binary and its state directory): the way `down` finds processes whose pid files were
/// lost. Zombies are left out.
#[must_use]
pub fn find_by_cmdline(needles: &[&str]) -> Vec<PidRecord> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    let me = i32::try_from(std::process::id()).unwrap_or(-1);
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
        if !needles.iter().all(|n| cmdline.contains(n)) {
            continue;
        }
        if let Some(stat) = proc_stat(pid)
            && !matches!(stat.state, 'Z' | 'X')
        {
            found.push(PidRecord {
                pid,
                start_time: stat.start_time,
            });
        }
    }
    found
}

/// Stops a process found by [`find_by_cmdline`] (SIGTERM to it, then SIGKILL).
///
/// # Errors
/// When it survives SIGKILL.
pub fn kill_stray(record: &PidRecord, grace: Duration) -> io::Result<Stopped> {
    let pid = Pid::from_raw(record.pid);
    let _ = nix::sys::signal::kill(pid, Signal::SIGTERM);
    if wait_gone(|| record.is_alive(), grace) {
        return Ok(Stopped::Terminated);
    }
    let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
    if wait_gone(|| record.is_alive(), Duration::from_secs(5)) {
        return Ok(Stopped::Killed);
    }
    Err(io::Error::other(format!(
        "pid {} is still alive after SIGKILL",
        record.pid
    )))
}

/// A process's command line (its arguments, `argv[0]` first).
#[must_use]
pub fn cmdline(pid: i32) -> Option<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
    )
}

/// Whether the executable a process runs has been replaced or deleted since it started
/// (a rebuilt binary is moved over the old one, which the kernel then reports as
/// `(deleted)`).
#[must_use]
pub fn executable_replaced(pid: i32) -> bool {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .is_ok_and(|exe| exe.to_string_lossy().ends_with(" (deleted)"))
}

/// The resident memory (`VmRSS`) of a process, in KiB.
#[must_use]
pub fn rss_kib(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// The resident memory of a process and all its descendants, in KiB (shared pages are
/// counted once per process, as `ps` would add them up).
#[must_use]
pub fn tree_rss_kib(pid: i32) -> u64 {
    let mut total = 0;
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        total += rss_kib(p).unwrap_or(0);
        // Children are listed per thread that started them (a Go program starts them from
        // any of its threads).
        let tasks = std::fs::read_dir(format!("/proc/{p}/task"))
            .into_iter()
            .flatten();
        for task in tasks.flatten() {
            if let Ok(children) = std::fs::read_to_string(task.path().join("children")) {
                todo.extend(
                    children
                        .split_whitespace()
                        .filter_map(|c| c.parse::<i32>().ok()),
                );
            }
        }
    }
    total
}

/// The last `lines` lines of a file (all of it when shorter). Reads at most the last
/// 4 MiB, so a huge log costs little.
///
/// # Errors
/// When the file cannot be read.
pub fn tail(path: &Path, lines: usize) -> io::Result<Vec<String>> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    let window = 4 * 1024 * 1024;
    if len > window {
        file.seek(SeekFrom::Start(len - window))?;
    }
    let mut all: Vec<String> = BufReader::new(file)
        .split(b'\n')
        .map(|l| l.map(|b| String::from_utf8_lossy(&b).into_owned()))
        .collect::<io::Result<_>>()?;
    if len > window && !all.is_empty() {
        all.remove(0); // probably a partial line
    }
    let skip = all.len().saturating_sub(lines);
    Ok(all.split_off(skip))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sleeper(dir: &Path, name: &str) -> (PidRecord, std::path::PathBuf) {
        let pid_file = dir.join(format!("{name}.pid"));
        let record = spawn(
            Path::new("/bin/sh"),
            &[
                "-c".to_owned(),
                format!("echo started {name}; exec sleep 600"),
            ],
            dir,
            &dir.join(format!("{name}.log")),
            &pid_file,
        )
        .expect("spawn");
        (record, pid_file)
    }

    #[test]
    fn spawned_process_is_alive_until_stopped_and_leaves_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (record, pid_file) = sleeper(dir.path(), "a");
        assert!(record.is_alive());
        assert_eq!(PidRecord::read(&pid_file), Some(record));
        // Its own process group, so a terminal's Ctrl-C does not reach it.
        let pgid = nix::unistd::getpgid(Some(Pid::from_raw(record.pid))).expect("pgid");
        assert_eq!(pgid.as_raw(), record.pid);

        let outcome = stop(&pid_file, Duration::from_secs(5)).expect("stop");
        assert_eq!(outcome, Stopped::Terminated);
        assert!(!record.is_alive());
        assert!(!pid_file.exists());
        assert_eq!(
            stop(&pid_file, Duration::from_secs(1)).expect("stop again"),
            Stopped::WasNotRunning
        );
    }

    #[test]
    fn output_goes_to_the_log_and_the_previous_log_is_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("b.log");
        std::fs::write(&log, "old run\n").expect("write");
        let (record, pid_file) = sleeper(dir.path(), "b");
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::fs::read_to_string(&log).unwrap_or_default().is_empty() {
            assert!(Instant::now() < deadline, "nothing logged");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(tail(&log, 10).expect("tail"), vec!["started b"]);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("b.log.1")).expect("old log"),
            "old run\n"
        );
        assert!(rss_kib(record.pid).is_some());
        stop(&pid_file, Duration::from_secs(5)).expect("stop");
    }

    #[test]
    fn the_detached_process_keeps_only_stdin_stdout_and_stderr() {
        let dir = tempfile::tempdir().expect("tempdir");
        // A descriptor without close-on-exec (dup does not set it), as a CI runner or
        // cargo may hand down.
        let file = File::create(dir.path().join("held")).expect("file");
        let leaky = nix::unistd::dup(&file).expect("dup");
        let (record, pid_file) = sleeper(dir.path(), "fds");
        drop(leaky);
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut fds: Vec<String>;
        loop {
            fds = std::fs::read_dir(format!("/proc/{}/fd", record.pid))
                .expect("fd dir")
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect();
            fds.sort();
            let exe = std::fs::read_link(format!("/proc/{}/exe", record.pid)).unwrap_or_default();
            if exe.ends_with("sleep") || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(fds, ["0", "1", "2"]);
        stop(&pid_file, Duration::from_secs(5)).expect("stop");
    }

    #[test]
    fn a_recycled_pid_does_not_count_as_alive() {
        let me = i32::try_from(std::process::id()).expect("pid");
        let real = proc_stat(me).expect("own stat");
        let fake = PidRecord {
            pid: me,
            start_time: real.start_time + 1,
        };
        assert!(!fake.is_alive());
    }

    #[test]
    fn finds_processes_by_command_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        // A sleep whose argument is unique to this test run.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let needle = format!("600.{}0{nanos}", std::process::id());
        let record = spawn(
            Path::new("sleep"),
            std::slice::from_ref(&needle),
            dir.path(),
            &dir.path().join("c.log"),
            &dir.path().join("c.pid"),
        )
        .expect("spawn");
        // Right after spawn the child may not have exec'd yet (its command line is still
        // this test binary's), so give it a moment.
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut found = find_by_cmdline(&["sleep", &needle]);
        while found.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            found = find_by_cmdline(&["sleep", &needle]);
        }
        if found != vec![record] {
            let _ = kill_stray(&record, Duration::from_secs(1));
        }
        assert_eq!(found, vec![record]);
        assert_eq!(
            kill_stray(&record, Duration::from_secs(5)).expect("kill"),
            Stopped::Terminated
        );
        assert!(find_by_cmdline(&["sleep", &needle]).is_empty());
    }

    #[test]
    fn command_line_and_executable_of_a_process() {
        let dir = tempfile::tempdir().expect("tempdir");
        let exe = dir.path().join("my-sleep");
        std::fs::copy("/bin/sleep", &exe).expect("copy sleep");
        let record = spawn(
            &exe,
            &["600".to_owned()],
            dir.path(),
            &dir.path().join("s.log"),
            &dir.path().join("s.pid"),
        )
        .expect("spawn");
        let deadline = Instant::now() + Duration::from_secs(5);
        let exe_arg = exe.display().to_string();
        // The launcher's command line until it has exec'd the program.
        while cmdline(record.pid).and_then(|c| c.first().cloned()) != Some(exe_arg.clone()) {
            assert!(Instant::now() < deadline, "{:?}", cmdline(record.pid));
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(
            cmdline(record.pid),
            Some(vec![exe.display().to_string(), "600".to_owned()])
        );
        assert!(!executable_replaced(record.pid));
        // Rebuilt: a new file moved over the old one.
        let new = dir.path().join("new-sleep");
        std::fs::copy("/bin/sleep", &new).expect("copy");
        std::fs::rename(&new, &exe).expect("replace");
        assert!(executable_replaced(record.pid));
        stop(&dir.path().join("s.pid"), Duration::from_secs(5)).expect("stop");
    }

    #[test]
    fn tail_returns_the_last_lines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("t");
        std::fs::write(&f, "1\n2\n3\n4").expect("write");
        assert_eq!(tail(&f, 2).expect("tail"), vec!["3", "4"]);
        assert_eq!(tail(&f, 10).expect("tail").len(), 4);
    }
}
