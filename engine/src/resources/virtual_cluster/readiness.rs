//! Waiting for a virtual control plane the way `vcluster connect` does: the newest pod
//! labelled `app=vcluster,release=<name>` must be Ready (a crash loop or an image that cannot
//! be pulled fails at once), then Secret `vc-<name>` key `config` holds its kubeconfig, and
//! the control plane has the address `expose` asks for ([`expose`]: a node port
//! on the pod's node, or a load balancer's address, which may take a while to come).
//!
//! [`observe`] takes one look; [`wait_ready`] repeats it every second until the control plane
//! is ready, something fails, the deadline passes or Terraform asks to stop. [`wait_stopped`]
//! waits the same way for a paused control plane's pods to be gone. The caller supplies the
//! deadline (the resource's `create` or `update` timeout).

use std::time::Duration;

use base64::Engine as _;
use serde_json::Value as Json;
use tokio::time::Instant;

use super::{
    expose::{self, Expose},
    objects::Names,
    unwritten::{self, GRACE, Overdue},
};
use crate::{
    backends::kube::{
        ObjectError,
        host::{HostObjects, ObjectKind},
    },
    context::Context,
};

/// How often the control plane is looked at, as vCluster's CLI does.
const POLL: Duration = Duration::from_secs(1);

/// Container states that will not get better by waiting (after vCluster's `HasPodProblem`).
const CRITICAL_REASONS: &[&str] = &[
    "CrashLoopBackOff",
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "PreCreateHookError",
    "PostStartHookError",
];

/// Restarts after which a crash-looping container is given up on rather than waited for.
const CRASH_LOOP_RESTARTS: u64 = 3;

/// How to reach a virtual cluster: Secret `vc-<name>`, pointed at the address `expose`
/// gives.
#[derive(Clone, PartialEq, Eq)]
pub struct Access {
    /// The whole kubeconfig (sensitive), its server replaced by `endpoint`.
    pub kubeconfig: String,
    /// The API server URL.
    pub endpoint: Option<String>,
    /// The CA certificate, PEM.
    pub ca: Option<String>,
    /// The admin client certificate, PEM.
    pub client_certificate: Option<String>,
    /// The admin client key, PEM (sensitive).
    pub client_key: Option<String>,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the kubeconfig or the key: they are an admin's credentials.
        f.debug_struct("Access")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl Access {
    /// The same credentials for the API server at `server`: `endpoint` and every cluster of
    /// the kubeconfig. The kubeconfig is left as the syncer wrote it when the server is
    /// already its own (or it cannot be read as one).
    pub fn at(mut self, server: Option<String>) -> Access {
        if let Some(url) = &server
            && self.endpoint.as_ref() != Some(url)
            && let Some(k) = expose::with_server(&self.kubeconfig, url)
        {
            self.kubeconfig = k;
        }
        self.endpoint = server;
        self
    }
}

/// What one look at the control plane found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// Ready, with its kubeconfig.
    Ready(Access),
    /// Scaled to zero; the kubeconfig, if the control plane ever wrote one.
    Paused(Option<Access>),
    /// Not ready yet, and why.
    Waiting(String),
    /// A problem waiting will not fix.
    Failed(String),
}

impl Readiness {
    /// Why a control plane that should run is not ready, if it is not.
    pub fn not_ready(&self) -> Option<&str> {
        match self {
            Readiness::Waiting(why) | Readiness::Failed(why) => Some(why),
            Readiness::Ready(_) | Readiness::Paused(_) => None,
        }
    }
}

/// Why waiting for the control plane (to be ready, or to stop) did not finish.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    /// A host call failed.
    #[error(transparent)]
    Host(#[from] ObjectError),
    /// The control plane cannot start.
    #[error("the control plane cannot start: {0}")]
    Failed(String),
    /// The deadline passed.
    #[error("gave up after {}: {last}", crate::timeouts::render(*.waited))]
    TimedOut {
        /// How long it waited.
        waited: Duration,
        /// The last reason it was not ready.
        last: String,
    },
    /// Terraform asked the provider to stop.
    #[error("stopped because Terraform asked the provider to stop")]
    Cancelled,
}

fn i64_at(v: &Json, ptr: &str) -> Option<i64> {
    v.pointer(ptr).and_then(Json::as_i64)
}

fn base64_text(data: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .ok()?;
    String::from_utf8(bytes).ok()
}

/// Decodes Secret `vc-<name>`: key `config` (the kubeconfig), and the PEM keys
/// `certificate-authority`, `client-certificate` and `client-key`, falling back to the data
/// inside the kubeconfig (its first cluster and user).
pub fn access_of(secret: &Json) -> Option<Access> {
    let key = |k: &str| base64_text(secret.pointer(&format!("/data/{k}"))?.as_str()?);
    let kubeconfig = key("config")?;
    let parsed: Option<Json> = serde_saphyr::from_str(&kubeconfig).ok();
    let inner = |ptr: &str| {
        parsed
            .as_ref()
            .and_then(|k| k.pointer(ptr))
            .and_then(Json::as_str)
    };
    let endpoint = inner("/clusters/0/cluster/server").map(str::to_owned);
    let ca = key("certificate-authority")
        .or_else(|| base64_text(inner("/clusters/0/cluster/certificate-authority-data")?));
    let client_certificate = key("client-certificate")
        .or_else(|| base64_text(inner("/users/0/user/client-certificate-data")?));
    let client_key =
        key("client-key").or_else(|| base64_text(inner("/users/0/user/client-key-data")?));
    Some(Access {
        kubeconfig,
        endpoint,
        ca,
        client_certificate,
        client_key,
    })
}

/// A problem with `pod` that waiting will not fix, described.
pub fn pod_problem(pod: &Json) -> Option<String> {
    let name = pod
        .pointer("/metadata/name")
        .and_then(Json::as_str)
        .unwrap_or("?");
    if pod.pointer("/status/phase").and_then(Json::as_str) == Some("Failed") {
        return Some(format!("pod {name} failed"));
    }
    let statuses = ["/status/initContainerStatuses", "/status/containerStatuses"];
    for s in statuses.iter().filter_map(|p| pod.pointer(p)?.as_array()) {
        for c in s {
            let waiting = c.pointer("/state/waiting/reason").and_then(Json::as_str);
            let restarts = c.get("restartCount").and_then(Json::as_u64).unwrap_or(0);
            // A syncer often restarts while its API server and backing store come up, more
            // so on a busy host; vCluster's CLI waits such restarts out. Only a loop that
            // keeps crashing is given up on.
            let settling = waiting == Some("CrashLoopBackOff") && restarts < CRASH_LOOP_RESTARTS;
            if let Some(reason) = waiting.filter(|r| CRITICAL_REASONS.contains(r) && !settling) {
                let container = c["name"].as_str().unwrap_or("?");
                let message = c
                    .pointer("/state/waiting/message")
                    .and_then(Json::as_str)
                    .unwrap_or_default();
                return Some(
                    format!("pod {name} container {container}: {reason} {message}")
                        .trim_end()
                        .to_owned(),
                );
            }
        }
    }
    None
}

/// Why `pod` is not ready yet, or `None` when every container is ready and running.
fn pod_not_ready(pod: &Json) -> Option<String> {
    let name = pod
        .pointer("/metadata/name")
        .and_then(Json::as_str)
        .unwrap_or("?");
    let phase = pod
        .pointer("/status/phase")
        .and_then(Json::as_str)
        .unwrap_or("Pending");
    let containers = pod
        .pointer("/status/containerStatuses")
        .and_then(Json::as_array);
    let all_ready = containers.is_some_and(|cs| {
        !cs.is_empty()
            && cs.iter().all(|c| {
                c["ready"].as_bool() == Some(true) && c.pointer("/state/running").is_some()
            })
    });
    if phase == "Running" && all_ready {
        return None;
    }
    let condition = pod
        .pointer("/status/conditions")
        .and_then(Json::as_array)
        .and_then(|cs| {
            cs.iter()
                .find(|c| c["status"] == "False" && c["message"].is_string())
        })
        .and_then(|c| c["message"].as_str());
    Some(match condition {
        Some(m) => format!("pod {name} is {phase}: {m}"),
        None => format!("pod {name} is {phase}, not ready yet"),
    })
}

/// The newest of `pods` by creation time (names break ties), leaving out those being
/// deleted: a control plane that is shutting down (say, restarted to write its Secret again)
/// still shows Ready, but what it wrote is about to be replaced by its successor.
fn newest(pods: &[Json]) -> Option<&Json> {
    pods.iter()
        .filter(|p| p.pointer("/metadata/deletionTimestamp").is_none())
        .max_by_key(|p| {
            (
                p.pointer("/metadata/creationTimestamp")
                    .and_then(Json::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                p.pointer("/metadata/name")
                    .and_then(Json::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
}

/// The Service `<name>`, when the address depends on it.
async fn service_for(
    host: &dyn HostObjects,
    namespace: &str,
    names: &Names,
    expose: &Expose,
) -> Result<Option<Json>, ObjectError> {
    if !expose.needs_service() {
        return Ok(None);
    }
    host.get(ObjectKind::Service, Some(namespace), &names.name)
        .await
}

/// One look at the control plane of the virtual cluster `names` in `namespace`, reached as
/// `expose` says.
pub async fn observe(
    host: &dyn HostObjects,
    namespace: &str,
    names: &Names,
    expose: &Expose,
) -> Result<Readiness, ObjectError> {
    Ok(look(host, namespace, names, expose).await?.readiness)
}

/// What one look found, and the Ready pod that has not written Secret `vc-<name>` yet
/// when that is all it waits for.
struct Seen {
    readiness: Readiness,
    unwritten: Option<Json>,
}

impl From<Readiness> for Seen {
    fn from(readiness: Readiness) -> Seen {
        Seen {
            readiness,
            unwritten: None,
        }
    }
}

async fn look(
    host: &dyn HostObjects,
    namespace: &str,
    names: &Names,
    expose: &Expose,
) -> Result<Seen, ObjectError> {
    let ns = Some(namespace);
    let Some(sts) = host.get(ObjectKind::StatefulSet, ns, &names.name).await? else {
        return Ok(Readiness::Waiting(format!("StatefulSet {} does not exist", names.name)).into());
    };
    if i64_at(&sts, "/spec/replicas") == Some(0) {
        // One created paused never wrote its kubeconfig; one that reads as missing keeps
        // the credentials recorded in state.
        let secret = host
            .peek(ObjectKind::Secret, ns, &names.kubeconfig())
            .await?;
        let Some(access) = secret.as_ref().and_then(access_of) else {
            return Ok(Readiness::Paused(None).into());
        };
        // No pod runs: the address is the one it will have where that is known (a load
        // balancer's, a host's), else the syncer's.
        let service = service_for(host, namespace, names, expose).await?;
        let server = expose
            .server(
                &names.name,
                access.endpoint.as_deref(),
                service.as_ref(),
                None,
            )
            .unwrap_or_else(|_| access.endpoint.clone());
        return Ok(Readiness::Paused(Some(access.at(server))).into());
    }
    let generation = i64_at(&sts, "/metadata/generation").unwrap_or(0);
    let observed = i64_at(&sts, "/status/observedGeneration").unwrap_or(0);
    let current = sts.pointer("/status/currentRevision");
    let update = sts.pointer("/status/updateRevision");
    if observed < generation || (update.is_some() && current != update) {
        return Ok(Readiness::Waiting(format!("StatefulSet {} is rolling out", names.name)).into());
    }
    let selector = names.control_plane_pods();
    let pods = host
        .list(ObjectKind::Pod, Some(namespace), &selector)
        .await?;
    let Some(pod) = newest(&pods) else {
        return Ok(Readiness::Waiting(format!("no control-plane pod ({selector}) yet")).into());
    };
    if let Some(problem) = pod_problem(pod) {
        return Ok(Readiness::Failed(problem).into());
    }
    if let Some(why) = pod_not_ready(pod) {
        return Ok(Readiness::Waiting(why).into());
    }
    match host
        .get(ObjectKind::Secret, ns, &names.kubeconfig())
        .await?
    {
        Some(secret) => match access_of(&secret) {
            Some(access) => {
                let service = service_for(host, namespace, names, expose).await?;
                match expose.server(
                    &names.name,
                    access.endpoint.as_deref(),
                    service.as_ref(),
                    Some(pod),
                ) {
                    Ok(server) => Ok(Readiness::Ready(access.at(server)).into()),
                    Err(why) => Ok(Readiness::Waiting(why).into()),
                }
            }
            None => Ok(Readiness::Waiting(format!(
                "Secret {} has no kubeconfig under key config yet",
                names.kubeconfig()
            ))
            .into()),
        },
        None => Ok(Seen {
            readiness: Readiness::Waiting(format!(
                "the control plane has not written Secret {} yet",
                names.kubeconfig()
            )),
            unwritten: Some(pod.clone()),
        }),
    }
}

/// What one look found, while polling.
enum Look<T> {
    /// Done, with the result.
    Done(T),
    /// Not yet, and why.
    Waiting(String),
}

/// Takes a look every second until one is done or fails, `deadline` passes or Terraform asks
/// to stop (then at once). `who` names the virtual cluster in debug logs.
async fn poll<T, F, Fut>(
    ctx: &Context,
    who: &str,
    deadline: Instant,
    mut look: F,
) -> Result<T, WaitError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Look<T>, WaitError>>,
{
    let started = Instant::now();
    let mut last = String::from("not looked at yet");
    loop {
        let r = ctx
            .cancel
            .run_until_cancelled(tokio::time::timeout_at(deadline, look()))
            .await;
        match r {
            None => return Err(WaitError::Cancelled),
            Some(Err(_)) => {
                return Err(WaitError::TimedOut {
                    waited: started.elapsed(),
                    last,
                });
            }
            Some(Ok(r)) => match r? {
                Look::Done(x) => return Ok(x),
                Look::Waiting(why) => {
                    tracing::debug!(target: "gpufleet::virtual_cluster", "{who}: {why}");
                    last = why;
                }
            },
        }
        let pause = ctx
            .cancel
            .run_until_cancelled(tokio::time::sleep_until(
                (Instant::now() + POLL).min(deadline),
            ))
            .await;
        if pause.is_none() {
            return Err(WaitError::Cancelled);
        }
        if Instant::now() >= deadline {
            return Err(WaitError::TimedOut {
                waited: started.elapsed(),
                last,
            });
        }
    }
}

/// Waits until the control plane is ready and has its address (or is paused, when it is meant
/// to be), polling every second until `deadline`, and stops at once when Terraform cancels.
pub async fn wait_ready(
    host: &dyn HostObjects,
    ctx: &Context,
    namespace: &str,
    names: &Names,
    expose: &Expose,
    deadline: Instant,
) -> Result<Readiness, WaitError> {
    // Held only between awaits, so the wait stays `Send`.
    let overdue = std::sync::Mutex::new(Overdue::default());
    poll(ctx, &names.name, deadline, || async {
        let seen = look(host, namespace, names, expose).await?;
        let restart = {
            let mut o = overdue
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match &seen.unwritten {
                Some(pod) => o.due(pod, Instant::now()),
                None => {
                    o.clear();
                    false
                }
            }
        };
        if restart {
            let why = format!("Ready for {} without it", crate::timeouts::render(GRACE));
            unwritten::restart(host, namespace, names, None, &why).await?;
        }
        match seen.readiness {
            Readiness::Failed(why) => Err(WaitError::Failed(why)),
            Readiness::Waiting(why) => Ok(Look::Waiting(why)),
            done => Ok(Look::Done(done)),
        }
    })
    .await
}

/// Why StatefulSet `sts` still has pods after a scale to zero, or `None` once its controller
/// has seen the change and counts none.
fn still_running(sts: &Json, name: &str) -> Option<String> {
    let generation = i64_at(sts, "/metadata/generation").unwrap_or(0);
    let observed = i64_at(sts, "/status/observedGeneration").unwrap_or(0);
    if observed < generation {
        return Some(format!(
            "StatefulSet {name}: its controller has not seen the scale to zero yet"
        ));
    }
    // Kubernetes always writes status.replicas; no status at all means no pods were made.
    match i64_at(sts, "/status/replicas").unwrap_or(0) {
        0 => None,
        n => Some(format!("StatefulSet {name} still has {n} pod(s)")),
    }
}

/// Waits until the control plane's StatefulSet has no pods left (`status.replicas` 0), as
/// `vcluster pause` does before it deletes the synced pods, polling like [`wait_ready`].
pub async fn wait_stopped(
    host: &dyn HostObjects,
    ctx: &Context,
    namespace: &str,
    names: &Names,
    deadline: Instant,
) -> Result<(), WaitError> {
    poll(ctx, &names.name, deadline, || async {
        let sts = host
            .get(ObjectKind::StatefulSet, Some(namespace), &names.name)
            .await?;
        Ok(match sts.and_then(|s| still_running(&s, &names.name)) {
            Some(why) => Look::Waiting(why),
            None => Look::Done(()),
        })
    })
    .await
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_control_plane_being_deleted_is_not_the_one_waited_for() {
        let pod = |name: &str, created: &str, deleting: bool| {
            let mut p = json!({ "metadata": { "name": name, "creationTimestamp": created } });
            if deleting {
                p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:09Z");
            }
            p
        };
        let pods = [
            pod("a-0", "2026-01-01T00:00:05Z", true),
            pod("a-1", "2026-01-01T00:00:01Z", false),
        ];
        assert_eq!(
            newest(&pods).and_then(|p| p["metadata"]["name"].as_str()),
            Some("a-1")
        );
        assert!(
            newest(&pods[..1]).is_none(),
            "only a pod being deleted: none yet"
        );
    }

    #[test]
    fn crash_loops_are_problems_and_pending_is_not() {
        let crashing = |restarts: u64| {
            json!({
                "metadata": { "name": "a-0" },
                "status": { "phase": "Running", "containerStatuses": [{
                    "name": "syncer", "ready": false, "restartCount": restarts,
                    "state": { "waiting": { "reason": "CrashLoopBackOff", "message": "back-off 10s" } },
                }] },
            })
        };
        assert_eq!(
            pod_problem(&crashing(3)).as_deref(),
            Some("pod a-0 container syncer: CrashLoopBackOff back-off 10s")
        );
        // A restart or two while starting is waited out.
        assert_eq!(pod_problem(&crashing(1)), None);
        let pending = json!({
            "metadata": { "name": "a-0" },
            "status": { "phase": "Pending", "conditions": [{
                "type": "PodScheduled", "status": "False", "message": "0/3 nodes are available",
            }] },
        });
        assert_eq!(pod_problem(&pending), None);
        assert_eq!(
            pod_not_ready(&pending).as_deref(),
            Some("pod a-0 is Pending: 0/3 nodes are available")
        );
    }

    #[test]
    fn a_statefulset_has_stopped_when_its_controller_counts_no_pods() {
        let sts = |generation: i64, observed: i64, replicas: i64| {
            json!({
                "metadata": { "generation": generation },
                "status": { "observedGeneration": observed, "replicas": replicas },
            })
        };
        assert_eq!(still_running(&sts(2, 2, 0), "a"), None);
        assert_eq!(
            still_running(&sts(2, 2, 1), "a").as_deref(),
            Some("StatefulSet a still has 1 pod(s)")
        );
        // Zero pods counted before the controller saw the change says nothing yet.
        assert!(still_running(&sts(3, 2, 0), "a").is_some());
        assert_eq!(still_running(&json!({ "metadata": {} }), "a"), None);
    }

    #[test]
    fn access_comes_from_the_kubeconfig_secret() {
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let kubeconfig = "apiVersion: v1\nkind: Config\nclusters:\n- name: a\n  cluster:\n    server: https://127.0.0.1:40001\ncontexts: []\nusers: []\n";
        let secret = json!({ "data": {
            "config": b64(kubeconfig),
            "certificate-authority": b64("-----BEGIN CERTIFICATE-----\n"),
            "client-certificate": b64("CLIENT CERT"),
            "client-key": b64("CLIENT KEY"),
        } });
        let a = access_of(&secret).expect("access");
        assert_eq!(a.endpoint.as_deref(), Some("https://127.0.0.1:40001"));
        assert_eq!(a.ca.as_deref(), Some("-----BEGIN CERTIFICATE-----\n"));
        assert_eq!(a.client_certificate.as_deref(), Some("CLIENT CERT"));
        assert_eq!(a.client_key.as_deref(), Some("CLIENT KEY"));
        assert_eq!(a.kubeconfig, kubeconfig);
        let shown = format!("{a:?}");
        assert!(
            !shown.contains("server") && !shown.contains("CLIENT"),
            "no kubeconfig or key in Debug: {shown}"
        );
        // The same server leaves the kubeconfig as written; another one is put in it.
        assert_eq!(a.clone().at(Some("https://127.0.0.1:40001".to_owned())), a);
        let moved = a.at(Some("https://203.0.113.10:443".to_owned()));
        assert_eq!(moved.endpoint.as_deref(), Some("https://203.0.113.10:443"));
        assert!(
            moved
                .kubeconfig
                .contains("server: https://203.0.113.10:443"),
            "{}",
            moved.kubeconfig
        );
        assert!(!moved.kubeconfig.contains("40001"));
    }

    #[test]
    fn client_credentials_fall_back_to_the_kubeconfigs_user() {
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let kubeconfig = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: a\n  cluster:\n    server: \
             https://localhost:8443\n    certificate-authority-data: {}\nusers:\n- name: a\n  \
             user:\n    client-certificate-data: {}\n    client-key-data: {}\n",
            b64("CA"),
            b64("CERT"),
            b64("KEY")
        );
        let a = access_of(&json!({ "data": { "config": b64(&kubeconfig) } })).expect("access");
        assert_eq!(a.endpoint.as_deref(), Some("https://localhost:8443"));
        assert_eq!(a.ca.as_deref(), Some("CA"));
        assert_eq!(a.client_certificate.as_deref(), Some("CERT"));
        assert_eq!(a.client_key.as_deref(), Some("KEY"));
    }
}
