//! Why a step stopped, and how that reads in a diagnostic.

use std::{fmt, time::Duration};

use crate::{
    diag::Diagnostic,
    timeouts::{self, Operation},
};

/// The failures of one kind's steps beyond those every kind has (mostly its backend's errors),
/// and how the kind words its failures.
pub trait KindError: fmt::Debug + fmt::Display {
    /// The resource type name that every detail starts with.
    const TYPE_NAME: &'static str;

    /// The sentence that ends a stop's detail, saying what state keeps (for example "The
    /// objects created so far are recorded in state.").
    const KEPT_IN_STATE: &'static str;

    /// The detail for this failure; `what` names the resource ([`subject`]), `doing` is what
    /// the step was doing. By default the failure as it displays, after the resource.
    fn detail(&self, what: &str, _name: &str, _doing: &str) -> String {
        format!("{what}: {self}.")
    }

    /// The detail when the remote objects do not allow the step, `msg` saying why.
    fn conflict(what: &str, _name: &str, _doing: &str, msg: &str) -> String {
        format!("{what}: {msg}")
    }

    /// The detail when the operation's timeout passed after `waited`.
    fn timed_out(what: &str, _name: &str, doing: &str, op: Operation, waited: Duration) -> String {
        format!(
            "{what}: gave up after {} while {doing} (the {} timeout). {}",
            timeouts::render(waited),
            op.name(),
            Self::KEPT_IN_STATE
        )
    }
}

/// Why a step of apply, read or import stopped.
#[derive(Debug)]
pub enum StepError<E> {
    /// A failure of the kind's own, such as a failed backend call.
    Kind(E),
    /// The remote objects do not allow the step ("a V-Net of that name exists").
    Conflict(String),
    /// The operation's timeout passed.
    TimedOut {
        /// The operation whose timeout it was.
        op: Operation,
        /// How long the operation had run.
        waited: Duration,
    },
    /// Terraform asked the provider to stop.
    Cancelled,
}

impl<E: KindError> StepError<E> {
    /// The error diagnostic for resource `name`, stopped while `doing`.
    pub fn diagnostic(&self, summary: &str, name: &str, doing: &str) -> Diagnostic {
        Diagnostic::error(summary, self.detail(name, doing))
    }

    /// The diagnostic's detail: the kind's wording of each way a step stops.
    pub fn detail(&self, name: &str, doing: &str) -> String {
        let what = subject(E::TYPE_NAME, name);
        match self {
            StepError::Kind(e) => e.detail(&what, name, doing),
            StepError::Conflict(msg) => E::conflict(&what, name, doing, msg),
            StepError::TimedOut { op, waited } => E::timed_out(&what, name, doing, *op, *waited),
            StepError::Cancelled => stopped_detail(&what, doing, E::KEPT_IN_STATE),
        }
    }
}

/// How a diagnostic's detail names a resource: its type and name.
pub fn subject(type_name: &str, name: &str) -> String {
    format!("{type_name} {name:?}")
}

/// The detail of a step that stopped because Terraform asked the provider to stop, ending with
/// `then` (what state keeps, or what to do next).
pub fn stopped_detail(what: &str, doing: &str, then: &str) -> String {
    format!("{what}: stopped while {doing}, because Terraform asked the provider to stop. {then}")
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A kind with one failure of its own, worded like the real ones.
    #[derive(Debug, thiserror::Error)]
    #[error("broke")]
    pub(in crate::apply) struct Broken;

    impl KindError for Broken {
        const TYPE_NAME: &'static str = "gpufleet_thing";
        const KEPT_IN_STATE: &'static str = "What was made so far is recorded in state.";

        fn detail(&self, what: &str, _name: &str, doing: &str) -> String {
            format!("{what}: broke while {doing}.")
        }
    }

    /// A kind that words its failures the default way.
    #[derive(Debug, thiserror::Error)]
    #[error("the controller said no")]
    struct Refused;

    impl KindError for Refused {
        const TYPE_NAME: &'static str = "gpufleet_thing";
        const KEPT_IN_STATE: &'static str = "What was made so far is recorded in state.";
    }

    #[test]
    fn by_default_a_failure_reads_as_it_displays_after_the_resource() {
        let d = StepError::Kind(Refused).diagnostic("Thing Read Failed", "a", "reading the thing");
        assert_eq!(d.detail, "gpufleet_thing \"a\": the controller said no.");
    }

    /// A kind that words its conflicts with what the step was doing.
    #[derive(Debug, thiserror::Error)]
    #[error("broke")]
    struct Verbose;

    impl KindError for Verbose {
        const TYPE_NAME: &'static str = "gpufleet_other";
        const KEPT_IN_STATE: &'static str = "Apply again to finish.";

        fn detail(&self, what: &str, _name: &str, _doing: &str) -> String {
            format!("{what}: broke.")
        }

        fn conflict(what: &str, _name: &str, doing: &str, msg: &str) -> String {
            format!("{what}: {msg} (while {doing}).")
        }
    }

    #[test]
    fn a_kind_may_word_its_conflicts_itself() {
        let e = StepError::<Verbose>::Conflict("it is taken".to_owned());
        let d = e.diagnostic("Other Update Failed", "b", "writing the objects");
        assert_eq!(
            d.detail,
            "gpufleet_other \"b\": it is taken (while writing the objects)."
        );
    }

    fn detail(e: &StepError<Broken>) -> String {
        let d = e.diagnostic("Thing Create Failed", "a", "making the thing");
        assert_eq!(d.summary, "Thing Create Failed");
        d.detail
    }

    #[test]
    fn every_detail_names_the_resource_and_what_it_was_doing() {
        assert_eq!(
            detail(&StepError::Kind(Broken)),
            "gpufleet_thing \"a\": broke while making the thing."
        );
        assert_eq!(
            detail(&StepError::Conflict("it is taken.".to_owned())),
            "gpufleet_thing \"a\": it is taken."
        );
        assert_eq!(
            detail(&StepError::TimedOut {
                op: Operation::Create,
                waited: Duration::from_secs(90),
            }),
            "gpufleet_thing \"a\": gave up after 1m 30s while making the thing (the create \
             timeout). What was made so far is recorded in state."
        );
        assert_eq!(
            detail(&StepError::Cancelled),
            "gpufleet_thing \"a\": stopped while making the thing, because Terraform asked the \
             provider to stop. What was made so far is recorded in state."
        );
    }
}
