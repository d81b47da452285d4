//! `gpufleet_gpu_node_pool_drain`: cordon a pool's nodes (or some of them) and move their
//! pods off, as `kubectl drain` does, for maintenance; or make them schedulable again after.
//!
//! Only nodes that carry the pool's label are touched, so an action cannot reach another
//! tenant's nodes. Pods leave through the Eviction API, so PodDisruptionBudgets apply: a
//! budget that refuses an eviction is asked again until the timeout. DaemonSet and mirror
//! pods stay, as with `kubectl drain`. The cordon is recorded on the node the way the pool
//! records its own, so the pool's release later gives the node back as it found it.

use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use crate::{
    backends::kube::{
        POOL,
        host::nodes::{HostNode, HostNodes, PodRef},
    },
    context::Context,
    diag::{Diagnostic, Diagnostics},
    kinds::{ActionKind, ProgressSink},
    path::AttrPath,
    resources::{
        benchmark::model::PoolRef,
        gpu_node_pool::{
            Backend, FromSettings, claim,
            node_config::{cordon_write, uncordon_write},
        },
    },
    schema::{Attribute, Block, Schema},
    tenancy::pool_label,
    timeouts,
    validate::{OneOf, PositiveDuration},
    value::{Type, Value},
};

/// The action type name.
pub const TYPE_NAME: &str = "gpufleet_gpu_node_pool_drain";

/// The summary of this action's errors.
const FAILED: &str = "Node Pool Drain Failed";

/// How often evictions are asked again while pods are left.
const POLL: Duration = Duration::from_secs(2);

/// The default of `timeout`.
const DEFAULT_TIMEOUT: &str = "10m";

/// The `gpufleet_gpu_node_pool_drain` action over a node pool [`Backend`]. The registry uses
/// `GpuNodePoolDrain(FromSettings)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct GpuNodePoolDrain<B = FromSettings>(pub B);

fn action_schema() -> Schema {
    Schema::new(
        Block::new(
            "Cordons a node pool's nodes and evicts their pods, honouring PodDisruptionBudgets, \
             for maintenance; `operation = \"uncordon\"` makes them schedulable again. Only \
             nodes the pool holds are touched. The action changes no Terraform state: the \
             pool keeps its nodes, cordoned or not.",
        )
        .attr(Attribute::required("node_pool_id", Type::String).describe(
            "The pool: a `gpufleet_gpu_node_pool`'s `id` \
                 (`<namespace>/<virtual cluster>/<pool>`).",
        ))
        .attr(
            Attribute::optional("nodes", Type::set(Type::String)).describe(
                "Only these of the pool's nodes (host node names, as the pool's `nodes` lists \
             them); all of them when left out. A node the pool does not hold is refused.",
            ),
        )
        .attr(
            Attribute::optional("operation", Type::String)
                .default("drain")
                .validate(OneOf::new(&["drain", "uncordon"]))
                .describe(
                    "`drain`: cordon, then evict every pod but DaemonSet and mirror pods \
                     until none is left. `uncordon`: lift the cordon a drain left.",
                ),
        )
        .attr(
            Attribute::optional("timeout", Type::String)
                .default(DEFAULT_TIMEOUT)
                .validate(PositiveDuration::new())
                .describe(
                    "How long a drain may wait for its pods to leave. Past it the action \
                     fails, naming the pods left; the nodes stay cordoned.",
                ),
        ),
    )
}

/// The pool `config` names, or the diagnostic on `node_pool_id`.
fn pool_of(config: &Value) -> Result<Option<PoolRef>, Diagnostics> {
    let Some(id) = config.get("node_pool_id").as_str() else {
        return Ok(None);
    };
    match PoolRef::parse(id) {
        Some(p) => Ok(Some(p)),
        None => Err(Diagnostic::error(
            "Invalid Node Pool ID",
            format!("node_pool_id: {id:?} is not a node pool id (`<namespace>/<virtual cluster>/<pool>`)."),
        )
        .with_path(AttrPath::attr("node_pool_id"))
        .into()),
    }
}

/// The pool's nodes the action is for: those `nodes` names, or all. A named node the pool
/// does not hold is an error on `nodes`; so is a pool that holds none.
async fn selected(
    api: &dyn HostNodes,
    pool: &PoolRef,
    label: &str,
    config: &Value,
) -> Result<Vec<HostNode>, Diagnostics> {
    let held = api
        .list_nodes(&format!("{POOL}={label}"))
        .await
        .map_err(|e| Diagnostics::from(Diagnostic::error(FAILED, format!("{TYPE_NAME}: {e}."))))?;
    let Some(wanted) = config.get("nodes").as_seq() else {
        if held.is_empty() {
            return Err(Diagnostic::error(
                "Node Pool Holds No Nodes",
                format!(
                    "node_pool_id: pool {} holds no nodes on the host cluster.",
                    pool.id()
                ),
            )
            .with_path(AttrPath::attr("node_pool_id"))
            .into());
        }
        return Ok(held);
    };
    let wanted: Vec<&str> = wanted.iter().filter_map(Value::as_str).collect();
    let foreign: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|w| !held.iter().any(|n| n.name == *w))
        .collect();
    if !foreign.is_empty() {
        return Err(Diagnostic::error(
            "Node Not In Pool",
            format!(
                "nodes: pool {} does not hold {}; it holds {}.",
                pool.id(),
                foreign.join(", "),
                if held.is_empty() {
                    "no nodes".to_owned()
                } else {
                    held.iter()
                        .map(|n| n.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ),
        )
        .with_path(AttrPath::attr("nodes"))
        .into());
    }
    Ok(held
        .into_iter()
        .filter(|n| wanted.contains(&n.name.as_str()))
        .collect())
}

/// The diagnostic of a host call that failed: what was being done, and the host's error.
fn host_failed(step: &str, e: impl std::fmt::Display) -> Diagnostics {
    Diagnostic::error(FAILED, format!("{TYPE_NAME}: {step}: {e}.")).into()
}

/// Cordons `nodes`, then evicts their pods until none is left or `timeout` passes.
async fn drain(
    api: &dyn HostNodes,
    ctx: &Context,
    label: &str,
    nodes: &[HostNode],
    timeout: Duration,
    progress: ProgressSink<'_>,
) -> Diagnostics {
    for n in nodes {
        if let Err(e) = claim::write_held(api, n, label, cordon_write).await {
            return host_failed(&format!("cordoning node {}", n.name), e);
        }
    }
    let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    progress(format!("cordoned {}", names.join(", ")));
    let started = Instant::now();
    let mut reported = None;
    loop {
        let mut left: Vec<PodRef> = Vec::new();
        for n in &names {
            match api.pods_on(n).await {
                Ok(pods) => left.extend(pods.into_iter().filter(|p| !p.stays)),
                Err(e) => return host_failed(&format!("listing the pods on {n}"), e),
            }
        }
        if left.is_empty() {
            progress(format!(
                "drained {} node(s) in {}s",
                names.len(),
                started.elapsed().as_secs()
            ));
            return Diagnostics::new();
        }
        let mut refused = Vec::new();
        for p in &left {
            match api.evict(p).await {
                Ok(true) => {}
                Ok(false) => refused.push(format!("{}/{}", p.namespace, p.name)),
                Err(e) => return host_failed(&format!("evicting {}/{}", p.namespace, p.name), e),
            }
        }
        if reported != Some(left.len()) {
            reported = Some(left.len());
            progress(if refused.is_empty() {
                format!("evicting {} pod(s)", left.len())
            } else {
                format!(
                    "evicting {} pod(s); a disruption budget holds {} for now",
                    left.len(),
                    refused.join(", ")
                )
            });
        }
        if started.elapsed() >= timeout {
            let pods: Vec<String> = left
                .iter()
                .map(|p| format!("{}/{}", p.namespace, p.name))
                .collect();
            let why = if refused.is_empty() {
                String::new()
            } else {
                format!(
                    " PodDisruptionBudgets refused the eviction of {}.",
                    refused.join(", ")
                )
            };
            return Diagnostic::error(
                FAILED,
                format!(
                    "{TYPE_NAME}: {} pod(s) were still on {} after {}: {}.{why} The nodes stay \
                     cordoned: run the action again, raise timeout, or run it with \
                     operation = \"uncordon\".",
                    pods.len(),
                    names.join(", "),
                    timeouts::render(timeout),
                    pods.join(", ")
                ),
            )
            .into();
        }
        if ctx
            .cancel
            .run_until_cancelled(tokio::time::sleep(POLL))
            .await
            .is_none()
        {
            return Diagnostic::error(
                FAILED,
                format!(
                    "{TYPE_NAME}: stopped by Terraform with {} pod(s) left; {} stay cordoned.",
                    left.len(),
                    names.join(", ")
                ),
            )
            .into();
        }
    }
}

/// Lifts the cordon of `nodes`.
async fn uncordon(
    api: &dyn HostNodes,
    label: &str,
    nodes: &[HostNode],
    progress: ProgressSink<'_>,
) -> Diagnostics {
    for n in nodes {
        if let Err(e) = claim::write_held(api, n, label, uncordon_write).await {
            return host_failed(&format!("uncordoning node {}", n.name), e);
        }
        progress(format!("node {} is schedulable", n.name));
    }
    Diagnostics::new()
}

#[async_trait]
impl<B: Backend> ActionKind for GpuNodePoolDrain<B> {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        action_schema()
    }

    fn validate(&self, config: &Value) -> Diagnostics {
        pool_of(config).err().unwrap_or_default()
    }

    async fn plan(&self, ctx: &Context, config: &Value) -> Diagnostics {
        let Ok(Some(pool)) = pool_of(config) else {
            return Diagnostics::new();
        };
        if config.get("nodes").is_unknown() {
            return Diagnostics::new();
        }
        let api = match self.0.connect(ctx, TYPE_NAME).await {
            Ok(api) => api,
            Err(diagnostics) => return diagnostics,
        };
        let label = pool_label(&pool.vc.name, &pool.name);
        match selected(api.as_ref(), &pool, &label, config).await {
            Ok(_) => Diagnostics::new(),
            Err(diagnostics) => diagnostics,
        }
    }

    async fn invoke(
        &self,
        ctx: &Context,
        config: Value,
        progress: ProgressSink<'_>,
    ) -> Diagnostics {
        let pool = match pool_of(&config) {
            Ok(Some(p)) => p,
            Ok(None) => return Diagnostics::new(),
            Err(diagnostics) => return diagnostics,
        };
        let api = match self.0.connect(ctx, TYPE_NAME).await {
            Ok(api) => api,
            Err(diagnostics) => return diagnostics,
        };
        let label = pool_label(&pool.vc.name, &pool.name);
        let nodes = match selected(api.as_ref(), &pool, &label, &config).await {
            Ok(n) => n,
            Err(diagnostics) => return diagnostics,
        };
        if config.get("operation").as_str() == Some("uncordon") {
            return uncordon(api.as_ref(), &label, &nodes, progress).await;
        }
        let timeout = config
            .get("timeout")
            .as_str()
            .and_then(|t| PositiveDuration::parse(t).ok())
            .unwrap_or(Duration::from_secs(600));
        drain(api.as_ref(), ctx, &label, &nodes, timeout, progress).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex, PoisonError};

    use super::*;
    use crate::backends::kube::host::memory::MemoryHost;

    /// A host with three nodes: two held by pool `train` of virtual cluster `team-a`, one by
    /// another tenant's pool.
    fn host() -> Arc<MemoryHost> {
        let h = MemoryHost::new();
        h.add_nodes("NVIDIA-H100-80GB-HBM3", "a1", 3, 8);
        h.claim_behind_the_back("gpu-a1-00", "team-a.train");
        h.claim_behind_the_back("gpu-a1-01", "team-a.train");
        h.claim_behind_the_back("gpu-a1-02", "team-b.train");
        h
    }

    fn config(extra: &[(&str, Value)]) -> Value {
        let mut attrs = vec![
            ("node_pool_id", Value::string("vc-team-a/team-a/train")),
            ("nodes", Value::Null),
            ("operation", Value::string("drain")),
            ("timeout", Value::string("1m")),
        ];
        for (k, v) in extra {
            attrs.retain(|(a, _)| a != k);
            attrs.push((k, v.clone()));
        }
        Value::object(attrs)
    }

    async fn invoke(h: &Arc<MemoryHost>, config: Value) -> (Diagnostics, Vec<String>) {
        let said = Mutex::new(Vec::new());
        let sink = |m: String| said.lock().unwrap_or_else(PoisonError::into_inner).push(m);
        let d = GpuNodePoolDrain(Arc::clone(h))
            .invoke(&Context::default(), config, &sink)
            .await;
        let said = said.into_inner().unwrap_or_else(PoisonError::into_inner);
        (d, said)
    }

    fn cordoned(h: &MemoryHost, node: &str) -> bool {
        h.node(node).is_some_and(|n| n.unschedulable)
    }

    #[tokio::test]
    async fn a_drain_cordons_the_pools_nodes_and_evicts_all_but_daemon_pods() {
        let h = host();
        h.add_pod("gpu-a1-00", "vc-team-a", "train-0");
        h.add_daemon_pod("gpu-a1-00", "gpu-operator", "device-plugin");
        h.add_pod("gpu-a1-02", "vc-team-b", "other-tenant");
        let (d, said) = invoke(&h, config(&[])).await;
        assert!(d.is_empty(), "{d:?}");
        assert!(cordoned(&h, "gpu-a1-00") && cordoned(&h, "gpu-a1-01"));
        assert_eq!(h.pods_now("gpu-a1-00"), ["gpu-operator/device-plugin"]);
        assert!(
            !cordoned(&h, "gpu-a1-02"),
            "another tenant's node is untouched"
        );
        assert_eq!(h.pods_now("gpu-a1-02"), ["vc-team-b/other-tenant"]);
        assert_eq!(
            said.first().map(String::as_str),
            Some("cordoned gpu-a1-00, gpu-a1-01")
        );
        assert!(
            said.last()
                .is_some_and(|m| m.starts_with("drained 2 node(s)")),
            "{said:?}"
        );

        let (d, said) = invoke(&h, config(&[("operation", Value::string("uncordon"))])).await;
        assert!(d.is_empty(), "{d:?}");
        assert!(!cordoned(&h, "gpu-a1-00") && !cordoned(&h, "gpu-a1-01"));
        assert_eq!(said.len(), 2, "{said:?}");
    }

    #[tokio::test]
    async fn named_nodes_must_be_the_pools() {
        let h = host();
        let only = Value::Set(vec![Value::string("gpu-a1-01")]);
        let (d, _) = invoke(&h, config(&[("nodes", only)])).await;
        assert!(d.is_empty(), "{d:?}");
        assert!(cordoned(&h, "gpu-a1-01") && !cordoned(&h, "gpu-a1-00"));

        let foreign = Value::Set(vec![Value::string("gpu-a1-02")]);
        let refused = GpuNodePoolDrain(Arc::clone(&h))
            .plan(&Context::default(), &config(&[("nodes", foreign)]))
            .await;
        let e = refused.iter().next().expect("a refusal");
        assert_eq!(e.path, Some(AttrPath::attr("nodes")));
        assert!(e.detail.contains("does not hold gpu-a1-02"), "{}", e.detail);
        assert!(!cordoned(&h, "gpu-a1-02"));
    }

    #[test]
    fn a_malformed_pool_id_is_refused_on_its_attribute() {
        let d =
            GpuNodePoolDrain(host()).validate(&config(&[("node_pool_id", Value::string("train"))]));
        let e = d.iter().next().expect("a diagnostic");
        assert_eq!(e.path, Some(AttrPath::attr("node_pool_id")));
    }
}
