//! The Karpenter `NodePool` (`karpenter.sh/v1`) an `auto` pool emits, and the checks of its
//! `karpenter` settings. Pure.
//!
//! The NodePool's requirements constrain what Karpenter may launch to the pool's product.
//! Karpenter itself stamps every requirement's value on the nodes it launches, so the GFD
//! product label (`nvidia.com/gpu.product`) alone would let it launch any instance and label
//! it as the product. The instance-type labels of the cloud's Karpenter provider say what
//! GPUs an instance really has, so with `provider = "aws"` or `"azure"` the NodePool also
//! requires the GPU's manufacturer, name and count (and, on AWS, memory where one name
//! covers two memory sizes); with `"generic"` the user's `requirements` choose the instances.
//!
//! The keys and values come from the providers' sources:
//! * AWS (`karpenter-provider-aws`, `pkg/providers/instancetype/types.go`):
//!   `karpenter.k8s.aws/instance-gpu-{name,manufacturer,count,memory}`, the EC2 GPU name and
//!   manufacturer lower-cased with spaces as dashes, the count and the memory in MiB. The
//!   instance types and their values are those of its generated instance-type reference.
//! * Azure (`karpenter-provider-azure`, `pkg/providers/instancetype/instancetype.go`):
//!   `karpenter.azure.com/sku-gpu-{name,manufacturer,count}`. The name is the accelerator part
//!   of the VM size as `github.com/Azure/skewer` parses it (`[A-Z][0-9]+`: `H100` in
//!   `ND96isr_H100_v5`); sizes whose name has none (`ND96asr_v4`, `ND128isr_NDR_GB200_v6`,
//!   the `RTXPRO6000BSE` sizes) get no name label and cannot be selected by it.
//!
//! The NodePool is capped with `limits` on `nodes` and, when GPUs per node are known (the
//! pool's `karpenter.gpus_per_node`, else the product's, see
//! [`crate::gpu_products::gpus_per_node`]), on `nvidia.com/gpu`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value as Json, json};

use super::{
    choices::{Cloud, Source},
    config::{PoolConfig, Requirement},
    model::PoolSpec,
    node_config::Desired,
    schema::{
        DEFAULT_NODE_CLASS, GPU_PRODUCT, GPUS_PER_NODE, KARPENTER, KARPENTER_PROVIDER, NODE_LABELS,
        REQUIREMENT_KEY, REQUIREMENT_MIN_VALUES, REQUIREMENT_VALUES, REQUIREMENTS,
    },
};
use crate::{
    backends::kube::{GPU_PRODUCT_LABEL, MANAGED_BY, MANAGED_BY_VALUE, POOL},
    catalog::GpuModel,
    diag::{Diagnostic, Diagnostics},
    gpu_products,
    path::AttrPath,
    validate::k8s_label,
    value::Known,
};

pub use crate::backends::kube::NODEPOOL_LABEL;

/// The capacity type an `auto` pool launches when its requirements name none: Karpenter
/// itself would take the cheapest offering, spot where the cloud has it, whose nodes the
/// cloud may reclaim under a training run.
const DEFAULT_CAPACITY_TYPE: &str = "on-demand";

/// The capacity-type label.
const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";

/// The capacity types Karpenter knows (`WellKnownValuesForRequirements`).
const CAPACITY_TYPES: &[&str] = &["on-demand", "spot", "reserved"];

/// Label keys of the `kubernetes.io` domains a NodePool may use (the CRD's list).
const ALLOWED_KUBERNETES_IO: &[&str] = &[
    "beta.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "node.kubernetes.io/windows-build",
];

/// Why Karpenter's NodePool CRD refuses `key` as a requirement key or a template label, if
/// it does: the `x-kubernetes-validations` rules of `karpenter.sh_nodepools.yaml`, which the
/// API server applies to every NodePool gpufleet writes.
pub fn restricted_key(key: &str) -> Option<String> {
    let domain = key.split('/').next().unwrap_or(key);
    let why = if key == "kubernetes.io/hostname" || key == "karpenter.sh/nodepool" {
        format!("label {key:?} is set by Karpenter on each node it launches")
    } else if domain.ends_with("kubernetes.io")
        && !ALLOWED_KUBERNETES_IO.contains(&key)
        && !domain.ends_with("node.kubernetes.io")
        && !domain.ends_with("node-restriction.kubernetes.io")
    {
        "label domain \"kubernetes.io\" is restricted".to_owned()
    } else if domain.ends_with("k8s.io") && !domain.ends_with("kops.k8s.io") {
        "label domain \"k8s.io\" is restricted".to_owned()
    } else if domain.ends_with("karpenter.sh") && key != CAPACITY_TYPE {
        "label domain \"karpenter.sh\" is restricted".to_owned()
    } else {
        return None;
    };
    Some(format!(
        "{why}: Karpenter's NodePool refuses {key:?} in its requirements and its node labels."
    ))
}

// The instance labels and GPUs of each provider, which only the NodePool needs.
impl Cloud {
    fn keys(self) -> Option<&'static GpuKeys> {
        match self {
            Cloud::Aws => Some(&AWS_KEYS),
            Cloud::Azure => Some(&AZURE_KEYS),
            Cloud::Generic => None,
        }
    }

    fn gpus(self) -> &'static [CloudGpu] {
        match self {
            Cloud::Aws => AWS_GPUS,
            Cloud::Azure => AZURE_GPUS,
            Cloud::Generic => &[],
        }
    }
}

/// The instance-type labels of one Karpenter provider that describe an instance's GPUs.
#[derive(Debug)]
struct GpuKeys {
    name: &'static str,
    manufacturer: &'static str,
    count: &'static str,
    memory: Option<&'static str>,
}

const AWS_KEYS: GpuKeys = GpuKeys {
    name: "karpenter.k8s.aws/instance-gpu-name",
    manufacturer: "karpenter.k8s.aws/instance-gpu-manufacturer",
    count: "karpenter.k8s.aws/instance-gpu-count",
    memory: Some("karpenter.k8s.aws/instance-gpu-memory"),
};

const AZURE_KEYS: GpuKeys = GpuKeys {
    name: "karpenter.azure.com/sku-gpu-name",
    manufacturer: "karpenter.azure.com/sku-gpu-manufacturer",
    count: "karpenter.azure.com/sku-gpu-count",
    memory: None,
};

/// How one cloud labels the instances of one catalog product.
#[derive(Debug)]
struct CloudGpu {
    /// Catalog product.
    product: &'static str,
    /// The GPU name label's value.
    name: &'static str,
    /// The GPU memory label's value, where the name alone does not tell the product.
    memory_mib: Option<u32>,
    /// GPUs per instance of the instance types that have it.
    counts: &'static [u32],
}

const fn gpu(
    product: &'static str,
    name: &'static str,
    memory_mib: Option<u32>,
    counts: &'static [u32],
) -> CloudGpu {
    CloudGpu {
        product,
        name,
        memory_mib,
        counts,
    }
}

/// EC2 instance types by GPU (Karpenter's instance-type reference).
const AWS_GPUS: &[CloudGpu] = &[
    // p4d.24xlarge and p4de.24xlarge: both "a100", told apart by memory.
    gpu("NVIDIA-A100-SXM4-40GB", "a100", Some(40_960), &[8]),
    gpu("NVIDIA-A100-SXM4-80GB", "a100", Some(81_920), &[8]),
    // p5.4xlarge and p5.48xlarge.
    gpu("NVIDIA-H100-80GB-HBM3", "h100", None, &[1, 8]),
    // p5e and p5en.48xlarge.
    gpu("NVIDIA-H200", "h200", None, &[8]),
    gpu("NVIDIA-B200", "b200", None, &[8]),
    gpu("NVIDIA-B300-SXM6-AC", "b300", None, &[8]),
    // g6 and gr6; the fractional g6f sizes report 0 GPUs and are left out by the count.
    gpu("NVIDIA-L4", "l4", None, &[1, 4, 8]),
    // g6e.
    gpu("NVIDIA-L40S", "l40s", None, &[1, 4, 8]),
    // g7e.
    gpu(
        "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition",
        "rtx-pro-server-6000",
        None,
        &[1, 2, 4, 8],
    ),
];

/// Azure VM sizes by GPU (the accelerator part of the size name).
const AZURE_GPUS: &[CloudGpu] = &[
    // ND96amsr_A100_v4 (SXM, 8) and NC24/48/96ads_A100_v4 (PCIe, 1/2/4): both "A100".
    gpu("NVIDIA-A100-SXM4-80GB", "A100", None, &[8]),
    gpu("NVIDIA-A100-80GB-PCIe", "A100", None, &[1, 2, 4]),
    // ND96is(r)_H100_v5 (SXM, 8) and NC40ads/NC80adis_H100_v5 (H100 NVL, 1/2).
    gpu("NVIDIA-H100-80GB-HBM3", "H100", None, &[8]),
    gpu("NVIDIA-H100-NVL", "H100", None, &[1, 2]),
    // ND96isr_H200_v5.
    gpu("NVIDIA-H200", "H200", None, &[8]),
];

// How a requirement is written in the NodePool.
impl Requirement {
    fn is_in(key: &str, values: Vec<String>) -> Requirement {
        Requirement {
            key: key.to_owned(),
            operator: "In".to_owned(),
            values,
            min_values: None,
        }
    }

    fn json(&self) -> Json {
        let mut r = json!({"key": self.key, "operator": self.operator});
        if !self.values.is_empty() {
            r["values"] = json!(self.values);
        }
        if let Some(n) = self.min_values {
            r["minValues"] = json!(n);
        }
        r
    }
}

/// The provider a pool's NodePool is written for: `karpenter.provider`, else the one of the
/// node class group.
pub fn cloud(spec: &PoolSpec) -> Cloud {
    spec.karpenter
        .cloud
        .or_else(|| Cloud::of_group(&spec.node_class.0))
        .unwrap_or(Cloud::Generic)
}

/// GPUs per node: `karpenter.gpus_per_node`, else the product's; `None` when servers differ.
pub fn gpus_per_node(spec: &PoolSpec) -> Option<u32> {
    spec.karpenter
        .gpus_per_node
        .or_else(|| gpu_products::gpus_per_node(spec.model))
}

fn cloud_gpu(cloud: Cloud, model: &GpuModel) -> Option<&'static CloudGpu> {
    cloud.gpus().iter().find(|g| g.product == model.product)
}

/// The requirements gpufleet writes: the product label, then the cloud's GPU keys.
fn product_requirements(spec: &PoolSpec) -> Vec<Requirement> {
    let mut reqs = vec![Requirement::is_in(
        GPU_PRODUCT_LABEL,
        vec![spec.model.product.to_owned()],
    )];
    let cloud = cloud(spec);
    let (Some(keys), Some(g)) = (cloud.keys(), cloud_gpu(cloud, spec.model)) else {
        return reqs;
    };
    let counts: Vec<String> = match gpus_per_node(spec) {
        Some(n) => vec![n.to_string()],
        None => g.counts.iter().map(u32::to_string).collect(),
    };
    reqs.push(Requirement::is_in(keys.manufacturer, vec!["nvidia".into()]));
    reqs.push(Requirement::is_in(keys.name, vec![g.name.to_owned()]));
    reqs.push(Requirement::is_in(keys.count, counts));
    if let (Some(key), Some(mib)) = (keys.memory, g.memory_mib) {
        reqs.push(Requirement::is_in(key, vec![mib.to_string()]));
    }
    reqs
}

/// Every requirement of the NodePool: gpufleet's, on-demand capacity unless the user's
/// requirements or node labels name a capacity type, then the user's.
pub fn requirements(spec: &PoolSpec) -> Vec<Requirement> {
    let mut reqs = product_requirements(spec);
    let user = &spec.karpenter.requirements;
    // A capacity-type node label is a requirement to Karpenter too.
    let labelled = spec.node_labels.contains_key(CAPACITY_TYPE);
    if !labelled && !user.iter().any(|r| r.key == CAPACITY_TYPE) {
        reqs.push(Requirement::is_in(
            CAPACITY_TYPE,
            vec![DEFAULT_CAPACITY_TYPE.to_owned()],
        ));
    }
    reqs.extend(user.iter().cloned());
    reqs
}

/// The NodePool object.
pub fn node_pool(spec: &PoolSpec, want: &Desired) -> Json {
    let max = spec
        .autoscaling
        .map(|(_, max)| max)
        .or(spec.node_count)
        .unwrap_or(1);
    let taints: Vec<Json> = want
        .taints
        .iter()
        .map(|t| match &t.value {
            Some(v) => json!({"key": t.key, "value": v, "effect": t.effect}),
            None => json!({"key": t.key, "effect": t.effect}),
        })
        .collect();
    let mut limits = json!({ "nodes": max.to_string() });
    if let Some(n) = gpus_per_node(spec) {
        limits["nvidia.com/gpu"] = json!((max * n).to_string());
    }
    let (group, kind, name) = &spec.node_class;
    json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {
            "name": spec.node_pool_name(),
            "labels": {
                MANAGED_BY: MANAGED_BY_VALUE,
                POOL: spec.pool_label(),
            },
        },
        "spec": {
            "template": {
                "metadata": { "labels": want.labels },
                "spec": {
                    "requirements": requirements(spec).iter().map(Requirement::json).collect::<Vec<_>>(),
                    "taints": taints,
                    "nodeClassRef": { "group": group, "kind": kind, "name": name },
                },
            },
            "limits": limits,
            "disruption": {
                "consolidationPolicy": "WhenEmpty",
                "consolidateAfter": "5m",
            },
        },
    })
}

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
pub(super) fn validate(pool: &PoolConfig) -> Diagnostics {
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

/// The `kubernetes.io` labels the CRD lets a NodePool name that Karpenter's own validation of
/// its node labels refuses (`IsRestrictedLabel`, which knows them only by their current
/// names), leaving the NodePool not Ready: the deprecated beta names.
fn restricted_label(key: &str) -> Option<String> {
    let deprecated = key.starts_with("beta.kubernetes.io/")
        || key.starts_with("failure-domain.beta.kubernetes.io/");
    deprecated.then(|| {
        format!(
            "Karpenter refuses the deprecated label {key:?} among a NodePool's node labels; use \
             its current name (kubernetes.io/arch, kubernetes.io/os, \
             node.kubernetes.io/instance-type, topology.kubernetes.io/zone or /region)."
        )
    })
}

/// The pool's `node_labels` become the NodePool's template labels, which Karpenter's CRD
/// restricts as it does requirement keys.
pub(super) fn check_template_labels(pool: &PoolConfig) -> Diagnostics {
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
pub(super) fn check_model(pool: &PoolConfig, model: &GpuModel) -> Diagnostics {
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
    use super::*;
    use crate::{
        resources::gpu_node_pool::{choices::Tier, model::PoolSpec, node_config::desired},
        value::Value,
    };

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

    fn config(product: &str, karpenter: Value, class: Option<&str>) -> Value {
        Value::object([
            ("name", Value::string("infer")),
            ("virtual_cluster_id", Value::string("vc-a/a")),
            ("gpu_product", Value::string(product)),
            ("source", Value::string("auto")),
            (
                "autoscaling",
                Value::object([("min_nodes", Value::int(0)), ("max_nodes", Value::int(4))]),
            ),
            ("karpenter", karpenter),
            ("karpenter_node_class", class.map(Value::string).into()),
        ])
    }

    fn karpenter(provider: Option<&str>, gpus: Option<i64>, reqs: Vec<Value>) -> Value {
        Value::object([
            ("provider", provider.map(Value::string).into()),
            ("gpus_per_node", gpus.map(Value::int).into()),
            (
                "requirements",
                if reqs.is_empty() {
                    Value::Null
                } else {
                    Value::List(reqs)
                },
            ),
        ])
    }

    fn req(key: &str, op: &str, values: &[&str]) -> Value {
        Value::object([
            ("key", Value::string(key)),
            ("operator", Value::string(op)),
            (
                "values",
                Value::List(values.iter().map(|v| Value::string(*v)).collect()),
            ),
            ("min_values", Value::Null),
        ])
    }

    fn node_pool_of(v: &Value) -> Json {
        let spec = PoolSpec::from_value(v).expect("spec");
        node_pool(&spec, &desired(&spec, Tier::Private))
    }

    fn requirement<'a>(np: &'a Json, key: &str) -> Option<&'a Json> {
        np["spec"]["template"]["spec"]["requirements"]
            .as_array()?
            .iter()
            .find(|r| r["key"] == key)
    }

    #[test]
    fn aws_node_pool_asks_for_the_gpu_by_its_instance_labels() {
        let np = node_pool_of(&config("H100-SXM", Value::Null, None));
        assert_eq!(np["metadata"]["name"], "gpufleet-a-infer");
        assert_eq!(np["spec"]["limits"]["nodes"], "4");
        assert_eq!(np["spec"]["limits"]["nvidia.com/gpu"], "32");
        let values = |k: &str| requirement(&np, k).map(|r| r["values"].clone());
        assert_eq!(
            values(GPU_PRODUCT_LABEL),
            Some(json!(["NVIDIA-H100-80GB-HBM3"]))
        );
        assert_eq!(
            values("karpenter.k8s.aws/instance-gpu-name"),
            Some(json!(["h100"]))
        );
        assert_eq!(
            values("karpenter.k8s.aws/instance-gpu-count"),
            Some(json!(["8"]))
        );
        assert_eq!(
            values("karpenter.k8s.aws/instance-gpu-manufacturer"),
            Some(json!(["nvidia"]))
        );
        assert_eq!(
            np["spec"]["template"]["spec"]["taints"][0]["key"],
            "gpufleet.dev/tenant"
        );
        assert_eq!(
            np["spec"]["template"]["metadata"]["labels"]["gpufleet.dev/pool"],
            "a.infer"
        );
        // The two A100s share a name on EC2 and differ by memory.
        let a100 = node_pool_of(&config("NVIDIA-A100-SXM4-40GB", Value::Null, None));
        assert_eq!(
            requirement(&a100, "karpenter.k8s.aws/instance-gpu-memory").map(|r| &r["values"]),
            Some(&json!(["40960"]))
        );
    }

    #[test]
    fn azure_and_generic_node_pools() {
        let az = node_pool_of(&config(
            "NVIDIA-H100-NVL",
            Value::Null,
            Some("karpenter.azure.com/AKSNodeClass/gpu"),
        ));
        assert_eq!(
            requirement(&az, "karpenter.azure.com/sku-gpu-name").map(|r| &r["values"]),
            Some(&json!(["H100"]))
        );
        // GPUs per node differ between H100 NVL sizes: every offered count, no GPU limit.
        assert_eq!(
            requirement(&az, "karpenter.azure.com/sku-gpu-count").map(|r| &r["values"]),
            Some(&json!(["1", "2"]))
        );
        assert!(az["spec"]["limits"].get("nvidia.com/gpu").is_none());
        let generic = node_pool_of(&config(
            "NVIDIA-L40S",
            karpenter(
                Some("generic"),
                Some(4),
                vec![req("node.kubernetes.io/instance-type", "In", &["x.4gpu"])],
            ),
            None,
        ));
        let keys: Vec<&Json> = generic["spec"]["template"]["spec"]["requirements"]
            .as_array()
            .expect("requirements")
            .iter()
            .map(|r| &r["key"])
            .collect();
        assert_eq!(
            keys,
            [
                GPU_PRODUCT_LABEL,
                CAPACITY_TYPE,
                "node.kubernetes.io/instance-type"
            ]
        );
        // On-demand unless the user names a capacity type.
        assert_eq!(
            requirement(&generic, CAPACITY_TYPE).map(|r| &r["values"]),
            Some(&json!(["on-demand"]))
        );
        let spot = node_pool_of(&config(
            "NVIDIA-L40S",
            karpenter(None, None, vec![req(CAPACITY_TYPE, "In", &["spot"])]),
            None,
        ));
        let capacity: Vec<&Json> = spot["spec"]["template"]["spec"]["requirements"]
            .as_array()
            .expect("requirements")
            .iter()
            .filter(|r| r["key"] == CAPACITY_TYPE)
            .collect();
        assert_eq!(
            capacity,
            [&json!({"key": CAPACITY_TYPE, "operator": "In", "values": ["spot"]})]
        );
        assert_eq!(generic["spec"]["limits"]["nvidia.com/gpu"], "16");
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
