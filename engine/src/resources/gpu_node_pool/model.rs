//! The pool as configured, decoded once from a planned (or prior) value into a [`PoolSpec`],
//! and the computed attributes a state shows for the nodes it holds. Pure: no I/O.

use std::{collections::BTreeMap, time::Duration};

use crate::{
    backends::kube::host::nodes::{HostNode, NodeTaint},
    catalog::{self, GpuModel, MigConfig, MigConfigError},
    diag::Diagnostics,
    path::AttrPath,
    tenancy::{VirtualClusterRef, pool_label},
    validate::PositiveDuration,
    value::{Known, Value},
};

use super::{
    choices::{Cloud, Policy, Source, Tier},
    config::{KarpenterConfig, PoolConfig, Requirement, SharingConfig, Strategy, whole_number},
    mig,
    schema::{
        DEFAULT_DRAIN_TIMEOUT, DEFAULT_NODE_CLASS, DRAIN_TIMEOUT, PLACEMENT, POLICY, SOURCE,
        TOPOLOGY_KEY,
    },
};

/// How GPUs are shared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sharing {
    /// Whole GPUs.
    None,
    /// Time-slicing with this many replicas per GPU.
    TimeSlicing(u32),
    /// MIG, every GPU laid out as a named config of the GPU Operator's default MIG
    /// configs.
    Mig(MigConfig),
}

/// A pool as configured, decoded from a planned (or prior) value.
#[derive(Debug, Clone)]
pub struct PoolSpec {
    /// Pool name.
    pub name: String,
    /// Its virtual cluster.
    pub vc: VirtualClusterRef,
    /// GPU product.
    pub model: &'static GpuModel,
    /// Where nodes come from.
    pub source: Source,
    /// The tier the pool was planned for, when the plan knew it; apply holds the virtual
    /// cluster's namespace to it.
    pub isolation: Option<Tier>,
    /// Fixed node count, or `None` with autoscaling.
    pub node_count: Option<u32>,
    /// Autoscaling bounds `(min, max)`.
    pub autoscaling: Option<(u32, u32)>,
    /// GPU sharing.
    pub sharing: Sharing,
    /// Topology label for placement.
    pub topology_key: Option<String>,
    /// Placement policy.
    pub policy: Policy,
    /// Extra labels.
    pub node_labels: BTreeMap<String, String>,
    /// Extra taints.
    pub node_taints: Vec<NodeTaint>,
    /// How long draining a node may take.
    pub drain_timeout: Duration,
    /// Karpenter node class `(group, kind, name)`.
    pub node_class: (String, String, String),
    /// What an `auto` pool asks Karpenter for beyond the product.
    pub karpenter: Settings,
    /// The configured `placement` and `drain_timeout`, as written on each held node for
    /// import to find ([`super::node_config::SETTINGS_ANNOTATION`]): nothing else on a node
    /// shows them.
    pub settings: serde_json::Value,
}

impl PoolSpec {
    /// The value of `gpufleet.dev/pool` on the pool's nodes: `<virtual cluster>.<pool>`,
    /// shortened with a hash when it would pass the 63 characters a label value may have.
    pub fn pool_label(&self) -> String {
        pool_label(&self.vc.name, &self.name)
    }

    /// The resource id.
    pub fn id(&self) -> String {
        format!("{}/{}/{}", self.vc.namespace, self.vc.name, self.name)
    }

    /// The Karpenter NodePool's name.
    pub fn node_pool_name(&self) -> String {
        let n = format!("gpufleet-{}-{}", self.vc.name, self.name);
        if n.len() <= 253 {
            n
        } else {
            format!("gpufleet-{}", self.pool_label())
        }
    }

    /// The node count apply aims for (autoscaling pools: the minimum).
    pub fn target(&self) -> u32 {
        self.node_count
            .or(self.autoscaling.map(|(min, _)| min))
            .unwrap_or(0)
    }

    /// Decodes a wholly known planned or prior value.
    pub fn from_value(v: &Value) -> Result<PoolSpec, Diagnostics> {
        PoolSpec::from_config(&PoolConfig::decode(v))
    }

    /// The pool a wholly known planned or prior value's [`PoolConfig`] describes.
    pub(super) fn from_config(c: &PoolConfig) -> Result<PoolSpec, Diagnostics> {
        let mut d = Diagnostics::new();
        let name = c.name.value().cloned().unwrap_or_default();
        let vc = c
            .virtual_cluster_id
            .value()
            .and_then(|s| VirtualClusterRef::parse(s));
        let model = c.gpu_product.value().and_then(|s| catalog::lookup(s));
        let (Some(vc), Some(model)) = (vc, model) else {
            d.error_at(
                AttrPath::root(),
                "Value Not Known At Apply",
                "name, virtual_cluster_id and gpu_product must be known and valid to apply a \
                 GPU node pool.",
            );
            return Err(d);
        };
        // A wholly known value has a valid source; anything else reads as the default.
        let source = c.source.value().copied().unwrap_or(Source::DEFAULT);
        let count = |x: &Known<i64>| x.value().and_then(|n| u32::try_from(*n).ok());
        let autoscaling = c
            .autoscaling
            .value()
            .and_then(|a| Some((count(&a.min_nodes)?, count(&a.max_nodes)?)));
        let sharing = c
            .sharing
            .value()
            .and_then(|s| sharing_of(s, model))
            .unwrap_or(Sharing::None);
        let placement = c.placement.value();
        let node_class = parse_node_class(
            c.karpenter_node_class
                .value()
                .map_or(DEFAULT_NODE_CLASS, String::as_str),
        )
        .unwrap_or_else(|| {
            (
                "karpenter.k8s.aws".into(),
                "EC2NodeClass".into(),
                "default".into(),
            )
        });
        Ok(PoolSpec {
            name,
            vc,
            model,
            source,
            isolation: c.isolation.value().copied(),
            node_count: count(&c.node_count),
            autoscaling,
            sharing,
            topology_key: placement.and_then(|p| p.topology_key.value().cloned()),
            policy: match placement.and_then(|p| p.policy.value()).map(String::as_str) {
                Some("spread") => Policy::Spread,
                _ => Policy::Pack,
            },
            node_labels: c
                .node_labels
                .value()
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, x)| Some((k.clone(), x.value()?.clone())))
                        .collect()
                })
                .unwrap_or_default(),
            node_taints: taints_of(c),
            drain_timeout: c
                .drain_timeout
                .value()
                .and_then(|s| PositiveDuration::parse(s).ok())
                .or_else(|| PositiveDuration::parse(DEFAULT_DRAIN_TIMEOUT).ok())
                .unwrap_or(Duration::from_secs(300)),
            node_class,
            karpenter: c
                .karpenter
                .value()
                .map(Settings::from_config)
                .unwrap_or_default(),
            settings: settings_of(c),
        })
    }
}

pub(super) fn parse_node_class(s: &str) -> Option<(String, String, String)> {
    let mut parts = s.split('/');
    let (g, k, n) = (parts.next()?, parts.next()?, parts.next()?);
    (parts.next().is_none() && !g.is_empty() && !k.is_empty() && !n.is_empty())
        .then(|| (g.to_owned(), k.to_owned(), n.to_owned()))
}

/// The MIG config a `mig_config` names: `all-disabled`, `all-enabled`, `all-balanced`,
/// `all-<profile>` or just `<profile>`.
pub(super) fn mig_config_of(
    model: &GpuModel,
    mig_config: &str,
) -> Result<MigConfig, MigConfigError> {
    catalog::mig_config(model, mig_config)
}

fn sharing_of(s: &SharingConfig, model: &GpuModel) -> Option<Sharing> {
    match s.strategy.value()? {
        Strategy::TimeSlicing => Some(Sharing::TimeSlicing(
            u32::try_from(whole_number(s.replicas.value()?)?).ok()?,
        )),
        Strategy::Mig => Some(Sharing::Mig(
            mig_config_of(model, s.mig_config.value()?).ok()?,
        )),
        Strategy::None | Strategy::Other(_) => None,
    }
}

/// `placement` and `drain_timeout` as configured (null when left out), and `source` (a `bcm`
/// pool's nodes look like any host node once they have joined), as JSON.
fn settings_of(c: &PoolConfig) -> serde_json::Value {
    let text = |x: Option<&String>| x.map_or(serde_json::Value::Null, |s| s.as_str().into());
    serde_json::json!({
        PLACEMENT: match &c.placement {
            Known::Null => serde_json::Value::Null,
            p => serde_json::json!({
                TOPOLOGY_KEY: text(p.value().and_then(|p| p.topology_key.value())),
                POLICY: text(p.value().and_then(|p| p.policy.value())),
            }),
        },
        DRAIN_TIMEOUT: text(c.drain_timeout.value()),
        SOURCE: c.source.value().map_or(serde_json::Value::Null, |s| s.as_str().into()),
    })
}

/// What [`settings_of`] wrote, back as the attributes `placement` and `drain_timeout`.
pub(super) fn settings_attributes(settings: &serde_json::Value) -> (Value, Value) {
    let text = |x: &serde_json::Value| x.as_str().map_or(Value::Null, Value::string);
    let p = &settings[PLACEMENT];
    let placement = if p.is_object() {
        Value::object([
            (TOPOLOGY_KEY, text(&p[TOPOLOGY_KEY])),
            (POLICY, text(&p[POLICY])),
        ])
    } else {
        Value::Null
    };
    (placement, text(&settings[DRAIN_TIMEOUT]))
}

fn taints_of(c: &PoolConfig) -> Vec<NodeTaint> {
    c.node_taints
        .value()
        .into_iter()
        .flatten()
        .filter_map(|t| {
            Some(NodeTaint {
                key: t.key.value()?.clone(),
                value: t.value.value().cloned(),
                effect: t.effect.value()?.clone(),
            })
        })
        .collect()
}

/// What the tenant can request from `gpus` physical GPUs shared as `sharing`.
pub fn allocatable(sharing: &Sharing, gpus: u64) -> BTreeMap<String, u64> {
    match sharing {
        Sharing::None => [("nvidia.com/gpu".to_owned(), gpus)].into(),
        Sharing::TimeSlicing(r) => [("nvidia.com/gpu".to_owned(), gpus * u64::from(*r))].into(),
        // Without the nodes to ask, the device plugin's default MIG strategy.
        Sharing::Mig(c) => mig::resources(c, mig::Strategy::Mixed, gpus),
    }
}

/// The GPU resources `nodes` advertise, added up: `nvidia.com/gpu`, and any MIG resources.
fn advertised(nodes: &[HostNode]) -> BTreeMap<String, u64> {
    let mut total = BTreeMap::from([("nvidia.com/gpu".to_owned(), 0)]);
    for n in nodes {
        *total.entry("nvidia.com/gpu".to_owned()).or_insert(0) += u64::from(n.gpu_capacity);
        for (k, v) in n.mig_capacity.iter().filter(|(_, v)| **v > 0) {
            *total.entry(k.clone()).or_insert(0) += v;
        }
    }
    total
}

/// The state for `held` nodes, from a planned (or prior) value.
pub(super) fn state_of(v: &Value, spec: &PoolSpec, held: &[HostNode], status: &str) -> Value {
    let mut s = v.clone();
    let mut names: Vec<String> = held.iter().map(|n| n.name.clone()).collect();
    names.sort();
    // Physical GPUs: capacity would count time-slicing replicas that `allocatable` adds.
    let gpus: u64 = held.iter().map(|n| u64::from(n.physical_gpus())).sum();
    s.set_attr("id", Value::string(spec.id()));
    s.set_attr(
        "nodes",
        Value::List(names.into_iter().map(Value::string).collect()),
    );
    s.set_attr("gpus", Value::int(i64::try_from(gpus).unwrap_or(i64::MAX)));
    // MIG resources depend on each node's strategy.
    let alloc = match &spec.sharing {
        Sharing::Mig(c) => mig::allocatable(c, held),
        // What the device plugin advertises: a node whose GPUs are still partitioned has no
        // whole GPU to give, whatever it has in it.
        Sharing::None => advertised(held),
        Sharing::TimeSlicing(_) => allocatable(&spec.sharing, gpus),
    };
    s.set_attr(
        "allocatable",
        Value::Map(
            alloc
                .into_iter()
                .map(|(k, n)| (k, Value::int(i64::try_from(n).unwrap_or(i64::MAX))))
                .collect(),
        ),
    );
    s.set_attr("status", Value::string(status));
    s.with_unknowns_nulled()
}

pub(super) fn status_for(spec: &PoolSpec, held: usize) -> &'static str {
    match spec.source {
        Source::Auto if held == 0 => "pending",
        Source::Auto => "ready",
        Source::Host | Source::Bcm if held == spec.target() as usize => "ready",
        Source::Host | Source::Bcm => "degraded",
    }
}

/// An `auto` pool's `karpenter` settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// `provider`, when set.
    pub cloud: Option<Cloud>,
    /// `gpus_per_node`, when set.
    pub gpus_per_node: Option<u32>,
    /// The user's `requirements`.
    pub requirements: Vec<Requirement>,
}

impl Settings {
    /// Decodes the `karpenter` attribute of a planned value.
    pub(super) fn from_config(k: &KarpenterConfig) -> Settings {
        Settings {
            cloud: k.provider.value().and_then(|p| Cloud::parse(p)),
            gpus_per_node: k.gpus_per_node.value().and_then(|n| u32::try_from(*n).ok()),
            requirements: k
                .requirements
                .value()
                .into_iter()
                .flatten()
                .filter_map(|r| r.value().cloned())
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mig_configs_name_a_config_of_the_product() {
        let a100 = catalog::lookup("NVIDIA-A100-SXM4-80GB").expect("in catalog");
        let name = |c: &str| mig_config_of(a100, c).map(|c| c.name);
        assert_eq!(name("all-1g.10gb").as_deref(), Ok("all-1g.10gb"));
        assert_eq!(name("3g.40gb").as_deref(), Ok("all-3g.40gb"));
        assert_eq!(name("all-balanced").as_deref(), Ok("all-balanced"));
        assert!(mig_config_of(a100, "all-1g.5gb").is_err());
    }

    #[test]
    fn allocatable_counts_what_the_tenant_can_request() {
        assert_eq!(allocatable(&Sharing::None, 8)["nvidia.com/gpu"], 8);
        assert_eq!(
            allocatable(&Sharing::TimeSlicing(4), 8)["nvidia.com/gpu"],
            32
        );
        let a100 = crate::catalog::lookup("NVIDIA-A100-SXM4-80GB").expect("catalog");
        let c = crate::catalog::mig_config(a100, "all-1g.10gb").expect("config");
        assert_eq!(
            allocatable(&Sharing::Mig(c), 16)["nvidia.com/mig-1g.10gb"],
            16 * 7
        );
    }
}
