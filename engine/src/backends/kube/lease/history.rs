//! The turns a Lease records in [`HISTORY_ANNOTATION`], so that overlapping turns show.

use std::collections::BTreeMap;

use k8s_openapi::{api::coordination::v1::Lease, jiff::Timestamp};
use serde::{Deserialize, Serialize};

use super::{HISTORY_ANNOTATION, HISTORY_LEN};

/// One turn in [`HISTORY_ANNOTATION`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    /// The holder identity.
    pub holder: String,
    /// When the turn began.
    pub acquired: Timestamp,
    /// When the holder released the Lease; `None` while the turn is on, or when its holder
    /// died and the next turn took over.
    pub released: Option<Timestamp>,
    /// The holder whose stale turn this one took over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub took_over: Option<String>,
}

/// The turns recorded on a Lease, oldest first. An annotation that is missing or that someone
/// edited into something else reads as no history.
pub fn history(lease: &Lease) -> Vec<Turn> {
    lease
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(HISTORY_ANNOTATION))
        .and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_default()
}

/// `history` with `turn` added, keeping the last [`HISTORY_LEN`].
pub(super) fn with_turn(mut history: Vec<Turn>, turn: Turn) -> Vec<Turn> {
    // Taking back a turn we still hold (the same holder) continues it.
    let continues = history
        .last()
        .is_some_and(|t| t.holder == turn.holder && t.released.is_none());
    if !continues {
        history.push(turn);
    }
    let excess = history.len().saturating_sub(HISTORY_LEN);
    history.drain(..excess);
    history
}

/// `history` with `holder`'s open turn closed at `at`.
pub(super) fn with_release(mut history: Vec<Turn>, holder: &str, at: Timestamp) -> Vec<Turn> {
    if let Some(turn) = history
        .iter_mut()
        .rev()
        .find(|t| t.holder == holder && t.released.is_none())
    {
        turn.released = Some(at);
    }
    history
}

pub(super) fn set_history(lease: &mut Lease, history: &[Turn]) {
    // A list of plain strings and timestamps always serialises.
    let json = serde_json::to_string(history).unwrap_or_else(|_| "[]".to_owned());
    lease
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(HISTORY_ANNOTATION.to_owned(), json);
}
