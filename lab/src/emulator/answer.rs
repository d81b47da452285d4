//! The answer an emulator's handler gives, before the transport turns it into HTTP.
//! Each emulator adds its own body shapes to [`Response`] (BCM's `errormessage`,
//! Netris' envelope) next to its dispatcher.

use std::time::Duration;

use serde_json::Value;

/// An answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// HTTP status.
    pub status: u16,
    /// The JSON body.
    pub body: Value,
    /// A `Set-Cookie` header value to send.
    pub set_cookie: Option<String>,
    /// How long the transport waits before answering (latency fault).
    pub delay: Duration,
}

impl Response {
    /// An answer with no cookie and no delay.
    #[must_use]
    pub fn new(status: u16, body: Value) -> Self {
        Self {
            status,
            body,
            set_cookie: None,
            delay: Duration::ZERO,
        }
    }

    /// The `name=value` pair of `set_cookie` when it sets cookie `name`, as a `Cookie`
    /// header value for the next request.
    #[must_use]
    pub fn cookie(&self, name: &str) -> Option<String> {
        let pair = self.set_cookie.as_deref()?.split(';').next()?.trim();
        pair.starts_with(name).then(|| pair.to_owned())
    }
}

/// What the transport should do.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Answer.
    Reply(Response),
    /// Drop the connection without answering (the `down` fault).
    Drop,
}

impl Outcome {
    /// The answer, unless the connection is to be dropped.
    #[must_use]
    pub fn response(&self) -> Option<&Response> {
        match self {
            Outcome::Reply(r) => Some(r),
            Outcome::Drop => None,
        }
    }

    /// The answer, unless the connection is to be dropped.
    #[must_use]
    pub fn into_response(self) -> Option<Response> {
        match self {
            Outcome::Reply(r) => Some(r),
            Outcome::Drop => None,
        }
    }
}
