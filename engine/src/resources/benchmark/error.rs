//! Why a run stops: the benchmark's own reasons ([`RunError`]) and the apply runtime's
//! timeout and stop request around them ([`StepError`]).

use std::time::Duration;

use crate::{
    apply::{self, KindError},
    backends::kube::ObjectError,
    timeouts::{self, Operation},
};

use super::TYPE_NAME;

/// A benchmark's own reasons for a run to stop before it had output to record; the
/// timeout and Terraform's stop request are [`StepError`]'s.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A cluster call failed.
    #[error(transparent)]
    Cluster(#[from] ObjectError),
    /// The objects the run needs are missing or wrong.
    #[error("{0}")]
    Setup(String),
    /// Not every pod started within the gang deadline.
    #[error("not every pod was running within start_timeout ({waited}): {pending}")]
    GangStart {
        /// How long the run waited.
        waited: String,
        /// The pods that did not start, and why.
        pending: String,
    },
    /// The pods of a gang ran one after another instead of together.
    #[error(
        "the {nodes} pods did not run together ({detail}); a run of nodes = {nodes} needs {nodes} free nodes of the pool at once"
    )]
    GangBroken {
        /// How many pods the gang has.
        nodes: u32,
        /// What showed it.
        detail: String,
    },
    /// The gang's nodes differ in a compared field.
    #[error(
        "the run's nodes differ in {0}; a result across them would mix two setups. List the \
         field in allow_node_differences to run on them anyway"
    )]
    MixedNodes(String),
    /// A node failed the prescreen: the run stopped before its benchmark pods started.
    #[error("the prescreen stopped the run before it measured anything: {0}")]
    Prescreen(String),
}

impl KindError for RunError {
    const TYPE_NAME: &'static str = TYPE_NAME;
    const KEPT_IN_STATE: &'static str =
        "What the run created is removed, or taken over by the next apply.";

    fn timed_out(what: &str, _name: &str, _doing: &str, op: Operation, waited: Duration) -> String {
        format!("{what}: {}.", timed_out_reason(op, waited))
    }
}

/// Why a step of a run, or of its cleanup, stopped.
pub type StepError = apply::StepError<RunError>;

impl From<ObjectError> for StepError {
    fn from(e: ObjectError) -> StepError {
        StepError::Kind(RunError::Cluster(e))
    }
}

impl From<RunError> for StepError {
    fn from(e: RunError) -> StepError {
        StepError::Kind(e)
    }
}

/// A run's timeout: the create timeout is the Job's, the delete timeout the cleanup's.
fn timed_out_reason(op: Operation, waited: Duration) -> String {
    match op {
        Operation::Delete => format!(
            "gave up after the delete timeout ({})",
            timeouts::render(waited)
        ),
        op => format!(
            "the Job did not finish within the {} timeout ({})",
            op.name(),
            timeouts::render(waited)
        ),
    }
}
