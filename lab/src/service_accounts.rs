//! The identities the lab runs its clients as, instead of its admin certificate: each a
//! ServiceAccount bound to a ClusterRole, with a kubeconfig that carries the account's token.
//!
//! - The gpufleet provider: `gpufleet-system/gpufleet-provider`, bound to the provider's own
//!   least-privilege ClusterRole as it is published (`deploy/rbac/clusterrole.yaml`, which
//!   a platform team applies; `gpufleet-rbac --check` keeps it equal to what the provider's
//!   code needs). The lab's settings point
//!   `GPUFLEET_KUBE_CONFIG_PATH` at its kubeconfig, so every test that runs Terraform finds
//!   out when the provider needs a right the role lacks, as a platform team's cluster would.
//! - The MPI Operator: `mpi-operator/mpi-operator`, bound to the ClusterRole of the
//!   operator's release (`manifests/base/cluster-role.yaml`, copied by its build).
//! - Karpenter: `karpenter/karpenter`, bound to the rules of its KWOK chart's ClusterRoles
//!   and Roles (`kwok/charts/templates/`, taken by its build).
//!
//! The token is a ServiceAccount token Secret's, which does not expire: the operator runs
//! as long as the lab does, and the provider's kubeconfig stays the same across `up`s.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::error::LabError;
use crate::gobuild;
use crate::kubeconfig;
use crate::nodes::FIELD_MANAGER;
use crate::paths::LabPaths;

/// The provider's namespace and ServiceAccount.
pub const PROVIDER_NAMESPACE: &str = "gpufleet-system";
/// The provider's ServiceAccount, named after the published ClusterRole.
pub const PROVIDER_ACCOUNT: &str = "gpufleet-provider";

/// The provider's ClusterRole, as published for platform teams to apply.
const PROVIDER_ROLE_MANIFEST: &str = include_str!("../../deploy/rbac/clusterrole.yaml");

/// The MPI Operator's namespace (the release's standalone install).
pub const MPI_OPERATOR_NAMESPACE: &str = "mpi-operator";
/// The MPI Operator's ServiceAccount and ClusterRole (as the release names them).
pub const MPI_OPERATOR_ACCOUNT: &str = "mpi-operator";

/// Karpenter's namespace and ServiceAccount (as its chart names them).
pub const KARPENTER_ACCOUNT: &str = crate::karpenter::NAMESPACE;

/// How long the token controller may take to fill a token Secret.
const TOKEN_WAIT: Duration = Duration::from_secs(60);

/// One identity to set up.
struct Identity {
    namespace: &'static str,
    account: &'static str,
    role: ClusterRole,
    /// Roles in namespaces of their own (each names its namespace).
    roles: Vec<Role>,
    kubeconfig: PathBuf,
}

/// Makes the provider's ServiceAccount, binds it to the provider's ClusterRole, and writes
/// its kubeconfig (`<dir>/provider.kubeconfig`). Returns the kubeconfig's path.
///
/// # Errors
/// When the API server refuses an object, or the token is not issued in time.
pub(crate) async fn provider(
    client: &kube::Client,
    paths: &LabPaths,
    server: &str,
) -> Result<PathBuf, LabError> {
    let role = release_role(PROVIDER_ROLE_MANIFEST, PROVIDER_ACCOUNT).map_err(|why| {
        LabError::Manifest {
            what: "the provider's ClusterRole (deploy/rbac/clusterrole.yaml)",
            why,
        }
    })?;
    let identity = Identity {
        namespace: PROVIDER_NAMESPACE,
        account: PROVIDER_ACCOUNT,
        role,
        roles: Vec::new(),
        kubeconfig: paths.provider_kubeconfig(),
    };
    ensure(client, paths, server, &identity).await?;
    Ok(identity.kubeconfig)
}

/// Makes the MPI Operator's ServiceAccount, binds it to its release's ClusterRole, and
/// writes its kubeconfig (`<dir>/mpi-operator/kubeconfig`).
///
/// # Errors
/// When the release's role cannot be read, the API server refuses an object, or the token
/// is not issued in time.
pub(crate) async fn mpi_operator(
    client: &kube::Client,
    paths: &LabPaths,
    server: &str,
) -> Result<(), LabError> {
    let file = gobuild::mpi_operator_dir().join("cluster-role.yaml");
    let text = std::fs::read_to_string(&file).map_err(|source| LabError::StateDir {
        path: file.clone(),
        source,
    })?;
    let role = release_role(&text, MPI_OPERATOR_ACCOUNT).map_err(|e| LabError::StateDir {
        path: file.clone(),
        source: std::io::Error::other(e),
    })?;
    let identity = Identity {
        namespace: MPI_OPERATOR_NAMESPACE,
        account: MPI_OPERATOR_ACCOUNT,
        role,
        roles: Vec::new(),
        kubeconfig: mpi_operator_kubeconfig(paths),
    };
    ensure(client, paths, server, &identity).await
}

/// Makes Karpenter's ServiceAccount, binds it to its release's ClusterRole and Roles, and
/// writes its kubeconfig ([`crate::karpenter::kubeconfig`]).
///
/// # Errors
/// When the release's roles cannot be read, the API server refuses an object, or the token
/// is not issued in time.
pub(crate) async fn karpenter(
    client: &kube::Client,
    paths: &LabPaths,
    server: &str,
) -> Result<(), LabError> {
    let read = |name: &str| {
        let file = gobuild::karpenter_dir().join(name);
        std::fs::read_to_string(&file).map_err(|source| LabError::StateDir { path: file, source })
    };
    let bad = |name: &str, e: String| LabError::StateDir {
        path: gobuild::karpenter_dir().join(name),
        source: std::io::Error::other(e),
    };
    let role = release_role(&read("cluster-role.yaml")?, KARPENTER_ACCOUNT)
        .map_err(|e| bad("cluster-role.yaml", e))?;
    let roles = documents::<Role>(&read("roles.yaml")?).map_err(|e| bad("roles.yaml", e))?;
    let identity = Identity {
        namespace: crate::karpenter::NAMESPACE,
        account: KARPENTER_ACCOUNT,
        role,
        roles,
        kubeconfig: crate::karpenter::kubeconfig(paths),
    };
    ensure(client, paths, server, &identity).await
}

/// The MPI Operator's kubeconfig.
#[must_use]
pub fn mpi_operator_kubeconfig(paths: &LabPaths) -> PathBuf {
    paths.mpi_operator_dir().join("kubeconfig")
}

/// The ClusterRole called `name` among the documents of a release's manifest.
fn release_role(text: &str, name: &str) -> Result<ClusterRole, String> {
    documents::<ClusterRole>(text)?
        .into_iter()
        .find(|role| role.metadata.name.as_deref() == Some(name))
        .ok_or_else(|| format!("no ClusterRole {name}"))
}

/// The documents of a multi-document YAML manifest.
fn documents<T: DeserializeOwned>(text: &str) -> Result<Vec<T>, String> {
    text.split("\n---")
        .filter(|doc| !doc.trim().is_empty())
        .map(|doc| serde_saphyr::from_str(doc).map_err(|e| format!("parse a manifest: {e}")))
        .collect()
}

fn api_error(what: String) -> impl FnOnce(kube::Error) -> LabError {
    move |source| LabError::Api { what, source }
}

async fn ensure(
    client: &kube::Client,
    paths: &LabPaths,
    server: &str,
    id: &Identity,
) -> Result<(), LabError> {
    let apply = PatchParams::apply(FIELD_MANAGER).force();
    let (ns, account) = (id.namespace, id.account);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let body = json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": ns } });
    namespaces
        .patch(ns, &apply, &Patch::Apply(&body))
        .await
        .map_err(api_error(format!("create namespace {ns}")))?;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let body = json!({
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": { "name": account, "namespace": ns },
    });
    accounts
        .patch(account, &apply, &Patch::Apply(&body))
        .await
        .map_err(api_error(format!("create serviceaccount {ns}/{account}")))?;
    let role_name = id.role.metadata.name.clone().unwrap_or_default();
    let mut role = id.role.clone();
    role.metadata.managed_fields = None;
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let mut body = serde_json::to_value(&role).map_err(|e| LabError::StateDir {
        path: PathBuf::from(&role_name),
        source: std::io::Error::other(e),
    })?;
    body["apiVersion"] = json!("rbac.authorization.k8s.io/v1");
    body["kind"] = json!("ClusterRole");
    roles
        .patch(&role_name, &apply, &Patch::Apply(&body))
        .await
        .map_err(api_error(format!("apply clusterrole {role_name}")))?;
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let body = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": { "name": role_name },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name },
        "subjects": [{ "kind": "ServiceAccount", "name": account, "namespace": ns }],
    });
    bindings
        .patch(&role_name, &apply, &Patch::Apply(&body))
        .await
        .map_err(api_error(format!("bind clusterrole {role_name}")))?;
    for role in &id.roles {
        let (name, role_ns) = (
            role.metadata.name.clone().unwrap_or_default(),
            role.metadata
                .namespace
                .clone()
                .unwrap_or_else(|| ns.to_owned()),
        );
        let mut body = serde_json::to_value(role).map_err(|e| LabError::StateDir {
            path: PathBuf::from(&name),
            source: std::io::Error::other(e),
        })?;
        body["apiVersion"] = json!("rbac.authorization.k8s.io/v1");
        body["kind"] = json!("Role");
        let roles: Api<Role> = Api::namespaced(client.clone(), &role_ns);
        roles
            .patch(&name, &apply, &Patch::Apply(&body))
            .await
            .map_err(api_error(format!("apply role {role_ns}/{name}")))?;
        let body = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": { "name": name, "namespace": role_ns },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name },
            "subjects": [{ "kind": "ServiceAccount", "name": account, "namespace": ns }],
        });
        let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), &role_ns);
        bindings
            .patch(&name, &apply, &Patch::Apply(&body))
            .await
            .map_err(api_error(format!("bind role {role_ns}/{name}")))?;
    }
    let token = token(client, ns, account).await?;
    let ca = std::fs::read(crate::pki::Pki::new(&paths.pki()).ca_cert()).map_err(|source| {
        LabError::StateDir {
            path: paths.pki(),
            source,
        }
    })?;
    let text = kubeconfig::render_token(server, &ca, &token, account);
    if std::fs::read_to_string(&id.kubeconfig).ok().as_deref() != Some(text.as_str()) {
        if let Some(dir) = id.kubeconfig.parent() {
            std::fs::create_dir_all(dir).map_err(|source| LabError::StateDir {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        kubeconfig::write(&id.kubeconfig, &text).map_err(LabError::Kubeconfig)?;
    }
    Ok(())
}

/// The token of the account's token Secret `<account>-token`, made when missing, once the
/// token controller has filled it in.
async fn token(client: &kube::Client, ns: &str, account: &str) -> Result<String, LabError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let name = format!("{account}-token");
    let body = json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
        "metadata": {
            "name": name, "namespace": ns,
            "annotations": { "kubernetes.io/service-account.name": account },
        },
    });
    secrets
        .patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER),
            &Patch::Apply(&body),
        )
        .await
        .map_err(api_error(format!("create secret {ns}/{name}")))?;
    let started = Instant::now();
    loop {
        let secret = secrets
            .get(&name)
            .await
            .map_err(api_error(format!("read secret {ns}/{name}")))?;
        let token = secret
            .data
            .as_ref()
            .and_then(|d| d.get("token"))
            .and_then(|t| String::from_utf8(t.0.clone()).ok())
            .filter(|t| !t.is_empty());
        if let Some(token) = token {
            return Ok(token);
        }
        if started.elapsed() >= TOKEN_WAIT {
            return Err(LabError::Timeout {
                what: format!("the token of serviceaccount {ns}/{account}"),
                waited: TOKEN_WAIT,
                state: format!(
                    "secret {ns}/{name} has no token; see the kube-controller-manager log"
                ),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_release_role_is_found_among_its_documents() {
        let text = "\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: mpi-operator
rules:
- apiGroups: [\"\"]
  resources: [pods]
  verbs: [get]

---

apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: kubeflow-mpijobs-view
rules: []
";
        let role = release_role(text, "mpi-operator").expect("found");
        assert_eq!(role.rules.map(|r| r.len()), Some(1));
        assert!(release_role(text, "other").is_err());
    }

    #[test]
    fn the_provider_is_bound_to_the_role_the_provider_publishes() {
        let role = release_role(PROVIDER_ROLE_MANIFEST, PROVIDER_ACCOUNT).expect("found");
        assert_eq!(
            PROVIDER_ACCOUNT,
            gpufleet_engine::backends::kube::rbac::PROVIDER_ROLE
        );
        let code: ClusterRole =
            serde_json::from_value(gpufleet_engine::backends::kube::rbac::cluster_role())
                .expect("the code's role");
        assert_eq!(role.rules, code.rules);
    }
}
