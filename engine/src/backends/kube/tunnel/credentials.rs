//! The credentials a tunnel hands out: the syncer's admin certificate, used once through the
//! tunnel to keep gpufleet's ServiceAccount and mint its short-lived token, and the
//! kubeconfigs of both.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::config::{AuthInfo, Cluster, Kubeconfig};
use serde_json::{Value as Json, json};

use super::{MIN_TOKEN_TTL, SERVICE_ACCOUNT, Target, TenantAccess, TunnelError};
use crate::backends::kube::{FIELD_MANAGER, MANAGED_BY, MANAGED_BY_VALUE, host::KubeHost};

/// The syncer's admin identity and CA, from Secret `vc-<name>`.
pub(super) struct AdminCredentials {
    pub(super) ca: String,
    pub(super) certificate: String,
    pub(super) key: String,
}

pub(super) async fn admin_credentials(
    host: &KubeHost,
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<AdminCredentials, TunnelError> {
    let secret_name = format!("vc-{name}");
    host.count();
    let secret = Api::<Secret>::namespaced(client.clone(), namespace)
        .get(&secret_name)
        .await
        .map_err(|e| TunnelError::Host {
            endpoint: format!("/api/v1/namespaces/{namespace}/secrets/{secret_name}"),
            operation: format!("reading Secret {secret_name}"),
            source: Box::new(e),
        })?;
    credentials_of(&secret).map_err(|what| TunnelError::Credentials {
        namespace: namespace.into(),
        name: name.into(),
        what,
    })
}

/// The PEM keys of Secret `vc-<name>`, falling back to the data inside its kubeconfig
/// (`config`); `Err` names what is missing.
pub(super) fn credentials_of(secret: &Secret) -> Result<AdminCredentials, &'static str> {
    let data = secret.data.as_ref();
    let key = |k: &str| {
        data.and_then(|d| d.get(k))
            .and_then(|b| String::from_utf8(b.0.clone()).ok())
            .filter(|s| !s.trim().is_empty())
    };
    // The kubeconfig read as plain data: kube's own type hides the key behind `secrecy`.
    let kubeconfig: Option<Json> =
        key("config").and_then(|text| serde_saphyr::from_str(&text).ok());
    let inner = |ptr: &str| {
        kubeconfig
            .as_ref()
            .and_then(|k| k.pointer(ptr))
            .and_then(Json::as_str)
    };
    let decoded = |b64: Option<&str>| {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD
            .decode(b64?.trim())
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
    };
    let ca = key("certificate-authority")
        .or_else(|| decoded(inner("/clusters/0/cluster/certificate-authority-data")))
        .ok_or("certificate authority (key certificate-authority)")?;
    let certificate = key("client-certificate")
        .or_else(|| decoded(inner("/users/0/user/client-certificate-data")))
        .ok_or("client certificate (key client-certificate)")?;
    let key_pem = key("client-key")
        .or_else(|| decoded(inner("/users/0/user/client-key-data")))
        .ok_or("client key (key client-key)")?;
    Ok(AdminCredentials {
        ca,
        certificate,
        key: key_pem,
    })
}

/// Ensures [`SERVICE_ACCOUNT`] and its `cluster-admin` binding (server-side apply, so
/// a second tunnel changes nothing).
pub(super) async fn ensure_service_account(
    target: &Target<'_>,
    admin: &kube::Client,
) -> Result<(), TunnelError> {
    let (sa_ns, sa_name) = SERVICE_ACCOUNT;
    let labels = json!({ MANAGED_BY: MANAGED_BY_VALUE });
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let sa = json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": { "name": sa_name, "namespace": sa_ns, "labels": labels },
    });
    Api::<ServiceAccount>::namespaced(admin.clone(), sa_ns)
        .patch(sa_name, &pp, &Patch::Apply(&sa))
        .await
        .map_err(target.failed(&format!("applying ServiceAccount {sa_ns}/{sa_name}")))?;
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": { "name": sa_name, "labels": labels },
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "cluster-admin",
        },
        "subjects": [{ "kind": "ServiceAccount", "name": sa_name, "namespace": sa_ns }],
    });
    Api::<ClusterRoleBinding>::all(admin.clone())
        .patch(sa_name, &pp, &Patch::Apply(&binding))
        .await
        .map_err(target.failed(&format!("applying ClusterRoleBinding {sa_name}")))?;
    Ok(())
}

/// The seconds a TokenRequest asks for: `ttl`, at least [`MIN_TOKEN_TTL`], rounded up.
pub(super) fn expiration_seconds(ttl: Duration) -> i64 {
    let ttl = ttl.max(MIN_TOKEN_TTL);
    let whole = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
    i64::try_from(whole).unwrap_or(i64::MAX)
}

pub(super) async fn mint_token(
    target: &Target<'_>,
    admin: &kube::Client,
    ttl: Duration,
) -> Result<(String, SystemTime), TunnelError> {
    let (sa_ns, sa_name) = SERVICE_ACCOUNT;
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(expiration_seconds(ttl)),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    let answer: TokenRequest = Api::<ServiceAccount>::namespaced(admin.clone(), sa_ns)
        .create_subresource("token", sa_name, &PostParams::default(), &request)
        .await
        .map_err(target.failed(&format!(
            "requesting a token for ServiceAccount {sa_ns}/{sa_name}"
        )))?;
    let missing = |what| TunnelError::Token {
        namespace: target.namespace.into(),
        name: target.name.into(),
        endpoint: target.endpoint.into(),
        what,
    };
    let status = answer.status.ok_or_else(|| missing("a status"))?;
    let token = status
        .token
        .filter(|t| !t.is_empty())
        .ok_or_else(|| missing("a token"))?;
    let expires_at = status
        .expiration_timestamp
        .map(|t| SystemTime::from(t.0))
        .ok_or_else(|| missing("an expiration time"))?;
    Ok((token, expires_at))
}

/// A one-context kubeconfig for `access.host` with the given user.
pub(super) fn kubeconfig(access: &TenantAccess, user: AuthInfo) -> Kubeconfig {
    use base64::Engine as _;
    let cluster = Cluster {
        server: Some(access.host.clone()),
        certificate_authority_data: Some(
            base64::engine::general_purpose::STANDARD.encode(&access.cluster_ca_certificate),
        ),
        tls_server_name: access.tls_server_name.clone(),
        ..Cluster::default()
    };
    crate::backends::kube::one_context_kubeconfig("gpufleet-tunnel", cluster, user)
}

pub(super) fn admin_kubeconfig(access: &TenantAccess, creds: &AdminCredentials) -> Kubeconfig {
    use base64::Engine as _;
    let b64 = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
    kubeconfig(
        access,
        AuthInfo {
            client_certificate_data: Some(b64(&creds.certificate)),
            client_key_data: Some(b64(&creds.key).into()),
            ..AuthInfo::default()
        },
    )
}

/// The token kubeconfig as YAML, written by hand so the token is not passed through a
/// serializer that might log it; every value is a plain scalar or base64.
pub(super) fn token_kubeconfig(access: &TenantAccess, token: &str) -> String {
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD.encode(&access.cluster_ca_certificate);
    let server_name = access
        .tls_server_name
        .as_deref()
        .map(|n| format!("    tls-server-name: {}\n", yaml_string(n)))
        .unwrap_or_default();
    format!(
        "apiVersion: v1\n\
         kind: Config\n\
         clusters:\n\
         - name: gpufleet-tunnel\n  \
           cluster:\n    \
             server: {server}\n    \
             certificate-authority-data: {ca}\n\
         {server_name}\
         users:\n\
         - name: gpufleet-tunnel\n  \
           user:\n    \
             token: {token}\n\
         contexts:\n\
         - name: gpufleet-tunnel\n  \
           context:\n    \
             cluster: gpufleet-tunnel\n    \
             user: gpufleet-tunnel\n\
         current-context: gpufleet-tunnel\n",
        server = yaml_string(&access.host),
        token = yaml_string(token),
    )
}

/// A YAML double-quoted scalar (JSON's string syntax is valid YAML).
pub(super) fn yaml_string(s: &str) -> String {
    Json::String(s.to_owned()).to_string()
}
