//! Writing a run's archive (see [`super::archive`] for what it holds) to the cluster as
//! ConfigMaps, and removing it when the benchmark is destroyed.

use serde_json::Value as Json;

use super::{
    TYPE_NAME,
    archive::{self, Keeper, RepeatLogs},
    config::{ArchiveRecord, BenchmarkConfig},
    model::BenchmarkSpec,
};
use crate::{
    backends::kube::{
        ObjectError,
        host::{HostObjects, ObjectKind},
    },
    diag::Diagnostic,
    value::Value,
};

/// Writes the archive of the run recorded in `state` ([`archive`]), whose repeats left
/// `logs`, under `keeper`'s names, part 0 (the index) last, so that an archive whose part 0
/// is there is whole. A write that fails removes what it wrote. A resource's parts past the
/// new archive's last (of a larger archive before) are removed when gpufleet may; when not,
/// the archive stands and the error comes back beside it (destroy removes them).
pub(super) async fn keep_archive(
    cluster: &dyn HostObjects,
    spec: &BenchmarkSpec,
    keeper: Keeper,
    state: &Value,
    main: &Json,
    logs: &[RepeatLogs<'_>],
) -> Result<(archive::Archive, Option<ObjectError>), ObjectError> {
    let recorded = BenchmarkConfig::decode(state);
    let started_at = recorded.started_at.value().map_or("", String::as_str);
    let prefix = keeper.prefix(&spec.name, started_at);
    let written_at = humantime::format_rfc3339_nanos(std::time::SystemTime::now()).to_string();
    let files = archive::files(state, main, logs, &written_at);
    let packed = archive::pack(&prefix, keeper, &spec.namespace, &spec.name, &files);
    let write = async {
        for part in packed.parts.iter().skip(1).chain(packed.parts.first()) {
            cluster.apply(part).await?;
        }
        Ok::<(), ObjectError>(())
    };
    if let Err(e) = write.await {
        for n in 0..archive::MAX_PARTS {
            let part = archive::part_name(&prefix, n);
            let _ = cluster
                .delete(ObjectKind::ConfigMap, Some(&spec.namespace), &part)
                .await;
        }
        return Err(e);
    }
    let mut stale_left = None;
    if keeper == Keeper::Resource {
        for n in packed.parts.len()..archive::MAX_PARTS {
            let stale = archive::part_name(&prefix, n);
            if let Err(e) = cluster
                .delete(ObjectKind::ConfigMap, Some(&spec.namespace), &stale)
                .await
            {
                stale_left = Some(e);
                break;
            }
        }
    }
    Ok((packed, stale_left))
}

/// Removes the archive `recorded` of a run (destroy): the parts a state from
/// before fixed names names, then the fixed parts while part 0's index still carries the
/// recorded SHA-256, or part 0 is missing (a write that stopped half-way) — a run that
/// replaced this one (`create_before_destroy`) wrote its own under the same names. An archive
/// gpufleet may not read or remove (its credentials lack ConfigMap rights) is a warning, not
/// a failed destroy.
pub(super) async fn remove_archive(
    cluster: &dyn HostObjects,
    namespace: &str,
    name: &str,
    recorded: &ArchiveRecord,
) -> Result<Option<Diagnostic>, ObjectError> {
    let prefix = Keeper::Resource.prefix(name, "");
    let fixed: Vec<String> = (0..archive::MAX_PARTS)
        .map(|n| archive::part_name(&prefix, n))
        .collect();
    let old: Vec<String> = recorded
        .configmaps
        .iter()
        .filter(|p| !fixed.contains(p))
        .cloned()
        .collect();
    if let Some(left) = delete_parts(cluster, namespace, name, &old).await? {
        return Ok(Some(left));
    }
    let recorded = recorded.sha256.value().map(String::as_str);
    let ours = match cluster
        .get(ObjectKind::ConfigMap, Some(namespace), &fixed[0])
        .await
    {
        Ok(found) => found.is_none_or(|p| archive::index_sha256(&p).as_deref() == recorded),
        Err(e) if e.is_forbidden() => return Ok(Some(archive_left(namespace, name, &e))),
        Err(e) => return Err(e),
    };
    if !ours {
        return Ok(None);
    }
    delete_parts(cluster, namespace, name, &fixed).await
}

/// Deletes the archive parts `parts`; a refusal to delete is the warning of
/// [`archive_left`].
async fn delete_parts(
    cluster: &dyn HostObjects,
    namespace: &str,
    name: &str,
    parts: &[String],
) -> Result<Option<Diagnostic>, ObjectError> {
    for part in parts {
        match cluster
            .delete(ObjectKind::ConfigMap, Some(namespace), part)
            .await
        {
            Ok(()) => {}
            Err(e) if e.is_forbidden() => return Ok(Some(archive_left(namespace, name, &e))),
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// The warning of an archive destroy could not remove.
fn archive_left(namespace: &str, name: &str, e: &ObjectError) -> Diagnostic {
    Diagnostic::warning(
        "Benchmark Archive Left",
        format!(
            "{TYPE_NAME} {name:?} is destroyed, but its archive stays in {namespace} ({e}). \
             Remove it with `kubectl delete configmap -n {namespace} -l \
             gpufleet.dev/record=archive,gpufleet.dev/benchmark={name}`."
        ),
    )
}
