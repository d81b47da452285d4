//! Errors of the BCM client: [`ApiError`] says what went wrong with one call, [`BcmError`]
//! says which step it was ("failed to update node gpu-001: revision mismatch …").
//!
//! Messages carry cmdaemon's `errormessage` and validation messages and the HTTP status,
//! never a password, a login token or key material.

use std::time::Duration;

use super::types::Validation;

/// What went wrong with one call to cmdaemon.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// cmdaemon answered with an HTTP error status.
    #[error("{}", super::super::http_status(*.status, .message))]
    Status {
        /// The HTTP status code.
        status: u16,
        /// The body's text or the status text.
        message: String,
    },
    /// cmdaemon refused the call in-band (`{"errormessage": …}`), for example a profile that
    /// does not allow it.
    #[error("{0}")]
    Refused(String),
    /// cmdaemon could not be reached, or the connection broke (TLS failures included).
    #[error("cannot reach the head node: {}", chain(.0))]
    Transport(#[source] reqwest::Error),
    /// cmdaemon did not answer in time (after retries, for idempotent calls).
    #[error(
        "the head node did not answer within {} ({url})",
        crate::timeouts::render(*.after)
    )]
    Timeout {
        /// The request's URL: which endpoint did not answer.
        url: String,
        /// How long the call waited.
        after: Duration,
    },
    /// The answer was not what the API documents.
    #[error("unexpected answer from the head node: {0}")]
    Decode(String),
    /// A JSON text did not parse, or a value did not encode, in the step `what` names.
    #[error("unexpected answer from the head node: {what}: {source}")]
    Json {
        /// The step ("the answer is not JSON", "not a commit result").
        what: String,
        /// serde's error.
        #[source]
        source: serde_json::Error,
    },
    /// The answer is JSON, but not of the shape the API documents.
    #[error("unexpected answer from the head node: {0}")]
    Shape(#[source] serde_json::Error),
}

impl ApiError {
    /// serde's error, met in the step `what` names.
    pub fn json(what: impl Into<String>, source: serde_json::Error) -> ApiError {
        ApiError::Json {
            what: what.into(),
            source,
        }
    }

    /// Whether the call may have failed for a passing reason (server error, broken
    /// connection, timeout); idempotent calls are retried on these.
    pub fn is_transient(&self) -> bool {
        match self {
            ApiError::Status { status, .. } => *status >= 500,
            ApiError::Transport(e) => !is_tls_failure(e),
            ApiError::Timeout { .. } => true,
            ApiError::Refused(_)
            | ApiError::Decode(_)
            | ApiError::Json { .. }
            | ApiError::Shape(_) => false,
        }
    }

    /// Whether the profile in use may not make the call.
    pub fn is_permission_denied(&self) -> bool {
        match self {
            ApiError::Refused(m) => m.contains("does not allow"),
            // 635 and 640: cmdaemon's "service restricted" and "call restricted" (pythoncm).
            ApiError::Status { status, .. } => matches!(status, 401 | 403 | 635 | 640),
            _ => false,
        }
    }
}

/// A reqwest error with its causes ([`crate::backends::error_chain`]).
fn chain(e: &reqwest::Error) -> String {
    crate::backends::error_chain(e.to_string(), std::error::Error::source(e))
}

/// A TLS failure (untrusted certificate, refused client certificate) will not pass by
/// retrying.
fn is_tls_failure(e: &reqwest::Error) -> bool {
    let mut source: Option<&dyn std::error::Error> = Some(e);
    while let Some(s) = source {
        let text = s.to_string().to_ascii_lowercase();
        if text.contains("certificate") || text.contains("tls") || text.contains("handshake") {
            return true;
        }
        source = s.source();
    }
    false
}

/// The validation entries of a refused commit, as one line.
fn render(validation: &[Validation]) -> String {
    if validation.is_empty() {
        return "no reason given".to_owned();
    }
    validation
        .iter()
        .map(|v| {
            let code = if v.error_code.is_empty() {
                String::new()
            } else {
                format!(" [{}]", v.error_code)
            };
            format!("{}: {}{code}", v.field, v.message)
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// A failed step of the BCM client, named after what it was doing.
#[derive(Debug, thiserror::Error)]
pub enum BcmError {
    /// The provider's `bcm` settings cannot make a client.
    #[error("invalid bcm settings: {0}")]
    Settings(String),
    /// The HTTPS client could not be built from valid settings (TLS backend setup).
    #[error("invalid bcm settings: cannot set up HTTPS: {0}")]
    Https(#[source] reqwest::Error),
    /// Logging in with username and password failed.
    #[error("failed to log in to BCM at {endpoint}: {source}")]
    Login {
        /// The head node's base URL.
        endpoint: String,
        /// What went wrong.
        #[source]
        source: ApiError,
    },
    /// A read (`get*`, `cmstatus.*`) failed.
    #[error("failed to read {what}: {source}")]
    Read {
        /// What was read ("node gpu-001", "categories", …).
        what: String,
        /// What went wrong.
        #[source]
        source: ApiError,
    },
    /// An update call failed before cmdaemon judged it.
    #[error("failed to update {what}: {source}")]
    Update {
        /// What was updated ("node gpu-001").
        what: String,
        /// What went wrong.
        #[source]
        source: ApiError,
    },
    /// cmdaemon refused an update because the object changed since it was read.
    #[error(
        "failed to update {what}: it was changed by someone else since gpufleet read it \
         ({detail}); nothing was overwritten. Run the apply again to work from its current \
         state."
    )]
    RevisionConflict {
        /// What was updated.
        what: String,
        /// cmdaemon's message.
        detail: String,
    },
    /// cmdaemon refused an update on validation.
    #[error("failed to update {what}: cmdaemon refused it: {}", render(.validation))]
    Rejected {
        /// What was updated.
        what: String,
        /// cmdaemon's reasons.
        validation: Vec<Validation>,
    },
    /// A power operation failed.
    #[error("failed to power {operation} {what}: {source}")]
    Power {
        /// `ON`, `OFF`, `RESET`.
        operation: &'static str,
        /// The devices ("node gpu-001").
        what: String,
        /// What went wrong.
        #[source]
        source: ApiError,
    },
}

impl BcmError {
    /// The failed call, when there was one.
    pub fn api(&self) -> Option<&ApiError> {
        match self {
            BcmError::Login { source, .. }
            | BcmError::Read { source, .. }
            | BcmError::Update { source, .. }
            | BcmError::Power { source, .. } => Some(source),
            BcmError::Settings(_)
            | BcmError::Https(_)
            | BcmError::RevisionConflict { .. }
            | BcmError::Rejected { .. } => None,
        }
    }

    /// Whether the profile in use may not make the call.
    pub fn is_permission_denied(&self) -> bool {
        self.api().is_some_and(ApiError::is_permission_denied)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_step_and_carry_cmdaemons_reason() {
        let e = BcmError::Update {
            what: "node gpu-001".to_owned(),
            source: ApiError::Refused(
                "Profile readonly does not allow access to cmdevice.updateDevice".to_owned(),
            ),
        };
        assert_eq!(
            e.to_string(),
            "failed to update node gpu-001: Profile readonly does not allow access to \
             cmdevice.updateDevice"
        );
        assert!(e.is_permission_denied());
        let restricted = BcmError::Update {
            what: "node gpu-001".to_owned(),
            source: ApiError::Status {
                status: 640,
                message: "Profile readonly does not allow access to cmdevice.updateDevice"
                    .to_owned(),
            },
        };
        assert!(
            restricted.is_permission_denied(),
            "cmdaemon's call-restricted status"
        );
        let e = BcmError::Rejected {
            what: "node gpu-001".to_owned(),
            validation: vec![Validation {
                field: "category".to_owned(),
                message: "no such category".to_owned(),
                error_code: "BAD_VALUE".to_owned(),
                severity: "ERROR".to_owned(),
                ref_entity_uuid: String::new(),
            }],
        };
        assert!(
            e.to_string()
                .ends_with("category: no such category [BAD_VALUE]")
        );
    }
}
