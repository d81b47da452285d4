//! A pod's volumes as host directories, the way a kubelet lays them out, and the mounts
//! that put them where the container expects them.
//!
//! - `emptyDir`: `<pod>/volumes/<name>/`, kept across restarts of the container and removed
//!   with the pod.
//! - `persistentVolumeClaim`: the `hostPath` of the volume the claim is bound to (the lab's
//!   provisioner puts it in `<claims>/<claim uid>/`), kept as long as the claim exists, so a
//!   new pod of the StatefulSet finds the data of the last.
//! - `secret`, `configMap` and `projected` (service account token, config maps, secrets,
//!   the downward API): written into `<pod>/volumes/<name>/` when the container starts;
//!   the token is requested for the pod (TokenRequest, bound to it) and renewed before it
//!   expires, as the kubelet does.
//!
//! Files are replaced by writing a temporary file and renaming it over the old one, so a
//! reader never sees half a token.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, KeyToPath, PersistentVolume, PersistentVolumeClaim, Pod, Secret,
    ServiceAccount, Volume, VolumeProjection,
};
use kube::api::PostParams;
use kube::{Api, Client};

use super::sandbox::Mount;

/// The kubelet's default life of a projected token.
const DEFAULT_TOKEN_SECONDS: i64 = 3607;

/// Why a pod's volumes could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    /// A file or directory could not be written.
    #[error("volume {volume}: failed to write {path}: {source}")]
    Write {
        /// The volume.
        volume: String,
        /// The path.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// An object the volume needs could not be read.
    #[error("volume {volume}: {what}")]
    Missing {
        /// The volume.
        volume: String,
        /// What is missing, and why.
        what: String,
    },
    /// A kind of volume the lab does not provide.
    #[error("volume {volume}: the lab's vCluster kubelet does not provide {kind} volumes")]
    Unsupported {
        /// The volume.
        volume: String,
        /// Its kind.
        kind: String,
    },
    /// The container mounts a volume the pod does not have.
    #[error("volume mount {0}: the pod has no volume of that name")]
    NoSuchVolume(String),
}

/// A projected service account token the kubelet keeps fresh.
#[derive(Debug, Clone)]
pub struct TokenFile {
    /// Where it is written on the host.
    pub path: PathBuf,
    volume: String,
    service_account: String,
    audience: Option<String>,
    seconds: i64,
    /// When the current token is due for renewal (80% of its life).
    pub renew_at: Instant,
}

/// A pod's prepared volumes: the mounts of its container and the tokens to renew.
#[derive(Debug, Clone, Default)]
pub struct Prepared {
    /// The container's volume mounts, as sandbox mounts.
    pub mounts: Vec<Mount>,
    /// Host directory of each volume, by name.
    pub dirs: BTreeMap<String, PathBuf>,
    /// Tokens to renew.
    pub tokens: Vec<TokenFile>,
}

/// Writes `bytes` to `path` through a temporary file and a rename.
fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// Lays out every volume of `pod` that `container` mounts and returns the mounts.
///
/// # Errors
/// When a volume cannot be written, an object it needs cannot be read, or it is of a kind
/// the lab does not provide.
pub async fn prepare(
    host: &Client,
    pod: &Pod,
    container: &Container,
    pod_dir: &Path,
) -> Result<Prepared, VolumeError> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let spec = pod.spec.clone().unwrap_or_default();
    let volumes: BTreeMap<String, Volume> = spec
        .volumes
        .unwrap_or_default()
        .into_iter()
        .map(|v| (v.name.clone(), v))
        .collect();
    let mut out = Prepared::default();
    for vm in container.volume_mounts.iter().flatten() {
        let volume = volumes
            .get(&vm.name)
            .ok_or_else(|| VolumeError::NoSuchVolume(vm.name.clone()))?;
        let dir = match out.dirs.get(&vm.name) {
            Some(d) => d.clone(),
            None => {
                let d = lay_out(host, pod, &namespace, volume, pod_dir, &mut out.tokens).await?;
                out.dirs.insert(vm.name.clone(), d.clone());
                d
            }
        };
        let source = match vm.sub_path.as_deref() {
            Some(sub) if !sub.is_empty() => {
                let p = dir.join(sub);
                if !p.exists() {
                    std::fs::create_dir_all(&p).map_err(|source| VolumeError::Write {
                        volume: vm.name.clone(),
                        path: p.clone(),
                        source,
                    })?;
                }
                p
            }
            _ => dir,
        };
        out.mounts.push(Mount::bind(
            source,
            &vm.mount_path,
            vm.read_only.unwrap_or(false),
        ));
    }
    Ok(out)
}

async fn lay_out(
    host: &Client,
    pod: &Pod,
    namespace: &str,
    volume: &Volume,
    pod_dir: &Path,
    tokens: &mut Vec<TokenFile>,
) -> Result<PathBuf, VolumeError> {
    let name = volume.name.clone();
    let write_err = |path: &Path| {
        let (volume, path) = (name.clone(), path.to_path_buf());
        move |source| VolumeError::Write {
            volume,
            path,
            source,
        }
    };
    let own = pod_dir.join("volumes").join(&name);
    if let Some(claim) = &volume.persistent_volume_claim {
        let pvc = Api::<PersistentVolumeClaim>::namespaced(host.clone(), namespace)
            .get_opt(&claim.claim_name)
            .await
            .map_err(|e| VolumeError::Missing {
                volume: name.clone(),
                what: format!(
                    "failed to read PersistentVolumeClaim {}: {e}",
                    claim.claim_name
                ),
            })?
            .ok_or_else(|| VolumeError::Missing {
                volume: name.clone(),
                what: format!("PersistentVolumeClaim {} does not exist", claim.claim_name),
            })?;
        // The volume the claim is bound to says where its data is (a lab volume's
        // `hostPath`); an unbound claim is waited for, as a kubelet does.
        let bound = pvc
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.clone())
            .filter(|v| !v.is_empty())
            .ok_or_else(|| VolumeError::Missing {
                volume: name.clone(),
                what: format!(
                    "PersistentVolumeClaim {} is not bound yet",
                    claim.claim_name
                ),
            })?;
        let pv = Api::<PersistentVolume>::all(host.clone())
            .get(&bound)
            .await
            .map_err(|e| VolumeError::Missing {
                volume: name.clone(),
                what: format!("failed to read PersistentVolume {bound}: {e}"),
            })?;
        let dir = pv
            .spec
            .and_then(|s| s.host_path)
            .map(|h| PathBuf::from(h.path))
            .ok_or_else(|| VolumeError::Unsupported {
                volume: name.clone(),
                kind: format!("PersistentVolume {bound}: only hostPath"),
            })?;
        std::fs::create_dir_all(&dir).map_err(write_err(&dir))?;
        return Ok(dir);
    }
    std::fs::create_dir_all(&own).map_err(write_err(&own))?;
    if volume.empty_dir.is_some() {
        return Ok(own);
    }
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    if let Some(s) = &volume.secret {
        let secret_name = s.secret_name.clone().unwrap_or_default();
        let data = keyed_data::<Secret>(
            host,
            namespace,
            &secret_name,
            s.optional.unwrap_or(false),
            &name,
        )
        .await?;
        files.extend(pick(data, s.items.as_deref()));
    } else if let Some(c) = &volume.config_map {
        let data =
            keyed_data::<ConfigMap>(host, namespace, &c.name, c.optional.unwrap_or(false), &name)
                .await?;
        files.extend(pick(data, c.items.as_deref()));
    } else if let Some(p) = &volume.projected {
        for source in p.sources.iter().flatten() {
            files.extend(project(host, pod, namespace, source, &own, &name, tokens).await?);
        }
    } else {
        let kind = serde_json::to_value(volume)
            .ok()
            .and_then(|v| {
                v.as_object()
                    .and_then(|o| o.keys().find(|k| *k != "name").cloned())
            })
            .unwrap_or_else(|| "such".into());
        return Err(VolumeError::Unsupported { volume: name, kind });
    }
    for (path, bytes) in files {
        let file = own.join(&path);
        write_atomic(&file, &bytes).map_err(write_err(&file))?;
    }
    Ok(own)
}

/// Keeps the listed keys under their paths, or every key under its own name.
fn pick(data: BTreeMap<String, Vec<u8>>, items: Option<&[KeyToPath]>) -> Vec<(String, Vec<u8>)> {
    match items {
        None => data.into_iter().collect(),
        Some(items) => items
            .iter()
            .filter_map(|k| data.get(&k.key).map(|b| (k.path.clone(), b.clone())))
            .collect(),
    }
}

/// A kind whose keys become files: Secret or ConfigMap.
trait KeyedData:
    kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
    + Clone
    + serde::de::DeserializeOwned
    + std::fmt::Debug
{
    /// Every key, with its bytes.
    fn keyed(self) -> BTreeMap<String, Vec<u8>>;
}

impl KeyedData for Secret {
    fn keyed(self) -> BTreeMap<String, Vec<u8>> {
        let mut out: BTreeMap<String, Vec<u8>> = self
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect();
        for (k, v) in self.string_data.unwrap_or_default() {
            out.insert(k, v.into_bytes());
        }
        out
    }
}

impl KeyedData for ConfigMap {
    fn keyed(self) -> BTreeMap<String, Vec<u8>> {
        let mut out: BTreeMap<String, Vec<u8>> = self
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.into_bytes()))
            .collect();
        for (k, v) in self.binary_data.unwrap_or_default() {
            out.insert(k, v.0);
        }
        out
    }
}

/// The keys of Secret or ConfigMap `name`; none when it is missing and `optional`.
async fn keyed_data<K: KeyedData>(
    host: &Client,
    namespace: &str,
    name: &str,
    optional: bool,
    volume: &str,
) -> Result<BTreeMap<String, Vec<u8>>, VolumeError> {
    let got = Api::<K>::namespaced(host.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|e| VolumeError::Missing {
            volume: volume.to_owned(),
            what: format!("failed to read {} {name}: {e}", K::kind(&())),
        })?;
    match got {
        Some(object) => Ok(object.keyed()),
        None if optional => Ok(BTreeMap::new()),
        None => Err(VolumeError::Missing {
            volume: volume.to_owned(),
            what: format!("{} {name} does not exist", K::kind(&())),
        }),
    }
}

async fn project(
    host: &Client,
    pod: &Pod,
    namespace: &str,
    source: &VolumeProjection,
    dir: &Path,
    volume: &str,
    tokens: &mut Vec<TokenFile>,
) -> Result<Vec<(String, Vec<u8>)>, VolumeError> {
    if let Some(t) = &source.service_account_token {
        let service_account = pod
            .spec
            .as_ref()
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_else(|| "default".into());
        let mut file = TokenFile {
            path: dir.join(&t.path),
            volume: volume.to_owned(),
            service_account,
            audience: t.audience.clone().filter(|a| !a.is_empty()),
            seconds: t.expiration_seconds.unwrap_or(DEFAULT_TOKEN_SECONDS),
            renew_at: Instant::now(),
        };
        let token = request_token(host, pod, namespace, &mut file).await?;
        tokens.push(file);
        return Ok(vec![(t.path.clone(), token.into_bytes())]);
    }
    if let Some(c) = &source.config_map {
        let data = keyed_data::<ConfigMap>(
            host,
            namespace,
            &c.name,
            c.optional.unwrap_or(false),
            volume,
        )
        .await?;
        return Ok(pick(data, c.items.as_deref()));
    }
    if let Some(s) = &source.secret {
        let data = keyed_data::<Secret>(
            host,
            namespace,
            &s.name,
            s.optional.unwrap_or(false),
            volume,
        )
        .await?;
        return Ok(pick(data, s.items.as_deref()));
    }
    if let Some(d) = &source.downward_api {
        let mut out = Vec::new();
        for item in d.items.iter().flatten() {
            if let Some(f) = &item.field_ref {
                let value = super::podspec::field(pod, &f.field_path).ok_or_else(|| {
                    VolumeError::Missing {
                        volume: volume.to_owned(),
                        what: format!("the downward API has no field {}", f.field_path),
                    }
                })?;
                out.push((item.path.clone(), value.into_bytes()));
            }
        }
        return Ok(out);
    }
    Err(VolumeError::Unsupported {
        volume: volume.to_owned(),
        kind: "this projected source of".into(),
    })
}

/// Requests a token for the pod's service account, bound to the pod, and sets when it
/// is due for renewal.
async fn request_token(
    host: &Client,
    pod: &Pod,
    namespace: &str,
    file: &mut TokenFile,
) -> Result<String, VolumeError> {
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: file.audience.clone().map(|a| vec![a]),
            expiration_seconds: Some(file.seconds),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
            }),
        }),
        ..TokenRequest::default()
    };
    let answer = Api::<ServiceAccount>::namespaced(host.clone(), namespace)
        .create_token_request(&file.service_account, &PostParams::default(), &request)
        .await
        .map_err(|e| VolumeError::Missing {
            volume: file.volume.clone(),
            what: format!(
                "failed to get a token for ServiceAccount {}: {e}",
                file.service_account
            ),
        })?;
    let token = answer.status.and_then(|s| s.token).unwrap_or_default();
    let life = u64::try_from(file.seconds).unwrap_or(3600);
    file.renew_at = Instant::now() + Duration::from_secs(life * 8 / 10);
    Ok(token)
}

/// Renews the tokens that are due, in place.
///
/// # Errors
/// When a token cannot be had or written.
pub async fn renew_tokens(
    host: &Client,
    pod: &Pod,
    tokens: &mut [TokenFile],
) -> Result<usize, VolumeError> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let mut renewed = 0;
    for file in tokens.iter_mut().filter(|t| Instant::now() >= t.renew_at) {
        let token = request_token(host, pod, &namespace, file).await?;
        write_atomic(&file.path, token.as_bytes()).map_err(|source| VolumeError::Write {
            volume: file.volume.clone(),
            path: file.path.clone(),
            source,
        })?;
        renewed += 1;
    }
    Ok(renewed)
}
