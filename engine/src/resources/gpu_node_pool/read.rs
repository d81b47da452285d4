//! Refresh and import: the nodes that hold the pool's label, checked against what the pool
//! wants, and a pool imported by id filled in from the cluster.

use std::collections::BTreeMap;

use tokio::time::Instant;

use super::{
    DEFAULT_TIMEOUTS, TYPE_NAME,
    apply::{list_held, namespace_setting},
    bcm as bcm_pool,
    choices::{Source, Tier},
    config::PoolConfig,
    device_plugin::{self, CONFIG_MAP},
    error::StepError,
    karpenter::NODEPOOL_LABEL,
    mig,
    model::{PoolSpec, Sharing, settings_attributes, state_of, status_for},
    node_config::{
        Desired, SETTINGS_ANNOTATION, configured, configured_on, desired, is_configured,
        is_releasing,
    },
    schema::{
        self, AUTOSCALING, DEFAULT_DRAIN_TIMEOUT, DRAIN_TIMEOUT, GPU_PRODUCT,
        ISOLATION as ISOLATION_ATTR, MAX_NODES, MIN_NODES, NODE_COUNT, PLACEMENT, SOURCE, STATUS,
    },
};
use crate::{
    apply::bounded,
    backends::{
        bcm::BcmApi,
        kube::{
            DEVICE_PLUGIN_CONFIG_LABEL, GPU_REPLICAS_LABEL, ISOLATION, MIG_CONFIG_LABEL,
            NODE_ISOLATION,
            host::nodes::{HostNode, HostNodes, NodeTaint},
        },
    },
    context::Context,
    diag::{Diagnostic, Diagnostics},
    kinds::ReadResponse,
    tenancy::{VirtualClusterRef, pool_label},
    timeouts::{Operation, Timeouts},
    value::Value,
};

/// Refresh: the nodes that hold the pool label, checked against what the pool wants.
pub(super) async fn read(
    api: &dyn HostNodes,
    bcm: Option<&dyn BcmApi>,
    ctx: &Context,
    state: &Value,
) -> ReadResponse {
    let recorded = PoolConfig::decode(state);
    let name = recorded.name.value().cloned().unwrap_or_default();
    let t = Timeouts::of_resource(state, DEFAULT_TIMEOUTS);
    let started = Instant::now();
    let mut mig_problems: Vec<mig::MigError> = Vec::new();
    let mut releasing_note: Option<String> = None;
    let result = bounded(ctx, Operation::Read, started, started + t.read, async {
        if recorded.gpu_product.is_null() {
            return read_imported(api, state, namespace_setting(&ctx.settings).as_deref()).await;
        }
        let spec = PoolSpec::from_config(&recorded)
            .map_err(|_| StepError::Conflict("the state does not describe a pool".to_owned()))?;
        if spec.source == Source::Auto {
            if api.get_node_pool(&spec.node_pool_name()).await?.is_none() {
                return Ok(Value::Null);
            }
            let launched = api
                .list_nodes(&format!("{NODEPOOL_LABEL}={}", spec.node_pool_name()))
                .await?;
            let mut s = state_of(state, &spec, &launched, status_for(&spec, launched.len()));
            if s.get(ISOLATION_ATTR).is_null() {
                let namespace = namespace_tier(api, &spec.vc).await?;
                fill_tier(&mut s, &launched, namespace);
            }
            return Ok(s);
        }
        // Nodes being let go (waiting for their MIG manager) serve the pool no more, but are
        // still its own: they count, so the next plan shows a change and its apply (or a
        // destroy) finishes releasing them.
        let (releasing, held): (Vec<HostNode>, Vec<HostNode>) = list_held(api, &spec.pool_label())
            .await?
            .into_iter()
            .partition(is_releasing);
        if !releasing.is_empty() {
            let waiting: Vec<(String, Option<String>)> = releasing
                .iter()
                .map(|n| {
                    (
                        n.name.clone(),
                        n.label(mig::MIG_CONFIG_STATE_LABEL).map(str::to_owned),
                    )
                })
                .collect();
            releasing_note = Some(format!(
                "{} {} being released and {} for the MIG manager to apply \
                 nvidia.com/mig.config={}; the next apply or destroy finishes releasing {}.",
                mig::describe_waiting(&waiting),
                if waiting.len() == 1 { "is" } else { "are" },
                if waiting.len() == 1 { "waits" } else { "wait" },
                releasing[0].label(MIG_CONFIG_LABEL).unwrap_or_default(),
                if waiting.len() == 1 { "it" } else { "them" },
            ));
        }
        // A bcm pool's servers still being wiped count as the pool's (its tenant's data is
        // on them), so the next apply or destroy finishes the wipe.
        let (bcm_held, wiping) = match (spec.source, bcm) {
            (Source::Bcm, Some(bcm)) => bcm_pool::census(bcm, &spec).await?,
            _ => (0, 0),
        };
        if held.is_empty() {
            if !releasing.is_empty() {
                let mut s = state_of(state, &spec, &releasing, "degraded");
                s.set_attr(NODE_COUNT, Value::int((releasing.len() + wiping) as i64));
                return Ok(s);
            }
            if bcm_held + wiping > 0 {
                let mut s = state_of(state, &spec, &[], "degraded");
                s.set_attr(NODE_COUNT, Value::int(wiping as i64));
                return Ok(s);
            }
            return Ok(Value::Null);
        }
        let namespace = namespace_tier(api, &spec.vc).await?;
        // Without its namespace, judge by what the nodes say.
        let tier = namespace
            .or_else(|| {
                held.iter()
                    .find_map(|n| n.label(ISOLATION).and_then(Tier::parse))
            })
            .unwrap_or(Tier::Shared);
        let want: Desired = desired(&spec, tier);
        // Nodes the MIG manager failed on are not configured: the next plan shows them.
        let mig_failed = match &spec.sharing {
            Sharing::Mig(_) => mig::failed_nodes(&held),
            _ => Vec::new(),
        };
        let mig_waiting = matches!(spec.sharing, Sharing::Mig(_))
            && held
                .iter()
                .any(|n| matches!(mig::NodeState::of(n), mig::NodeState::Waiting(_)));
        if let Sharing::Mig(c) = &spec.sharing {
            if !mig_failed.is_empty() {
                mig_problems.push(mig::MigError::Failed {
                    config: c.name.clone(),
                    nodes: mig_failed.clone(),
                });
            }
            if let Err(e) = mig::check_strategy(c, &held) {
                mig_problems.push(e);
            }
        }
        let configured = held
            .iter()
            .filter(|n| is_configured(n, &want) && !mig_failed.contains(&n.name))
            .count();
        let mut s = state_of(state, &spec, &held, "ready");
        fill_tier(&mut s, &held, namespace);
        let count = if configured == held.len() {
            held.len()
        } else {
            configured
        } + wiping
            + releasing.len();
        if spec.node_count.is_some() {
            s.set_attr(NODE_COUNT, Value::int(count as i64));
        }
        if count != spec.target() as usize || configured != held.len() || !releasing.is_empty() {
            s.set_attr(STATUS, Value::string("degraded"));
        } else if mig_waiting {
            s.set_attr(STATUS, Value::string("pending"));
        }
        Ok(s)
    })
    .await;
    match result {
        Ok(new_state) => ReadResponse {
            new_state,
            diagnostics: mig_problems
                .iter()
                .map(|e| {
                    Diagnostic::warning(
                        "GPU Node Pool MIG Not Applied",
                        format!("{TYPE_NAME} {name:?}: {e}"),
                    )
                })
                .chain(releasing_note.map(|note| {
                    Diagnostic::warning(
                        "GPU Node Pool Nodes Still Being Released",
                        format!("{TYPE_NAME} {name:?}: {note}"),
                    )
                }))
                .fold(Diagnostics::new(), |mut d, x| {
                    d.push(x);
                    d
                }),
        },
        Err(e) => ReadResponse {
            new_state: state.clone(),
            diagnostics: e
                .diagnostic(
                    "GPU Node Pool Read Failed",
                    &name,
                    "reading the pool's nodes",
                )
                .into(),
        },
    }
}

/// The tier on the virtual cluster's namespace, if it exists and carries one.
async fn namespace_tier(
    api: &dyn HostNodes,
    vc: &VirtualClusterRef,
) -> Result<Option<Tier>, StepError> {
    Ok(api
        .namespace_labels(&vc.namespace)
        .await?
        .and_then(|l| l.get(ISOLATION).and_then(|t| Tier::parse(t))))
}

/// A state without `isolation` (imported, or written before it was recorded) gets the tier
/// its nodes carry, else its namespace's: the tier the pool's nodes are configured for, which
/// the next plan compares with the virtual cluster's.
fn fill_tier(s: &mut Value, held: &[HostNode], namespace: Option<Tier>) {
    if !s.get(ISOLATION_ATTR).is_null() {
        return;
    }
    let tier = held
        .iter()
        .find_map(|n| n.label(NODE_ISOLATION).and_then(Tier::parse))
        .or(namespace);
    if let Some(t) = tier {
        s.set_attr(ISOLATION_ATTR, Value::string(t.as_str()));
    }
}

/// Fills an import skeleton (name, virtual cluster) from the cluster.
async fn read_imported(
    api: &dyn HostNodes,
    state: &Value,
    setting: Option<&str>,
) -> Result<Value, StepError> {
    let recorded = PoolConfig::decode(state);
    let name = recorded.name.value().map_or("", String::as_str);
    let vc_id = recorded
        .virtual_cluster_id
        .value()
        .map_or("", String::as_str);
    let Some(vc) = VirtualClusterRef::parse(vc_id) else {
        return Ok(Value::Null);
    };
    let label = pool_label(&vc.name, name);
    let mut s = state.clone();
    s.set_attr(DRAIN_TIMEOUT, Value::string(DEFAULT_DRAIN_TIMEOUT));
    let np_name = format!("gpufleet-{}-{name}", vc.name);
    if let Some(np) = api.get_node_pool(&np_name).await? {
        let product = np["spec"]["template"]["spec"]["requirements"][0]["values"][0]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        s.set_attr(GPU_PRODUCT, Value::string(product));
        s.set_attr(SOURCE, Value::string(Source::Auto.as_str()));
        let max = np["spec"]["limits"]["nodes"]
            .as_str()
            .and_then(|n| n.parse::<i64>().ok());
        s.set_attr(
            AUTOSCALING,
            Value::object([
                (MIN_NODES, Value::int(0)),
                (MAX_NODES, Value::int(max.unwrap_or(1))),
            ]),
        );
        let template = &np["spec"]["template"];
        let labels: BTreeMap<String, String> =
            serde_json::from_value(template["metadata"]["labels"].clone()).unwrap_or_default();
        let taints: Vec<NodeTaint> =
            serde_json::from_value(template["spec"]["taints"].clone()).unwrap_or_default();
        let (labels, taints) = configured(&labels, &taints);
        set_configured(&mut s, labels, &taints);
    } else {
        let held = list_held(api, &label).await?;
        let Some(first) = held.first() else {
            return Ok(Value::Null);
        };
        // Any node GFD labels right now tells the product.
        let product = held
            .iter()
            .find_map(HostNode::gpu_model)
            .map(|m| m.product)
            .unwrap_or_default();
        s.set_attr(GPU_PRODUCT, Value::string(product));
        s.set_attr(SOURCE, Value::string(Source::Host.as_str()));
        s.set_attr(NODE_COUNT, Value::int(held.len() as i64));
        let (labels, taints) = configured_on(first);
        set_configured(&mut s, labels, &taints);
        if let Some(settings) = first
            .annotations
            .get(SETTINGS_ANNOTATION)
            .and_then(|text| serde_json::from_str(text).ok())
        {
            let (placement, drain_timeout) = settings_attributes(&settings);
            s.set_attr(PLACEMENT, placement);
            if settings[SOURCE].as_str() == Some(Source::Bcm.as_str()) {
                s.set_attr(SOURCE, Value::string(Source::Bcm.as_str()));
            }
            if !drain_timeout.is_null() {
                s.set_attr(DRAIN_TIMEOUT, drain_timeout);
            }
        }
        let sharing = if let Some(m) = first.label(MIG_CONFIG_LABEL) {
            Some(("mig", Value::Null, Value::string(m)))
        } else if first.label(DEVICE_PLUGIN_CONFIG_LABEL).is_some() {
            // The pool's key, else what GFD reports the device plugin applied.
            let cfg = match device_plugin::locate(api, setting).await {
                Ok(home) => api.config_key(&home.namespace, CONFIG_MAP, &label).await?,
                Err(_) => None,
            };
            let r = cfg
                .as_deref()
                .and_then(device_plugin::replicas_in)
                .or_else(|| first.label(GPU_REPLICAS_LABEL)?.parse().ok())
                .unwrap_or(1);
            Some(("time-slicing", Value::int(r), Value::Null))
        } else {
            None
        };
        if let Some((strategy, replicas, mig)) = sharing {
            s.set_attr(
                "sharing",
                Value::object([
                    ("strategy", Value::string(strategy)),
                    ("replicas", replicas),
                    ("mig_config", mig),
                ]),
            );
        }
    }
    let spec = PoolSpec::from_value(&s).map_err(|_| {
        StepError::Conflict(format!("no pool {name} of virtual cluster {vc_id} found"))
    })?;
    // Fill the computed attributes the way a refresh does.
    Box::pin(read_spec(api, &s, &spec)).await
}

/// `node_labels` and `node_taints` of an imported pool; null when there are none, as a
/// configuration that leaves them out has them.
fn set_configured(s: &mut Value, labels: BTreeMap<String, String>, taints: &[NodeTaint]) {
    if !labels.is_empty() {
        s.set_attr(
            "node_labels",
            Value::Map(
                labels
                    .into_iter()
                    .map(|(k, v)| (k, Value::string(v)))
                    .collect(),
            ),
        );
    }
    if !taints.is_empty() {
        s.set_attr(
            "node_taints",
            Value::List(
                taints
                    .iter()
                    .map(|t| {
                        Value::object([
                            ("key", Value::string(&t.key)),
                            (
                                "value",
                                t.value.as_deref().map_or(Value::Null, Value::string),
                            ),
                            ("effect", Value::string(&t.effect)),
                        ])
                    })
                    .collect(),
            ),
        );
    }
}

async fn read_spec(api: &dyn HostNodes, s: &Value, spec: &PoolSpec) -> Result<Value, StepError> {
    let held = if spec.source == Source::Auto {
        api.list_nodes(&format!("{NODEPOOL_LABEL}={}", spec.node_pool_name()))
            .await?
    } else {
        list_held(api, &spec.pool_label()).await?
    };
    let mut state = state_of(s, spec, &held, status_for(spec, held.len()));
    let namespace = namespace_tier(api, &spec.vc).await?;
    fill_tier(&mut state, &held, namespace);
    Ok(state)
}

/// The state skeleton for an import by `<namespace>/<virtual cluster>/<pool>`.
pub(super) fn import_skeleton(id: &str) -> Result<Value, Diagnostics> {
    let parts: Vec<&str> = id.trim().split('/').collect();
    let ok = parts.len() == 3
        && VirtualClusterRef::parse(&format!("{}/{}", parts[0], parts[1])).is_some()
        && !parts[2].is_empty();
    if !ok {
        return Err(Diagnostic::error(
            "Invalid Import ID",
            format!(
                "import a {TYPE_NAME} by `<host namespace>/<virtual cluster>/<pool>`, e.g. \
                 `terraform import gpufleet_gpu_node_pool.train vc-team-a/team-a/train`; got \
                 {id:?}."
            ),
        )
        .into());
    }
    Ok(schema::pool_schema().block.complete(&Value::object([
        ("id", Value::string(id.trim())),
        ("name", Value::string(parts[2])),
        (
            "virtual_cluster_id",
            Value::string(format!("{}/{}", parts[0], parts[1])),
        ),
    ])))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn import_ids_name_namespace_cluster_and_pool() {
        let s = import_skeleton("vc-a/a/train").expect("skeleton");
        assert_eq!(s.get("virtual_cluster_id"), &Value::string("vc-a/a"));
        assert_eq!(s.get("name"), &Value::string("train"));
        assert!(s.conforms_to(&schema::pool_schema().value_type()));
        assert!(import_skeleton("train").is_err());
    }
}
