//! A state kept in memory and, when the store persists, written through to its state
//! file before each change becomes visible, so a restart finds exactly what clients
//! were told. Changes run on a copy and commit only when they succeed.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::lock;

/// Why the state file could not be loaded or saved.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Reading it failed.
    #[error("failed to read the state file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It is not a state this emulator wrote.
    #[error("failed to parse the state file {path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// It has another format version.
    #[error("the state file {path} has format version {found}, this emulator writes {expected}")]
    Version {
        /// The file.
        path: PathBuf,
        /// Its version.
        found: u32,
        /// The version this emulator writes.
        expected: u32,
    },
    /// Writing it failed.
    #[error("failed to write the state file {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// A state that can be kept in a state file.
pub(crate) trait StateFormat: Clone + PartialEq + Serialize + DeserializeOwned {
    /// The format version this emulator writes.
    const VERSION: u32;

    /// The format version a state says it has.
    fn version(&self) -> u32;
}

/// The state, optionally written through to a file.
#[derive(Debug)]
pub(crate) struct Persisted<D> {
    file: Option<PathBuf>,
    state: Mutex<D>,
}

impl<D: StateFormat> Persisted<D> {
    /// A state in memory only.
    pub(crate) fn in_memory(state: D) -> Self {
        Self {
            file: None,
            state: Mutex::new(state),
        }
    }

    /// The state in `file`: loaded when the file exists (the saved state wins), else
    /// `seed()`, written.
    pub(crate) fn open(file: PathBuf, seed: impl FnOnce() -> D) -> Result<Self, StoreError> {
        let state = if file.exists() {
            load(&file)?
        } else {
            let state = seed();
            write_atomically(&file, &state)?;
            state
        };
        Ok(Self {
            file: Some(file),
            state: Mutex::new(state),
        })
    }

    /// The state file, when the state persists.
    pub(crate) fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// A copy of the state.
    pub(crate) fn get(&self) -> D {
        lock(&self.state).clone()
    }

    /// Runs `f` on a copy and, when it succeeds and changed something, writes the copy
    /// (when persisting) and makes it the state. On failure nothing changes; a failed
    /// write is reported through `write_error`.
    pub(crate) fn transact<T, E>(
        &self,
        f: impl FnOnce(&mut D) -> Result<T, E>,
        write_error: impl FnOnce(StoreError) -> E,
    ) -> Result<T, E> {
        // The lock is held across the write so the file's order is the commit order.
        let mut state = lock(&self.state);
        let mut next = state.clone();
        let out = f(&mut next)?;
        if next != *state {
            if let Some(file) = &self.file {
                write_atomically(file, &next).map_err(write_error)?;
            }
            *state = next;
        }
        Ok(out)
    }

    /// Replaces the state, writing it first (when persisting).
    pub(crate) fn replace(&self, new: D) -> Result<(), StoreError> {
        let mut state = lock(&self.state);
        if let Some(file) = &self.file {
            write_atomically(file, &new)?;
        }
        *state = new;
        Ok(())
    }
}

fn load<D: StateFormat>(file: &Path) -> Result<D, StoreError> {
    let text = std::fs::read_to_string(file).map_err(|source| StoreError::Read {
        path: file.to_path_buf(),
        source,
    })?;
    let state: D = serde_json::from_str(&text).map_err(|source| StoreError::Parse {
        path: file.to_path_buf(),
        source,
    })?;
    if state.version() != D::VERSION {
        return Err(StoreError::Version {
            path: file.to_path_buf(),
            found: state.version(),
            expected: D::VERSION,
        });
    }
    Ok(state)
}

/// Writes `state` to `file` through a temporary file in the same directory and a
/// rename, so a reader (or a restart after a crash) sees the old state or the new one,
/// never a torn one.
fn write_atomically(file: &Path, state: &impl Serialize) -> Result<(), StoreError> {
    let err = |source| StoreError::Write {
        path: file.to_path_buf(),
        source,
    };
    let text = serde_json::to_vec(state).map_err(|e| err(std::io::Error::other(e)))?;
    let tmp = file.with_extension("json.tmp");
    let mut f = std::fs::File::create(&tmp).map_err(err)?;
    f.write_all(&text).map_err(err)?;
    drop(f);
    std::fs::rename(&tmp, file).map_err(err)
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct State {
        version: u32,
        n: u32,
    }

    impl StateFormat for State {
        const VERSION: u32 = 2;

        fn version(&self) -> u32 {
            self.version
        }
    }

    fn seed() -> State {
        State { version: 2, n: 0 }
    }

    #[test]
    fn the_saved_state_wins_over_the_seed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("state.json");
        let state = Persisted::open(file.clone(), seed).expect("open");
        state
            .transact(
                |s| {
                    s.n = 7;
                    Ok::<_, StoreError>(())
                },
                |e| e,
            )
            .expect("commit");
        let again = Persisted::<State>::open(file, || panic!("seeded again")).expect("reopen");
        assert_eq!(again.get().n, 7);
    }

    #[test]
    fn a_failed_change_leaves_memory_and_file_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("state.json");
        let state = Persisted::open(file.clone(), seed).expect("open");
        let before = std::fs::read(&file).expect("read");
        let r: Result<(), &str> = state.transact(
            |s| {
                s.n = 9;
                Err("no")
            },
            |_| "write",
        );
        assert_eq!(r, Err("no"));
        assert_eq!(state.get(), seed());
        assert_eq!(std::fs::read(&file).expect("read"), before);
    }

    #[test]
    fn another_format_version_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("state.json");
        std::fs::write(&file, r#"{"version": 1, "n": 3}"#).expect("write");
        let err = Persisted::open(file.clone(), seed).expect_err("version 1");
        assert_eq!(
            err.to_string(),
            format!(
                "the state file {} has format version 1, this emulator writes 2",
                file.display()
            )
        );
    }
}
