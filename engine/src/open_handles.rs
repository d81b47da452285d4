//! What ephemeral resources hold open in this provider process (tunnels, leases), by the id
//! their private data carries between open, renew and close.
//!
//! The table lives as long as the provider process: Terraform closes what it opened before the
//! process ends, and if the process is killed first, everything in it goes with it.

use std::{
    any::Any,
    collections::HashMap,
    fmt,
    sync::{
        Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
};

use serde::{Deserialize, Serialize};

/// The id of one open handle, unique within this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HandleId(u64);

/// The private data of an open handle, as Terraform hands it back on renew and close.
#[derive(Debug, Serialize, Deserialize)]
struct PrivateData {
    /// The provider process that opened it: a handle id means nothing in another process.
    pid: u32,
    /// The handle within that process.
    handle: u64,
}

/// Why private data names no handle of this process.
#[derive(Debug, thiserror::Error)]
pub enum PrivateError {
    /// Terraform sent no private data.
    #[error("no private data was sent")]
    Missing,
    /// The bytes are not what [`HandleId::to_private`] wrote.
    #[error("the private data is not a handle of gpufleet: {0}")]
    Malformed(#[source] serde_json::Error),
    /// The handle was opened by another provider process, which has closed it by ending.
    #[error("the handle was opened by provider process {0}, which has ended")]
    OtherProcess(u32),
}

impl HandleId {
    /// The private data that names this handle.
    pub fn to_private(self) -> Vec<u8> {
        let data = PrivateData {
            pid: std::process::id(),
            handle: self.0,
        };
        // Two integers always serialise.
        serde_json::to_vec(&data).unwrap_or_default()
    }

    /// The handle named by private data from [`HandleId::to_private`].
    pub fn from_private(private: Option<&[u8]>) -> Result<HandleId, PrivateError> {
        let bytes = private
            .filter(|b| !b.is_empty())
            .ok_or(PrivateError::Missing)?;
        let data: PrivateData = serde_json::from_slice(bytes).map_err(PrivateError::Malformed)?;
        if data.pid != std::process::id() {
            return Err(PrivateError::OtherProcess(data.pid));
        }
        Ok(HandleId(data.handle))
    }
}

impl fmt::Display for HandleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

type Handle = Box<dyn Any + Send + Sync>;

/// The open handles of one provider process; dropping a handle releases it.
#[derive(Default)]
pub struct OpenHandles {
    next: AtomicU64,
    open: Mutex<HashMap<HandleId, Handle>>,
}

impl fmt::Debug for OpenHandles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenHandles")
            .field("open", &self.len())
            .finish()
    }
}

impl OpenHandles {
    /// Keeps `handle` open and returns its id.
    pub fn insert<T: Any + Send + Sync>(&self, handle: T) -> HandleId {
        let id = HandleId(self.next.fetch_add(1, Ordering::Relaxed) + 1);
        self.lock().insert(id, Box::new(handle));
        id
    }

    /// Calls `f` with the handle `id` if it is open and of type `T`.
    pub fn with<T: Any, R>(&self, id: HandleId, f: impl FnOnce(&T) -> R) -> Option<R> {
        self.lock()
            .get(&id)
            .and_then(|h| h.downcast_ref::<T>())
            .map(f)
    }

    /// Takes the handle `id` out of the table; dropping it releases it. `false` when it was
    /// not open.
    pub fn close(&self, id: HandleId) -> bool {
        // Dropped outside the lock: releasing may take a moment.
        let taken = self.lock().remove(&id);
        taken.is_some()
    }

    /// How many handles are open.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nothing is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<HandleId, Handle>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_data_names_the_handle_in_this_process_only() {
        let handles = OpenHandles::default();
        let id = handles.insert(String::from("tunnel"));
        let private = id.to_private();
        assert_eq!(HandleId::from_private(Some(&private)).ok(), Some(id));
        assert_eq!(
            handles.with(id, |s: &String| s.clone()).as_deref(),
            Some("tunnel")
        );
        let foreign = serde_json::to_vec(&PrivateData {
            pid: std::process::id().wrapping_add(1),
            handle: 1,
        })
        .expect("serialise");
        assert!(matches!(
            HandleId::from_private(Some(&foreign)),
            Err(PrivateError::OtherProcess(_))
        ));
        assert!(matches!(
            HandleId::from_private(Some(b"not json")),
            Err(PrivateError::Malformed(_))
        ));
        assert!(matches!(
            HandleId::from_private(None),
            Err(PrivateError::Missing)
        ));
    }

    #[test]
    fn closing_drops_the_handle_once() {
        let handles = OpenHandles::default();
        let a = handles.insert(1_u8);
        let b = handles.insert(2_u8);
        assert_ne!(a, b);
        assert!(handles.close(a));
        assert!(!handles.close(a), "a second close finds nothing");
        assert_eq!(handles.len(), 1);
    }
}
