//! Planning a `gpufleet_benchmark`: the namespace and id as soon as they are known, an
//! in-place change's verdict, re-checked against the recorded results, and what the host
//! cluster knows about the pool the run asks for.

use crate::{
    backends::kube::{
        NODEPOOL_LABEL, POOL,
        host::{HostObjects, ObjectKind},
        json::{labels_by_name, labels_of, str_at},
    },
    context::Context,
    diag::Diagnostics,
    kinds::{PlanRequest, PlanResponse},
    plan::backend_facts as facts,
    tenancy::pool_label,
    value::{Known, Value},
};

use super::{
    config::BenchmarkConfig,
    model::{PoolRef, RecordedRun},
    schema::{FAILURES, GPUS_PER_NODE, ID, NAMESPACE, NODE_POOL_ID, NODES, PER, STATUS},
    units,
};

pub(super) fn plan_benchmark(req: &PlanRequest) -> PlanResponse {
    let config = BenchmarkConfig::decode(&req.config);
    let proposed = BenchmarkConfig::decode(&req.proposed);
    let mut planned = req.proposed.clone();
    let namespace = if config.namespace.is_null() {
        let ns = config.run_namespace();
        planned.set_attr(
            NAMESPACE,
            ns.clone().map_or_else(Value::unknown, Value::string),
        );
        ns
    } else {
        proposed.namespace.value().cloned()
    };
    let id = match (namespace, proposed.name.value()) {
        (Some(ns), Some(n)) => Value::string(format!("{ns}/{n}")),
        _ => Value::unknown(),
    };
    planned.set_attr(ID, id);
    if !req.prior.is_null() {
        match re_checked(&req.prior, &proposed) {
            Some(failures) => {
                let status = if failures.is_empty() {
                    "passed"
                } else {
                    "failed"
                };
                planned.set_attr(STATUS, Value::string(status));
                planned.set_attr(
                    FAILURES,
                    Value::List(failures.into_iter().map(Value::string).collect()),
                );
            }
            None => {
                planned.set_attr(STATUS, Value::unknown());
                planned.set_attr(FAILURES, Value::unknown());
            }
        }
    }
    PlanResponse {
        planned,
        requires_replace: Vec::new(),
        diagnostics: Diagnostics::new(),
    }
}

/// The failures of the recorded run of `prior` under the thresholds and baseline `planned`
/// sets; `None` when any of them is not known yet.
fn re_checked(prior: &Value, planned: &BenchmarkConfig) -> Option<Vec<String>> {
    if !planned.thresholds_known()
        || !planned.baseline_known()
        || planned.unit_tolerance.is_unknown()
    {
        return None;
    }
    RecordedRun::from_state(prior).re_checked(
        &planned.bounds(),
        planned.baseline().as_ref(),
        &planned.unit_tolerance_or_default(),
    )
}

/// What the host cluster already knows that refuses a run: more `nodes` than its pool has
/// (or than this run plans for it), more `gpus_per_node` than each node of the pool
/// offers, or a pool that does not divide into the units of `per`. Checked when the run is planned anew; a pool without nodes yet, one that grows on
/// demand, or a cluster that cannot be asked is no finding (apply checks again).
pub(super) async fn check_plan(
    cluster: &dyn HostObjects,
    ctx: &Context,
    req: &PlanRequest,
) -> Diagnostics {
    let mut d = Diagnostics::new();
    let same = !req.prior.is_null()
        && req
            .config
            .same_attrs(&req.prior, &[NODE_POOL_ID, NODES, GPUS_PER_NODE, PER]);
    let config = BenchmarkConfig::decode(&req.config);
    let Some(id) = config.node_pool_id.value().filter(|_| !same) else {
        return d;
    };
    let Some(pool) = PoolRef::parse(id) else {
        return d;
    };
    let count = |n: &Known<i64>| n.value().copied().unwrap_or(1);
    let (nodes, gpus) = (count(&config.nodes), count(&config.gpus_per_node));
    let too_many_nodes = |has: i64, how: &str| {
        facts::MORE_NODES_THAN_POOL.refuse(format!(
            "nodes = {nodes}, but node pool {id} {how} {has} node(s), and a run puts one pod on \
             each node. Lower nodes, or raise the pool's node_count."
        ))
    };
    // A pool this run creates or resizes: its planned count, and nothing yet to look at.
    if let Some(planned) = ctx.pools.node_count(id) {
        if let Some(n) = planned.filter(|n| *n < nodes) {
            d.push(too_many_nodes(n, "is planned with"));
        }
        return d;
    }
    let selector = format!("{POOL}={}", pool_label(&pool.vc.name, &pool.name));
    let Ok(held) = cluster.list(ObjectKind::Node, None, &selector).await else {
        return d;
    };
    // Nodes Karpenter launched: the pool grows on demand.
    let on_demand = held
        .iter()
        .any(|n| labels_of(n).contains_key(NODEPOOL_LABEL));
    if held.is_empty() || on_demand {
        return d;
    }
    let has = i64::try_from(held.len()).unwrap_or(i64::MAX);
    if has < nodes {
        d.push(too_many_nodes(has, "has"));
    } else if let Some(&per) = config.per.value() {
        let by_name = labels_by_name(&held);
        let gang = u32::try_from(nodes).unwrap_or(u32::MAX);
        if let Err(why) = units::units(per, &by_name, gang) {
            d.push(facts::POOL_NOT_IN_UNITS.refuse(format!("node pool {id}: {why}.")));
        }
    }
    let offered = held
        .iter()
        .filter_map(|n| {
            str_at(n, "/status/allocatable/nvidia.com~1gpu")?
                .parse::<i64>()
                .ok()
        })
        .min();
    if let Some(offered) = offered.filter(|o| *o > 0 && *o < gpus) {
        d.push(facts::MORE_GPUS_THAN_NODES.refuse(format!(
            "gpus_per_node = {gpus}, but the nodes of node pool {id} offer at most {offered} \
             nvidia.com/gpu each (their allocatable), so the run's pods would never be \
             scheduled. Lower gpus_per_node."
        )));
    }
    d
}
