//! Karpenter as a lab component: its CRDs and its controller with the KWOK cloud provider,
//! both from the release `lab/karpenter/build.sh` builds ([`gobuild::KARPENTER_VERSION`]).
//!
//! gpufleet's `auto` pools write a Karpenter `NodePool`. In the lab the real controller acts
//! on it as on a GPU cloud: a pending pod the NodePool admits makes it create a NodeClaim and
//! launch a node of an instance type the NodePool allows, with the NodePool's labels and
//! taints; deleting the NodePool drains and removes its nodes. The KWOK provider "launches" a
//! node by creating the Node object with kwok's annotation, so the lab's kwok plays its
//! kubelet like any other node's. Its instance types are GPU instances labelled as the AWS
//! provider labels EC2's ([`instance_types`]), and its node class is the `KWOKNodeClass`
//! [`NODE_CLASS`] (`karpenter_node_class = "karpenter.kwok.sh/KWOKNodeClass/default"`).
//!
//! The CRDs (`NodePool`, `NodeClaim`, `NodeOverlay`, `KWOKNodeClass`) are installed on every
//! `up`, with the controller or without, so the API server checks NodePools with the
//! release's own schema and CEL rules. The controller runs like the MPI Operator
//! ([`crate::kubelet_component`]): in a network namespace of its own (it serves metrics and
//! health on ports of every interface), as the ServiceAccount `karpenter/karpenter` bound to
//! the rules of its chart's ClusterRoles and Roles ([`crate::service_accounts`]), with
//! leader election off (one replica).

pub mod instance_types;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};

use crate::components::Component;
use crate::error::LabError;
use crate::gobuild;
use crate::nodes::FIELD_MANAGER;
use crate::paths::LabPaths;
use crate::ports::Ports;

/// The port of its `/healthz` inside its network namespace (its default
/// `HEALTH_PROBE_PORT`).
pub const HEALTH_PORT: u16 = 8081;

/// Its namespace and ServiceAccount (as its chart names them).
pub const NAMESPACE: &str = "karpenter";

/// The lab's `KWOKNodeClass`.
pub const NODE_CLASS: &str = "default";

/// What an `auto` pool's `karpenter_node_class` says to use the lab's node class.
pub const NODE_CLASS_REF: &str = "karpenter.kwok.sh/KWOKNodeClass/default";

/// The controller's binary in the build directory.
#[must_use]
pub fn binary() -> PathBuf {
    gobuild::karpenter_dir().join("karpenter-kwok")
}

/// Its kubeconfig (its ServiceAccount's token).
#[must_use]
pub fn kubeconfig(paths: &LabPaths) -> PathBuf {
    paths.karpenter_dir().join("kubeconfig")
}

/// The instance-types file it reads at start.
#[must_use]
pub fn instance_types_file(paths: &LabPaths) -> PathBuf {
    paths.karpenter_dir().join("instance-types.json")
}

/// The supervisor's flags (after `vcluster-kubelet`), then the controller and its flags.
/// It reads its kubeconfig and instance types only from its environment.
#[must_use]
pub fn args(paths: &LabPaths, ports: &Ports) -> Vec<String> {
    vec![
        "isolated".into(),
        format!("--dir={}", paths.karpenter_dir().display()),
        format!("--api-port={}", ports.apiserver),
        format!(
            "--expose={}",
            SocketAddr::from((Ipv4Addr::LOCALHOST, ports.karpenter))
        ),
        format!("--inner-port={HEALTH_PORT}"),
        format!("--env=KUBECONFIG={}", kubeconfig(paths).display()),
        format!(
            "--env=INSTANCE_TYPES_FILE_PATH={}",
            instance_types_file(paths).display()
        ),
        "--env=DISABLE_LEADER_ELECTION=true".into(),
        "--".into(),
        binary().display().to_string(),
    ]
}

/// Installs the release's CRDs (server-side apply) and waits until they are served.
///
/// # Errors
/// When the build's CRDs cannot be read or parsed, or the API server refuses one.
pub async fn install_crds(client: &kube::Client) -> Result<(), LabError> {
    let dir = gobuild::karpenter_dir().join("crds");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|source| LabError::StateDir {
            path: dir.clone(),
            source,
        })?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    for file in files {
        crate::crds::install_file(client, &file).await?;
    }
    Ok(())
}

/// Makes the lab's `KWOKNodeClass` (server-side apply).
///
/// # Errors
/// When the API server refuses it.
pub async fn install_node_class(client: &kube::Client) -> Result<(), LabError> {
    let gvk = GroupVersionKind::gvk("karpenter.kwok.sh", "v1alpha1", "KWOKNodeClass");
    let api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, "kwoknodeclasses"),
    );
    let body = serde_json::json!({
        "apiVersion": "karpenter.kwok.sh/v1alpha1",
        "kind": "KWOKNodeClass",
        "metadata": { "name": NODE_CLASS },
    });
    api.patch(
        NODE_CLASS,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await
    .map_err(|source| LabError::Api {
        what: format!("create the KWOKNodeClass {NODE_CLASS}"),
        source,
    })?;
    Ok(())
}

/// Writes the instance-types file; true when its contents changed.
fn write_instance_types(paths: &LabPaths) -> Result<bool, LabError> {
    let path = instance_types_file(paths);
    let text = instance_types::file();
    if std::fs::read_to_string(&path).ok().as_deref() == Some(text.as_str()) {
        return Ok(false);
    }
    std::fs::write(&path, text).map_err(|source| LabError::StateDir { path, source })?;
    Ok(true)
}

/// Makes the controller run, current and healthy (after its CRDs, node class and
/// ServiceAccount exist). Returns `ports` with its health port.
///
/// # Errors
/// When its instance types cannot be written, its supervisor cannot be found, no loopback
/// port is free, or it does not become healthy.
pub(crate) async fn ensure(paths: &LabPaths, ports: Ports) -> Result<Ports, LabError> {
    let restart = write_instance_types(paths)?.then(|| "its instance types changed".to_owned());
    crate::kubelet_component::ensure(
        paths,
        ports,
        Component::Karpenter,
        |p| &mut p.karpenter,
        restart,
    )
    .await
}
