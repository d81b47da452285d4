//! Host-cluster objects as JSON values: server-side apply, merge patch, get, list and delete
//! by a fixed group/version/kind, counting the requests made.
//!
//! Resources keep their own kind lists and hand a [`Gvk`] to every call; nothing here asks
//! the API server for discovery, so a kind's API path is decided by the caller alone.

use std::{
    fmt,
    sync::{
        Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
};

use kube::{
    Api,
    api::{
        ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
    },
};
use serde_json::Value as Json;

use super::{
    FIELD_MANAGER,
    ownership::{self, Conflict},
};

/// A kind of object and where its API lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gvk {
    /// API group; empty for the core group.
    pub group: &'static str,
    /// API version, e.g. `v1`.
    pub version: &'static str,
    /// Kind, e.g. `StatefulSet`.
    pub kind: &'static str,
    /// Resource name in the URL, e.g. `statefulsets`.
    pub plural: &'static str,
}

impl Gvk {
    /// The kind `kind` of `group/version`, served at `plural`.
    pub const fn new(
        group: &'static str,
        version: &'static str,
        kind: &'static str,
        plural: &'static str,
    ) -> Gvk {
        Gvk {
            group,
            version,
            kind,
            plural,
        }
    }

    fn api_resource(&self) -> ApiResource {
        let gvk = GroupVersionKind::gvk(self.group, self.version, self.kind);
        ApiResource::from_gvk_with_plural(&gvk, self.plural)
    }
}

/// Why an object call failed.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    /// The API server refused or the connection failed.
    #[error("failed to {what}: {}", explain(source))]
    Call {
        /// The operation, e.g. `apply StatefulSet a in vc-a`.
        what: String,
        /// kube's error (status code and the server's message).
        #[source]
        source: Box<kube::Error>,
    },
    /// An answer did not decode.
    #[error("failed to decode {what}: {source}")]
    Decode {
        /// What was being decoded.
        what: String,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// The turn on a Lease could not be taken.
    #[error("{0}")]
    Lease(#[source] super::lease::LeaseError),
    /// A failure outside the API: an object of a kind the caller does not write, or one
    /// reported by a test double.
    #[error("{0}")]
    Other(String),
}

impl ObjectError {
    /// Wraps a failed call to the API server as the failure to do `what`.
    pub fn call(what: impl Into<String>) -> impl FnOnce(kube::Error) -> ObjectError {
        let what = what.into();
        move |source| ObjectError::Call {
            what,
            source: Box::new(source),
        }
    }

    /// Whether the API server answered that the object (or its namespace) does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, ObjectError::Call { source, .. } if status_code(source) == Some(404))
    }

    /// Whether the API server answered that gpufleet's credentials may not do this.
    pub fn is_forbidden(&self) -> bool {
        matches!(self, ObjectError::Call { source, .. } if status_code(source) == Some(403))
    }

    /// The cause alone, without `what`, for callers that name the operation their own way.
    pub fn cause(&self) -> String {
        match self {
            ObjectError::Call { source, .. } => explain(source),
            ObjectError::Decode { source, .. } => source.to_string(),
            ObjectError::Lease(e) => e.to_string(),
            ObjectError::Other(message) => message.clone(),
        }
    }
}

/// A kube error in words: the API server's refusal as its status code, reason and message
/// (kube's own text appends a Debug dump of the status), any other failure as the chain of
/// its causes (kube's says only `ServiceError: client error (Connect)` and keeps the cause,
/// such as "Connection refused", in its sources).
pub(super) fn explain(e: &kube::Error) -> String {
    if let kube::Error::Api(s) = e {
        let reason = if s.reason.is_empty() {
            String::new()
        } else {
            format!(" {}", s.reason)
        };
        return format!(
            "the API server answered HTTP {}{reason}: {}",
            s.code, s.message
        );
    }
    // kube's "ServiceError: " prefix says nothing a user acts on; its cause does.
    match e {
        kube::Error::Service(inner) => {
            crate::backends::error_chain(inner.to_string(), inner.source())
        }
        _ => crate::backends::error_chain(e.to_string(), std::error::Error::source(e)),
    }
}

/// The HTTP status of an API server's refusal; `None` for transport and client errors.
pub fn status_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// One object as messages name it: `Kind name in namespace`, or `Kind name` when
/// cluster-scoped.
pub fn describe(kind: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{kind} {name} in {ns}"),
        None => format!("{kind} {name}"),
    }
}

/// Object calls on a `kube::Client`, counting every request for the operation's debug log.
pub struct DynamicClient {
    client: kube::Client,
    calls: AtomicU64,
    left: Mutex<Vec<String>>,
}

impl fmt::Debug for DynamicClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynamicClient")
            .field("calls", &self.calls())
            .finish_non_exhaustive()
    }
}

impl DynamicClient {
    /// Calls over `client`.
    pub fn new(client: kube::Client) -> DynamicClient {
        DynamicClient {
            client,
            calls: AtomicU64::new(0),
            left: Mutex::new(Vec::new()),
        }
    }

    /// The client, for typed calls this module does not cover; count each with
    /// [`Self::count`].
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// Counts one request made outside this client's methods.
    pub fn count(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests made so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// The API of `kind` in `namespace` (all namespaces, or cluster-scoped, for `None`),
    /// for one request.
    fn api(&self, kind: &Gvk, namespace: Option<&str>) -> Api<DynamicObject> {
        self.count();
        let ar = kind.api_resource();
        match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &ar),
            None => Api::all_with(self.client.clone(), &ar),
        }
    }

    /// Server-side applies `object` as `kind` under [`FIELD_MANAGER`], so an object left by
    /// an interrupted apply is adopted, not duplicated. The name and namespace are the
    /// object's own.
    ///
    /// The first apply is not forced. When another manager owns some of its fields, the
    /// fields [`ownership`] leaves to their controller are taken out of the body, and the
    /// rest (hand edits, and what gpufleet holds) are taken back with a forced apply. The
    /// fields left are recorded for [`Self::take_left`].
    pub async fn apply(&self, kind: &Gvk, object: &Json) -> Result<(), ObjectError> {
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let namespace = object["metadata"]["namespace"].as_str();
        let target = describe(kind.kind, namespace, name);
        let what = format!("apply {target}");
        tracing::debug!(target: "gpufleet::kube", "{what}");
        let api = self.api(kind, namespace);
        let gentle = PatchParams::apply(FIELD_MANAGER);
        let conflicts = match api.patch(name, &gentle, &Patch::Apply(object)).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 => {
                let conflicts = Conflict::all_in(&status);
                if conflicts.is_empty() {
                    return Err(ObjectError::call(what)(kube::Error::Api(status)));
                }
                conflicts
            }
            Err(e) => return Err(ObjectError::call(what)(e)),
        };
        let mut body = object.clone();
        let mut left = Vec::new();
        for c in &conflicts {
            if ownership::leave_out(kind.kind, &mut body, c) {
                let field = format!(
                    "{} of {target} (kept by {:?})",
                    c.field.trim_start_matches('.'),
                    c.manager
                );
                tracing::warn!(target: "gpufleet::kube", "left to its controller: {field}");
                left.push(field);
            } else {
                tracing::info!(
                    target: "gpufleet::kube",
                    "taking back {} of {target} from {:?}",
                    c.field, c.manager
                );
            }
        }
        let take_back = left.len() < conflicts.len();
        let params = if take_back { gentle.force() } else { gentle };
        self.api(kind, namespace)
            .patch(name, &params, &Patch::Apply(&body))
            .await
            .map_err(ObjectError::call(what))?;
        self.left
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(left);
        Ok(())
    }

    /// The fields left to other controllers by the applies since the last call, one
    /// sentence each (field, object, manager).
    pub fn take_left(&self) -> Vec<String> {
        std::mem::take(&mut *self.left.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Reads one object; `None` when it does not exist.
    pub async fn get(
        &self,
        kind: &Gvk,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Json>, ObjectError> {
        let what = format!("read {}", describe(kind.kind, namespace, name));
        let found = self
            .api(kind, namespace)
            .get_opt(name)
            .await
            .map_err(ObjectError::call(what.clone()))?;
        found.map(|o| to_json(&o, &what)).transpose()
    }

    /// Lists the objects of `kind` matching a label selector; `what` names the list in
    /// errors (each resource words it its own way).
    pub async fn list(
        &self,
        kind: &Gvk,
        namespace: Option<&str>,
        selector: &str,
        what: String,
    ) -> Result<Vec<Json>, ObjectError> {
        let list = self
            .api(kind, namespace)
            .list(&ListParams::default().labels(selector))
            .await
            .map_err(ObjectError::call(what.clone()))?;
        list.items.iter().map(|o| to_json(o, &what)).collect()
    }

    /// JSON merge-patches one object (RFC 7386: `null` removes a field). Unlike
    /// [`Self::apply`] it can remove fields another field manager owns.
    pub async fn merge_patch(
        &self,
        kind: &Gvk,
        namespace: Option<&str>,
        name: &str,
        patch: &Json,
    ) -> Result<(), ObjectError> {
        let what = format!("patch {}", describe(kind.kind, namespace, name));
        tracing::debug!(target: "gpufleet::kube", "{what}");
        self.api(kind, namespace)
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map(|_| ())
            .map_err(ObjectError::call(what))
    }

    /// Deletes one object with `params` (the caller picks the propagation policy); a
    /// missing object is not an error, since gone is what the caller wants.
    pub async fn delete(
        &self,
        kind: &Gvk,
        namespace: Option<&str>,
        name: &str,
        params: &DeleteParams,
    ) -> Result<(), ObjectError> {
        let what = format!("delete {}", describe(kind.kind, namespace, name));
        tracing::debug!(target: "gpufleet::kube", "{what}");
        match self.api(kind, namespace).delete(name, params).await {
            Ok(_) => Ok(()),
            Err(e) if status_code(&e) == Some(404) => Ok(()),
            Err(e) => Err(ObjectError::call(what)(e)),
        }
    }
}

fn to_json(o: &DynamicObject, what: &str) -> Result<Json, ObjectError> {
    serde_json::to_value(o).map_err(|source| ObjectError::Decode {
        what: what.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_say_what_happened_without_a_debug_dump() {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure",
            "code": 401,
            "reason": "Unauthorized",
            "message": "Unauthorized",
        }))
        .expect("a Status");
        let unauthorized = kube::Error::Api(Box::new(status));
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused");
        let transport = kube::Error::ReadEvents(io);
        for (e, says) in [
            (&unauthorized, "HTTP 401 Unauthorized: Unauthorized"),
            (&transport, "Connection refused"),
        ] {
            let text = ObjectError::call("get Namespace vc-a")(clone_of(e)).to_string();
            assert!(text.starts_with("failed to get Namespace vc-a: "), "{text}");
            assert!(text.contains(says), "{text}");
            assert!(!text.contains("Status {"), "a Debug dump: {text}");
        }
    }

    /// A call to an API server nobody listens on says where it went and why it failed.
    #[tokio::test]
    async fn an_unreachable_api_server_is_named_with_the_cause() {
        // A port just freed: nothing listens on it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let server = format!("https://127.0.0.1:{port}");
        let config = kube::Config::new(server.parse().expect("a URL"));
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = super::super::client_naming_server(config).expect("a client");
        let e = client
            .apiserver_version()
            .await
            .expect_err("nothing listens there");
        let text = ObjectError::call("read the server version")(e).to_string();
        assert!(
            text.starts_with(&format!(
                "failed to read the server version: cannot reach the API server at {server}: "
            )),
            "{text}"
        );
        assert!(text.to_lowercase().contains("refused"), "{text}");
        assert!(!text.contains("ServiceError"), "{text}");
    }

    fn clone_of(e: &kube::Error) -> kube::Error {
        match e {
            kube::Error::Api(s) => kube::Error::Api(s.clone()),
            kube::Error::ReadEvents(io) => {
                kube::Error::ReadEvents(std::io::Error::new(io.kind(), io.to_string()))
            }
            _ => unreachable!("only the two errors above"),
        }
    }

    fn refused(code: u16) -> ObjectError {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure",
            "code": code,
            "reason": "NotFound",
            "message": "namespaces \"vc-a\" not found",
        }))
        .expect("status");
        ObjectError::call("delete Job a in vc-a")(kube::Error::Api(Box::new(status)))
    }

    #[test]
    fn only_an_api_404_is_not_found() {
        assert!(refused(404).is_not_found());
        assert!(!refused(403).is_not_found());
        assert!(!ObjectError::Other("not found".to_owned()).is_not_found());
    }
}
