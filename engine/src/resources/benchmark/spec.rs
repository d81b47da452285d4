//! The benchmark as configured: decoding a planned value into a [`BenchmarkSpec`], and the
//! offline checks across attributes. Pure.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use crate::{
    benchmark::{self, Suite},
    diag::Diagnostics,
    path::AttrPath,
    tenancy::VirtualClusterRef,
    validate::PositiveDuration,
    value::Value,
};

use super::{
    launch::LauncherSetting,
    schema::{DEFAULT_START_TIMEOUT, NODE_FIELDS},
    thresholds::{self, Bounds},
};

/// The node pool a benchmark runs on, from its id `<namespace>/<virtual cluster>/<pool>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolRef {
    /// The pool's virtual cluster.
    pub vc: VirtualClusterRef,
    /// The pool's name.
    pub name: String,
}

impl PoolRef {
    /// Parses a pool id.
    pub fn parse(id: &str) -> Option<PoolRef> {
        let (vc, name) = id.trim().rsplit_once('/')?;
        let vc = VirtualClusterRef::parse(vc)?;
        (!name.is_empty()).then(|| PoolRef {
            vc,
            name: name.to_owned(),
        })
    }

    /// The pool's id.
    pub fn id(&self) -> String {
        format!("{}/{}/{}", self.vc.namespace, self.vc.name, self.name)
    }
}

/// What a failed run does to the apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFailure {
    /// An apply error; the run is recorded and tainted.
    Fail,
    /// Recorded as `failed`, no error.
    Record,
}

/// A benchmark as configured, decoded from a wholly known planned value.
#[derive(Clone)]
pub struct BenchmarkSpec {
    /// Name.
    pub name: String,
    /// Host namespace to run in.
    pub namespace: String,
    /// The virtual cluster, when given.
    pub vc: Option<VirtualClusterRef>,
    /// The node pool, when given.
    pub pool: Option<PoolRef>,
    /// The suite.
    pub suite: &'static dyn Suite,
    /// Container image.
    pub image: String,
    /// Command as configured (`None`: the suite's default).
    pub command: Option<Vec<String>>,
    /// Nodes (pods).
    pub nodes: u32,
    /// GPUs per pod.
    pub gpus_per_node: u32,
    /// Suite parameters.
    pub parameters: BTreeMap<String, String>,
    /// Metric bounds.
    pub thresholds: BTreeMap<String, Bounds>,
    /// What a failed run does.
    pub on_failure: OnFailure,
    /// The gang deadline.
    pub start_timeout: Duration,
    /// How a multi-node MPI run starts.
    pub launcher: LauncherSetting,
    /// Per-node environment fields the nodes may differ in.
    pub allow_node_differences: BTreeSet<String>,
}

impl std::fmt::Debug for BenchmarkSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BenchmarkSpec")
            .field("name", &self.name)
            .field("namespace", &self.namespace)
            .field("suite", &self.suite.name())
            .field("nodes", &self.nodes)
            .finish_non_exhaustive()
    }
}

fn string_map(v: &Value) -> BTreeMap<String, String> {
    v.as_map()
        .map(|m| {
            m.iter()
                .filter_map(|(k, x)| Some((k.clone(), x.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// The namespace a benchmark runs in: `namespace`, else the namespace of
/// `virtual_cluster_id`.
pub fn namespace_of(v: &Value) -> Option<String> {
    v.get("namespace").as_str().map(str::to_owned).or_else(|| {
        v.get("virtual_cluster_id")
            .as_str()
            .and_then(VirtualClusterRef::parse)
            .map(|vc| vc.namespace)
    })
}

impl BenchmarkSpec {
    /// Decodes a planned value whose configuration is known.
    pub fn from_value(v: &Value) -> Result<BenchmarkSpec, Diagnostics> {
        let mut d = Diagnostics::new();
        let name = v.get("name").as_str().unwrap_or_default().to_owned();
        let suite = v.get("suite").as_str().and_then(benchmark::suite);
        let namespace = namespace_of(v);
        let image = v.get("image").as_str().map(str::to_owned);
        let (Some(suite), Some(namespace), Some(image)) = (suite, namespace, image) else {
            d.error_at(
                AttrPath::root(),
                "Value Not Known At Apply",
                "name, suite, image and namespace (or virtual_cluster_id) must be known to run a \
                 benchmark.",
            );
            return Err(d);
        };
        let count = |a: &str| {
            v.get(a)
                .as_i64()
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(1)
        };
        let command = v.get("command").as_seq().map(|xs| {
            xs.iter()
                .map(|x| x.as_str().unwrap_or_default().to_owned())
                .collect()
        });
        Ok(BenchmarkSpec {
            name,
            namespace,
            vc: v
                .get("virtual_cluster_id")
                .as_str()
                .and_then(VirtualClusterRef::parse),
            pool: v.get("node_pool_id").as_str().and_then(PoolRef::parse),
            suite,
            image,
            command,
            nodes: count("nodes"),
            gpus_per_node: count("gpus_per_node"),
            parameters: string_map(v.get("parameters")),
            thresholds: thresholds::of_value(v.get("thresholds")),
            on_failure: match v.get("on_failure").as_str() {
                Some("record") => OnFailure::Record,
                _ => OnFailure::Fail,
            },
            start_timeout: v
                .get("start_timeout")
                .as_str()
                .and_then(|s| PositiveDuration::parse(s).ok())
                .or_else(|| PositiveDuration::parse(DEFAULT_START_TIMEOUT).ok())
                .unwrap_or(Duration::from_secs(300)),
            launcher: LauncherSetting::parse(v.get("launcher").as_str()),
            allow_node_differences: v
                .get("allow_node_differences")
                .as_seq()
                .map(|xs| {
                    xs.iter()
                        .filter_map(|x| x.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
        })
    }

    /// The resource id.
    pub fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// The checks across attributes; per-attribute rules are validators in the schema.
pub fn validate(config: &Value) -> Diagnostics {
    let mut d = Diagnostics::new();
    let (vc, ns) = (config.get("virtual_cluster_id"), config.get("namespace"));
    if vc.is_null() && ns.is_null() {
        d.error_at(
            AttrPath::root(),
            "Missing Namespace",
            "set virtual_cluster_id (to run in the virtual cluster's host namespace) or \
             namespace.",
        );
    }
    let vc_ref = vc.as_str().map(|s| (s, VirtualClusterRef::parse(s)));
    if let Some((s, None)) = vc_ref {
        d.error_at(
            AttrPath::attr("virtual_cluster_id"),
            "Invalid Virtual Cluster ID",
            format!("{s:?} is not a virtual cluster id (`<host namespace>/<name>`)."),
        );
    }
    if let (Some((_, Some(vc))), Some(ns)) = (&vc_ref, ns.as_str())
        && vc.namespace != ns
    {
        d.error_at(
            AttrPath::attr("namespace"),
            "Namespace Does Not Match",
            format!(
                "namespace {ns:?} differs from the host namespace {:?} of virtual_cluster_id; \
                 leave namespace out.",
                vc.namespace
            ),
        );
    }
    if let Some(p) = config.get("node_pool_id").as_str() {
        match PoolRef::parse(p) {
            None => d.error_at(
                AttrPath::attr("node_pool_id"),
                "Invalid Node Pool ID",
                format!("{p:?} is not a node pool id (`<namespace>/<virtual cluster>/<pool>`)."),
            ),
            Some(pool) => {
                if let Some((_, Some(vc))) = &vc_ref
                    && pool.vc != *vc
                {
                    d.error_at(
                        AttrPath::attr("node_pool_id"),
                        "Pool Of Another Virtual Cluster",
                        format!(
                            "node pool {p:?} belongs to virtual cluster {}/{}, not to \
                             virtual_cluster_id.",
                            pool.vc.namespace, pool.vc.name
                        ),
                    );
                }
            }
        }
    }
    let suite = config.get("suite").as_str().and_then(benchmark::suite);
    if let Some(suite) = suite {
        thresholds::validate(suite, config.get("thresholds"), &mut d);
        super::suite_params::validate(suite, config, &mut d);
        if suite.name() == "custom" && config.get("command").is_null() {
            d.error_at(
                AttrPath::attr("command"),
                "Missing Command",
                "the custom suite has no default command: set command, and make its last line \
                 of output a JSON object of metrics.",
            );
        }
    }
    for field in config
        .get("allow_node_differences")
        .as_seq()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|f| !NODE_FIELDS.contains(f))
    {
        d.error_at(
            AttrPath::attr("allow_node_differences"),
            "Unknown Node Field",
            format!(
                "{field:?} is not a per-node environment field; the fields are {}.",
                NODE_FIELDS.join(", ")
            ),
        );
    }
    if let Some(xs) = config.get("command").as_seq()
        && xs.is_empty()
    {
        d.error_at(
            AttrPath::attr("command"),
            "Empty Command",
            "command must have at least the program; leave it out for the suite's default.",
        );
    }
    d
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An `nccl-all-reduce` run `allreduce` of `nodes` × `gpus`, defaults elsewhere.
    pub(crate) fn nccl_spec(nodes: u32, gpus: u32) -> BenchmarkSpec {
        BenchmarkSpec {
            name: "allreduce".into(),
            namespace: "vc-a".into(),
            vc: None,
            pool: None,
            suite: benchmark::suite("nccl-all-reduce").expect("suite"),
            image: "nvcr.io/nvidia/pytorch:25.04-py3".into(),
            command: None,
            nodes,
            gpus_per_node: gpus,
            parameters: BTreeMap::new(),
            thresholds: BTreeMap::new(),
            on_failure: OnFailure::Fail,
            start_timeout: Duration::from_secs(60),
            launcher: LauncherSetting::Auto,
            allow_node_differences: BTreeSet::new(),
        }
    }

    #[test]
    fn pool_ids_have_three_parts() {
        let p = PoolRef::parse("vc-a/a/train").expect("pool");
        assert_eq!(p.vc.namespace, "vc-a");
        assert_eq!(p.vc.name, "a");
        assert_eq!(p.name, "train");
        assert_eq!(p.id(), "vc-a/a/train");
        assert!(PoolRef::parse("train").is_none());
        assert!(PoolRef::parse("a/").is_none());
    }
}
