//! The response of an apply that failed part-way.

use super::{KindError, StepError};
use crate::{kinds::ApplyResponse, value::Value};

/// The response to an apply that stopped with `e` while `doing`: the error, and `state`,
/// which records what the steps before it made (null when they made nothing).
pub fn failed<E: KindError>(
    summary: &str,
    name: &str,
    doing: &str,
    e: &StepError<E>,
    state: Value,
) -> ApplyResponse {
    ApplyResponse {
        new_state: state,
        diagnostics: e.diagnostic(summary, name, doing).into(),
    }
}
