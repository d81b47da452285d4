//! The responses of an apply or a read that failed part-way.

use super::{KindError, StepError};
use crate::{
    kinds::{ApplyResponse, ReadResponse},
    value::Value,
};

/// The response to an apply that stopped with `e` while `doing`: the error, and `state`,
/// which records what the steps before it made (null when they made nothing).
pub fn failed<E: KindError>(
    summary: &str,
    name: &str,
    doing: &str,
    e: &StepError<E>,
    state: Value,
) -> ApplyResponse {
    ApplyResponse::refused(state, e.diagnostic(summary, name, doing).into())
}

/// The response to a read that ended with `result`: the observed state, or, when it stopped
/// while `doing`, `state` unchanged with the error.
pub fn read_outcome<E: KindError>(
    result: Result<Value, StepError<E>>,
    state: &Value,
    summary: &str,
    name: &str,
    doing: &str,
) -> ReadResponse {
    match result {
        Ok(new_state) => ReadResponse::observed(new_state),
        Err(e) => ReadResponse::refused(state.clone(), e.diagnostic(summary, name, doing).into()),
    }
}
