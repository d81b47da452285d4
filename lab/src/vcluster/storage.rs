//! The lab's storage: a default StorageClass `lab-local` and its provisioner, so that
//! volume claims (a vCluster's `data` claim, above all) are bound as on a cluster with
//! dynamic provisioning. A claim of the class gets a `hostPath` PersistentVolume in
//! `<dir>/claims/<claim uid>/`, bound to it through `claimRef`; Kubernetes' own volume
//! controller does the binding, the scheduler waits for it, and the vCluster kubelet mounts
//! the volume's path. A released volume (its claim deleted) is deleted with its
//! directory, as `reclaimPolicy: Delete` says.

use std::collections::BTreeSet;
use std::path::Path;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

/// The StorageClass the lab makes its default.
pub const STORAGE_CLASS: &str = "lab-local";

/// The provisioner name of that class.
pub const PROVISIONER: &str = "gpufleet.dev/lab-local";

/// The annotation a provisioner sets on the volumes it made.
const PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";

const FIELD_MANAGER: &str = "gpufleet-lab";

/// Makes StorageClass `lab-local` exist, as the cluster's default.
///
/// # Errors
/// When the API server refuses it.
pub async fn ensure_class(host: &Client) -> Result<(), kube::Error> {
    let class = json!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": STORAGE_CLASS,
            "annotations": { "storageclass.kubernetes.io/is-default-class": "true" },
        },
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    });
    Api::<StorageClass>::all(host.clone())
        .patch(
            STORAGE_CLASS,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(class),
        )
        .await
        .map(|_| ())
}

/// One pass: a volume for every pending claim of the class, and released volumes deleted.
/// Returns how many volumes were made and deleted.
///
/// # Errors
/// When claims or volumes cannot be listed.
pub async fn pass(host: &Client, claims_dir: &Path) -> Result<(usize, usize), kube::Error> {
    let claims = Api::<PersistentVolumeClaim>::all(host.clone())
        .list(&ListParams::default())
        .await?;
    let volumes: Api<PersistentVolume> = Api::all(host.clone());
    let ours: Vec<PersistentVolume> = volumes
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|pv| {
            pv.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(PROVISIONED_BY))
                .is_some_and(|p| p == PROVISIONER)
        })
        .collect();
    let have: BTreeSet<String> = ours
        .iter()
        .filter_map(|pv| pv.metadata.name.clone())
        .collect();
    let mut made = 0;
    for pvc in &claims.items {
        let spec = pvc.spec.clone().unwrap_or_default();
        let pending = pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending");
        if !pending
            || spec.storage_class_name.as_deref() != Some(STORAGE_CLASS)
            || spec.volume_name.as_deref().is_some_and(|v| !v.is_empty())
            || pvc.metadata.deletion_timestamp.is_some()
        {
            continue;
        }
        let uid = pvc.metadata.uid.clone().unwrap_or_default();
        let name = format!("pvc-{uid}");
        if have.contains(&name) {
            continue;
        }
        let dir = claims_dir.join(&uid);
        if let Err(e) = std::fs::create_dir_all(&dir) {
            tracing::warn!("failed to create {}: {e}", dir.display());
            continue;
        }
        let size = spec
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage").cloned())
            .map_or_else(|| "1Gi".to_owned(), |q| q.0);
        let pv: PersistentVolume = serde_json::from_value(json!({
            "metadata": {
                "name": name,
                "annotations": { PROVISIONED_BY: PROVISIONER },
            },
            "spec": {
                "capacity": { "storage": size },
                "accessModes": spec.access_modes.clone().unwrap_or_else(|| vec!["ReadWriteOnce".into()]),
                "persistentVolumeReclaimPolicy": "Delete",
                "storageClassName": STORAGE_CLASS,
                "volumeMode": spec.volume_mode.clone().unwrap_or_else(|| "Filesystem".into()),
                "hostPath": { "path": dir.to_string_lossy(), "type": "DirectoryOrCreate" },
                "claimRef": {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "namespace": pvc.metadata.namespace,
                    "name": pvc.metadata.name,
                    "uid": uid,
                },
            },
        }))
        .unwrap_or_default();
        match volumes.create(&PostParams::default(), &pv).await {
            Ok(_) => {
                made += 1;
                tracing::info!(
                    "provisioned {name} ({size}) for claim {}/{}",
                    pvc.metadata.namespace.as_deref().unwrap_or_default(),
                    pvc.metadata.name.as_deref().unwrap_or_default()
                );
            }
            Err(e) => tracing::warn!("failed to provision {name}: {e}"),
        }
    }
    let mut deleted = 0;
    for pv in &ours {
        let released = pv.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Released");
        if !released || pv.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let name = pv.metadata.name.clone().unwrap_or_default();
        if let Some(path) = pv
            .spec
            .as_ref()
            .and_then(|s| s.host_path.as_ref())
            .map(|h| h.path.clone())
            && Path::new(&path).starts_with(claims_dir)
            && let Err(e) = std::fs::remove_dir_all(&path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!("failed to remove {path}: {e}");
            continue;
        }
        match volumes.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {
                deleted += 1;
                tracing::info!("deleted released volume {name} and its data");
            }
            Err(e) => tracing::warn!("failed to delete {name}: {e}"),
        }
    }
    Ok((made, deleted))
}
