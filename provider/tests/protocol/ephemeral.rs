//! `gpufleet_virtual_cluster_connection` over the wire: the schema, validation, open, renew
//! and close, unknown configuration, and Terraform's checks of the result. The connection
//! runs over a fake tunnel backend that counts the tunnels it holds open, so closing is seen
//! to release them.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, SystemTime},
};

use async_trait::async_trait;
use gpufleet_engine::{
    backends::kube::{
        host::{OpenTunnel, OpenTunnelError, TunnelsBackend},
        tunnel::TenantAccess,
    },
    context::Context,
    diag::Diagnostics,
    ephemeral_resources::virtual_cluster_connection::{TYPE_NAME, VirtualClusterConnection},
    kinds::{EphemeralKind, OpenResponse, RenewResponse},
    path::AttrPath,
    schema::Schema,
    value::Value,
};
use terraform_provider_gpufleet::{proto::tfplugin6 as pb, server::Kinds};

use crate::support::{
    Harness, assert_no_errors, client_capabilities, engine_path, errors, has_error, single_error,
    test_kinds,
};

const TOKEN: &str = "fake-token-of-the-tenant-admin";

/// Tunnels that only count how many of them are open.
#[derive(Debug, Clone, Default)]
struct FakeTunnels {
    open: Arc<AtomicUsize>,
    asked: Arc<AtomicUsize>,
}

struct FakeTunnel {
    access: TenantAccess,
    open: Arc<AtomicUsize>,
}

impl OpenTunnel for FakeTunnel {
    fn access(&self) -> &TenantAccess {
        &self.access
    }
}

impl Drop for FakeTunnel {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::SeqCst);
    }
}

#[async_trait]
impl TunnelsBackend for FakeTunnels {
    async fn open_tunnel(
        &self,
        _ctx: &Context,
        _needed_by: &str,
        namespace: &str,
        name: &str,
        token_ttl: Duration,
    ) -> Result<Box<dyn OpenTunnel>, OpenTunnelError> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        if name == "gone" {
            return Err(OpenTunnelError::Tunnel(
                format!("virtual cluster {namespace}/{name} not found").into(),
            ));
        }
        self.open.fetch_add(1, Ordering::SeqCst);
        Ok(Box::new(FakeTunnel {
            access: TenantAccess {
                host: "https://127.0.0.1:45678".to_owned(),
                tls_server_name: Some(format!("{name}.{namespace}.svc")),
                cluster_ca_certificate: "-----BEGIN CERTIFICATE-----\n...".to_owned(),
                token: TOKEN.to_owned(),
                expires_at: SystemTime::now() + token_ttl,
                kubeconfig: format!("apiVersion: v1\nkind: Config\n# token {TOKEN}\n"),
            },
            open: Arc::clone(&self.open),
        }))
    }
}

/// A harness whose connection runs over fresh fake tunnels.
async fn harness() -> (Harness, FakeTunnels) {
    let tunnels = FakeTunnels::default();
    let kind: &'static dyn EphemeralKind =
        Box::leak(Box::new(VirtualClusterConnection(tunnels.clone())));
    let kinds = Kinds {
        ephemeral_resources: vec![kind],
        ..test_kinds()
    };
    (Harness::start_with(kinds).await, tunnels)
}

/// A configuration as Terraform sends it: computed attributes null.
fn config(id: Value, ttl: Value) -> Value {
    Value::object([
        ("virtual_cluster_id", id),
        ("credentials_ttl", ttl),
        ("host", Value::Null),
        ("tls_server_name", Value::Null),
        ("cluster_ca_certificate", Value::Null),
        ("token", Value::Null),
        ("kubeconfig", Value::Null),
        ("expires_at", Value::Null),
    ])
}

fn prod() -> Value {
    config(Value::string("vc-prod/prod"), Value::Null)
}

#[tokio::test]
async fn the_connection_is_announced_with_its_secrets_sensitive() {
    let h = Harness::start().await;
    let schema = h
        .wire_schema()
        .ephemeral_resource_schemas
        .get(TYPE_NAME)
        .expect("GetProviderSchema announces the connection");
    let block = schema.block.as_ref().expect("a block");
    let attr = |name: &str| {
        block
            .attributes
            .iter()
            .find(|a| a.name == name)
            .unwrap_or_else(|| panic!("{name} is in the schema"))
    };
    assert!(attr("virtual_cluster_id").required);
    assert!(attr("credentials_ttl").optional);
    for secret in ["token", "kubeconfig"] {
        assert!(attr(secret).computed && attr(secret).sensitive, "{secret}");
    }
    for computed in [
        "host",
        "tls_server_name",
        "cluster_ca_certificate",
        "expires_at",
    ] {
        assert!(attr(computed).computed, "{computed}");
    }
    assert!(!block.description.is_empty());

    let meta = h.metadata().await;
    assert!(
        meta.ephemeral_resources
            .iter()
            .any(|e| e.type_name == TYPE_NAME),
        "{:?}",
        meta.ephemeral_resources
    );
}

#[tokio::test]
async fn bad_ids_and_durations_are_errors_on_their_attribute_and_open_nothing() {
    let (h, tunnels) = harness().await;
    for (cfg, attr, summary) in [
        (
            config(Value::string("prod"), Value::Null),
            "virtual_cluster_id",
            "Invalid Virtual Cluster ID",
        ),
        (
            config(Value::string("vc-prod/Prod_1"), Value::Null),
            "virtual_cluster_id",
            "Invalid Virtual Cluster ID",
        ),
        (
            config(Value::string("vc-prod/prod"), Value::string("5m")),
            "credentials_ttl",
            "Invalid Credentials TTL",
        ),
        (
            config(Value::string("vc-prod/prod"), Value::string("48h")),
            "credentials_ttl",
            "Invalid Credentials TTL",
        ),
        (
            config(Value::string("vc-prod/prod"), Value::string("soon")),
            "credentials_ttl",
            "Invalid Duration",
        ),
    ] {
        let opened = h.open_ephemeral(TYPE_NAME, &cfg).await;
        let d = single_error(&opened.diagnostics, &format!("{cfg:?}"));
        assert_eq!(d.summary, summary, "{cfg:?}: {}", d.detail);
        assert_eq!(
            d.attribute.as_ref().map(engine_path),
            Some(AttrPath::attr(attr)),
            "{cfg:?}"
        );
    }
    // Unknown values cannot be judged yet and are not errors at validation.
    let resp = h
        .client()
        .validate_ephemeral_resource_config(pb::validate_ephemeral_resource_config::Request {
            type_name: TYPE_NAME.to_owned(),
            config: Some(crate::support::dv(
                &config(Value::unknown(), Value::unknown()),
                &h.ephemeral_schema(TYPE_NAME).value_type(),
            )),
        })
        .await
        .expect("ValidateEphemeralResourceConfig")
        .into_inner();
    assert!(resp.diagnostics.is_empty(), "{:?}", resp.diagnostics);
    assert_eq!(
        tunnels.asked.load(Ordering::SeqCst),
        0,
        "nothing was opened"
    );
}

#[tokio::test]
async fn open_renew_close_holds_the_tunnel_for_the_run_and_releases_it() {
    let (h, tunnels) = harness().await;
    let opened = h
        .open_ephemeral(
            TYPE_NAME,
            &config(Value::string("vc-prod/prod"), Value::string("30m")),
        )
        .await;
    assert_no_errors(&opened.diagnostics, "open");
    let r = &opened.result;
    assert_eq!(r.get("virtual_cluster_id"), &Value::string("vc-prod/prod"));
    assert_eq!(r.get("credentials_ttl"), &Value::string("30m"));
    assert_eq!(r.get("host"), &Value::string("https://127.0.0.1:45678"));
    assert_eq!(r.get("token"), &Value::string(TOKEN));
    assert_eq!(r.get("tls_server_name"), &Value::string("prod.vc-prod.svc"));
    let expires_at = humantime::parse_rfc3339(r.get("expires_at").as_str().expect("expires_at"))
        .expect("RFC 3339");
    let renew_at = opened.renew_at.expect("renew_at is set");
    let renew_at = SystemTime::try_from(renew_at).expect("a valid time");
    assert!(
        renew_at < expires_at,
        "renewal is asked before the token expires"
    );
    assert_eq!(tunnels.open.load(Ordering::SeqCst), 1, "the tunnel is open");

    // Renewal cannot extend a TokenRequest token: a warning while it still works.
    let renewed = h.renew_ephemeral(TYPE_NAME, opened.private.clone()).await;
    assert!(
        !has_error(&renewed.diagnostics),
        "{:?}",
        renewed.diagnostics
    );
    assert!(
        renewed
            .diagnostics
            .iter()
            .any(|d| d.summary == "Connection Credentials Expire Soon"),
        "{:?}",
        renewed.diagnostics
    );
    assert_eq!(renewed.private, opened.private);
    assert_eq!(renewed.renew_at, None, "renewing again would not help");
    assert_eq!(
        tunnels.open.load(Ordering::SeqCst),
        1,
        "renew keeps it open"
    );

    let closed = h.close_ephemeral(TYPE_NAME, opened.private.clone()).await;
    assert!(closed.is_empty(), "{closed:?}");
    assert_eq!(
        tunnels.open.load(Ordering::SeqCst),
        0,
        "close drops the tunnel"
    );

    // Closing twice is harmless; renewing what is closed is an error.
    assert!(
        h.close_ephemeral(TYPE_NAME, opened.private.clone())
            .await
            .is_empty()
    );
    let renewed = h.renew_ephemeral(TYPE_NAME, opened.private.clone()).await;
    assert_eq!(
        single_error(&renewed.diagnostics, "renew after close").summary,
        "Connection Closed"
    );
    assert!(
        !h.all_diagnostic_text().contains(TOKEN),
        "the token never appears in a diagnostic"
    );
}

#[tokio::test]
async fn each_open_gets_its_own_tunnel() {
    let (h, tunnels) = harness().await;
    let a = h.open_ephemeral(TYPE_NAME, &prod()).await;
    let b = h.open_ephemeral(TYPE_NAME, &prod()).await;
    assert_no_errors(&a.diagnostics, "open a");
    assert_no_errors(&b.diagnostics, "open b");
    assert_ne!(a.private, b.private);
    assert_eq!(tunnels.open.load(Ordering::SeqCst), 2);
    assert!(h.close_ephemeral(TYPE_NAME, a.private).await.is_empty());
    assert_eq!(tunnels.open.load(Ordering::SeqCst), 1, "only a is closed");
    assert!(h.close_ephemeral(TYPE_NAME, b.private).await.is_empty());
    assert_eq!(tunnels.open.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_tunnel_that_fails_to_open_is_an_error_on_the_id() {
    let (h, tunnels) = harness().await;
    let opened = h
        .open_ephemeral(
            TYPE_NAME,
            &config(Value::string("vc-gone/gone"), Value::Null),
        )
        .await;
    let d = single_error(&opened.diagnostics, "open of a missing cluster");
    assert_eq!(d.summary, "Cannot Connect to Virtual Cluster");
    assert!(d.detail.contains("vc-gone/gone"), "{}", d.detail);
    assert_eq!(
        d.attribute.as_ref().map(engine_path),
        Some(AttrPath::attr("virtual_cluster_id"))
    );
    assert!(opened.result.is_null());
    assert_eq!(tunnels.open.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn unknown_configuration_is_deferred_when_allowed_and_never_opened() {
    let (h, tunnels) = harness().await;
    let unknown = config(Value::unknown(), Value::Null);

    let deferring = pb::ClientCapabilities {
        deferral_allowed: true,
        ..client_capabilities()
    };
    let resp = h.open_ephemeral_rpc(TYPE_NAME, &unknown, deferring).await;
    assert!(resp.diagnostics.is_empty(), "{:?}", resp.diagnostics);
    assert_eq!(
        resp.deferred.map(|d| d.reason()),
        Some(pb::deferred::Reason::ResourceConfigUnknown)
    );
    assert_eq!(resp.private, None);
    let ty = h.ephemeral_schema(TYPE_NAME).value_type();
    let result = crate::support::from_dv(resp.result.as_ref(), &ty);
    assert!(result.get("token").is_unknown(), "{result:?}");
    assert!(result.get("virtual_cluster_id").is_unknown());

    let resp = h
        .open_ephemeral_rpc(TYPE_NAME, &unknown, client_capabilities())
        .await;
    let d = single_error(&resp.diagnostics, "open with an unknown id");
    assert_eq!(d.summary, "Ephemeral Resource Configuration Unknown");
    assert_eq!(
        d.attribute.as_ref().map(engine_path),
        Some(AttrPath::attr("virtual_cluster_id"))
    );
    assert_eq!(resp.deferred, None);
    assert_eq!(resp.private, None);
    assert_eq!(
        tunnels.asked.load(Ordering::SeqCst),
        0,
        "nothing was opened"
    );
}

#[tokio::test]
async fn closing_an_unknown_connection_is_harmless_and_bad_data_is_an_error() {
    let (h, _) = harness().await;
    // A well-formed handle of this process that was never opened.
    let never = serde_json::to_vec(&serde_json::json!({
        "pid": std::process::id(),
        "handle": 999_999,
    }))
    .expect("json");
    assert!(h.close_ephemeral(TYPE_NAME, Some(never)).await.is_empty());
    // A handle of a provider process that has ended.
    let ended = serde_json::to_vec(&serde_json::json!({
        "pid": std::process::id().wrapping_add(1),
        "handle": 1,
    }))
    .expect("json");
    assert!(h.close_ephemeral(TYPE_NAME, Some(ended)).await.is_empty());

    // No private data: an open whose values were not known yet, which opened nothing.
    assert!(h.close_ephemeral(TYPE_NAME, None).await.is_empty());

    let diags = h
        .close_ephemeral(TYPE_NAME, Some(b"garbage".to_vec()))
        .await;
    assert_eq!(
        single_error(&diags, "close of garbage").summary,
        "Invalid Connection Data"
    );
    let diags = h
        .close_ephemeral("gpufleet_no_such_thing", Some(b"x".to_vec()))
        .await;
    assert_eq!(
        single_error(&diags, "close of an unknown type").summary,
        "Unknown Ephemeral Resource Type"
    );
}

/// A connection that rewrites its configuration, as a buggy kind might.
struct RewritesItsConfig;

#[async_trait]
impl EphemeralKind for RewritesItsConfig {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        VirtualClusterConnection(FakeTunnels::default()).schema()
    }

    async fn open(&self, ctx: &Context, config: Value) -> OpenResponse {
        let mut opened = VirtualClusterConnection(FakeTunnels::default())
            .open(ctx, config)
            .await;
        opened
            .result
            .set_attr("virtual_cluster_id", Value::string("vc-other/other"));
        opened
    }

    async fn renew(&self, _ctx: &Context, _private: Option<&[u8]>) -> RenewResponse {
        RenewResponse {
            private: None,
            renew_at: None,
            diagnostics: Diagnostics::new(),
        }
    }

    async fn close(&self, _ctx: &Context, _private: Option<&[u8]>) -> Diagnostics {
        Diagnostics::new()
    }
}

#[tokio::test]
#[should_panic(expected = "Provider produced invalid ephemeral resource instance")]
async fn the_harness_holds_results_to_terraforms_rules() {
    let kinds = Kinds {
        ephemeral_resources: vec![&RewritesItsConfig],
        ..test_kinds()
    };
    let h = Harness::start_with(kinds).await;
    let opened = h.open_ephemeral(TYPE_NAME, &prod()).await;
    // Not reached: the check above fails first.
    assert!(errors(&opened.diagnostics).is_empty());
}
