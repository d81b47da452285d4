//! Bringing up the Kubernetes control plane: the directory's lock, the PKI and
//! kubeconfigs, then etcd, kube-apiserver and the rest in order, each once the one before
//! is healthy.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ServiceAccount;

use super::steps::{spawn_component, wait_healthy};
use crate::components::{self, Component};
use crate::error::LabError;
use crate::kubeconfig;
use crate::lock::FileLock;
use crate::paths::LabPaths;
use crate::pki::Pki;
use crate::ports::Ports;

/// The component a start-up error is about, for the progress log.
pub(crate) fn e_step(e: &LabError) -> String {
    match e {
        LabError::Spawn { component, .. }
        | LabError::Exited { component, .. }
        | LabError::Unhealthy { component, .. } => component.name().to_owned(),
        _ => "starting the control plane".to_owned(),
    }
}

/// Takes the directory's lock, saying so when another process holds it.
pub(crate) fn lock_dir(paths: &LabPaths) -> Result<FileLock, LabError> {
    let path = paths.lock_file();
    FileLock::acquire(&path, || {
        tracing::info!(
            "another gpufleet-lab is working on {}; waiting for it",
            paths.root().display()
        );
    })
    .map_err(LabError::Lock)
}

/// Writes the admin kubeconfig and the components' kubeconfigs, and kwok's stages.
pub(crate) fn write_kubeconfigs(
    paths: &LabPaths,
    ports: &Ports,
    pki: &Pki,
) -> Result<(), LabError> {
    let server = kubeconfig::server_url(ports.apiserver);
    let read = |p: PathBuf| {
        std::fs::read(&p).map_err(|source| {
            LabError::Kubeconfig(kubeconfig::KubeconfigError::Io { path: p, source })
        })
    };
    let admin = kubeconfig::render_embedded(
        &server,
        &read(pki.ca_cert())?,
        &read(pki.cert("admin"))?,
        &read(pki.key("admin"))?,
    );
    kubeconfig::write(&paths.kubeconfig(), &admin).map_err(LabError::Kubeconfig)?;
    for c in Component::ALL {
        if let Some(identity) = c.client_identity() {
            let text = kubeconfig::render_files(
                &server,
                &pki.ca_cert(),
                &pki.cert(identity),
                &pki.key(identity),
                identity,
            );
            kubeconfig::write(&paths.component_kubeconfig(c), &text)
                .map_err(LabError::Kubeconfig)?;
        }
    }
    Ok(())
}

/// Generates what is missing, then starts the components in order, each once the one
/// before is healthy (the last three together).
pub(crate) async fn start_control_plane(
    paths: &LabPaths,
    ports: &Ports,
    bin: &Path,
) -> Result<(), LabError> {
    let pki = Pki::new(&paths.pki());
    if pki.ensure().map_err(LabError::Pki)? {
        tracing::info!("generated the PKI in {}", pki.dir().display());
    }
    write_kubeconfigs(paths, ports, &pki)?;
    std::fs::write(paths.stages_file(), components::KWOK_STAGES_YAML).map_err(|source| {
        LabError::StateDir {
            path: paths.stages_file(),
            source,
        }
    })?;
    std::fs::write(paths.audit_policy(), components::audit_policy_yaml()).map_err(|source| {
        LabError::StateDir {
            path: paths.audit_policy(),
            source,
        }
    })?;
    let spawn = |c: Component| spawn_component(bin, c, paths, ports);
    let etcd = spawn(Component::Etcd)?;
    wait_healthy(
        Component::Etcd,
        etcd,
        paths,
        ports,
        &pki,
        Duration::from_secs(60),
    )
    .await?;
    let api = spawn(Component::KubeApiserver)?;
    wait_healthy(
        Component::KubeApiserver,
        api,
        paths,
        ports,
        &pki,
        Duration::from_secs(180),
    )
    .await?;
    let rest = [
        Component::KubeControllerManager,
        Component::KubeScheduler,
        Component::Kwok,
    ];
    let mut records = Vec::new();
    for c in rest {
        records.push((c, spawn(c)?));
    }
    let waits = records
        .into_iter()
        .map(|(c, r)| wait_healthy(c, r, paths, ports, &pki, Duration::from_secs(120)));
    for result in futures_util::future::join_all(waits).await {
        result?;
    }
    Ok(())
}

/// Waits for the service-account controller (in kube-controller-manager) to create the
/// `default` ServiceAccount of namespace `default`: pods need one, so this is when the
/// lab can run workloads.
pub(crate) async fn wait_default_service_account(client: &kube::Client) -> Result<(), LabError> {
    let api: kube::Api<ServiceAccount> = kube::Api::namespaced(client.clone(), "default");
    let started = Instant::now();
    let timeout = Duration::from_secs(120);
    loop {
        match api.get_opt("default").await {
            Ok(Some(_)) => return Ok(()),
            Ok(None) => {}
            Err(e) => tracing::debug!("waiting for serviceaccount default/default: {e}"),
        }
        if started.elapsed() >= timeout {
            return Err(LabError::Timeout {
                what: "serviceaccount default/default (kube-controller-manager)".into(),
                waited: timeout,
                state: "not created; see the kube-controller-manager log".into(),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
