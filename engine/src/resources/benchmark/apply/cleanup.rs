//! Removal of everything a run made in its namespace.

use crate::backends::kube::{
    ObjectError,
    host::{HostObjects, ObjectKind},
    json::str_at,
};
use crate::resources::benchmark::{launch, prescreen, render};

/// Deletes everything a benchmark made in `namespace`: Job, Service and any pod left.
pub(super) async fn cleanup(
    cluster: &dyn HostObjects,
    namespace: &str,
    name: &str,
) -> Result<(), ObjectError> {
    let job = render::job_name(name);
    // The run's Job, and a prescreen's a killed provider left (whose controller would
    // otherwise start its pods again).
    for j in [job.clone(), prescreen::job_name(name)] {
        cluster.delete(ObjectKind::Job, Some(namespace), &j).await?;
    }
    // The MPI Operator's own objects (launcher, workers, hostfile, keys) go with it; its
    // launcher Job is deleted here too, so nothing of the run outlives the apply.
    cluster
        .delete(ObjectKind::MpiJob, Some(namespace), &job)
        .await?;
    cluster
        .delete(ObjectKind::Job, Some(namespace), &format!("{job}-launcher"))
        .await?;
    cluster
        .delete(ObjectKind::Service, Some(namespace), &job)
        .await?;
    for secret in [
        launch::ssh_secret_name(name),
        render::endpoint_secret_name(name),
    ] {
        cluster
            .delete(ObjectKind::Secret, Some(namespace), &secret)
            .await?;
    }
    for pod in cluster
        .list(
            ObjectKind::Pod,
            Some(namespace),
            &render::owner_selector(name),
        )
        .await?
    {
        if let Some(p) = str_at(&pod, "/metadata/name") {
            cluster.delete(ObjectKind::Pod, Some(namespace), p).await?;
        }
    }
    Ok(())
}
