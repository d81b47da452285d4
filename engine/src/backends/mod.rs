//! Clients of the systems gpufleet manages. This is the only part of the engine that talks to
//! the network (reqwest, tokio networking); resources see each backend through a trait, so
//! their logic can be tested against fakes and the planner stays offline.

pub mod bcm;
mod connect;
pub mod kube;
pub mod netris;
mod shared;

use std::{collections::BTreeMap, sync::Arc};

pub use connect::{Connect, FromSettings};

use crate::{context::Context, diag::Diagnostics, provider_config::ProviderSettings};

/// Checks every backend block that is set, without connecting: the settings each client needs
/// are there and agree (a client certificate has its key, a user its password), PEM values and
/// kubeconfig files can be read, endpoints are URLs. Blocks with values still unknown, and
/// blocks not set at all, are not checked. Run when the provider is configured; the result is
/// kept in [`ProviderSettings::problems`].
pub async fn check_settings(settings: &ProviderSettings) -> BTreeMap<&'static str, Diagnostics> {
    let ready = |block| settings.is_configured(block) && !settings.is_pending(block);
    let ctx = Context {
        settings: Arc::new(settings.clone()),
        ..Context::default()
    };
    let mut problems = BTreeMap::new();
    if ready("kubernetes")
        && let Err(d) = kube::client(settings, "the provider").await
    {
        problems.insert("kubernetes", d);
    }
    if ready("bcm")
        && let Err(d) = bcm::connect_from_settings(&ctx)
    {
        problems.insert("bcm", d);
    }
    if ready("netris")
        && let Err(d) = netris::connect_from_settings(&ctx)
    {
        problems.insert("netris", d);
    }
    problems
}

/// An error in words with its causes ("error sending request for url (…): client error
/// (Connect): tcp connect error: Connection refused"), each said once: the cause (an
/// untrusted certificate, a refused connection) is what the user acts on, and wrappers often
/// repeat their cause's text.
pub(crate) fn error_chain(
    first: String,
    mut next: Option<&(dyn std::error::Error + 'static)>,
) -> String {
    let mut parts = vec![first];
    while let Some(cause) = next {
        let text = cause.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = cause.source();
    }
    parts.join(": ")
}

/// `HTTP 503: <message>` for an error status, without saying the status twice when the
/// message already does (a proxy's "HTTP 503", a body of just "503", or none at all).
pub(crate) fn http_status(status: u16, message: &str) -> String {
    let message = message.trim();
    let code = status.to_string();
    let prefix = format!("HTTP {code}");
    let says_it = message.is_empty()
        || message == code
        || message.get(..prefix.len()).is_some_and(|head| {
            head.eq_ignore_ascii_case(&prefix)
                && !message[prefix.len()..].starts_with(|c: char| c.is_ascii_digit())
        });
    if says_it && !message.is_empty() && message != code {
        message.to_owned()
    } else if says_it {
        prefix
    } else {
        format!("{prefix}: {message}")
    }
}

#[cfg(test)]
mod tests {
    use super::http_status;

    #[test]
    fn http_status_says_the_status_once() {
        assert_eq!(
            http_status(503, "Service Unavailable"),
            "HTTP 503: Service Unavailable"
        );
        assert_eq!(http_status(503, "HTTP 503"), "HTTP 503");
        assert_eq!(
            http_status(503, "http 503 Service Unavailable"),
            "http 503 Service Unavailable"
        );
        assert_eq!(http_status(503, "503"), "HTTP 503");
        assert_eq!(http_status(503, "  "), "HTTP 503");
        assert_eq!(
            http_status(500, "HTTP 5000 things"),
            "HTTP 500: HTTP 5000 things"
        );
    }
}
