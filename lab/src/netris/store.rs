//! Where the emulator keeps its state: the [`Store`] trait and [`MemStore`], its
//! in-memory implementation with optional write-through to a JSON file.
//!
//! Three kinds of state, kept apart:
//!
//! - the controller's objects ([`Db`]): changed only through [`Store::transact`], which
//!   runs a closure on a *copy* and commits it only when the closure succeeds, so a
//!   failed request leaves nothing half-done. With a state file, every commit is written
//!   atomically (temporary file + rename) before it becomes visible, so a restart finds
//!   exactly what clients were told.
//! - login sessions: in memory only (a restart logs everyone out).
//! - faults ([`Faults`]): in memory only (a restart clears them).
//!
//! Every read hands out a copy; nothing outside the store holds a reference into it.
//! Time comes from a [`Clock`] so tests can move it by hand ([`ManualClock`]).

use std::collections::HashMap;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::dispatch::ApiError;
use super::inventory::NetrisInventory;
use super::model::{DB_VERSION, Db};

/// The name of the state file in the state directory.
pub const STATE_FILE: &str = "netris-state.json";

/// A source of the current time, in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Now.
    fn now_ms(&self) -> u64;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

/// A clock that moves only when told to; clones share the time.
#[derive(Debug, Clone, Default)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock at `start_ms`.
    #[must_use]
    pub fn new(start_ms: u64) -> Self {
        Self(Arc::new(AtomicU64::new(start_ms)))
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        let ms = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.0.fetch_add(ms, Ordering::SeqCst);
    }

    /// Sets the time.
    pub fn set(&self, ms: u64) {
        self.0.store(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// A login session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// The user who logged in.
    pub user: String,
    /// When it stops being valid, epoch ms (absolute: calls do not extend it).
    pub expires_ms: u64,
}

/// Injected faults. See the admin plane ([`super::admin`]) for how they are set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Faults {
    /// Drop every `/api` connection without an answer (the admin plane still answers).
    pub down: bool,
    /// V-Nets created or updated while set never finish provisioning (until cleared).
    pub provisioning_stuck: bool,
    /// Per-route errors and delays.
    pub rules: Vec<FaultRule>,
}

/// One route fault: an error status, a delay, or both, for the next `count` calls.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultRule {
    /// `"METHOD /path"` or `"/path"` (any method; so does method `*`); a path segment `*` or `{…}` matches
    /// any one segment, a trailing `/**` any rest. `None`: every `/api` call.
    pub route: Option<String>,
    /// Answer with this status and a Netris-shaped error envelope; the call is not
    /// carried out.
    pub status: Option<u16>,
    /// The envelope's `message` (default: the status' reason, "injected fault").
    pub message: Option<String>,
    /// Delay the answer this long; the call itself takes effect at once.
    pub latency_ms: Option<u64>,
    /// Calls left; `None`: until cleared.
    pub remaining: Option<u32>,
}

/// What the faults say about one call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultHit {
    /// Answer with this error (status, message) instead of carrying out the call.
    pub error: Option<(u16, Option<String>)>,
    /// Delay the answer.
    pub delay: Duration,
}

impl FaultRule {
    /// Whether this rule covers `method path`.
    #[must_use]
    pub fn matches(&self, method: &str, path: &str) -> bool {
        let Some(route) = &self.route else {
            return true;
        };
        let route = route.trim();
        let (want_method, pattern) = match route.split_once(' ') {
            Some((m, p)) => (Some(m.trim()), p.trim()),
            None => (None, route),
        };
        if want_method.is_some_and(|m| m != "*" && !m.eq_ignore_ascii_case(method)) {
            return false;
        }
        let mut want = pattern.trim_matches('/').split('/');
        let mut have = path.trim_matches('/').split('/');
        loop {
            match (want.next(), have.next()) {
                (None, None) => return true,
                (Some("**"), _) => return true,
                (Some(w), Some(h)) => {
                    let wildcard = w == "*" || (w.starts_with('{') && w.ends_with('}'));
                    if !wildcard && w != h {
                        return false;
                    }
                }
                _ => return false,
            }
        }
    }
}

impl Faults {
    /// Applies the rules to one call, counting down (and removing) the rules it uses.
    pub fn take(&mut self, method: &str, path: &str) -> FaultHit {
        let mut hit = FaultHit::default();
        for rule in &mut self.rules {
            if rule.remaining == Some(0) || !rule.matches(method, path) {
                continue;
            }
            let mut used = false;
            if let Some(status) = rule.status
                && hit.error.is_none()
            {
                hit.error = Some((status, rule.message.clone()));
                used = true;
            }
            if let Some(ms) = rule.latency_ms {
                hit.delay = hit.delay.max(Duration::from_millis(ms));
                used = true;
            }
            if used && let Some(n) = &mut rule.remaining {
                *n = n.saturating_sub(1);
            }
        }
        self.rules.retain(|r| r.remaining != Some(0));
        hit
    }
}

/// Why the store could not load or save its state.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Reading the state file failed.
    #[error("failed to read the state file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The state file is not a state this emulator wrote.
    #[error("failed to parse the state file {path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// The state file is from another format version.
    #[error("the state file {path} has format version {found}, this emulator writes {DB_VERSION}")]
    Version {
        /// The file.
        path: PathBuf,
        /// Its version.
        found: u32,
    },
    /// Writing the state file failed.
    #[error("failed to write the state file {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The emulator's state, behind whatever locking the implementation needs.
///
/// Reads return copies. [`Store::transact`] is the only way to change objects, and is
/// all-or-nothing.
pub trait Store: Send + Sync + fmt::Debug {
    /// The current time, epoch ms.
    fn now_ms(&self) -> u64;

    /// A copy of every object.
    fn snapshot(&self) -> Db;

    /// Runs `f` on a copy of the objects and, when it returns `Ok`, makes the copy the
    /// new state (and persists it, when the store persists). On `Err` nothing changes.
    ///
    /// # Errors
    /// What `f` returns, or a 500 [`ApiError`] when the new state cannot be persisted
    /// (the state then stays as it was).
    fn transact(
        &self,
        f: &mut dyn FnMut(&mut Db) -> Result<Value, ApiError>,
    ) -> Result<Value, ApiError>;

    /// Replaces every object (seed, reset), and clears sessions and faults.
    ///
    /// # Errors
    /// When the new state cannot be persisted (the old one stays).
    fn replace(&self, db: Db) -> Result<(), StoreError>;

    /// Starts a session for `user` valid until `expires_ms`; returns its id.
    fn new_session(&self, user: &str, expires_ms: u64) -> String;

    /// The session with this id, if it exists and has not expired.
    fn session(&self, id: &str) -> Option<Session>;

    /// Ends every session.
    fn expire_sessions(&self);

    /// How many sessions exist (valid or not yet swept).
    fn session_count(&self) -> usize;

    /// A copy of the faults.
    fn faults(&self) -> Faults;

    /// Changes the faults atomically.
    fn update_faults(&self, f: &mut dyn FnMut(&mut Faults));
}

/// The in-memory [`Store`], optionally writing through to `<dir>/netris-state.json`.
#[derive(Debug)]
pub struct MemStore {
    clock: Arc<dyn Clock>,
    file: Option<PathBuf>,
    db: Mutex<Db>,
    sessions: Mutex<HashMap<String, Session>>,
    faults: Mutex<Faults>,
}

/// Locks a mutex, carrying on past poisoning: every critical section leaves the data
/// consistent (commits are a single assignment), so a panic elsewhere cannot tear it.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl MemStore {
    /// A store that keeps everything in memory, seeded with `inventory`.
    #[must_use]
    pub fn in_memory(inventory: NetrisInventory, clock: Arc<dyn Clock>) -> Self {
        let db = Db::seeded(inventory, clock.now_ms());
        Self::with_db(db, clock, None)
    }

    /// A store persisted in `dir`: loads `dir/netris-state.json` when it exists (the
    /// inventory is then ignored: the saved state wins), else seeds with `inventory` and
    /// writes the file.
    ///
    /// # Errors
    /// When the file exists but cannot be read or parsed, or cannot be written.
    pub fn open(
        dir: &Path,
        inventory: NetrisInventory,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StoreError> {
        let file = dir.join(STATE_FILE);
        if file.exists() {
            let text = std::fs::read_to_string(&file).map_err(|source| StoreError::Read {
                path: file.clone(),
                source,
            })?;
            let db: Db = serde_json::from_str(&text).map_err(|source| StoreError::Parse {
                path: file.clone(),
                source,
            })?;
            if db.version != DB_VERSION {
                return Err(StoreError::Version {
                    path: file,
                    found: db.version,
                });
            }
            return Ok(Self::with_db(db, clock, Some(file)));
        }
        let db = Db::seeded(inventory, clock.now_ms());
        write_atomically(&file, &db)?;
        Ok(Self::with_db(db, clock, Some(file)))
    }

    fn with_db(db: Db, clock: Arc<dyn Clock>, file: Option<PathBuf>) -> Self {
        Self {
            clock,
            file,
            db: Mutex::new(db),
            sessions: Mutex::new(HashMap::new()),
            faults: Mutex::new(Faults::default()),
        }
    }

    /// The state file, when the store persists.
    #[must_use]
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    fn persist(&self, db: &Db) -> Result<(), StoreError> {
        match &self.file {
            Some(file) => write_atomically(file, db),
            None => Ok(()),
        }
    }
}

/// Writes `db` to `file` through a temporary file in the same directory and a rename,
/// so a reader (or a restart after a crash) sees the old state or the new one, never a
/// torn one.
fn write_atomically(file: &Path, db: &Db) -> Result<(), StoreError> {
    let err = |source| StoreError::Write {
        path: file.to_path_buf(),
        source,
    };
    let text = serde_json::to_vec(db).map_err(|e| err(std::io::Error::other(e)))?;
    let tmp = file.with_extension("json.tmp");
    let mut f = std::fs::File::create(&tmp).map_err(err)?;
    f.write_all(&text).map_err(err)?;
    drop(f);
    std::fs::rename(&tmp, file).map_err(err)
}

impl Store for MemStore {
    fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    fn snapshot(&self) -> Db {
        lock(&self.db).clone()
    }

    fn transact(
        &self,
        f: &mut dyn FnMut(&mut Db) -> Result<Value, ApiError>,
    ) -> Result<Value, ApiError> {
        // The lock is held across the write so the file's order is the commit order.
        let mut db = lock(&self.db);
        let mut next = db.clone();
        let out = f(&mut next)?;
        if next != *db {
            self.persist(&next)
                .map_err(|e| ApiError::internal(e.to_string()))?;
            *db = next;
        }
        Ok(out)
    }

    fn replace(&self, new: Db) -> Result<(), StoreError> {
        let mut db = lock(&self.db);
        self.persist(&new)?;
        *db = new;
        drop(db);
        lock(&self.sessions).clear();
        *lock(&self.faults) = Faults::default();
        Ok(())
    }

    fn new_session(&self, user: &str, expires_ms: u64) -> String {
        let id = session_id();
        let mut sessions = lock(&self.sessions);
        let now = self.clock.now_ms();
        sessions.retain(|_, s| s.expires_ms > now);
        sessions.insert(
            id.clone(),
            Session {
                user: user.to_string(),
                expires_ms,
            },
        );
        id
    }

    fn session(&self, id: &str) -> Option<Session> {
        let now = self.clock.now_ms();
        lock(&self.sessions)
            .get(id)
            .filter(|s| s.expires_ms > now)
            .cloned()
    }

    fn expire_sessions(&self) {
        lock(&self.sessions).clear();
    }

    fn session_count(&self) -> usize {
        lock(&self.sessions).len()
    }

    fn faults(&self) -> Faults {
        lock(&self.faults).clone()
    }

    fn update_faults(&self, f: &mut dyn FnMut(&mut Faults)) {
        f(&mut lock(&self.faults));
    }
}

/// 32 random bytes, hex: unguessable session ids.
fn session_id() -> String {
    use aws_lc_rs::rand::{SecureRandom, SystemRandom};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut bytes = [0u8; 32];
    if SystemRandom::new().fill(&mut bytes).is_err() {
        // No system randomness: fall back to something unique (the emulator is a test
        // double on loopback, not a security boundary).
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let t = SystemClock.now_ms();
        bytes[..8].copy_from_slice(&n.to_le_bytes());
        bytes[8..16].copy_from_slice(&t.to_le_bytes());
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(route: &str) -> FaultRule {
        FaultRule {
            route: Some(route.into()),
            status: Some(503),
            remaining: Some(2),
            ..FaultRule::default()
        }
    }

    #[test]
    fn routes_match_by_method_and_segments() {
        assert!(rule("POST /api/v2/vnet").matches("POST", "/api/v2/vnet"));
        assert!(!rule("POST /api/v2/vnet").matches("GET", "/api/v2/vnet"));
        assert!(!rule("POST /api/v2/vnet").matches("POST", "/api/v2/vnet/3"));
        assert!(rule("/api/v2/vnet").matches("DELETE", "/api/v2/vnet"));
        assert!(rule("PUT /api/v2/vnet/{id}").matches("PUT", "/api/v2/vnet/7"));
        assert!(rule("* /api/v2/vnet/*").matches("GET", "/api/v2/vnet/7"));
        assert!(rule("/api/v2/**").matches("GET", "/api/v2/ipam/subnet/1"));
        assert!(FaultRule::default().matches("GET", "/anything"));
    }

    #[test]
    fn rules_count_down_and_go_away() {
        let mut f = Faults {
            rules: vec![rule("POST /api/v2/vnet")],
            ..Faults::default()
        };
        assert_eq!(f.take("GET", "/api/v2/vnet"), FaultHit::default());
        assert_eq!(f.take("POST", "/api/v2/vnet").error, Some((503, None)));
        assert_eq!(f.take("POST", "/api/v2/vnet").error, Some((503, None)));
        assert!(f.rules.is_empty());
        assert_eq!(f.take("POST", "/api/v2/vnet"), FaultHit::default());
    }

    #[test]
    fn transactions_are_all_or_nothing() {
        let store = MemStore::in_memory(NetrisInventory::default(), Arc::new(ManualClock::new(0)));
        let before = store.snapshot();
        let r = store.transact(&mut |db| {
            db.tenants.clear();
            Err(ApiError::bad_request("x", "no"))
        });
        assert!(r.is_err());
        assert_eq!(store.snapshot(), before);
        store
            .transact(&mut |db| {
                db.tenants.clear();
                Ok(Value::Null)
            })
            .expect("ok");
        assert!(store.snapshot().tenants.is_empty());
    }

    #[test]
    fn sessions_expire_on_the_clock() {
        let clock = ManualClock::new(1000);
        let store = MemStore::in_memory(NetrisInventory::default(), Arc::new(clock.clone()));
        let id = store.new_session("netris", 2000);
        assert_eq!(id.len(), 64);
        assert!(store.session(&id).is_some());
        clock.advance(Duration::from_millis(1000));
        assert!(store.session(&id).is_none());
        let id = store.new_session("netris", 5000);
        store.expire_sessions();
        assert!(store.session(&id).is_none());
    }

    #[test]
    fn the_state_file_survives_a_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(0));
        let inv = NetrisInventory::from_nodes(&[("s", "r", "h")]);
        let store = MemStore::open(dir.path(), inv.clone(), clock.clone()).expect("open");
        store
            .transact(&mut |db| {
                db.next_id(super::super::model::Kind::Vnet);
                Ok(Value::Null)
            })
            .expect("ok");
        let again = MemStore::open(dir.path(), NetrisInventory::default(), clock).expect("reopen");
        assert_eq!(again.snapshot(), store.snapshot());
        assert_eq!(again.snapshot().counters.vnet, 1);
    }
}
