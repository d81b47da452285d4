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
    value::Value,
};

use super::mig;

/// The default `drain_timeout`.
pub(super) const DEFAULT_DRAIN_TIMEOUT: &str = "5m";

/// The isolation tier of a virtual cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// Shared nodes: labels only.
    Shared,
    /// Dedicated nodes: tenant label and taint.
    Dedicated,
    /// Private nodes: as dedicated (only bcm and auto pools).
    Private,
}

impl Tier {
    /// Parses the namespace label value.
    pub fn parse(s: &str) -> Option<Tier> {
        match s {
            "shared" => Some(Tier::Shared),
            "dedicated" => Some(Tier::Dedicated),
            "private" => Some(Tier::Private),
            _ => None,
        }
    }

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Shared => "shared",
            Tier::Dedicated => "dedicated",
            Tier::Private => "private",
        }
    }
}

/// Where nodes come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Claim existing host nodes.
    Host,
    /// Emit a Karpenter NodePool.
    Auto,
    /// Claim and provision bare-metal nodes through Base Command Manager, then claim their
    /// host-cluster nodes.
    Bcm,
}

impl Source {
    /// What a pool that leaves `source` out gets: the schema's default.
    pub const DEFAULT: Source = Source::Host;

    /// The source `source` names; the one parse of it.
    pub fn parse(s: &str) -> Option<Source> {
        match s {
            "host" => Some(Source::Host),
            "auto" => Some(Source::Auto),
            "bcm" => Some(Source::Bcm),
            _ => None,
        }
    }

    /// The attribute's text.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Host => "host",
            Source::Auto => "auto",
            Source::Bcm => "bcm",
        }
    }
}

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

/// Placement policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Fewest domains.
    Pack,
    /// Most domains.
    Spread,
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

/// The default Karpenter node class.
pub(super) const DEFAULT_NODE_CLASS: &str = "karpenter.k8s.aws/EC2NodeClass/default";

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
        let mut d = Diagnostics::new();
        let text = |name: &str| v.get(name).as_str().map(str::to_owned);
        let name = text("name").unwrap_or_default();
        let vc = text("virtual_cluster_id")
            .as_deref()
            .and_then(VirtualClusterRef::parse);
        let model = text("gpu_product").as_deref().and_then(catalog::lookup);
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
        let source = v
            .get("source")
            .as_str()
            .and_then(Source::parse)
            .unwrap_or(Source::DEFAULT);
        let count = |x: &Value| x.as_i64().and_then(|n| u32::try_from(n).ok());
        let autoscaling = match (
            count(v.get("autoscaling").get("min_nodes")),
            count(v.get("autoscaling").get("max_nodes")),
        ) {
            (Some(a), Some(b)) => Some((a, b)),
            _ => None,
        };
        let sharing = sharing_of(v.get("sharing"), model).unwrap_or(Sharing::None);
        let placement = v.get("placement");
        let node_class_text = text("karpenter_node_class");
        let node_class = parse_node_class(node_class_text.as_deref().unwrap_or(DEFAULT_NODE_CLASS))
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
            isolation: v.get("isolation").as_str().and_then(Tier::parse),
            node_count: count(v.get("node_count")),
            autoscaling,
            sharing,
            topology_key: placement.get("topology_key").as_str().map(str::to_owned),
            policy: match placement.get("policy").as_str() {
                Some("spread") => Policy::Spread,
                _ => Policy::Pack,
            },
            node_labels: v
                .get("node_labels")
                .as_map()
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, x)| Some((k.clone(), x.as_str()?.to_owned())))
                        .collect()
                })
                .unwrap_or_default(),
            node_taints: taints_of(v.get("node_taints")),
            drain_timeout: v
                .get("drain_timeout")
                .as_str()
                .and_then(|s| PositiveDuration::parse(s).ok())
                .or_else(|| PositiveDuration::parse(DEFAULT_DRAIN_TIMEOUT).ok())
                .unwrap_or(Duration::from_secs(300)),
            node_class,
            karpenter: Settings::from_value(v.get("karpenter")),
            settings: settings_of(v),
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

fn sharing_of(v: &Value, model: &GpuModel) -> Option<Sharing> {
    match v.get("strategy").as_str() {
        Some("time-slicing") => Some(Sharing::TimeSlicing(
            u32::try_from(v.get("replicas").as_i64()?).ok()?,
        )),
        Some("mig") => Some(Sharing::Mig(
            mig_config_of(model, v.get("mig_config").as_str()?).ok()?,
        )),
        _ => None,
    }
}

/// `placement` and `drain_timeout` as configured (null when left out), and `source` (a `bcm`
/// pool's nodes look like any host node once they have joined), as JSON.
fn settings_of(v: &Value) -> serde_json::Value {
    let text = |x: &Value| x.as_str().map_or(serde_json::Value::Null, |s| s.into());
    let placement = v.get("placement");
    serde_json::json!({
        "placement": if placement.is_null() {
            serde_json::Value::Null
        } else {
            serde_json::json!({
                "topology_key": text(placement.get("topology_key")),
                "policy": text(placement.get("policy")),
            })
        },
        "drain_timeout": text(v.get("drain_timeout")),
        "source": text(v.get("source")),
    })
}

/// What [`settings_of`] wrote, back as the attributes `placement` and `drain_timeout`.
pub(super) fn settings_attributes(settings: &serde_json::Value) -> (Value, Value) {
    let text = |x: &serde_json::Value| x.as_str().map_or(Value::Null, Value::string);
    let p = &settings["placement"];
    let placement = if p.is_object() {
        Value::object([
            ("topology_key", text(&p["topology_key"])),
            ("policy", text(&p["policy"])),
        ])
    } else {
        Value::Null
    };
    (placement, text(&settings["drain_timeout"]))
}

fn taints_of(v: &Value) -> Vec<NodeTaint> {
    v.as_seq()
        .unwrap_or_default()
        .iter()
        .filter_map(|t| {
            Some(NodeTaint {
                key: t.get("key").as_str()?.to_owned(),
                value: t.get("value").as_str().map(str::to_owned),
                effect: t.get("effect").as_str()?.to_owned(),
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
        other => allocatable(other, gpus),
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

/// A Karpenter cloud provider, whose instance labels describe an instance's GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cloud {
    /// `karpenter-provider-aws` (EC2NodeClass).
    Aws,
    /// `karpenter-provider-azure` (AKSNodeClass).
    Azure,
    /// Any other: only the user's requirements choose instances.
    Generic,
}

/// The names `karpenter.provider` accepts.
pub(super) const CLOUD_NAMES: &[&str] = &["aws", "azure", "generic"];

impl Cloud {
    pub(super) fn parse(s: &str) -> Option<Cloud> {
        match s {
            "aws" => Some(Cloud::Aws),
            "azure" => Some(Cloud::Azure),
            "generic" => Some(Cloud::Generic),
            _ => None,
        }
    }

    /// The provider whose node class API group this is, if one gpufleet knows.
    pub(super) fn of_group(group: &str) -> Option<Cloud> {
        match group {
            "karpenter.k8s.aws" => Some(Cloud::Aws),
            "karpenter.azure.com" => Some(Cloud::Azure),
            _ => None,
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Cloud::Aws => "aws",
            Cloud::Azure => "azure",
            Cloud::Generic => "generic",
        }
    }

    pub(super) fn title(self) -> &'static str {
        match self {
            Cloud::Aws => "AWS",
            Cloud::Azure => "Azure",
            Cloud::Generic => "generic",
        }
    }
}

/// One node-selector requirement of the NodePool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// Label key.
    pub key: String,
    /// `In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`, `Gte` or `Lte`.
    pub operator: String,
    /// Values, none for `Exists` and `DoesNotExist`.
    pub values: Vec<String>,
    /// Karpenter's `minValues`: how many distinct values the launch choices must span.
    pub min_values: Option<u32>,
}

impl Requirement {
    pub(super) fn from_value(v: &Value) -> Option<Requirement> {
        Some(Requirement {
            key: v.get("key").as_str()?.to_owned(),
            operator: v.get("operator").as_str()?.to_owned(),
            values: v.get("values").strings(),
            min_values: v
                .get("min_values")
                .as_i64()
                .and_then(|n| u32::try_from(n).ok()),
        })
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
    /// Decodes the `karpenter` attribute of a planned value (null: all defaults).
    pub fn from_value(v: &Value) -> Settings {
        Settings {
            cloud: v.get("provider").as_str().and_then(Cloud::parse),
            gpus_per_node: v
                .get("gpus_per_node")
                .as_i64()
                .and_then(|n| u32::try_from(n).ok()),
            requirements: v
                .get("requirements")
                .as_seq()
                .unwrap_or_default()
                .iter()
                .filter_map(Requirement::from_value)
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
