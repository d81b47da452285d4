//! What a kubelet reads from a pod to run its container: the downward API's fields, the
//! environment (with what the kubelet adds), the command line and the image.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret};
use kube::{Api, Client};

/// The program the vCluster image runs when the pod gives no command (its entrypoint).
pub const IMAGE_ENTRYPOINT: [&str; 2] = ["/vcluster", "start"];

/// The value of a downward-API field of `pod` (`metadata.name`, `status.podIP`,
/// `metadata.labels['app']`, …); `None` for a field it does not have.
#[must_use]
pub fn field(pod: &Pod, path: &str) -> Option<String> {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let keyed = |prefix: &str| -> Option<&str> {
        path.strip_prefix(prefix)?
            .strip_prefix("['")?
            .strip_suffix("']")
    };
    if let Some(k) = keyed("metadata.labels") {
        return meta.labels.as_ref()?.get(k).cloned();
    }
    if let Some(k) = keyed("metadata.annotations") {
        return meta.annotations.as_ref()?.get(k).cloned();
    }
    match path {
        "metadata.name" => meta.name.clone(),
        "metadata.namespace" => meta.namespace.clone(),
        "metadata.uid" => meta.uid.clone(),
        "spec.nodeName" => spec?.node_name.clone(),
        "spec.serviceAccountName" => spec?.service_account_name.clone(),
        "status.hostIP" => status?.host_ip.clone(),
        "status.podIP" => status?.pod_ip.clone(),
        _ => None,
    }
}

/// The container's environment as the kubelet gives it: `PATH`, `HOSTNAME` and the
/// `kubernetes` Service's variables first (here pointing at the host API server through
/// the sandbox's loopback forwarder, at `api_port`), then the container's `env`, resolved.
///
/// # Errors
/// When a variable refers to a field, Secret or ConfigMap key that cannot be had.
pub async fn environment(
    host: &Client,
    pod: &Pod,
    container: &Container,
    api_port: u16,
) -> Result<Vec<(String, String)>, String> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let mut env: Vec<(String, String)> = vec![
        (
            "PATH".into(),
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
        ),
        (
            "HOSTNAME".into(),
            pod.metadata.name.clone().unwrap_or_default(),
        ),
        ("KUBERNETES_SERVICE_HOST".into(), "127.0.0.1".into()),
        ("KUBERNETES_SERVICE_PORT".into(), api_port.to_string()),
        (
            "KUBERNETES_PORT".into(),
            format!("tcp://127.0.0.1:{api_port}"),
        ),
    ];
    for var in container.env.iter().flatten() {
        let value = match (&var.value, &var.value_from) {
            (Some(v), _) => v.clone(),
            (None, None) => String::new(),
            (None, Some(from)) => {
                if let Some(f) = &from.field_ref {
                    field(pod, &f.field_path).ok_or_else(|| {
                        format!("env {}: the pod has no field {}", var.name, f.field_path)
                    })?
                } else if let Some(s) = &from.secret_key_ref {
                    let secret = Api::<Secret>::namespaced(host.clone(), &namespace)
                        .get_opt(&s.name)
                        .await
                        .map_err(|e| {
                            format!("env {}: failed to read Secret {}: {e}", var.name, s.name)
                        })?;
                    match secret
                        .and_then(|x| x.data)
                        .and_then(|d| d.get(&s.key).cloned())
                    {
                        Some(b) => String::from_utf8_lossy(&b.0).into_owned(),
                        None if s.optional.unwrap_or(false) => continue,
                        None => {
                            return Err(format!(
                                "env {}: Secret {} has no key {}",
                                var.name, s.name, s.key
                            ));
                        }
                    }
                } else if let Some(c) = &from.config_map_key_ref {
                    let map = Api::<ConfigMap>::namespaced(host.clone(), &namespace)
                        .get_opt(&c.name)
                        .await
                        .map_err(|e| {
                            format!("env {}: failed to read ConfigMap {}: {e}", var.name, c.name)
                        })?;
                    match map
                        .and_then(|x| x.data)
                        .and_then(|d| d.get(&c.key).cloned())
                    {
                        Some(v) => v,
                        None if c.optional.unwrap_or(false) => continue,
                        None => {
                            return Err(format!(
                                "env {}: ConfigMap {} has no key {}",
                                var.name, c.name, c.key
                            ));
                        }
                    }
                } else {
                    return Err(format!(
                        "env {}: the lab's vCluster kubelet resolves fieldRef, secretKeyRef and configMapKeyRef only",
                        var.name
                    ));
                }
            }
        };
        env.retain(|(k, _)| *k != var.name);
        env.push((var.name.clone(), value));
    }
    Ok(env)
}

/// The command line: the container's `command` (else the image's entrypoint) and `args`.
#[must_use]
pub fn argv(container: &Container) -> Vec<String> {
    let mut out: Vec<String> = match container.command.as_deref() {
        Some(c) if !c.is_empty() => c.to_vec(),
        _ => IMAGE_ENTRYPOINT.iter().map(|s| (*s).to_owned()).collect(),
    };
    out.extend(container.args.iter().flatten().cloned());
    out
}

/// Whether the lab can run `image`: a vCluster image (`…/vcluster-oss`, `…/vcluster` or
/// `…/vcluster-pro`) of the release it built. The message says why not.
///
/// # Errors
/// Why the lab cannot run it, as an image pull would fail.
pub fn check_image(image: &str, version: &str) -> Result<(), String> {
    let (repository, tag) = match image.rsplit_once(':') {
        Some((r, t)) if !t.contains('/') => (r, t),
        _ => (image, "latest"),
    };
    let name = repository.rsplit('/').next().unwrap_or(repository);
    if !matches!(name, "vcluster-oss" | "vcluster" | "vcluster-pro") {
        return Err(format!(
            "the lab runs only vCluster's syncer image, not {image}"
        ));
    }
    if tag.trim_start_matches('v') != version.trim_start_matches('v') {
        return Err(format!(
            "the lab has vCluster {version}, built from the Go module proxy; {image} is another release"
        ));
    }
    Ok(())
}

/// The Kubernetes programs for the chart's `kubernetes` init container `image`
/// (`…/kubernetes:v1.35.0`): the lab's build of that minor among `builds` (minor → binary).
/// The patch release is the lab's own.
///
/// # Errors
/// Why the lab cannot run it, as an image pull would fail: another minor, or one whose
/// build is missing.
pub fn kubernetes_binaries<'a>(
    image: &str,
    builds: &'a BTreeMap<String, PathBuf>,
) -> Result<&'a Path, String> {
    let tag = image
        .rsplit_once(':')
        .map(|(_, t)| t)
        .filter(|t| !t.contains('/'))
        .unwrap_or("latest");
    let minor = tag
        .trim_start_matches('v')
        .splitn(3, '.')
        .take(2)
        .collect::<Vec<_>>()
        .join(".");
    match builds.get(&minor) {
        Some(bin) if bin.is_file() => Ok(bin),
        Some(bin) => Err(format!(
            "{image}: the lab's Kubernetes {minor} build {} is missing; run `gpufleet-lab build`",
            bin.display()
        )),
        None => {
            let have = builds.keys().cloned().collect::<Vec<_>>().join(", ");
            Err(format!(
                "the lab has Kubernetes {have} for virtual clusters, built from the Go module \
                 proxy; {image} is another release"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubernetes_images_map_to_the_build_of_their_minor_and_others_fail() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (new, old) = (
            dir.path().join("gpufleet-kube"),
            dir.path().join("kube-1.35"),
        );
        std::fs::write(&new, "").expect("write");
        std::fs::write(&old, "").expect("write");
        let builds: BTreeMap<String, PathBuf> = [
            ("1.36".to_owned(), new.clone()),
            ("1.35".to_owned(), old.clone()),
        ]
        .into();
        let pick = |image: &str| kubernetes_binaries(image, &builds);
        assert_eq!(
            pick("ghcr.io/loft-sh/kubernetes:v1.36.0"),
            Ok(new.as_path())
        );
        assert_eq!(
            pick("ghcr.io/loft-sh/kubernetes:v1.35.0"),
            Ok(old.as_path())
        );
        let other = pick("ghcr.io/loft-sh/kubernetes:v1.34.0").expect_err("not built");
        assert!(
            other.contains("Kubernetes 1.35, 1.36") && other.contains("v1.34.0"),
            "{other}"
        );
        std::fs::remove_file(&old).expect("remove");
        let missing = pick("ghcr.io/loft-sh/kubernetes:v1.35.2").expect_err("missing");
        assert!(missing.contains("gpufleet-lab build"), "{missing}");
    }

    #[test]
    fn images_of_the_built_release_run_and_others_fail_as_a_pull_would() {
        assert!(check_image("ghcr.io/loft-sh/vcluster-oss:0.36.0", "0.36.0").is_ok());
        assert!(check_image("registry.example/mirror/vcluster:v0.36.0", "0.36.0").is_ok());
        let other = check_image("ghcr.io/loft-sh/vcluster-oss:0.35.1", "0.36.0")
            .expect_err("another release");
        assert!(
            other.contains("0.35.1") && other.contains("0.36.0"),
            "{other}"
        );
        assert!(check_image("nginx:1.27", "0.36.0").is_err());
    }

    #[test]
    fn downward_fields_and_default_command() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": { "name": "a-0", "namespace": "vc-a", "labels": { "app": "vcluster" } },
            "spec": { "nodeName": "n1", "containers": [] },
            "status": { "podIP": "10.0.0.7", "hostIP": "127.0.0.1" },
        }))
        .expect("pod");
        assert_eq!(field(&pod, "status.podIP").as_deref(), Some("10.0.0.7"));
        assert_eq!(
            field(&pod, "metadata.labels['app']").as_deref(),
            Some("vcluster")
        );
        assert_eq!(field(&pod, "spec.nodeName").as_deref(), Some("n1"));
        assert_eq!(field(&pod, "status.nope"), None);
        let c = Container {
            name: "syncer".into(),
            args: Some(vec!["--x".into()]),
            ..Container::default()
        };
        assert_eq!(argv(&c), ["/vcluster", "start", "--x"]);
    }
}
