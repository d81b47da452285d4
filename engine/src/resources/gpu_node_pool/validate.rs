//! The plan-time checks of a pool's configuration that need no cluster: across attributes
//! (`validate`), and the tier rule plan and apply share.

use crate::{
    backends::kube::{DEVICE_PLUGIN_CONFIG_LABEL, MIG_CONFIG_LABEL, NODE_ISOLATION, POOL, TENANT},
    catalog::{self, GpuModel, MigConfigError},
    diag::Diagnostics,
    path::AttrPath,
    tenancy::VirtualClusterRef,
    validate::k8s_label,
    value::Value,
};

use super::{
    model::{Source, mig_config_of, parse_node_class},
    node_config::Tier,
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
    d.extend(super::karpenter::check_template_labels(config));
    validate_taints(config.get("node_taints"), &mut d);
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
    // then serves no GPUs at all on the node; above MAX_REPLICAS, pods share a GPU in slices
    // too thin to do work, and no managed offering allows more.
    if let Some(n) = replicas.as_number()
        && !replicas
            .as_i64()
            .is_some_and(|i| (2..=MAX_REPLICAS).contains(&i))
    {
        d.error_at(
            path.push_attr("replicas"),
            "Invalid Replicas",
            format!(
                "sharing.replicas: {n} is not a whole number from 2 to {MAX_REPLICAS}; accepted: \
                 2 (the NVIDIA device plugin refuses fewer: \"number of replicas must be >= 2\") \
                 to {MAX_REPLICAS} pods per GPU. For one pod per GPU, use strategy = \"none\"."
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
        } else if k8s_label::valid_key(k) {
            k8s_label::check_value(&path, v, d);
        } else {
            k8s_label::check_key(&path, k, d);
        }
    }
}

/// A taint's key and value follow the label rules.
fn validate_taints(taints: &Value, d: &mut Diagnostics) {
    for (i, t) in taints.as_seq().unwrap_or_default().iter().enumerate() {
        let path = AttrPath::attr("node_taints").push_index(i);
        match t.get("key").as_str() {
            Some(TENANT) => d.error_at(
                path.push_attr("key"),
                "Reserved Taint",
                format!(
                    "the taint {TENANT} is set by gpufleet for dedicated and private virtual \
                     clusters; remove it from node_taints."
                ),
            ),
            Some(key) => k8s_label::check_key(&path.push_attr("key"), key, d),
            None => {}
        }
        k8s_label::check_value(&path.push_attr("value"), t.get("value"), d);
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
}
