//! The plan-time checks of a pool's configuration that need no cluster: across attributes
//! (`validate`), and the tier rule plan and apply share. They read the pool as
//! [`PoolConfig`] decodes it.

use std::collections::BTreeMap;

use crate::{
    backends::kube::{DEVICE_PLUGIN_CONFIG_LABEL, MIG_CONFIG_LABEL, NODE_ISOLATION, POOL, TENANT},
    catalog::{self, GpuModel, MigConfigError},
    diag::Diagnostics,
    path::AttrPath,
    tenancy::VirtualClusterRef,
    validate::k8s_label,
    value::{Known, Value},
};

use super::{
    choices::{Source, Tier},
    config::{PoolConfig, SharingConfig, Strategy, Taint, whole_number},
    model::{mig_config_of, parse_node_class},
    schema::{
        AUTOSCALING, KARPENTER_NODE_CLASS, MIG_CONFIG, MIN_NODES, NODE_COUNT, NODE_LABELS,
        NODE_TAINTS, REPLICAS, SHARING, TAINT_KEY, TAINT_VALUE, VIRTUAL_CLUSTER_ID,
    },
};

/// Labels the pool manages; users may not set them through `node_labels`.
pub(super) const RESERVED_LABELS: &[&str] = &[
    POOL,
    TENANT,
    NODE_ISOLATION,
    DEVICE_PLUGIN_CONFIG_LABEL,
    MIG_CONFIG_LABEL,
];

/// Most pods that may share one GPU by time-slicing: GKE's documented maximum of GPU
/// time-sharing clients per GPU.
pub(super) const MAX_REPLICAS: i64 = 48;

/// The cross-attribute checks, run at validate time; unknown values are skipped.
pub fn validate_pool(config: &Value) -> Diagnostics {
    let pool = PoolConfig::decode(config);
    let mut d = Diagnostics::new();
    if let Some(id) = pool.virtual_cluster_id.value()
        && VirtualClusterRef::parse(id).is_none()
    {
        d.error_at(
            AttrPath::attr(VIRTUAL_CLUSTER_ID),
            "Invalid Virtual Cluster ID",
            format!(
                "{id:?} is not a virtual cluster id. Use the `id` of a \
                 gpufleet_virtual_cluster, `<host namespace>/<name>`, e.g. \"vc-team-a/team-a\"."
            ),
        );
    }
    // A product the catalog lacks may be declared in the provider configuration, which only
    // plan sees: plan refuses unknown products (`product::check`).
    let model = pool
        .gpu_product
        .value()
        .map(String::as_str)
        .and_then(catalog::lookup);
    validate_count(&pool, &mut d);
    if let Some(sharing) = pool.sharing.value() {
        validate_sharing(sharing, model, &mut d);
    }
    validate_labels(&pool.node_labels, &mut d);
    d.extend(super::karpenter::check_template_labels(&pool));
    validate_taints(&pool.node_taints, &mut d);
    if let Some(s) = pool.karpenter_node_class.value()
        && parse_node_class(s).is_none()
    {
        d.error_at(
            AttrPath::attr(KARPENTER_NODE_CLASS),
            "Invalid Node Class",
            format!("{s:?} must be written <group>/<kind>/<name>, e.g. \"karpenter.k8s.aws/EC2NodeClass/default\"."),
        );
    }
    d
}

fn validate_count(pool: &PoolConfig, d: &mut Diagnostics) {
    let (count, auto) = (&pool.node_count, &pool.autoscaling);
    if !count.is_null() && !auto.is_null() {
        d.error_at(
            AttrPath::attr(AUTOSCALING),
            "Conflicting Node Counts",
            "set either node_count (a fixed size) or autoscaling (a range), not both.",
        );
    } else if count.is_null() && auto.is_null() {
        d.error_at(
            AttrPath::attr(NODE_COUNT),
            "Missing Node Count",
            "set node_count (a fixed size) or autoscaling { min_nodes, max_nodes }.",
        );
    }
    if let Some(auto) = auto.value() {
        if let (Some(min), Some(max)) = (auto.min_nodes.value(), auto.max_nodes.value())
            && min > max
        {
            d.error_at(
                AttrPath::attr(AUTOSCALING).push_attr(MIN_NODES),
                "Invalid Range",
                format!("min_nodes ({min}) is larger than max_nodes ({max})."),
            );
        }
        if pool.source_is(Source::Host) || pool.source_is(Source::Bcm) {
            d.error_at(
                AttrPath::attr(AUTOSCALING),
                "Autoscaling Needs Karpenter",
                "autoscaling needs source = \"auto\" (a Karpenter NodePool); a \"host\" or \
                 \"bcm\" pool claims a fixed node_count of nodes.",
            );
        }
    }
}

fn validate_sharing(
    sharing: &SharingConfig,
    model: Option<&'static GpuModel>,
    d: &mut Diagnostics,
) {
    let path = AttrPath::attr(SHARING);
    let (replicas, mig_config) = (&sharing.replicas, &sharing.mig_config);
    // NVIDIA's device plugin refuses a time-slicing config with fewer than 2 replicas and
    // then serves no GPUs at all on the node; above MAX_REPLICAS, pods share a GPU in slices
    // too thin to do work, and no managed offering allows more.
    if let Some(n) = replicas.value()
        && !whole_number(n).is_some_and(|i| (2..=MAX_REPLICAS).contains(&i))
    {
        d.error_at(
            path.push_attr(REPLICAS),
            "Invalid Replicas",
            format!(
                "sharing.replicas: {n} is not a whole number from 2 to {MAX_REPLICAS}; accepted: \
                 2 (the NVIDIA device plugin refuses fewer: \"number of replicas must be >= 2\") \
                 to {MAX_REPLICAS} pods per GPU. For one pod per GPU, use strategy = \"none\"."
            ),
        );
    }
    let Some(strategy) = sharing.strategy.value() else {
        return;
    };
    match strategy {
        Strategy::TimeSlicing if replicas.is_null() => {
            d.error_at(
                path.push_attr(REPLICAS),
                "Missing Replicas",
                "time-slicing needs replicas: how many pods may share one GPU.",
            );
        }
        Strategy::Mig => match (mig_config, model) {
            (Known::Unknown, _) => {}
            (Known::Null, _) => d.error_at(
                path.push_attr(MIG_CONFIG),
                "Missing MIG Config",
                "mig needs mig_config, a MIG config of the GPU Operator such as \
                 \"all-1g.10gb\" or \"all-balanced\".",
            ),
            (Known::Value(c), Some(m)) => {
                if let Err(e) = mig_config_of(m, c) {
                    let detail = match &e {
                        MigConfigError::NotMigCapable { .. } => format!("{e}."),
                        MigConfigError::Unknown { .. } => format!(
                            "{e}. all-balanced is the product's mixed layout and \
                             all-<profile> fills every GPU with one profile (see \
                             provider::gpufleet::mig_profiles)."
                        ),
                    };
                    d.error_at(path.push_attr(MIG_CONFIG), "Invalid MIG Config", detail);
                }
            }
            (Known::Value(_), None) => {}
        },
        _ => {}
    }
    let name = strategy.as_str();
    if *strategy != Strategy::TimeSlicing && replicas.value().is_some() {
        d.error_at(
            path.push_attr(REPLICAS),
            "Replicas Without Time-Slicing",
            format!("replicas only applies with strategy = \"time-slicing\", not {name:?}."),
        );
    }
    if *strategy != Strategy::Mig && mig_config.value().is_some() {
        d.error_at(
            path.push_attr(MIG_CONFIG),
            "MIG Config Without MIG",
            format!("mig_config only applies with strategy = \"mig\", not {name:?}."),
        );
    }
}

fn validate_labels(labels: &Known<BTreeMap<String, Known<String>>>, d: &mut Diagnostics) {
    for (k, v) in labels.value().into_iter().flatten() {
        let path = AttrPath::attr(NODE_LABELS).push_key(k.clone());
        if RESERVED_LABELS.contains(&k.as_str()) {
            d.error_at(
                path,
                "Reserved Label",
                format!("{k} is managed by gpufleet for the pool; remove it from node_labels."),
            );
        } else if k8s_label::valid_key(k) {
            check_label_value(&path, v, d);
        } else {
            k8s_label::check_key(&path, k, d);
        }
    }
}

/// A taint's key and value follow the label rules.
fn validate_taints(taints: &Known<Vec<Taint>>, d: &mut Diagnostics) {
    for (i, t) in taints.value().into_iter().flatten().enumerate() {
        let path = AttrPath::attr(NODE_TAINTS).push_index(i);
        match t.key.value().map(String::as_str) {
            Some(TENANT) => d.error_at(
                path.push_attr(TAINT_KEY),
                "Reserved Taint",
                format!(
                    "the taint {TENANT} is set by gpufleet for dedicated and private virtual \
                     clusters; remove it from node_taints."
                ),
            ),
            Some(key) => k8s_label::check_key(&path.push_attr(TAINT_KEY), key, d),
            None => {}
        }
        check_label_value(&path.push_attr(TAINT_VALUE), &t.value, d);
    }
}

/// Refuses a known string that is not a label value, as [`k8s_label::check_value`] does.
fn check_label_value(path: &AttrPath, v: &Known<String>, d: &mut Diagnostics) {
    if let Some(s) = v.value() {
        k8s_label::check_value(path, &Value::string(s.as_str()), d);
    }
}

/// The private-tier check plan and apply share.
pub(super) fn refuse_private_host(tier: Tier, source: Source) -> Option<String> {
    (tier == Tier::Private && source == Source::Host).then(|| {
        "the virtual cluster is `private`: its tenants get nodes of their own, never \
         host-cluster nodes. Use source = \"bcm\" or \"auto\"."
            .to_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn autoscaled(source: Value) -> Value {
        Value::object([
            ("name", Value::string("p")),
            ("virtual_cluster_id", Value::string("vc-a/a")),
            ("gpu_product", Value::string("NVIDIA-A100-SXM4-40GB")),
            ("source", source),
            (
                "autoscaling",
                Value::object([("min_nodes", Value::int(0)), ("max_nodes", Value::int(2))]),
            ),
        ])
    }

    #[test]
    fn autoscaling_needs_auto_and_a_left_out_source_is_host() {
        let needs = |d: &Diagnostics| format!("{d:?}").contains("Autoscaling Needs Karpenter");
        assert!(needs(&validate_pool(&autoscaled(Value::Null))));
        assert!(needs(&validate_pool(&autoscaled(Value::string("bcm")))));
        assert!(!needs(&validate_pool(&autoscaled(Value::string("auto")))));
        assert!(!needs(&validate_pool(&autoscaled(Value::unknown()))));
    }

    #[test]
    fn a_strategy_the_schema_refuses_is_named_as_written() {
        let config = Value::object([
            ("name", Value::string("p")),
            ("virtual_cluster_id", Value::string("vc-a/a")),
            ("node_count", Value::int(1)),
            (
                "sharing",
                Value::object([
                    ("strategy", Value::string("spread")),
                    ("replicas", Value::int(2)),
                    ("mig_config", Value::Null),
                ]),
            ),
        ]);
        let text = format!("{:?}", validate_pool(&config));
        assert!(text.contains("Replicas Without Time-Slicing"), "{text}");
        assert!(text.contains("spread"), "{text}");
    }
}
