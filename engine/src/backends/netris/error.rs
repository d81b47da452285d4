//! Errors of the Netris client: [`ApiError`] says what went wrong with a call, [`NetrisError`]
//! says which step it was ("failed to create V-Net tenant-a-net: HTTP 400: …").
//!
//! Messages carry the controller's `message` and `errors` and the HTTP status, never the
//! password or the session cookie.

use std::time::Duration;

/// What went wrong with one call to the controller.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The controller answered with an error status, or with `isSuccess: false`.
    #[error("{}{}", super::super::http_status(*.status, .message), render_errors(.errors))]
    Status {
        /// The HTTP status code.
        status: u16,
        /// The controller's `message`, or the status text when it sent none.
        message: String,
        /// The controller's `errors`, rendered as JSON; empty when it sent none.
        errors: String,
    },
    /// The controller could not be reached, or the connection broke.
    #[error(
        "cannot reach the controller: {}",
        crate::backends::error_chain(.0.to_string(), std::error::Error::source(.0))
    )]
    Transport(#[source] reqwest::Error),
    /// The controller did not answer in time (after retries, for idempotent calls).
    #[error(
        "the controller did not answer within {} ({url})",
        crate::timeouts::render(*.after)
    )]
    Timeout {
        /// The request's URL: which endpoint did not answer.
        url: String,
        /// How long the call waited.
        after: Duration,
    },
    /// The answer was not what the API documents.
    #[error("unexpected answer from the controller: {0}")]
    Decode(String),
    /// A JSON text did not parse, or a value did not decode or encode, in the step `what`
    /// names.
    #[error("unexpected answer from the controller: {what}: {source}")]
    Json {
        /// The step ("malformed envelope", "V-Net 7", …).
        what: String,
        /// serde's error.
        #[source]
        source: serde_json::Error,
    },
}

fn render_errors(errors: &str) -> String {
    if errors.is_empty() {
        String::new()
    } else {
        format!(" ({errors})")
    }
}

impl ApiError {
    /// serde's error, met in the step `what` names.
    pub fn json(what: impl Into<String>, source: serde_json::Error) -> ApiError {
        ApiError::Json {
            what: what.into(),
            source,
        }
    }

    /// The HTTP status, if the controller answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            ApiError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether the object does not exist (HTTP 404).
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }

    /// Whether the call may have failed for a passing reason: a server error, a broken or
    /// refused connection, or a timeout. Such calls are retried when idempotent; a create that
    /// fails this way may still have happened.
    pub fn is_transient(&self) -> bool {
        match self {
            ApiError::Status { status, .. } => *status >= 500,
            ApiError::Transport(_) | ApiError::Timeout { .. } => true,
            ApiError::Decode(_) | ApiError::Json { .. } => false,
        }
    }
}

/// A failed step of the Netris client, named after what it was doing.
#[derive(Debug, thiserror::Error)]
pub enum NetrisError {
    /// The provider's `netris` settings cannot make a client.
    #[error("invalid netris settings: {0}")]
    Settings(String),
    /// The HTTPS client could not be built from valid settings (TLS backend setup).
    #[error("invalid netris settings: cannot set up HTTPS: {0}")]
    Https(#[source] reqwest::Error),
    /// Logging in (`POST /api/auth`) failed.
    #[error("failed to log in to the Netris controller at {endpoint}: {source}")]
    Login {
        /// The controller's base URL.
        endpoint: String,
        /// What went wrong.
        #[source]
        source: ApiError,
    },
    /// Listing objects failed.
    #[error("failed to list {what}: {source}")]
    List {
        /// What was listed ("tenants", "V-Nets", …).
        what: &'static str,
        /// What went wrong.
        #[source]
        source: ApiError,
    },
    /// Reading one V-Net failed.
    #[error("failed to read V-Net {id}: {source}")]
    GetVNet {
        /// The V-Net id.
        id: i64,
        /// What went wrong.
        #[source]
        source: ApiError,
    },
    /// Creating an IPAM allocation failed.
    #[error("failed to create IPAM allocation {name}: {source}")]
    CreateAllocation {
        /// The allocation's name.
        name: String,
        /// What went wrong.
        #[source]
        source: ApiError,
    },
    /// Deleting an IPAM allocation failed.
    #[error("failed to delete IPAM allocation {id}: {source}")]
    DeleteAllocation {
        /// The allocation id.
        id: i64,
        /// What went wrong.
        #[source]
        source: ApiError,
    },
    /// Creating a subnet failed.
    #[error("failed to create subnet {name}: {source}")]
    CreateSubnet {
        /// The subnet's name.
        name: String,
        /// What went wrong.
        #[source]
        source: ApiError,
    },
    /// Updating a subnet failed.
    #[error("failed to update subnet {name}: {source}")]
    UpdateSubnet {
        /// The subnet's name.
        name: String,
        /// What went wrong.
        #[source]
        source: ApiError,
    },
    /// Deleting a subnet failed.
    #[error("failed to delete subnet {id}: {source}")]
    DeleteSubnet {
        /// The subnet id.
        id: i64,
        /// What went wrong.
        #[source]
        source: ApiError,
    },
    /// Creating a V-Net failed.
    #[error("failed to create V-Net {name}: {source}")]
    CreateVNet {
        /// The V-Net's name.
        name: String,
        /// What went wrong.
        #[source]
        source: ApiError,
    },
    /// Updating a V-Net failed.
    #[error("failed to update V-Net {name}: {source}")]
    UpdateVNet {
        /// The V-Net's name.
        name: String,
        /// What went wrong.
        #[source]
        source: ApiError,
    },
    /// Deleting a V-Net failed.
    #[error("failed to delete V-Net {id}: {source}")]
    DeleteVNet {
        /// The V-Net id.
        id: i64,
        /// What went wrong.
        #[source]
        source: ApiError,
    },
}

impl NetrisError {
    /// The failed call, when there was one.
    pub fn api(&self) -> Option<&ApiError> {
        match self {
            NetrisError::Settings(_) | NetrisError::Https(_) => None,
            NetrisError::Login { source, .. }
            | NetrisError::List { source, .. }
            | NetrisError::GetVNet { source, .. }
            | NetrisError::CreateAllocation { source, .. }
            | NetrisError::DeleteAllocation { source, .. }
            | NetrisError::CreateSubnet { source, .. }
            | NetrisError::UpdateSubnet { source, .. }
            | NetrisError::DeleteSubnet { source, .. }
            | NetrisError::CreateVNet { source, .. }
            | NetrisError::UpdateVNet { source, .. }
            | NetrisError::DeleteVNet { source, .. } => Some(source),
        }
    }

    /// Whether the object the step was about does not exist (HTTP 404).
    pub fn is_not_found(&self) -> bool {
        self.api().is_some_and(ApiError::is_not_found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_step_and_carry_the_controller_message() {
        let e = NetrisError::CreateVNet {
            name: "tenant-a-net".to_owned(),
            source: ApiError::Status {
                status: 400,
                message: "Gateway is out of any subnet".to_owned(),
                errors: r#"{"gateways":"invalid"}"#.to_owned(),
            },
        };
        assert_eq!(
            e.to_string(),
            "failed to create V-Net tenant-a-net: HTTP 400: Gateway is out of any subnet \
             ({\"gateways\":\"invalid\"})"
        );
        assert!(!e.is_not_found());
    }
}
