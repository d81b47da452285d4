//! The offline checks of an `auto` pool's `karpenter` settings and node labels, and the
//! plan-time check of its product against the cloud's instances.

use std::collections::{BTreeMap, BTreeSet};

use super::{
    cloud_gpus::cloud_gpu,
    label_keys::{CAPACITY_TYPE, restricted_key, restricted_label},
};
use crate::resources::gpu_node_pool::{
    choices::{Cloud, Source},
    config::{PoolConfig, Requirement},
    schema::{
        DEFAULT_NODE_CLASS, GPU_PRODUCT, GPUS_PER_NODE, KARPENTER, KARPENTER_PROVIDER, NODE_LABELS,
        REQUIREMENT_KEY, REQUIREMENT_MIN_VALUES, REQUIREMENT_VALUES, REQUIREMENTS,
    },
};
use crate::{
    backends::kube::GPU_PRODUCT_LABEL,
    catalog::GpuModel,
    diag::{Diagnostic, Diagnostics},
    gpu_products,
    path::AttrPath,
    validate::k8s_label,
    value::Known,
};

/// The capacity types Karpenter knows (`WellKnownValuesForRequirements`).
const CAPACITY_TYPES: &[&str] = &["on-demand", "spot", "reserved"];

/// The node class group a configuration names, or the default's.
fn node_class_group(pool: &PoolConfig) -> Option<String> {
    let class = match &pool.karpenter_node_class {
        Known::Unknown => return None,
        Known::Null => DEFAULT_NODE_CLASS,
        Known::Value(s) => s.as_str(),
    };
    class.split('/').next().map(str::to_owned)
}

/// The provider a configuration chooses, when known.
fn config_cloud(pool: &PoolConfig) -> Option<Cloud> {
    let provider = match &pool.karpenter {
        Known::Unknown => return None,
        Known::Null => &Known::Null,
        Known::Value(k) => &k.provider,
    };
    match provider {
        Known::Unknown => None,
        Known::Value(p) => Cloud::parse(p),
        Known::Null => Some(
            node_class_group(pool)
                .as_deref()
                .and_then(Cloud::of_group)
                .unwrap_or(Cloud::Generic),
        ),
    }
}

/// The offline checks of `karpenter`, at validate: only with `source = "auto"`, a provider
/// that matches the node class, well-formed requirements that neither contradict each other
/// nor rewrite the keys gpufleet sets.
pub(crate) fn validate(pool: &PoolConfig) -> Diagnostics {
    let mut d = Diagnostics::new();
    let Some(karpenter) = pool.karpenter.value() else {
        return d;
    };
    let at = AttrPath::attr(KARPENTER);
    if !pool.source.is_unknown() && !pool.source_is(Source::Auto) {
        d.error_at(
            at.clone(),
            "Karpenter Settings Without Karpenter",
            "karpenter only applies with source = \"auto\", where the pool emits a Karpenter \
             NodePool; remove it or set source = \"auto\".",
        );
    }
    if let (Some(p), Some(group)) = (
        karpenter.provider.value().and_then(|p| Cloud::parse(p)),
        node_class_group(pool),
    ) && let Some(of_class) = Cloud::of_group(&group)
        && p != Cloud::Generic
        && p != of_class
    {
        d.error_at(
            at.push_attr(KARPENTER_PROVIDER),
            "Conflicting Karpenter Provider",
            format!(
                "provider = {:?} does not match the node class group {group:?}, which belongs \
                 to the {} provider. Set provider = {:?}, or karpenter_node_class to a node \
                 class of the {} provider.",
                p.name(),
                of_class.title(),
                of_class.name(),
                p.title()
            ),
        );
    }
    let cloud = config_cloud(pool);
    let mut earlier: Vec<(usize, &Requirement)> = Vec::new();
    let reqs = karpenter.requirements.value().into_iter().flatten();
    for (i, r) in reqs.enumerate() {
        let path = at.push_attr(REQUIREMENTS).push_index(i);
        let Some(req) = r.value() else {
            continue;
        };
        check_shape(req, &path, &mut d);
        if let Some(why) = reserved_key(&req.key, cloud) {
            d.error_at(
                path.push_attr(REQUIREMENT_KEY),
                "Conflicting Requirement",
                why,
            );
        }
        if let Some((j, _)) = earlier.iter().find(|(_, other)| contradict(other, req)) {
            d.error_at(
                path.clone(),
                "Conflicting Requirements",
                format!(
                    "requirements[{i}] ({} {} {:?}) and requirements[{j}] on the same key can \
                     never both hold, so Karpenter could launch nothing.",
                    req.key, req.operator, req.values
                ),
            );
        }
        earlier.push((i, req));
    }
    d
}

/// Why a user requirement may not use `key`, if it may not.
fn reserved_key(key: &str, cloud: Option<Cloud>) -> Option<String> {
    if key == GPU_PRODUCT_LABEL {
        return Some(format!(
            "{GPU_PRODUCT_LABEL} is set from gpu_product; remove this requirement."
        ));
    }
    let cloud = cloud?;
    let keys = cloud.keys()?;
    let generated = [
        Some(keys.name),
        Some(keys.manufacturer),
        Some(keys.count),
        keys.memory,
    ];
    generated.contains(&Some(key)).then(|| {
        format!(
            "{key} is set by gpufleet from gpu_product and gpus_per_node with provider = {:?}. \
             Change gpus_per_node, or set provider = \"generic\" to write the GPU requirements \
             yourself.",
            cloud.name()
        )
    })
}

/// The checks of one requirement that Karpenter makes: its NodePool CRD's schema and CEL
/// rules, which the API server applies at apply, and its own validation of requirement
/// values (label values), which leaves a NodePool not Ready. Both are refused at plan.
fn check_shape(req: &Requirement, path: &AttrPath, d: &mut Diagnostics) {
    let n = req.values.len();
    let problem = match req.operator.as_str() {
        "In" | "NotIn" if n == 0 => Some(format!("{} needs at least one value.", req.operator)),
        "Exists" | "DoesNotExist" if n > 0 => Some(format!("{} takes no values.", req.operator)),
        "Gt" | "Lt" if n != 1 || !req.values[0].parse::<i64>().is_ok_and(|v| v >= 0) => {
            Some(format!(
                "{} takes exactly one value, a whole number of 0 or more.",
                req.operator
            ))
        }
        _ => None,
    };
    if let Some(p) = problem {
        d.error_at(path.push_attr(REQUIREMENT_VALUES), "Invalid Requirement", p);
    }
    let numeric = matches!(req.operator.as_str(), "Gt" | "Lt");
    for (i, v) in req.values.iter().enumerate() {
        if !numeric && !k8s_label::valid_value(v) {
            d.error_at(
                path.push_attr(REQUIREMENT_VALUES).push_index(i),
                "Invalid Requirement",
                format!(
                    "{v:?} is not a label value (63 characters at most: letters, digits, '-', \
                     '_' and '.', beginning and ending with a letter or digit)."
                ),
            );
        }
    }
    if req.key == CAPACITY_TYPE
        && req.operator == "In"
        && n > 0
        && !req
            .values
            .iter()
            .any(|v| CAPACITY_TYPES.contains(&v.as_str()))
    {
        d.error_at(
            path.push_attr(REQUIREMENT_VALUES),
            "Invalid Requirement",
            format!(
                "{CAPACITY_TYPE} takes {}; none of {:?} is one, so Karpenter would leave the \
                 NodePool not Ready.",
                CAPACITY_TYPES.join(", "),
                req.values
            ),
        );
    }
    if let Some(min) = req.min_values
        && req.operator == "In"
        && (min as usize) > n
    {
        d.error_at(
            path.push_attr(REQUIREMENT_MIN_VALUES),
            "Invalid Requirement",
            format!("min_values = {min} needs at least {min} values; values has {n}."),
        );
    }
    if !k8s_label::valid_key(&req.key) {
        d.error_at(
            path.push_attr(REQUIREMENT_KEY),
            "Invalid Requirement",
            format!("{:?} is not a Kubernetes label key.", req.key),
        );
    } else if let Some(why) = restricted_key(&req.key) {
        d.error_at(
            path.push_attr(REQUIREMENT_KEY),
            "Restricted Requirement Key",
            why,
        );
    }
}

/// The pool's `node_labels` become the NodePool's template labels, which Karpenter's CRD
/// restricts as it does requirement keys.
pub(crate) fn check_template_labels(pool: &PoolConfig) -> Diagnostics {
    let mut d = Diagnostics::new();
    if !pool.source_is(Source::Auto) {
        return d;
    }
    for key in pool
        .node_labels
        .value()
        .into_iter()
        .flat_map(BTreeMap::keys)
    {
        if let Some(why) = restricted_key(key).or_else(|| restricted_label(key)) {
            d.error_at(
                AttrPath::attr(NODE_LABELS).push_key(key.clone()),
                "Restricted Node Label",
                why,
            );
        }
    }
    d
}

/// Whether two requirements on one key exclude each other.
fn contradict(a: &Requirement, b: &Requirement) -> bool {
    if a.key != b.key {
        return false;
    }
    let set = |r: &Requirement| r.values.iter().cloned().collect::<BTreeSet<String>>();
    match (a.operator.as_str(), b.operator.as_str()) {
        ("In", "In") => set(a).is_disjoint(&set(b)),
        ("In", "NotIn") => set(a).is_subset(&set(b)),
        ("NotIn", "In") => set(b).is_subset(&set(a)),
        ("In" | "Exists", "DoesNotExist") | ("DoesNotExist", "In" | "Exists") => true,
        _ => false,
    }
}

/// The plan-time checks that need the product's model (declared products are only known
/// at plan): with `aws` or `azure`, the cloud must offer the product with that many GPUs.
pub(crate) fn check_model(pool: &PoolConfig, model: &GpuModel) -> Diagnostics {
    let mut d = Diagnostics::new();
    if !pool.source_is(Source::Auto) {
        return d;
    }
    let Some(cloud) = config_cloud(pool) else {
        return d;
    };
    let karpenter = pool.karpenter.value();
    if cloud == Cloud::Generic {
        let none = karpenter
            .and_then(|k| k.requirements.value())
            .is_none_or(Vec::is_empty);
        if none {
            d.push(
                Diagnostic::warning(
                    "Karpenter May Launch Any Instance",
                    format!(
                        "with provider = \"generic\" and no requirements, the NodePool only \
                         asks for the label {GPU_PRODUCT_LABEL}={}, which Karpenter writes on \
                         whatever instance it launches. Add requirements that select \
                         instances with this GPU.",
                        model.product
                    ),
                )
                .with_path(AttrPath::attr(KARPENTER)),
            );
        }
        return d;
    }
    let explicit = karpenter.is_some_and(|k| k.provider.value().is_some());
    let Some(g) = cloud_gpu(cloud, model) else {
        let offered: Vec<&str> = cloud.gpus().iter().map(|g| g.product).collect();
        let path = if explicit {
            AttrPath::attr(KARPENTER).push_attr(KARPENTER_PROVIDER)
        } else {
            AttrPath::attr(GPU_PRODUCT)
        };
        d.error_at(
            path,
            "GPU Product Not Offered By Cloud",
            format!(
                "{}'s Karpenter provider labels no instance type with the GPU of {} that \
                 gpufleet knows of (it maps {}). Set karpenter = {{ provider = \"generic\", \
                 requirements = [...] }} to choose the instances yourself.",
                cloud.title(),
                model.product,
                offered.join(", ")
            ),
        );
        return d;
    };
    let per_node = karpenter.map_or(&Known::Null, |k| &k.gpus_per_node);
    let (wanted, path) = match per_node {
        Known::Value(n) => (
            u32::try_from(*n).ok(),
            AttrPath::attr(KARPENTER).push_attr(GPUS_PER_NODE),
        ),
        Known::Unknown => (None, AttrPath::root()),
        Known::Null => (
            gpu_products::gpus_per_node(model),
            AttrPath::attr(GPU_PRODUCT),
        ),
    };
    if let Some(n) = wanted
        && !g.counts.contains(&n)
    {
        let counts: Vec<String> = g.counts.iter().map(u32::to_string).collect();
        d.error_at(
            path,
            "No Instance With That Many GPUs",
            format!(
                "{} offers {} with {} GPUs per instance, not {n}; set karpenter.gpus_per_node \
                 to one of these.",
                cloud.title(),
                model.product,
                counts.join(", ")
            ),
        );
    }
    d
}

#[cfg(test)]
mod tests {
    use super::{
        super::fixtures::{config, karpenter, req},
        *,
    };
    use crate::value::Value;

    // The checks read a decoded configuration; the tests write raw values.
    fn validate(v: &Value) -> Diagnostics {
        super::validate(&PoolConfig::decode(v))
    }

    fn check_template_labels(v: &Value) -> Diagnostics {
        super::check_template_labels(&PoolConfig::decode(v))
    }

    fn check_model(v: &Value, model: &GpuModel) -> Diagnostics {
        super::check_model(&PoolConfig::decode(v), model)
    }

    #[test]
    fn requirements_are_checked_where_they_are_written() {
        let at = |d: &Diagnostics| -> Vec<String> {
            d.iter()
                .filter_map(|x| x.path.as_ref().map(ToString::to_string))
                .collect()
        };
        let d = validate(&config(
            "NVIDIA-H100-80GB-HBM3",
            karpenter(
                None,
                None,
                vec![
                    req("karpenter.k8s.aws/instance-gpu-count", "In", &["4"]),
                    req("karpenter.sh/capacity-type", "In", &["spot"]),
                    req("karpenter.sh/capacity-type", "In", &["on-demand"]),
                    req("karpenter.k8s.aws/instance-cpu", "Gt", &["a", "b"]),
                    req("topology.kubernetes.io/zone", "Exists", &["x"]),
                ],
            ),
            None,
        ));
        assert_eq!(
            at(&d),
            [
                "karpenter.requirements[0].key",
                "karpenter.requirements[2]",
                "karpenter.requirements[3].values",
                "karpenter.requirements[4].values",
            ],
            "{d:?}"
        );
        // The same count key is free with generic.
        let d = validate(&config(
            "NVIDIA-H100-80GB-HBM3",
            karpenter(
                Some("generic"),
                None,
                vec![req("karpenter.k8s.aws/instance-gpu-count", "In", &["4"])],
            ),
            None,
        ));
        assert!(d.is_empty(), "{d:?}");
        // A provider that contradicts the node class.
        let d = validate(&config(
            "NVIDIA-H100-80GB-HBM3",
            karpenter(Some("azure"), None, vec![]),
            None,
        ));
        assert_eq!(at(&d), ["karpenter.provider"]);
    }

    #[test]
    fn what_the_nodepool_crd_refuses_is_refused_at_validate() {
        let at = |d: &Diagnostics| -> Vec<String> {
            d.iter()
                .filter_map(|x| x.path.as_ref().map(ToString::to_string))
                .collect()
        };
        let mut min = req("node.kubernetes.io/instance-type", "In", &["a.1", "b.1"]);
        if let Value::Object(m) = &mut min {
            m.insert("min_values".into(), Value::int(3));
        }
        let d = validate(&config(
            "NVIDIA-L40S",
            karpenter(
                Some("generic"),
                None,
                vec![
                    req("kubernetes.io/hostname", "In", &["n1"]),
                    req("karpenter.sh/nodepool", "In", &["x"]),
                    req("node-role.kubernetes.io/gpu", "Exists", &[]),
                    req("example.k8s.io/x", "Exists", &[]),
                    req("karpenter.sh/foo", "Exists", &[]),
                    req("karpenter.k8s.aws/instance-cpu", "Gt", &["-1"]),
                    req("example.com/grade", "In", &["not a value"]),
                    min,
                    // Allowed: a well-known kubernetes.io label, node.kubernetes.io, the
                    // capacity type, a domain of one's own.
                    req("topology.kubernetes.io/zone", "In", &["zone-a"]),
                    req("node.kubernetes.io/instance-type", "NotIn", &["x.1"]),
                    req(CAPACITY_TYPE, "In", &["spot"]),
                    req("example.com/tier", "In", &["gold"]),
                ],
            ),
            None,
        ));
        assert_eq!(
            at(&d),
            [
                "karpenter.requirements[0].key",
                "karpenter.requirements[1].key",
                "karpenter.requirements[2].key",
                "karpenter.requirements[3].key",
                "karpenter.requirements[4].key",
                "karpenter.requirements[5].values",
                "karpenter.requirements[6].values[0]",
                "karpenter.requirements[7].min_values",
            ],
            "{d:?}"
        );
        let labels = |source: &str| {
            Value::object([
                ("source", Value::string(source)),
                (
                    "node_labels",
                    Value::Map(
                        [
                            ("kubernetes.io/role".to_owned(), Value::string("gpu")),
                            ("team.example.com/cost".to_owned(), Value::string("ml")),
                        ]
                        .into(),
                    ),
                ),
            ])
        };
        assert_eq!(
            at(&check_template_labels(&labels("auto"))),
            ["node_labels[\"kubernetes.io/role\"]"]
        );
        let beta = Value::object([
            ("source", Value::string("auto")),
            (
                "node_labels",
                Value::Map([("beta.kubernetes.io/arch".to_owned(), Value::string("amd64"))].into()),
            ),
        ]);
        assert_eq!(
            at(&check_template_labels(&beta)),
            ["node_labels[\"beta.kubernetes.io/arch\"]"]
        );
        // A capacity type Karpenter does not know.
        let d = validate(&config(
            "NVIDIA-L40S",
            karpenter(
                Some("generic"),
                None,
                vec![req(CAPACITY_TYPE, "In", &["ondemand"])],
            ),
            None,
        ));
        assert_eq!(at(&d), ["karpenter.requirements[0].values"], "{d:?}");
        // Labels of host nodes are written by gpufleet, not by Karpenter.
        assert!(check_template_labels(&labels("host")).is_empty());
    }

    #[test]
    fn products_the_cloud_does_not_offer_are_refused_at_plan() {
        let lookup = |p: &str| crate::catalog::lookup(p).expect("catalog");
        let a30 = config("NVIDIA-A30", Value::Null, None);
        let d = check_model(&a30, lookup("NVIDIA-A30"));
        assert!(d.has_error());
        assert_eq!(d.0[0].path, Some(AttrPath::attr("gpu_product")));
        let h100 = config(
            "NVIDIA-H100-80GB-HBM3",
            karpenter(Some("aws"), Some(2), vec![]),
            None,
        );
        let d = check_model(&h100, lookup("NVIDIA-H100-80GB-HBM3"));
        assert_eq!(
            d.0[0].path,
            Some(AttrPath::attr("karpenter").push_attr("gpus_per_node"))
        );
        assert!(d.0[0].detail.contains("1, 8"), "{d:?}");
        let ok = config(
            "NVIDIA-H100-80GB-HBM3",
            karpenter(Some("aws"), Some(1), vec![]),
            None,
        );
        assert!(check_model(&ok, lookup("NVIDIA-H100-80GB-HBM3")).is_empty());
        // generic without requirements warns, never fails.
        let generic = config("NVIDIA-A30", karpenter(Some("generic"), None, vec![]), None);
        let d = check_model(&generic, lookup("NVIDIA-A30"));
        assert!(!d.has_error() && !d.is_empty());
    }
}
