//! Steps 1 to 6 of a run that has its turn, unit by unit and repeat by repeat (with each
//! unit's prescreen), and the record and archive the run leaves.

use std::{collections::BTreeMap, time::Duration};

use serde_json::Value as Json;
use tokio::time::Instant;

use super::cleanup::cleanup;
use super::repeat::{Launch, Repeat, Run, describe_differences, now, one_repeat, start};
use crate::resources::benchmark::{
    TYPE_NAME,
    archive::RepeatLogs,
    archive_store::keep_archive,
    cluster_facts::{PoolInfo, gpu_operator_versions, pool_info, vc_versions},
    commands,
    environment::{self, Environment, NodeRecord, node_differences},
    error::{RunError, StepError},
    launch::{self, Launcher},
    prescreen,
    render::{self, SPEC_HASH_ANNOTATION},
    results::{UnitRuns, launcher_name, record_run},
    schema::ARCHIVE,
    shape::Shape,
    units,
};
use crate::{
    backends::kube::host::{HostObjects, ObjectKind},
    diag::Diagnostic,
    kinds::ApplyResponse,
    value::Value,
};

/// Steps 1 to 6 of a run that has its turn (see the module docs); `deadline` ends the create
/// timeout `limit`, counted from `started`.
pub(super) async fn execute(
    cluster: &dyn HostObjects,
    run: &Run<'_>,
    started: Instant,
    deadline: Instant,
    limit: Duration,
) -> Result<ApplyResponse, StepError> {
    let Run {
        spec,
        planned,
        progress,
        ..
    } = *run;
    if cluster
        .get(ObjectKind::Namespace, None, &spec.namespace)
        .await?
        .is_none()
    {
        return Err(RunError::Setup(format!("namespace {} does not exist", spec.namespace)).into());
    }
    let kubernetes_version = cluster.server_version().await?;
    let (vcluster_version, vc_kubernetes_version) = vc_versions(cluster, spec).await?;
    let pool = pool_info(cluster, spec).await?;
    let (gpu_operator_version, device_plugin_version) = gpu_operator_versions(cluster).await?;

    let serves_mpijob = launch::is_mpi(spec) && cluster.serves(ObjectKind::MpiJob).await?;
    let launcher = launch::choose(spec, serves_mpijob).map_err(RunError::Setup)?;
    let shape = Shape::new(launcher, &spec.name);
    let deadline_seconds = limit.as_secs().max(1);
    // Per unit: each unit's nodes by its label, in turn. Else the whole pool, once.
    let unit_list: Vec<Option<String>> = match spec.per {
        None => vec![None],
        Some(per) => units::units(per, &pool.nodes, spec.nodes)
            .map_err(|e| RunError::Setup(format!("node pool: {e}")))?
            .into_keys()
            .map(Some)
            .collect(),
    };
    let mut by_unit: Vec<(Option<String>, Vec<Repeat>)> = Vec::new();
    let mut mains: Vec<Json> = Vec::new();
    let mut per_node: BTreeMap<String, NodeRecord> = BTreeMap::new();
    let mut nodes: Vec<String> = Vec::new();
    let mut started_at = String::new();
    let mut screened: Vec<prescreen::Screened> = Vec::new();
    for (u, unit) in unit_list.iter().enumerate() {
        let mut placement = pool.placement.clone();
        let mut of_unit = String::new();
        if let (Some(per), Some(unit)) = (spec.per, unit) {
            placement
                .node_selector
                .insert(per.label().to_owned(), unit.clone());
            of_unit = format!(
                " on {} {unit} ({} of {})",
                per.name(),
                u + 1,
                unit_list.len()
            );
        }
        if spec.prescreen {
            let s = screen(cluster, run, &pool, &placement, &of_unit, (deadline, limit)).await?;
            placement.hosts = s.nodes.clone();
            screened.push(s);
        }
        let mut main = match launcher {
            Launcher::Pods => render::job(spec, &placement, deadline_seconds),
            Launcher::Gpufleet => launch::gpufleet_job(spec, &placement, deadline_seconds),
            Launcher::MpiOperator => launch::mpijob(spec, &placement, deadline_seconds),
        };
        let hash = environment::sha256_hex(main.to_string().as_bytes());
        main["metadata"]["annotations"] = serde_json::json!({ SPEC_HASH_ANNOTATION: hash });
        let launch = Launch {
            launcher,
            shape: &shape,
            main: &main,
            hash: &hash,
            serves_mpijob,
            deadline,
            limit,
        };
        let mut repeats: Vec<Repeat> = Vec::new();
        for i in 0..spec.repeats {
            let first = u == 0 && i == 0;
            // A prescreened run never takes over a leftover: it was screened anew.
            let may_adopt = first && !spec.prescreen;
            let (adopted, created_at) = start(cluster, run, &launch, may_adopt).await?;
            if first {
                started_at = created_at;
            }
            let repeat = if spec.repeats > 1 {
                format!(" (repeat {} of {})", i + 1, spec.repeats)
            } else {
                String::new()
            };
            progress(format!(
                "{} {} {}{of_unit}{repeat} ({} node(s), {} launcher); waiting for its pods to start",
                if adopted { "took over" } else { "created" },
                shape.main_kind().kind(),
                shape.name,
                spec.nodes,
                launcher_name(launcher)
            ));
            let more = i + 1 < spec.repeats || u + 1 < unit_list.len();
            let mut repeat = one_repeat(cluster, run, &launch, &pool, started, more).await?;
            // Environment: GPU facts from the nodes the pods ran on, over every repeat and
            // unit. Numbers from nodes of different setups compare what no one setup gave:
            // stop at the first repeat that shows it.
            for n in &repeat.observed.nodes {
                if !nodes.contains(n) {
                    nodes.push(n.clone());
                }
            }
            per_node.append(&mut repeat.per_node);
            let differences = node_differences(&per_node, &spec.allow_node_differences);
            if !differences.is_empty() {
                return Err(RunError::MixedNodes(describe_differences(&differences)).into());
            }
            repeats.push(repeat);
        }
        mains.push(main);
        by_unit.push((unit.clone(), repeats));
    }
    let repeats: Vec<&Repeat> = by_unit.iter().flat_map(|(_, r)| r).collect();
    // The prescreen's facts, beside the labels' of each node it passed.
    for s in &screened {
        for (node, report) in &s.reports {
            if let Some(r) = per_node.get_mut(node) {
                r.prescreen = report.facts();
            }
        }
    }

    let first = repeats.first().map(|r| &r.observed);
    let mut env = Environment {
        kubernetes_version,
        vcluster_version,
        virtual_cluster_kubernetes_version: vc_kubernetes_version,
        nodes,
        image: spec.image.clone(),
        image_digest: first.map(|o| o.image_digest.clone()).unwrap_or_default(),
        suite: spec.suite.name().to_owned(),
        command: commands::command(spec),
        parameters: spec.parameters.clone(),
        node_count: spec.nodes,
        gpus_per_node: spec.gpus_per_node,
        node_pool_id: spec.pool.as_ref().map(|p| p.id()).unwrap_or_default(),
        sharing: pool.sharing,
        started_at,
        finished_at: repeats
            .last()
            .map(|r| r.finished_at.clone())
            .unwrap_or_else(now),
        gpu_operator_version,
        device_plugin_version,
        launcher: launcher_name(launcher).to_owned(),
        per_node,
        ..Environment::default()
    };
    env.summarise_nodes();

    let left = repeats
        .iter()
        .find_map(|r| r.left.as_ref().map(ToString::to_string));
    drop(repeats);
    if let Some(key) = run.endpoint_api_key {
        for (_, repeats) in &mut by_unit {
            for r in repeats {
                r.observed.redact(key);
            }
        }
    }
    let units: Vec<UnitRuns> = by_unit
        .iter()
        .map(|(unit, repeats)| UnitRuns {
            unit: unit.clone(),
            runs: repeats.iter().map(|r| (&r.observed, r.completed)).collect(),
        })
        .collect();
    let (mut state, mut diagnostics) = record_run(planned, spec, launcher, &units, env);
    // The archive's repeats are numbered over the units, in turn.
    let mut logs: Vec<RepeatLogs> = by_unit
        .iter()
        .flat_map(|(_, repeats)| repeats.iter().map(|r| r.observed.archive_logs()))
        .collect();
    if let Some(first) = logs.first_mut() {
        first.prescreen = screened
            .iter()
            .flat_map(|s| s.logs.iter().map(|(p, l)| (p.as_str(), l.as_str())))
            .collect();
    }
    // The object sent, or per unit each unit's.
    let objects = match (&mains[..], spec.per) {
        ([main], None) => main.clone(),
        (mains, _) => Json::Object(
            unit_list
                .iter()
                .zip(mains)
                .map(|(u, m)| (u.clone().unwrap_or_default(), m.clone()))
                .collect(),
        ),
    };
    match keep_archive(cluster, spec, run.keeper, &state, &objects, &logs).await {
        Ok((archive, stale_left)) => {
            progress(format!(
                "archive kept in ConfigMap(s) {} of {}",
                archive.names().join(", "),
                spec.namespace
            ));
            state.set_attr(ARCHIVE, archive.to_value());
            if let Some(e) = stale_left {
                diagnostics.push(Diagnostic::warning(
                    "Benchmark Archive Parts Left",
                    format!(
                        "{TYPE_NAME} {:?}: the archive is kept, but parts of an earlier, \
                         larger one could not be removed ({e}); destroy removes them.",
                        spec.name
                    ),
                ));
            }
        }
        Err(e) => {
            state.set_attr(ARCHIVE, Value::Null);
            diagnostics.push(Diagnostic::warning(
                "Benchmark Archive Not Kept",
                format!(
                    "{TYPE_NAME} {:?}: the run is recorded, but its archive (every pod's \
                     log, the objects and the record) could not be written to ConfigMaps in \
                     {}: {e}.",
                    spec.name, spec.namespace
                ),
            ));
        }
    }
    if let Some(e) = left {
        diagnostics.push(Diagnostic::warning(
            "Benchmark Objects Left Behind",
            format!(
                "{TYPE_NAME} {:?}: the run is recorded, but its Job, Service or pods in {} \
                 could not be removed ({e}). Destroy removes them.",
                spec.name, spec.namespace
            ),
        ));
    }
    Ok(ApplyResponse {
        new_state: state,
        diagnostics,
    })
}

/// The prescreen of one unit (or of the whole run): everything of the run's removed first,
/// then [`prescreen::screen`] on `placement`, said to `progress`.
async fn screen(
    cluster: &dyn HostObjects,
    run: &Run<'_>,
    pool: &PoolInfo,
    placement: &render::Placement,
    of_unit: &str,
    (deadline, limit): (Instant, Duration),
) -> Result<prescreen::Screened, StepError> {
    let Run { spec, progress, .. } = *run;
    cleanup(cluster, &spec.namespace, &spec.name).await?;
    progress(format!(
        "prescreening {} node(s){of_unit}: nvidia-smi, topology, InfiniBand, kernel command \
         line, NCCL environment",
        spec.nodes
    ));
    let labelled: BTreeMap<String, String> = pool
        .nodes
        .iter()
        .map(|(n, l)| (n.clone(), NodeRecord::from_labels(l).driver_version))
        .collect();
    let s = prescreen::screen(
        cluster,
        spec,
        placement,
        &labelled,
        (Instant::now(), deadline, limit),
    )
    .await?;
    progress(format!("prescreen passed on {}", s.nodes.join(", ")));
    Ok(s)
}
