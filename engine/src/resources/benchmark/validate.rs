//! The plan-time checks of a `gpufleet_benchmark` configuration across attributes; the
//! per-attribute rules are validators in the schema. They read the configuration as
//! [`BenchmarkConfig`] decodes it.

use bigdecimal::BigDecimal;

use crate::{
    benchmark,
    diag::{Diagnostic, Diagnostics},
    path::AttrPath,
    tenancy::VirtualClusterRef,
    value::{Value, display_number},
};

use super::{
    baseline::{MUST_MATCH, NODE_COUNT},
    config::{BaselineConfig, BenchmarkConfig},
    model::PoolRef,
    schema::{
        ALLOW_DIFFERENCES, ALLOW_NODE_DIFFERENCES, BASELINE, COMMAND, ENDPOINT_API_KEY,
        ENDPOINT_API_KEY_VERSION, ENDPOINT_SUITES, IMAGE, MIN_RATIO, NAMESPACE, NODE_FIELDS,
        NODE_POOL_ID, NODES, PARAMETERS, PER, RESULTS, THRESHOLDS, UNIT_TOLERANCE,
        VIRTUAL_CLUSTER_ID,
    },
    suite_params, thresholds,
};

/// The checks across attributes.
pub(super) fn validate_benchmark(config: &Value) -> Diagnostics {
    let config = BenchmarkConfig::decode(config);
    let mut d = Diagnostics::new();
    let (vc, ns) = (&config.virtual_cluster_id, &config.namespace);
    if vc.is_null() && ns.is_null() {
        d.error_at(
            AttrPath::root(),
            "Missing Namespace",
            "set virtual_cluster_id (to run in the virtual cluster's host namespace) or \
             namespace.",
        );
    }
    let vc_ref = vc.value().map(|s| (s, VirtualClusterRef::parse(s)));
    if let Some((s, None)) = vc_ref {
        d.error_at(
            AttrPath::attr(VIRTUAL_CLUSTER_ID),
            "Invalid Virtual Cluster ID",
            format!("{s:?} is not a virtual cluster id (`<host namespace>/<name>`)."),
        );
    }
    if let (Some((_, Some(vc))), Some(ns)) = (&vc_ref, ns.value().map(String::as_str))
        && vc.namespace != ns
    {
        d.error_at(
            AttrPath::attr(NAMESPACE),
            "Namespace Does Not Match",
            format!(
                "namespace {ns:?} differs from the host namespace {:?} of virtual_cluster_id; \
                 leave namespace out.",
                vc.namespace
            ),
        );
    }
    if let Some(p) = config.node_pool_id.value() {
        match PoolRef::parse(p) {
            None => d.error_at(
                AttrPath::attr(NODE_POOL_ID),
                "Invalid Node Pool ID",
                format!("{p:?} is not a node pool id (`<namespace>/<virtual cluster>/<pool>`)."),
            ),
            Some(pool) => {
                if let Some((_, Some(vc))) = &vc_ref
                    && pool.vc != *vc
                {
                    d.error_at(
                        AttrPath::attr(NODE_POOL_ID),
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
    let suite = config.suite();
    if let Some(suite) = suite {
        thresholds::validate(
            suite,
            &AttrPath::attr(THRESHOLDS),
            &config.thresholds,
            &mut d,
        );
        suite_params::validate(suite, &config, &mut d);
        // AIPerf is a client of one endpoint: copies of it on several nodes would each
        // measure a share of the load they make together, and no node's numbers would be the
        // endpoint's.
        if suite.name() == "aiperf"
            && let Some(&nodes) = config.nodes.value()
            && nodes > 1
        {
            d.error_at(
                AttrPath::attr(NODES),
                "One Node Per Endpoint Run",
                format!(
                    "the aiperf suite measures one endpoint from one client, so it runs on one \
                     node; {nodes} copies would each see a share of the load they make \
                     together. Set nodes = 1, and raise parameters.concurrency for more load."
                ),
            );
        }
        if let Some(baseline) = config.baseline.value() {
            baseline_checks(suite, baseline, &mut d);
        }
        if suite.name() == "custom" && config.command.is_null() {
            d.error_at(
                AttrPath::attr(COMMAND),
                "Missing Command",
                "the custom suite has no default command: set command, and make its last line \
                 of output a JSON object of metrics.",
            );
        }
    }
    for field in config
        .allow_node_differences
        .value()
        .into_iter()
        .flatten()
        .filter_map(|f| f.value().map(String::as_str))
        .filter(|f| !NODE_FIELDS.contains(f))
    {
        d.error_at(
            AttrPath::attr(ALLOW_NODE_DIFFERENCES),
            "Unknown Node Field",
            format!(
                "{field:?} is not a per-node environment field; the fields are {}.",
                NODE_FIELDS.join(", ")
            ),
        );
    }
    if let Some(image) = config.image.value()
        && image.trim().is_empty()
    {
        d.error_at(
            AttrPath::attr(IMAGE),
            "Empty Image",
            format!(
                "image: {image:?} is not a container image; accepted: an image reference such \
                 as \"nvcr.io/nvidia/cloud-native/dcgm:4.2.3-1-ubuntu22.04\", pinned by digest \
                 for reproducible runs."
            ),
        );
    }
    if let Some(xs) = config.command.value()
        && xs.is_empty()
    {
        d.error_at(
            AttrPath::attr(COMMAND),
            "Empty Command",
            "command must have at least the program; leave it out for the suite's default.",
        );
    }
    endpoint_key_checks(&config, suite.map(|s| s.name()), &mut d);
    unit_checks(&config, &mut d);
    d
}

/// `per` needs a pool to divide, and `unit_tolerance` is a share below 1 that only `per`
/// reads.
fn unit_checks(config: &BenchmarkConfig, d: &mut Diagnostics) {
    let per = &config.per;
    if !per.is_null() && config.node_pool_id.is_null() {
        d.error_at(
            AttrPath::attr(PER),
            "Units Without A Pool",
            "per divides a node pool into its units; set node_pool_id.",
        );
    }
    let tolerance = &config.unit_tolerance;
    if tolerance.is_null() {
        return;
    }
    if per.is_null() {
        d.error_at(
            AttrPath::attr(UNIT_TOLERANCE),
            "Tolerance Without Units",
            "unit_tolerance compares the units of a run per unit; set per, or leave \
             unit_tolerance out.",
        );
    }
    if let Some(t) = tolerance.value()
        && (t < &BigDecimal::from(0) || t >= &BigDecimal::from(1))
    {
        d.error_at(
            AttrPath::attr(UNIT_TOLERANCE),
            "Invalid Tolerance",
            format!(
                "unit_tolerance is {}; it is the share a unit may fall short of the best unit, \
                 at least 0 and below 1 (0.05 for \"within 5%\").",
                display_number(t)
            ),
        );
    }
}

/// The write-only key is used by the suites that reach an endpoint, its version only with it,
/// and a secret never travels in the recorded `parameters`.
fn endpoint_key_checks(config: &BenchmarkConfig, suite: Option<&str>, d: &mut Diagnostics) {
    let key = &config.endpoint_api_key;
    if let Some(suite) = suite
        && !key.is_null()
        && !ENDPOINT_SUITES.contains(&suite)
    {
        d.error_at(
            AttrPath::attr(ENDPOINT_API_KEY),
            "Endpoint Key Not Used",
            format!(
                "the {suite} suite reaches no endpoint; {ENDPOINT_API_KEY} is read by {} runs \
                 only. Leave it out.",
                ENDPOINT_SUITES.join(" and ")
            ),
        );
    }
    let version = &config.endpoint_api_key_version;
    if !version.is_null() && !version.is_unknown() && key.is_null() {
        d.error_at(
            AttrPath::attr(ENDPOINT_API_KEY_VERSION),
            "Missing Endpoint Key",
            format!(
                "{ENDPOINT_API_KEY_VERSION} tracks changes of {ENDPOINT_API_KEY}, which is not \
                 set: set the key, or leave the version out."
            ),
        );
    }
    // Suites with a fixed set of parameters refuse any other key already.
    if suite != Some("custom") {
        return;
    }
    for name in config
        .parameters
        .value()
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
        .filter(|k| suite_params::looks_secret(k))
    {
        d.push(
            Diagnostic::warning(
                "Secret In Parameters",
                format!(
                    "parameters.{name} looks like a secret, but parameters are recorded in the \
                     state and in environment.parameters. Pass an endpoint's key in \
                     {ENDPOINT_API_KEY}, which is never stored."
                ),
            )
            .with_path(AttrPath::attr(PARAMETERS).push_key(name)),
        );
    }
}

/// A baseline's metrics must be the suite's, its ratio a share, and the fields it lets differ
/// fields that must otherwise match.
fn baseline_checks(suite: &dyn benchmark::Suite, baseline: &BaselineConfig, d: &mut Diagnostics) {
    let path = AttrPath::attr(BASELINE);
    for metric in baseline
        .results
        .value()
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
    {
        thresholds::check_metric(suite, metric, path.push_attr(RESULTS).push_key(metric), d);
    }
    if let Some(ratio) = baseline.min_ratio.value()
        && (ratio <= &BigDecimal::from(0) || ratio > &BigDecimal::from(1))
    {
        d.error_at(
            path.push_attr(MIN_RATIO),
            "Invalid Ratio",
            format!(
                "baseline.min_ratio is {}; it is the share of the reference a run must reach, \
                 above 0 and at most 1 (0.95 for \"within 5%\").",
                display_number(ratio)
            ),
        );
    }
    for field in baseline
        .allow_differences
        .value()
        .into_iter()
        .flatten()
        .filter_map(|f| f.value().map(String::as_str))
        .filter(|f| !MUST_MATCH.contains(f) && *f != NODE_COUNT)
    {
        d.error_at(
            path.push_attr(ALLOW_DIFFERENCES),
            "Unknown Environment Field",
            format!(
                "{field:?} is not a field that must match between compared runs; those are {} \
                 and {NODE_COUNT}.",
                MUST_MATCH.join(", ")
            ),
        );
    }
}
