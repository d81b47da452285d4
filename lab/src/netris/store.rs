//! Where the emulator keeps its state: the [`NetrisStore`], an extension of
//! [`emulator::Store`] with login sessions, and [`MemStore`], its in-memory
//! implementation with optional write-through to a JSON file.
//!
//! Three kinds of state, kept apart:
//!
//! - the controller's objects ([`Db`]): changed only through [`emulator::Store::transact`],
//!   all-or-nothing and written through to the state file before a commit is visible.
//! - login sessions: in memory only (a restart logs everyone out).
//! - faults ([`Faults`]): in memory only (a restart clears them).
//!
//! Time comes from a [`Clock`] so tests can move it by hand ([`ManualClock`]).

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::dispatch::ApiError;
use super::inventory::NetrisInventory;
use super::model::{DB_VERSION, Db};
use crate::emulator;
use crate::emulator::fault_rules::{self, CountedRule};
use crate::emulator::lock;
use crate::emulator::persisted::{Persisted, StateFormat};
use crate::emulator::store::{Change, Core};
pub use crate::emulator::{Clock, ManualClock, StoreError, SystemClock};

/// The name of the state file in the state directory.
pub const STATE_FILE: &str = "netris-state.json";

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
    /// Matching calls let through before the rule starts (`None`: at once), so a fault can
    /// start in the middle of an operation; counts down to 0 as calls pass.
    #[serde(default)]
    pub after: Option<u32>,
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

impl CountedRule for FaultRule {
    type Error = (u16, Option<String>);

    fn error(&self) -> Option<(u16, Option<String>)> {
        Some((self.status?, self.message.clone()))
    }

    fn latency_ms(&self) -> Option<u64> {
        self.latency_ms
    }

    fn remaining(&mut self) -> &mut Option<u32> {
        &mut self.remaining
    }

    fn after(&mut self) -> &mut Option<u32> {
        &mut self.after
    }
}

impl Faults {
    /// Applies the rules to one call, counting down (and removing) the rules it uses.
    pub fn take(&mut self, method: &str, path: &str) -> FaultHit {
        let (error, delay) = fault_rules::take(&mut self.rules, |r| r.matches(method, path));
        FaultHit { error, delay }
    }
}

impl StateFormat for Db {
    const VERSION: u32 = DB_VERSION;

    fn version(&self) -> u32 {
        self.version
    }
}

/// The Netris emulator's state: the shared store shape, plus login sessions.
pub trait NetrisStore: emulator::Store<Db = Db, Faults = Faults, Error = ApiError> {
    /// Starts a session for `user` valid until `expires_ms`; returns its id.
    fn new_session(&self, user: &str, expires_ms: u64) -> String;

    /// The session with this id, if it exists and has not expired.
    fn session(&self, id: &str) -> Option<Session>;

    /// Ends every session.
    fn expire_sessions(&self);

    /// How many sessions exist (valid or not yet swept).
    fn session_count(&self) -> usize;
}

/// The in-memory [`NetrisStore`], optionally writing through to `<dir>/netris-state.json`.
#[derive(Debug)]
pub struct MemStore {
    core: Core<Db, Faults>,
    sessions: Mutex<HashMap<String, Session>>,
}

impl MemStore {
    /// A store that keeps everything in memory, seeded with `inventory`.
    #[must_use]
    pub fn in_memory(inventory: NetrisInventory, clock: Arc<dyn Clock>) -> Self {
        let db = Db::seeded(inventory, clock.now_ms());
        Self::with_db(Persisted::in_memory(db), clock)
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
        let db = Persisted::open(dir.join(STATE_FILE), || {
            Db::seeded(inventory, clock.now_ms())
        })?;
        Ok(Self::with_db(db, clock))
    }

    fn with_db(db: Persisted<Db>, clock: Arc<dyn Clock>) -> Self {
        Self {
            core: Core::new(db, clock),
            sessions: Mutex::new(HashMap::new()),
        }
    }
}

impl emulator::Store for MemStore {
    type Db = Db;
    type Faults = Faults;
    type Error = ApiError;

    fn now_ms(&self) -> u64 {
        self.core.now_ms()
    }

    fn snapshot(&self) -> Db {
        self.core.snapshot()
    }

    /// A state that cannot be written answers HTTP 500.
    fn transact(&self, f: &mut Change<'_, Db, ApiError>) -> Result<Value, ApiError> {
        self.core.transact(f, |e| ApiError::internal(e.to_string()))
    }

    fn replace(&self, new: Db) -> Result<(), StoreError> {
        self.core.replace(new)?;
        lock(&self.sessions).clear();
        Ok(())
    }

    fn faults(&self) -> Faults {
        self.core.faults()
    }

    fn update_faults(&self, f: &mut dyn FnMut(&mut Faults)) {
        self.core.update_faults(f);
    }

    fn file(&self) -> Option<&Path> {
        self.core.file()
    }
}

impl NetrisStore for MemStore {
    fn new_session(&self, user: &str, expires_ms: u64) -> String {
        let id = session_id();
        let mut sessions = lock(&self.sessions);
        let now = self.core.now_ms();
        sessions.retain(|_, s| s.expires_ms > now);
        sessions.insert(
            id.clone(),
            Session {
                user: user.to_owned(),
                expires_ms,
            },
        );
        id
    }

    fn session(&self, id: &str) -> Option<Session> {
        let now = self.core.now_ms();
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
    use crate::emulator::Store as _;

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
        let r = store.transact(&mut |db, _| {
            db.tenants.clear();
            Err(ApiError::bad_request("x", "no"))
        });
        assert!(r.is_err());
        assert_eq!(store.snapshot(), before);
        store
            .transact(&mut |db, _| {
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
            .transact(&mut |db, _| {
                db.next_id(super::super::model::Kind::Vnet);
                Ok(Value::Null)
            })
            .expect("ok");
        let again = MemStore::open(dir.path(), NetrisInventory::default(), clock).expect("reopen");
        assert_eq!(again.snapshot(), store.snapshot());
        assert_eq!(again.snapshot().counters.vnet, 1);
    }
}
