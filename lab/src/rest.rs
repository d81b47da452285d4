//! A small synchronous client of the Kubernetes REST API, for tests and tools that want to look
//! at or poke a cluster the way `kubectl get/patch/create` would, without needing `kubectl`.
//!
//! Paths are the API's own (`/api/v1/namespaces/x`, `/apis/apps/v1/statefulsets`), bodies and
//! answers are JSON, and a failure carries the HTTP code (404 for not found) and the server's
//! message.

use std::path::Path;

use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::Value;

/// What the API server refused, or why it could not be asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("HTTP {code}: {message}")]
pub struct RestError {
    /// The HTTP status (0 when the request never got an answer).
    pub code: u16,
    /// The server's message, or the transport error.
    pub message: String,
}

impl RestError {
    /// Whether the object does not exist.
    pub fn is_not_found(&self) -> bool {
        self.code == 404
    }
}

/// A blocking client of one cluster.
pub struct KubeRest {
    client: kube::Client,
    runtime: tokio::runtime::Runtime,
}

impl std::fmt::Debug for KubeRest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KubeRest")
    }
}

impl KubeRest {
    /// A client for the current context of the kubeconfig at `path`.
    ///
    /// # Errors
    /// When the file cannot be read or describes no usable cluster.
    pub fn from_kubeconfig(path: &Path) -> Result<KubeRest, RestError> {
        crate::crypto::install_crypto_provider();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| transport(&e))?;
        let client = runtime.block_on(async {
            let kubeconfig = Kubeconfig::read_from(path).map_err(|e| transport(&e))?;
            let config =
                kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                    .await
                    .map_err(|e| transport(&e))?;
            kube::Client::try_from(config).map_err(|e| transport(&e))
        })?;
        Ok(KubeRest { client, runtime })
    }

    /// `GET path`.
    ///
    /// # Errors
    /// When the server refuses (404 when the object does not exist).
    pub fn get(&self, path: &str) -> Result<Value, RestError> {
        self.send(http::Method::GET, path, None, None)
    }

    /// The `items` of a list at `path` (empty when the answer has none).
    ///
    /// # Errors
    /// When the server refuses.
    pub fn list(&self, path: &str) -> Result<Vec<Value>, RestError> {
        Ok(self.get(path)?["items"]
            .as_array()
            .cloned()
            .unwrap_or_default())
    }

    /// What gpufleet may change on each node, by node name: labels, taints and cordon, as
    /// one comparable string. Tests take it before and after to show a node left as found.
    ///
    /// # Errors
    /// When the nodes cannot be listed.
    pub fn node_marks(&self) -> Result<std::collections::BTreeMap<String, String>, RestError> {
        Ok(self
            .list("/api/v1/nodes")?
            .into_iter()
            .map(|n| {
                let name = n["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let marks = format!(
                    "{} {} {}",
                    n["metadata"]["labels"], n["spec"]["taints"], n["spec"]["unschedulable"]
                );
                (name, marks)
            })
            .collect())
    }

    /// `POST path` with a JSON body: creates an object.
    ///
    /// # Errors
    /// When the server refuses (409 when it exists).
    pub fn create(&self, path: &str, body: &Value) -> Result<Value, RestError> {
        self.send(http::Method::POST, path, Some(body), None)
    }

    /// `PATCH path` with a JSON merge patch.
    ///
    /// # Errors
    /// When the server refuses.
    pub fn merge_patch(&self, path: &str, patch: &Value) -> Result<Value, RestError> {
        self.send(
            http::Method::PATCH,
            path,
            Some(patch),
            Some("application/merge-patch+json"),
        )
    }

    /// `PATCH path` as a server-side apply by field manager `manager`, forced, as a
    /// controller that owns the fields it applies would write them.
    ///
    /// # Errors
    /// When the server refuses.
    pub fn apply_as(&self, path: &str, manager: &str, object: &Value) -> Result<Value, RestError> {
        self.send(
            http::Method::PATCH,
            &format!("{path}?fieldManager={manager}&force=true"),
            Some(object),
            Some("application/apply-patch+yaml"),
        )
    }

    /// `DELETE path`.
    ///
    /// # Errors
    /// When the server refuses (404 when it does not exist).
    pub fn delete(&self, path: &str) -> Result<Value, RestError> {
        self.send(http::Method::DELETE, path, None, None)
    }

    fn send(
        &self,
        method: http::Method,
        path: &str,
        body: Option<&Value>,
        content_type: Option<&str>,
    ) -> Result<Value, RestError> {
        let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        let request = http::Request::builder()
            .method(method)
            .uri(path)
            .header(
                http::header::CONTENT_TYPE,
                content_type.unwrap_or("application/json"),
            )
            .body(bytes)
            .map_err(|e| transport(&e))?;
        self.runtime
            .block_on(self.client.request::<Value>(request))
            .map_err(|e| match e {
                kube::Error::Api(status) => RestError {
                    code: status.code,
                    message: status.message,
                },
                other => transport(&other),
            })
    }
}

fn transport(e: &dyn std::fmt::Display) -> RestError {
    RestError {
        code: 0,
        message: e.to_string(),
    }
}
