//! Where the emulator keeps its state: [`BcmStore`], an [`emulator::Store`].
//!
//! - The entities and node states ([`Db`]) change only through
//!   [`emulator::Store::transact`], which here also brings the status clock up to now
//!   ([`boot::settle`]) before the change and checks for leaks after it; a commit is
//!   written to the state file before it is visible.
//! - Login tokens, faults, the journal and call counts live in memory only.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::boot;
use super::inventory::BcmInventory;
use super::model::{DB_VERSION, Db, InstallFault};
pub use crate::emulator::StoreError;
use crate::emulator::fault_rules::{self, CountedRule};
use crate::emulator::persisted::{Persisted, StateFormat};
use crate::emulator::store::{Change, Core};
use crate::emulator::{self, Clock, lock};

/// The state file's name in the state directory.
pub const STATE_FILE: &str = "bcm-state.json";

/// The journal keeps at most this many calls (the oldest go first).
pub const JOURNAL_LIMIT: usize = 10_000;

/// Why a call failed: an in-band `errormessage`, or a commit refused with validation
/// entries. Either way nothing was changed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    /// `{"errormessage": …}`.
    #[error("{0}")]
    Message(String),
    /// `{"success": false, "validation": […]}`.
    #[error("the commit was refused: {0:?}")]
    Refused(Vec<Validation>),
}

/// One validation entry of a commit result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Validation {
    /// The field.
    pub field: String,
    /// What is wrong.
    pub message: String,
    /// `DUPLICATE_FIELD`, `BAD_VALUE` or `NOT_NULL`.
    pub error_code: String,
    /// `ERROR` or `WARNING`.
    pub severity: String,
    /// The entity the problem is about (the other one, for a duplicate), or the zero
    /// uuid.
    pub ref_entity_uuid: String,
}

impl Validation {
    /// An `ERROR`.
    #[must_use]
    pub fn error(field: &str, code: &str, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
            error_code: code.into(),
            severity: "ERROR".into(),
            ref_entity_uuid: super::model::ZERO_UUID.into(),
        }
    }

    /// The same, about entity `uuid`.
    #[must_use]
    pub fn about(mut self, uuid: &str) -> Self {
        self.ref_entity_uuid = uuid.into();
        self
    }
}

/// A call fault: an error, a delay, or both, for the next `remaining` matching calls.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultRule {
    /// `service.call` (service case-insensitive), `service.*`, or `None`/`*` for every
    /// call.
    pub call: Option<String>,
    /// Answer with this HTTP status (body `{"errormessage": …}`); the call is not carried out.
    pub status: Option<u16>,
    /// Answer HTTP 200 `{"errormessage": this}` (or use it as the message of `status`).
    pub errormessage: Option<String>,
    /// Delay the answer; the call itself takes effect at once.
    pub latency_ms: Option<u64>,
    /// Calls left; `None`: until cleared.
    pub remaining: Option<u32>,
    /// Matching calls let through before the rule starts (`None`: at once), so a fault can
    /// start in the middle of an operation; counts down to 0 as calls pass.
    #[serde(default)]
    pub after: Option<u32>,
}

impl FaultRule {
    /// Whether the rule covers `service.call`.
    #[must_use]
    pub fn matches(&self, service: &str, call: &str) -> bool {
        let Some(pattern) = self.call.as_deref().map(str::trim) else {
            return true;
        };
        if pattern == "*" {
            return true;
        }
        let (s, c) = pattern.split_once('.').unwrap_or((pattern, "*"));
        s.eq_ignore_ascii_case(service) && (c == "*" || c == call)
    }
}

impl CountedRule for FaultRule {
    type Error = (u16, String);

    fn error(&self) -> Option<(u16, String)> {
        if self.status.is_none() && self.errormessage.is_none() {
            return None;
        }
        let status = self.status.unwrap_or(200);
        let message = self
            .errormessage
            .clone()
            .unwrap_or_else(|| format!("HTTP {status} (injected fault)"));
        Some((status, message))
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

/// Injected faults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Faults {
    /// Drop every `/json` connection without answering (the admin plane still answers).
    pub down: bool,
    /// Call faults.
    pub rules: Vec<FaultRule>,
    /// Per hostname: the state its installs stop in.
    pub installs: BTreeMap<String, InstallFault>,
}

/// What the faults say about one call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultHit {
    /// Answer this (HTTP status, message) instead of carrying out the call.
    pub error: Option<(u16, String)>,
    /// Delay the answer.
    pub delay: Duration,
}

impl Faults {
    /// Applies the rules to one call, counting down (and dropping) the rules it uses.
    pub fn take(&mut self, service: &str, call: &str) -> FaultHit {
        let (error, delay) = fault_rules::take(&mut self.rules, |r| r.matches(service, call));
        FaultHit { error, delay }
    }
}

/// One `/json` call as received.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalEntry {
    /// When, epoch ms.
    pub at: u64,
    /// The service, lower case.
    pub service: String,
    /// The call.
    pub call: String,
    /// The arguments (omitted for `login`, whose only argument is a password).
    pub args: Vec<Value>,
    /// `admin`, `readonly`, another certificate's common name, or `none`.
    pub profile: String,
}

impl StateFormat for Db {
    const VERSION: u32 = DB_VERSION;

    fn version(&self) -> u32 {
        self.version
    }
}

/// The emulator's state: the shared store, plus login tokens, the journal and call
/// counts.
#[derive(Debug)]
pub struct BcmStore {
    core: Core<Db, Faults>,
    tokens: Mutex<HashSet<String>>,
    journal: Mutex<Vec<JournalEntry>>,
    stats: Mutex<BTreeMap<String, u64>>,
}

impl BcmStore {
    /// A store in memory only, seeded with `inventory`.
    #[must_use]
    pub fn in_memory(inventory: BcmInventory, clock: Arc<dyn Clock>) -> Self {
        Self::with_db(Persisted::in_memory(Db::seeded(inventory)), clock)
    }

    /// A store persisted in `dir/bcm-state.json`: loaded when the file exists (the saved
    /// state wins over `inventory`), else seeded from `inventory` and written.
    ///
    /// # Errors
    /// When the file exists but cannot be read or parsed, or cannot be written.
    pub fn open(
        dir: &Path,
        inventory: BcmInventory,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StoreError> {
        let db = Persisted::open(dir.join(STATE_FILE), || Db::seeded(inventory))?;
        // A state saved before nodes had disks gets them from its inventory.
        let mut saved = db.get();
        if saved.add_missing_disks() {
            db.replace(saved)?;
        }
        Ok(Self::with_db(db, clock))
    }

    fn with_db(db: Persisted<Db>, clock: Arc<dyn Clock>) -> Self {
        Self {
            core: Core::new(db, clock),
            tokens: Mutex::new(HashSet::new()),
            journal: Mutex::new(Vec::new()),
            stats: Mutex::new(BTreeMap::new()),
        }
    }

    /// Starts a login session; returns its token.
    #[must_use]
    pub fn new_token(&self) -> String {
        let token = format!(
            "{}{}",
            super::uuid::random_uuid().replace('-', ""),
            super::uuid::random_uuid().replace('-', "")
        );
        lock(&self.tokens).insert(token.clone());
        token
    }

    /// Whether a token is valid (tokens do not expire; a restart ends them).
    #[must_use]
    pub fn has_token(&self, token: &str) -> bool {
        lock(&self.tokens).contains(token)
    }

    /// Records a call in the journal and the counts.
    pub fn record(&self, entry: JournalEntry) {
        *lock(&self.stats)
            .entry(format!("{}.{}", entry.service, entry.call))
            .or_insert(0) += 1;
        let mut journal = lock(&self.journal);
        if journal.len() >= JOURNAL_LIMIT {
            journal.remove(0);
        }
        journal.push(entry);
    }

    /// A copy of the journal, oldest first.
    #[must_use]
    pub fn journal(&self) -> Vec<JournalEntry> {
        lock(&self.journal).clone()
    }

    /// Empties the journal (the counts stay).
    pub fn clear_journal(&self) {
        lock(&self.journal).clear();
    }

    /// Calls per `service.call`.
    #[must_use]
    pub fn stats(&self) -> BTreeMap<String, u64> {
        lock(&self.stats).clone()
    }
}

/// Every change, and every read, first brings the status clock up to now, so what a
/// client sees has moved on with time even when nobody called.
impl emulator::Store for BcmStore {
    type Db = Db;
    type Faults = Faults;
    type Error = CallError;

    fn now_ms(&self) -> u64 {
        self.core.now_ms()
    }

    /// A copy of the state, brought up to now.
    fn snapshot(&self) -> Db {
        let mut out = None;
        let _ = self.transact(&mut |db, _| {
            out = Some(db.clone());
            Ok(Value::Null)
        });
        out.unwrap_or_else(|| self.core.snapshot())
    }

    /// Also settles the status clock before `f` and records leaks after it; a failed
    /// write answers as a [`CallError::Message`].
    fn transact(&self, f: &mut Change<'_, Db, CallError>) -> Result<Value, CallError> {
        self.core.transact(
            |next, now| {
                boot::settle(next, now);
                let out = f(next, now)?;
                boot::check_leaks(next, now);
                Ok(out)
            },
            |e| CallError::Message(e.to_string()),
        )
    }

    /// Also clears tokens, the journal and the counts.
    fn replace(&self, new: Db) -> Result<(), StoreError> {
        self.core.replace(new)?;
        lock(&self.tokens).clear();
        lock(&self.journal).clear();
        lock(&self.stats).clear();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_patterns() {
        let rule = |c: &str| FaultRule {
            call: Some(c.into()),
            ..FaultRule::default()
        };
        assert!(rule("cmdevice.updateDevice").matches("cmdevice", "updateDevice"));
        assert!(rule("CMDevice.updateDevice").matches("cmdevice", "updateDevice"));
        assert!(!rule("cmdevice.updateDevice").matches("cmdevice", "getDevice"));
        assert!(rule("cmdevice.*").matches("cmdevice", "getDevice"));
        assert!(rule("cmdevice").matches("cmdevice", "getDevice"));
        assert!(rule("*").matches("cmpart", "x"));
        assert!(FaultRule::default().matches("a", "b"));
    }

    #[test]
    fn a_rule_starts_after_the_calls_it_lets_through() {
        let mut f = Faults {
            rules: vec![FaultRule {
                status: Some(400),
                after: Some(2),
                ..FaultRule::default()
            }],
            ..Faults::default()
        };
        assert_eq!(f.take("cmdevice", "getDevices"), FaultHit::default());
        assert_eq!(f.take("cmdevice", "getDevice"), FaultHit::default());
        for _ in 0..3 {
            assert_eq!(
                f.take("cmdevice", "getDevice").error.map(|e| e.0),
                Some(400)
            );
        }
    }

    #[test]
    fn rules_count_down() {
        let mut f = Faults {
            rules: vec![FaultRule {
                call: Some("cmdevice.getDevice".into()),
                errormessage: Some("boom".into()),
                remaining: Some(1),
                ..FaultRule::default()
            }],
            ..Faults::default()
        };
        assert_eq!(f.take("cmdevice", "getDevices"), FaultHit::default());
        assert_eq!(
            f.take("cmdevice", "getDevice").error,
            Some((200, "boom".into()))
        );
        assert!(f.rules.is_empty());
    }
}
