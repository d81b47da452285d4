//! Exclusive file locks (`flock`) that serialise work across processes: one Go build of
//! `gpufleet-kube` at a time, and one `up`/`down`/`reset` per state directory at a time,
//! so concurrent test binaries share one lab instead of racing to start two.
//!
//! The lock is released when the [`FileLock`] is dropped, or when the process dies.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

/// A held exclusive lock on a file.
#[derive(Debug)]
pub struct FileLock {
    _lock: Flock<File>,
    path: PathBuf,
}

impl FileLock {
    /// Takes the lock on `path` (created if missing), waiting for another holder to let
    /// go. `on_wait` is called once if the lock is busy, before waiting.
    ///
    /// # Errors
    /// When the file cannot be opened or locked.
    pub fn acquire(path: &Path, on_wait: impl FnOnce()) -> io::Result<Self> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let open = || {
            OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(path)
        };
        let lock = match Flock::lock(open()?, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => lock,
            Err((file, Errno::EWOULDBLOCK)) => {
                on_wait();
                Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, e)| io::Error::from(e))?
            }
            Err((_, e)) => return Err(io::Error::from(e)),
        };
        Ok(Self {
            _lock: lock,
            path: path.to_path_buf(),
        })
    }

    /// The locked file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_second_holder_waits_for_the_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.lock");
        let first = FileLock::acquire(&path, || panic!("free lock")).expect("first");
        let released = Arc::new(AtomicBool::new(false));
        let waited = Arc::new(AtomicBool::new(false));
        let (p, r, w) = (path.clone(), released.clone(), waited.clone());
        let second = std::thread::spawn(move || {
            let _l = FileLock::acquire(&p, || w.store(true, Ordering::SeqCst)).expect("second");
            assert!(
                r.load(Ordering::SeqCst),
                "got the lock while the first still held it"
            );
        });
        std::thread::sleep(Duration::from_millis(200));
        released.store(true, Ordering::SeqCst);
        drop(first);
        second.join().expect("second thread");
        assert!(waited.load(Ordering::SeqCst));
    }
}
