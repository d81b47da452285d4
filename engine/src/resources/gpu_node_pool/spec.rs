//! The pool as configured: decoding a planned value into a [`PoolSpec`], and the offline
//! checks across attributes (`validate`). Pure: no I/O.

use std::{collections::BTreeMap, time::Duration};

use crate::{
    backends::kube::{NODE_ISOLATION, POOL, TENANT},
    catalog::{self, GpuModel, MigConfig, MigConfigError},
    diag::Diagnostics,
    path::AttrPath,
    validate::PositiveDuration,
    value::Value,
};

use super::{api::NodeTaint, schema::DEFAULT_DRAIN_TIMEOUT};

/// The GPU Operator's node label selecting a device-plugin config.
pub const DEVICE_PLUGIN_CONFIG_LABEL: &str = "nvidia.com/device-plugin.config";
/// The MIG manager's node label selecting a MIG profile.
pub const MIG_CONFIG_LABEL: &str = "nvidia.com/mig.config";
/// The node label GFD writes the GPU product into. Under time-slicing without renaming GFD
/// appends `-SHARED`, under the MIG `single` strategy `-MIG-<profile>`: match it with
/// [`crate::catalog::lookup`], never by equality.
pub const GPU_PRODUCT_LABEL: &str = "nvidia.com/gpu.product";
/// The node label GFD writes the number of physical GPUs into (MIG devices under the MIG
/// `single` strategy).
pub const GPU_COUNT_LABEL: &str = "nvidia.com/gpu.count";
/// The node label GFD writes the time-slicing replicas per GPU into (`0` or `1` when
/// unshared).
pub const GPU_REPLICAS_LABEL: &str = "nvidia.com/gpu.replicas";

/// Labels the pool manages; users may not set them through `node_labels`.
pub const RESERVED_LABELS: &[&str] = &[
    POOL,
    TENANT,
    NODE_ISOLATION,
    DEVICE_PLUGIN_CONFIG_LABEL,
    MIG_CONFIG_LABEL,
];

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

/// The virtual cluster a pool serves, from its id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VirtualClusterRef {
    /// Host namespace.
    pub namespace: String,
    /// Virtual cluster name.
    pub name: String,
}

impl VirtualClusterRef {
    /// Parses `<namespace>/<name>`.
    pub fn parse(id: &str) -> Option<VirtualClusterRef> {
        let (ns, name) = id.split_once('/')?;
        let ok = |s: &str| {
            !s.is_empty()
                && s.len() <= 63
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        };
        (ok(ns) && ok(name)).then(|| VirtualClusterRef {
            namespace: ns.to_owned(),
            name: name.to_owned(),
        })
    }
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
    pub karpenter: super::karpenter::Settings,
}

/// The default Karpenter node class.
const DEFAULT_NODE_CLASS: &str = "karpenter.k8s.aws/EC2NodeClass/default";

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
        let source = match v.get("source").as_str() {
            Some("auto") => Source::Auto,
            Some("bcm") => Source::Bcm,
            _ => Source::Host,
        };
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
            karpenter: super::karpenter::Settings::from_value(v.get("karpenter")),
        })
    }
}

/// `gpufleet.dev/pool` for a pool of a virtual cluster.
pub fn pool_label(vc: &str, pool: &str) -> String {
    let full = format!("{vc}.{pool}");
    if full.len() <= 63 {
        return full;
    }
    // FNV-1a: stable across builds and platforms, unlike the std hasher.
    let hash = full.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let head: String = full.chars().take(54).collect();
    format!("{}-{:08x}", head.trim_end_matches(['-', '.']), hash as u32)
}

fn parse_node_class(s: &str) -> Option<(String, String, String)> {
    let mut parts = s.split('/');
    let (g, k, n) = (parts.next()?, parts.next()?, parts.next()?);
    (parts.next().is_none() && !g.is_empty() && !k.is_empty() && !n.is_empty())
        .then(|| (g.to_owned(), k.to_owned(), n.to_owned()))
}

/// The MIG config a `mig_config` names: `all-disabled`, `all-enabled`, `all-balanced`,
/// `all-<profile>` or just `<profile>`.
pub fn mig_config_of(model: &GpuModel, mig_config: &str) -> Result<MigConfig, MigConfigError> {
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

/// The cross-attribute checks, run at validate time; unknown values are skipped.
pub fn validate_pool(config: &Value) -> Diagnostics {
    let mut d = Diagnostics::new();
    let vc = config.get("virtual_cluster_id");
    if let Some(id) = vc.as_str()
        && VirtualClusterRef::parse(id).is_none()
    {
        d.error_at(
            AttrPath::attr("virtual_cluster_id"),
            "Invalid Virtual Cluster ID",
            format!(
                "{id:?} is not a virtual cluster id. Use the `id` of a \
                 gpufleet_virtual_cluster, `<host namespace>/<name>`, e.g. \"vc-team-a/team-a\"."
            ),
        );
    }
    // A product the catalog lacks may be declared in the provider configuration, which only
    // plan sees: plan refuses unknown products (`product::check`).
    let model = config.get("gpu_product").as_str().and_then(catalog::lookup);
    let source = config.get("source").as_str();
    validate_count(config, source, &mut d);
    validate_sharing(config.get("sharing"), model, &mut d);
    validate_labels(config.get("node_labels"), &mut d);
    for t in config.get("node_taints").as_seq().unwrap_or_default() {
        if t.get("key").as_str() == Some(TENANT) {
            d.error_at(
                AttrPath::attr("node_taints"),
                "Reserved Taint",
                format!(
                    "the taint {TENANT} is set by gpufleet for dedicated and private virtual \
                     clusters; remove it from node_taints."
                ),
            );
        }
    }
    if let Some(s) = config.get("karpenter_node_class").as_str()
        && parse_node_class(s).is_none()
    {
        d.error_at(
            AttrPath::attr("karpenter_node_class"),
            "Invalid Node Class",
            format!("{s:?} must be written <group>/<kind>/<name>, e.g. \"karpenter.k8s.aws/EC2NodeClass/default\"."),
        );
    }
    d
}

fn validate_count(config: &Value, source: Option<&str>, d: &mut Diagnostics) {
    let (count, auto) = (config.get("node_count"), config.get("autoscaling"));
    if !count.is_null() && !auto.is_null() {
        d.error_at(
            AttrPath::attr("autoscaling"),
            "Conflicting Node Counts",
            "set either node_count (a fixed size) or autoscaling (a range), not both.",
        );
    } else if count.is_null() && auto.is_null() {
        d.error_at(
            AttrPath::attr("node_count"),
            "Missing Node Count",
            "set node_count (a fixed size) or autoscaling { min_nodes, max_nodes }.",
        );
    }
    if auto.as_object().is_some() {
        if let (Some(min), Some(max)) = (
            auto.get("min_nodes").as_i64(),
            auto.get("max_nodes").as_i64(),
        ) && min > max
        {
            d.error_at(
                AttrPath::attr("autoscaling").push_attr("min_nodes"),
                "Invalid Range",
                format!("min_nodes ({min}) is larger than max_nodes ({max})."),
            );
        }
        if matches!(source, Some("host" | "bcm") | None) && !config.get("source").is_unknown() {
            d.error_at(
                AttrPath::attr("autoscaling"),
                "Autoscaling Needs Karpenter",
                "autoscaling needs source = \"auto\" (a Karpenter NodePool); a \"host\" or \
                 \"bcm\" pool claims a fixed node_count of nodes.",
            );
        }
    }
}

fn validate_sharing(sharing: &Value, model: Option<&'static GpuModel>, d: &mut Diagnostics) {
    if sharing.as_object().is_none() {
        return;
    }
    let path = AttrPath::attr("sharing");
    let strategy = sharing.get("strategy");
    let replicas = sharing.get("replicas");
    let mig_config = sharing.get("mig_config");
    // NVIDIA's device plugin refuses a time-slicing config with fewer than 2 replicas and
    // then serves no GPUs at all on the node.
    if let Some(n) = replicas.as_i64()
        && n < 2
    {
        d.error_at(
            path.push_attr("replicas"),
            "Invalid Replicas",
            format!(
                "replicas must be at least 2, not {n}: the NVIDIA device plugin refuses fewer \
                 (\"number of replicas must be >= 2\"). For one pod per GPU, use strategy = \
                 \"none\"."
            ),
        );
    }
    if strategy.is_unknown() {
        return;
    }
    let strategy = strategy.as_str().unwrap_or("none");
    match strategy {
        "time-slicing" if replicas.is_null() => {
            d.error_at(
                path.push_attr("replicas"),
                "Missing Replicas",
                "time-slicing needs replicas: how many pods may share one GPU.",
            );
        }
        "mig" => match (mig_config.as_str(), model) {
            _ if mig_config.is_unknown() => {}
            (None, _) => d.error_at(
                path.push_attr("mig_config"),
                "Missing MIG Config",
                "mig needs mig_config, a MIG config of the GPU Operator such as \
                 \"all-1g.10gb\" or \"all-balanced\".",
            ),
            (Some(c), Some(m)) => {
                if let Err(e) = mig_config_of(m, c) {
                    let detail = match &e {
                        MigConfigError::NotMigCapable { .. } => format!("{e}."),
                        MigConfigError::Unknown { .. } => format!(
                            "{e}. all-balanced is the product's mixed layout and \
                             all-<profile> fills every GPU with one profile (see \
                             provider::gpufleet::mig_profiles)."
                        ),
                    };
                    d.error_at(path.push_attr("mig_config"), "Invalid MIG Config", detail);
                }
            }
            _ => {}
        },
        _ => {}
    }
    if strategy != "time-slicing" && !replicas.is_null() && !replicas.is_unknown() {
        d.error_at(
            path.push_attr("replicas"),
            "Replicas Without Time-Slicing",
            format!("replicas only applies with strategy = \"time-slicing\", not {strategy:?}."),
        );
    }
    if strategy != "mig" && !mig_config.is_null() && !mig_config.is_unknown() {
        d.error_at(
            path.push_attr("mig_config"),
            "MIG Config Without MIG",
            format!("mig_config only applies with strategy = \"mig\", not {strategy:?}."),
        );
    }
}

fn validate_labels(labels: &Value, d: &mut Diagnostics) {
    for (k, v) in labels.as_map().into_iter().flatten() {
        let path = AttrPath::attr("node_labels").push_key(k.clone());
        if RESERVED_LABELS.contains(&k.as_str()) {
            d.error_at(
                path,
                "Reserved Label",
                format!("{k} is managed by gpufleet for the pool; remove it from node_labels."),
            );
        } else if !valid_label_key(k) {
            d.error_at(
                path,
                "Invalid Label Key",
                format!("{k:?} is not a Kubernetes label key ([prefix/]name, name at most 63 characters of letters, digits, '-', '_' and '.')."),
            );
        } else if let Some(v) = v.as_str()
            && !valid_label_value(v)
        {
            d.error_at(
                path,
                "Invalid Label Value",
                format!("{v:?} is not a Kubernetes label value (at most 63 characters of letters, digits, '-', '_' and '.', starting and ending alphanumeric)."),
            );
        }
    }
}

fn valid_label_value(v: &str) -> bool {
    v.is_empty()
        || (v.len() <= 63
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && v.starts_with(|c: char| c.is_ascii_alphanumeric())
            && v.ends_with(|c: char| c.is_ascii_alphanumeric()))
}

pub(super) fn valid_label_key(k: &str) -> bool {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.'))
    });
    prefix_ok && !name.is_empty() && valid_label_value(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_labels_fit_in_a_label_value() {
        assert_eq!(pool_label("team-a", "train"), "team-a.train");
        let long = pool_label(&"a".repeat(52), &"b".repeat(40));
        assert!(long.len() <= 63, "{long}");
        assert_eq!(long, pool_label(&"a".repeat(52), &"b".repeat(40)));
        assert_ne!(long, pool_label(&"a".repeat(52), &"c".repeat(40)));
    }

    #[test]
    fn virtual_cluster_ids_parse() {
        assert_eq!(
            VirtualClusterRef::parse("vc-a/a"),
            Some(VirtualClusterRef {
                namespace: "vc-a".into(),
                name: "a".into()
            })
        );
        assert_eq!(VirtualClusterRef::parse("a"), None);
        assert_eq!(VirtualClusterRef::parse("a/b/c"), None);
    }

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
    fn validation_names_the_accepted_mig_configs() {
        let config = |mig: &str| {
            Value::object([
                ("name", Value::string("p")),
                ("virtual_cluster_id", Value::string("vc-a/a")),
                ("gpu_product", Value::string("NVIDIA-A100-SXM4-40GB")),
                ("node_count", Value::int(1)),
                (
                    "sharing",
                    Value::object([
                        ("strategy", Value::string("mig")),
                        ("replicas", Value::Null),
                        ("mig_config", Value::string(mig)),
                    ]),
                ),
            ])
        };
        assert!(!validate_pool(&config("all-balanced")).has_error());
        assert!(!validate_pool(&config("all-disabled")).has_error());
        let d = validate_pool(&config("all-1g.5gb.me"));
        assert!(d.has_error());
        let text = format!("{d:?}");
        assert!(
            text.contains("all-balanced") && text.contains("sharing"),
            "{text}"
        );
    }
}
