//! What the HTTP backends (BCM, Netris) share: the HTTPS client and its endpoint check, one
//! client per settings, how a request's answer is read, the login session a client keeps, how
//! calls are retried, secrets, and PEM values that are either inline text or a path.

use std::{
    collections::HashMap,
    fmt,
    hash::Hash,
    net::IpAddr,
    sync::{Arc, Mutex, OnceLock, PoisonError},
    time::Duration,
};

use crate::{diag::Diagnostics, path::AttrPath};

/// Clients shared by every operation with the same settings, so connections and logins are
/// reused across resources.
pub(crate) struct ClientCache<K, C>(OnceLock<Mutex<HashMap<K, Arc<C>>>>);

impl<K: Hash + Eq + Clone, C> ClientCache<K, C> {
    /// An empty cache, for a `static`.
    pub(crate) const fn new() -> Self {
        ClientCache(OnceLock::new())
    }

    /// The client for `key`, made with `make` the first time.
    pub(crate) fn get_or_make<E>(
        &self,
        key: &K,
        make: impl FnOnce() -> Result<C, E>,
    ) -> Result<Arc<C>, E> {
        let clients = self.0.get_or_init(Mutex::default);
        let mut clients = clients.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = clients.get(key) {
            return Ok(Arc::clone(c));
        }
        let client = Arc::new(make()?);
        clients.insert(key.clone(), Arc::clone(&client));
        Ok(client)
    }
}

/// How one request ended, before the retry policy looks at it.
pub(crate) enum Outcome<T, E> {
    /// The server answered with success.
    Ok(T),
    /// The session is not (or no longer) valid: logging in again may help.
    Unauthorized,
    /// Anything else.
    Failed(E),
}

/// Sends `req` and reads its answer as text. HTTP 401 is [`Outcome::Unauthorized`] when the
/// request `has_session` to renew (a login's own refusal is for `parse` to say); `no_answer`
/// makes the error of a request that got no answer, `parse` the result of one that did.
pub(crate) async fn exchange<T, E>(
    req: reqwest::RequestBuilder,
    has_session: bool,
    no_answer: impl Fn(reqwest::Error) -> E,
    parse: impl FnOnce(reqwest::StatusCode, &str) -> Result<T, E>,
) -> Outcome<T, E> {
    let resp = match req.send().await {
        Ok(r) => r,
        Err(e) => return Outcome::Failed(no_answer(e)),
    };
    let status = resp.status();
    if has_session && status == reqwest::StatusCode::UNAUTHORIZED {
        return Outcome::Unauthorized;
    }
    match resp.text().await {
        Ok(text) => parse(status, &text).map_or_else(Outcome::Failed, Outcome::Ok),
        Err(e) => Outcome::Failed(no_answer(e)),
    }
}

/// The error of a request that got no answer: `timeout`'s, given the request's URL, when it
/// timed out, else `transport`'s (the connection failed or broke). reqwest says both with one
/// error type; the backends say them apart, since only a timeout names the endpoint.
pub(crate) fn no_answer<E>(
    e: reqwest::Error,
    timeout: impl FnOnce(String) -> E,
    transport: impl FnOnce(reqwest::Error) -> E,
) -> E {
    if e.is_timeout() {
        timeout(e.url().map(|u| u.as_str().to_owned()).unwrap_or_default())
    } else {
        transport(e)
    }
}

/// The diagnostic of the provider setting `block.name` (`bcm.client_key`), which `problem`
/// completes.
pub(crate) fn invalid_setting(block: &str, name: &str, problem: &str) -> Diagnostics {
    let mut d = Diagnostics::new();
    d.error_at(
        AttrPath::root(),
        "Invalid Provider Setting",
        format!("{block}.{name} {problem}"),
    );
    d
}

/// A secret string: never shown by `Debug`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(s: impl Into<String>) -> Secret {
        Secret(s.into())
    }

    /// The secret itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(redacted)")
    }
}

/// How idempotent calls are retried: up to `attempts` tries, waiting `base * 2^n` (capped at
/// `max_delay`) with random jitter between tries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RetryPolicy {
    /// Tries in all, the first included (1: no retries).
    pub attempts: u32,
    /// The first delay.
    pub base_delay: Duration,
    /// The longest delay.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            attempts: 4,
            base_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(5),
        }
    }
}

impl RetryPolicy {
    /// The delay after failed try number `attempt` (1-based): exponential, capped, with
    /// "equal jitter" (half fixed, half random) so concurrent clients spread out but never
    /// retry immediately.
    pub fn delay(&self, attempt: u32) -> Duration {
        let exp = self
            .base_delay
            .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)));
        let capped = exp.min(self.max_delay);
        let half = capped / 2;
        let jitter_ms = u64::try_from(half.as_millis()).unwrap_or(u64::MAX);
        half + Duration::from_millis(fastrand::u64(0..=jitter_ms))
    }
}

/// Runs `try_once` until it succeeds, fails with an error `retry_on` refuses, or has had
/// every try of `policy`, waiting the policy's delay between tries.
pub(crate) async fn with_retries<T, E, Fut>(
    policy: &RetryPolicy,
    retry_on: impl Fn(&E) -> bool,
    mut try_once: impl FnMut() -> Fut,
) -> Result<T, E>
where
    Fut: Future<Output = Result<T, E>>,
{
    let mut attempt = 1;
    loop {
        match try_once().await {
            Err(e) if retry_on(&e) && attempt < policy.attempts => {
                tokio::time::sleep(policy.delay(attempt)).await;
                attempt += 1;
            }
            done => return done,
        }
    }
}

/// The login a server keeps for a client (a session cookie or token), shared by the client's
/// calls. Its generation counts logins, so that of several calls that see the same session
/// expire, only the first logs in again.
#[derive(Default)]
pub(crate) struct LoginSession(tokio::sync::Mutex<(Option<Secret>, u64)>);

impl LoginSession {
    /// The session and its generation; `log_in` first when there is none. Calls wait for a
    /// login under way rather than log in beside it.
    pub(crate) async fn get_or_log_in<E>(
        &self,
        log_in: impl Future<Output = Result<Secret, E>>,
    ) -> Result<(Secret, u64), E> {
        let mut s = self.0.lock().await;
        if let Some(secret) = &s.0 {
            return Ok((secret.clone(), s.1));
        }
        let secret = log_in.await?;
        s.0 = Some(secret.clone());
        s.1 += 1;
        Ok((secret, s.1))
    }

    /// Forgets the session of `generation`, unless another call has already replaced it.
    pub(crate) async fn expire(&self, generation: u64) {
        let mut s = self.0.lock().await;
        if s.1 == generation {
            s.0 = None;
        }
    }
}

/// A PEM setting: the text itself, or the path of a file that holds a PEM block of `label`
/// (`CERTIFICATE`, `PRIVATE KEY`). The error completes "<setting> …".
pub(crate) fn read_pem(value: &str, label: &str) -> Result<Vec<u8>, String> {
    if value.trim_start().starts_with("-----BEGIN") {
        return Ok(value.as_bytes().to_vec());
    }
    let path = value.trim();
    let pem = std::fs::read(path).map_err(|e| {
        format!(
            "is neither PEM text (it does not start with -----BEGIN) nor a readable file: \
             cannot read {path:?}: {e}"
        )
    })?;
    let has_label = String::from_utf8_lossy(&pem)
        .lines()
        .any(|l| l.starts_with("-----BEGIN") && l.contains(label));
    if !has_label {
        return Err(format!(
            "names the file {path:?}, which holds no PEM {}",
            label.to_lowercase()
        ));
    }
    Ok(pem)
}

/// `https://` anywhere; `http://` only on loopback, for local emulators.
pub(crate) fn check_endpoint(endpoint: &str) -> Result<reqwest::Url, String> {
    let url = reqwest::Url::parse(endpoint)
        .map_err(|e| format!("is {endpoint:?}, which is not a URL ({e})"))?;
    let loopback = match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        None => false,
    };
    match url.scheme() {
        "https" => Ok(url),
        "http" if loopback => Ok(url),
        _ => Err(format!(
            "is {endpoint:?}; it must be an https:// URL (plain http is only accepted for \
             loopback addresses)"
        )),
    }
}

/// The HTTP client builder every backend controller starts from: endpoint checked, the
/// request and connect timeouts, gpufleet's user agent and, with `ca_pem`, trust in that CA
/// alone. The error is the whole message for the backend's settings error.
pub(crate) fn https_client_builder(
    endpoint: &str,
    request_timeout: Duration,
    ca_pem: Option<&[u8]>,
) -> Result<reqwest::ClientBuilder, String> {
    check_endpoint(endpoint).map_err(|e| format!("endpoint {e}"))?;
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .timeout(request_timeout)
        .connect_timeout(request_timeout.min(Duration::from_secs(10)))
        .user_agent(concat!("gpufleet/", env!("CARGO_PKG_VERSION")));
    if let Some(pem) = ca_pem {
        let certs = reqwest::Certificate::from_pem_bundle(pem)
            .map_err(|e| format!("ca_certificate is not a PEM CA bundle: {e}"))?;
        if certs.is_empty() {
            return Err("ca_certificate holds no certificate".to_owned());
        }
        // Only the configured CA is trusted, not the system roots as well.
        builder = builder.tls_built_in_root_certs(false);
        for cert in certs {
            builder = builder.add_root_certificate(cert);
        }
    } else if cfg!(target_os = "macos") {
        // There reqwest trusts the bundled roots only; SSL_CERT_FILE and SSL_CERT_DIR add to
        // them, as for the host cluster (backends/kube/bundled_tls.rs).
        let extra = crate::backends::kube::bundled_tls::ExtraRoots::from_env();
        for der in extra.certs().map_err(|e| e.to_string())? {
            let cert = reqwest::Certificate::from_der(&der)
                .map_err(|e| format!("a certificate of SSL_CERT_FILE or SSL_CERT_DIR: {e}"))?;
            builder = builder.add_root_certificate(cert);
        }
    }
    Ok(builder)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn retries_stop_at_success_a_refused_error_or_the_last_try() {
        let policy = RetryPolicy {
            attempts: 3,
            base_delay: Duration::ZERO,
            max_delay: Duration::ZERO,
        };
        let tries = std::cell::Cell::new(0);
        let transient = |e: &&str| *e == "busy";
        let run = |answers: &'static [Result<u8, &'static str>]| {
            tries.set(0);
            let tries = &tries;
            with_retries(&policy, transient, move || async move {
                let n = tries.get();
                tries.set(n + 1);
                answers[n.min(answers.len() - 1)]
            })
        };
        assert_eq!(run(&[Err("busy"), Ok(7)]).await, Ok(7));
        assert_eq!(tries.get(), 2);
        assert_eq!(run(&[Err("refused"), Ok(7)]).await, Err("refused"));
        assert_eq!(tries.get(), 1);
        assert_eq!(run(&[Err("busy")]).await, Err("busy"));
        assert_eq!(tries.get(), 3);
    }

    #[tokio::test]
    async fn a_session_logs_in_once_until_its_generation_expires() {
        let session = LoginSession::default();
        let login = |s: &str| std::future::ready(Ok::<_, ()>(Secret::new(s)));
        let (first, generation) = session.get_or_log_in(login("a")).await.expect("login");
        assert_eq!((first.expose(), generation), ("a", 1));
        let (again, _) = session.get_or_log_in(login("b")).await.expect("kept");
        assert_eq!(again.expose(), "a");
        session.expire(0).await;
        let (kept, _) = session.get_or_log_in(login("c")).await.expect("kept");
        assert_eq!(kept.expose(), "a", "a stale generation expires nothing");
        session.expire(generation).await;
        let (fresh, next) = session.get_or_log_in(login("d")).await.expect("login");
        assert_eq!((fresh.expose(), next), ("d", 2));
    }

    #[test]
    fn endpoint_must_be_https_unless_loopback() {
        assert!(check_endpoint("https://controller.example").is_ok());
        assert!(check_endpoint("http://127.0.0.1:8080").is_ok());
        assert!(check_endpoint("http://localhost:8080").is_ok());
        assert!(check_endpoint("http://controller.example").is_err());
        assert!(check_endpoint("controller.example").is_err());
    }

    #[test]
    fn pem_is_text_or_a_path() {
        let pem = "-----BEGIN CERTIFICATE-----\nMII\n-----END CERTIFICATE-----\n";
        assert_eq!(read_pem(pem, "CERTIFICATE"), Ok(pem.as_bytes().to_vec()));
        let err = read_pem("/nonexistent/ca.pem", "CERTIFICATE").expect_err("missing file");
        assert!(err.contains("neither PEM text"), "{err}");
    }

    #[test]
    fn a_file_without_the_block_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("key.pem");
        std::fs::write(&path, "-----BEGIN PRIVATE KEY-----\nMII\n").expect("write");
        let path = path.to_string_lossy();
        assert!(read_pem(&path, "PRIVATE KEY").is_ok());
        let err = read_pem(&path, "CERTIFICATE").expect_err("no certificate");
        assert!(err.ends_with("which holds no PEM certificate"), "{err}");
    }

    #[test]
    fn one_client_per_settings() {
        static CACHE: ClientCache<&str, String> = ClientCache::new();
        let a = CACHE.get_or_make(&"a", || Ok::<_, ()>("first".to_owned()));
        let again = CACHE.get_or_make(&"a", || Ok::<_, ()>("second".to_owned()));
        let (Ok(a), Ok(again)) = (a, again) else {
            panic!("made");
        };
        assert!(Arc::ptr_eq(&a, &again));
        assert_eq!(CACHE.get_or_make(&"b", || Err("refused")), Err("refused"));
        assert!(
            CACHE
                .get_or_make(&"b", || Ok::<_, ()>("made".to_owned()))
                .is_ok()
        );
    }
}
