//! One repeat of a run: its objects created (or a leftover taken over), its gang and Job
//! waited for, its results read and its objects removed.

use std::{collections::BTreeMap, time::Duration};

use serde_json::Value as Json;
use tokio::time::Instant;

use super::cleanup::cleanup;
use crate::resources::benchmark::{
    archive::Keeper,
    cluster_facts::{PoolInfo, node_records},
    environment::{NodeRecord, node_differences},
    error::{RunError, StepError},
    launch::{self, Launcher},
    model::BenchmarkSpec,
    render::{self, SPEC_HASH_ANNOTATION},
    results::{Observed, observe},
    shape::Shape,
    ssh_keys,
    wait::{POLL, wait_done, wait_gang, wait_pods_gone},
};
use crate::{
    backends::kube::{
        ObjectError,
        host::{HostObjects, ObjectKind},
        json::str_at,
    },
    kinds::ProgressSink,
    timeouts::Operation,
    value::Value,
};

/// What one run is made of: the planned record, the key no state holds, and who hears of
/// its phases.
#[derive(Clone, Copy)]
pub(super) struct Run<'a> {
    pub(super) spec: &'a BenchmarkSpec,
    pub(super) planned: &'a Value,
    pub(super) endpoint_api_key: Option<&'a str>,
    pub(super) keeper: Keeper,
    pub(super) progress: ProgressSink<'a>,
}

/// What every repeat of a run launches.
pub(super) struct Launch<'a> {
    pub(super) launcher: Launcher,
    pub(super) shape: &'a Shape,
    /// The Job or MPIJob, with its spec hash annotation.
    pub(super) main: &'a Json,
    pub(super) hash: &'a str,
    pub(super) serves_mpijob: bool,
    /// The end of the create timeout `limit`.
    pub(super) deadline: Instant,
    pub(super) limit: Duration,
}

/// Step 2: takes over a leftover of the same configuration (a run whose provider was killed)
/// when `may_adopt`, or removes any other and creates the run's objects. Returns whether it took over, and when
/// the run started.
pub(super) async fn start(
    cluster: &dyn HostObjects,
    run: &Run<'_>,
    launch: &Launch<'_>,
    may_adopt: bool,
) -> Result<(bool, String), StepError> {
    let Run {
        spec,
        endpoint_api_key,
        ..
    } = *run;
    let Launch {
        launcher,
        shape,
        main,
        hash,
        serves_mpijob,
        deadline,
        limit,
    } = *launch;
    let (kind, name) = (shape.main_kind(), shape.name.clone());
    let existing = cluster.get(kind, Some(&spec.namespace), &name).await?;
    // Only a run's first repeat takes over a leftover: a later one would take its
    // predecessor's finished Job for itself.
    let adopt = may_adopt
        && existing.as_ref().is_some_and(|j| {
            j.pointer("/metadata/annotations")
                .and_then(|a| a.get(SPEC_HASH_ANNOTATION))
                .and_then(Json::as_str)
                == Some(hash)
        });
    // A run of the other launcher (the configuration or the cluster changed) is a leftover too.
    let other = match kind {
        ObjectKind::MpiJob => Some(ObjectKind::Job),
        _ if serves_mpijob => Some(ObjectKind::MpiJob),
        _ => None,
    };
    let mut stray = false;
    if let Some(other) = other {
        stray = cluster
            .get(other, Some(&spec.namespace), &name)
            .await?
            .is_some();
    }
    let started_at = match (&existing, adopt) {
        (Some(j), true) => str_at(j, "/metadata/creationTimestamp").map_or_else(now, str::to_owned),
        _ => now(),
    };
    if !adopt {
        if existing.is_some() || stray {
            // A leftover of another configuration: a template cannot change in place.
            cleanup(cluster, &spec.namespace, &spec.name).await?;
            let kinds: Vec<ObjectKind> = std::iter::once(kind).chain(other).collect();
            wait_run_gone(cluster, spec, &kinds, &name, deadline, limit).await?;
        }
        if launcher == Launcher::Gpufleet
            && cluster
                .get(
                    ObjectKind::Secret,
                    Some(&spec.namespace),
                    &launch::ssh_secret_name(&spec.name),
                )
                .await?
                .is_none()
        {
            let keys = ssh_keys::generate(&name).map_err(|e| RunError::Setup(e.to_string()))?;
            cluster.apply(&launch::ssh_secret(spec, &keys)).await?;
        }
        // The MPI Operator makes the workers' Service itself.
        if launcher != Launcher::MpiOperator
            && let Some(svc) = render::service(spec)
        {
            cluster.apply(&svc).await?;
        }
        if let Some(key) = endpoint_api_key {
            cluster.apply(&render::endpoint_secret(spec, key)).await?;
        }
        cluster.apply(main).await?;
    } else if let Some(key) = endpoint_api_key {
        // The run of a killed provider, taken over: its key may have gone with a cleanup.
        cluster.apply(&render::endpoint_secret(spec, key)).await?;
    }
    tracing::info!(
        target: "gpufleet::benchmark",
        "{} {} {} in {} ({} node(s), {:?} launcher)",
        if adopt { "adopted" } else { "created" },
        kind.kind(),
        name,
        spec.namespace,
        spec.nodes,
        launcher
    );
    Ok((adopt, started_at))
}

/// Waits until no object of `kinds` named `name` is left in the run's namespace, then until
/// its pods are gone (they outlive it by their grace period, with the same names), within
/// the create timeout `limit` ending at `deadline`.
async fn wait_run_gone(
    cluster: &dyn HostObjects,
    spec: &BenchmarkSpec,
    kinds: &[ObjectKind],
    name: &str,
    deadline: Instant,
    limit: Duration,
) -> Result<(), StepError> {
    for k in kinds {
        while cluster
            .get(*k, Some(&spec.namespace), name)
            .await?
            .is_some()
        {
            if Instant::now() >= deadline {
                return Err(StepError::TimedOut {
                    op: Operation::Create,
                    waited: limit,
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }
    wait_pods_gone(
        cluster,
        &spec.namespace,
        &spec.name,
        deadline.saturating_duration_since(Instant::now()),
    )
    .await?;
    Ok(())
}

/// What one repeat gave.
pub(super) struct Repeat {
    pub(super) observed: Observed,
    /// Whether its Job succeeded.
    pub(super) completed: bool,
    /// The facts of the nodes it ran on.
    pub(super) per_node: BTreeMap<String, NodeRecord>,
    pub(super) finished_at: String,
    /// Why its objects could not be removed, if they could not.
    pub(super) left: Option<ObjectError>,
}

/// Steps 3 to 6 of one repeat: the gang starts, the Job ends, its logs are read and its
/// objects removed (and, when `more` repeats follow, waited out, so the next one's pods are
/// not taken for this one's).
pub(super) async fn one_repeat(
    cluster: &dyn HostObjects,
    run: &Run<'_>,
    launch: &Launch<'_>,
    pool: &PoolInfo,
    started: Instant,
    more: bool,
) -> Result<Repeat, StepError> {
    let Run { spec, progress, .. } = *run;
    let Launch {
        shape,
        deadline,
        limit,
        ..
    } = *launch;
    // The gang deadline counts from the creation, not from waiting out a leftover.
    let gang_deadline = (Instant::now() + spec.start_timeout).min(deadline);
    let pool_size = spec.pool.as_ref().map(|_| pool.nodes.len());
    let gang = wait_gang(cluster, spec, shape, started, gang_deadline, pool_size).await?;
    // A gang of mixed setups would report a result neither setup has: stop it now.
    let gang_records = node_records(cluster, pool, &gang).await?;
    let differences = node_differences(&gang_records, &spec.allow_node_differences);
    if !differences.is_empty() {
        return Err(RunError::MixedNodes(describe_differences(&differences)).into());
    }
    if !gang.is_empty() {
        progress(format!("running on {}", gang.join(", ")));
    }
    let completed = wait_done(cluster, spec, shape, deadline, limit).await?;
    progress(format!(
        "finished after {}s; reading the results",
        started.elapsed().as_secs()
    ));
    let observed = observe(cluster, spec, shape, &gang).await?;
    let finished_at = now();
    // The run is recorded either way; what could not be removed waits for destroy (or the
    // next run of the same name, which takes it over), and the user is told.
    let left = match cleanup(cluster, &spec.namespace, &spec.name).await {
        Ok(()) => None,
        // The next repeat would find this one's Job and take it for a run to adopt.
        Err(e) if more => return Err(e.into()),
        Err(e) => Some(e),
    };
    if more {
        wait_run_gone(
            cluster,
            spec,
            &[shape.main_kind()],
            &shape.name,
            deadline,
            limit,
        )
        .await?;
    }
    // The gang's nodes, unless it was not seen forming (an adopted run that had finished).
    let per_node = if observed.nodes == gang {
        gang_records
    } else {
        node_records(cluster, pool, &observed.nodes).await?
    };
    Ok(Repeat {
        observed,
        completed,
        per_node,
        finished_at,
        left,
    })
}

/// `driver_version (gpu-a: 570.1; gpu-b: 575.2)` for each differing field.
pub(super) fn describe_differences(differences: &[(String, BTreeMap<String, String>)]) -> String {
    differences
        .iter()
        .map(|(field, by_node)| {
            let values: Vec<String> = by_node
                .iter()
                .map(|(n, v)| format!("{n}: {}", if v.is_empty() { "unknown" } else { v }))
                .collect();
            format!("{field} ({})", values.join("; "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}
