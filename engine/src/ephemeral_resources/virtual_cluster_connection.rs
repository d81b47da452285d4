//! `gpufleet_virtual_cluster_connection`: a connection to a virtual cluster's API server for
//! the length of one Terraform run, for the `kubernetes` and `helm` providers, `kubectl` in a
//! provisioner, or anything else that takes a kubeconfig.
//!
//! Opening it starts a local listener in the provider process that forwards through the host
//! API server to the tenant's control plane, and asks the virtual cluster for a short-lived
//! token. The tunnel is kept in the context's open handles, named by the private data
//! Terraform hands back; closing it (or the provider process ending) drops the listener.
//! Nothing of it is written to the plan or the state.

use std::time::{Duration, SystemTime};

use async_trait::async_trait;

use crate::{
    backends::kube::host::{FromSettings, OpenTunnel, OpenTunnelError, TunnelsBackend},
    context::Context,
    diag::{Diagnostic, Diagnostics},
    kinds::{EphemeralKind, OpenResponse, RenewResponse},
    open_handles::{HandleId, PrivateError},
    path::AttrPath,
    resources::virtual_cluster::schema::NAME_MAX,
    schema::{Attribute, Block, Schema, Validator},
    validate::{DnsLabel, PositiveDuration},
    value::{Type, Value},
};

/// The type name.
pub const TYPE_NAME: &str = "gpufleet_virtual_cluster_connection";

/// How long the token is valid when `credentials_ttl` is not set.
pub const DEFAULT_TTL: Duration = Duration::from_secs(3600);
/// The shortest token the TokenRequest API issues (`expirationSeconds` of at least 600).
pub const MIN_TTL: Duration = Duration::from_secs(600);
/// The longest token the connection asks for.
pub const MAX_TTL: Duration = Duration::from_secs(24 * 3600);

const ID: &str = "virtual_cluster_id";
const TTL: &str = "credentials_ttl";

/// The `gpufleet_virtual_cluster_connection` ephemeral resource over a [`TunnelsBackend`].
#[derive(Debug, Clone, Copy, Default)]
pub struct VirtualClusterConnection<B = FromSettings>(pub B);

fn connection_schema() -> Schema {
    Schema::new(
        Block::new(
            "A connection to a virtual cluster's API server for the length of one Terraform \
             run: a local address in the provider process that forwards through the host \
             cluster's API server to the tenant's control plane, and a short-lived token \
             issued inside the virtual cluster. Configure the `kubernetes` or `helm` provider with it, or hand \
             its kubeconfig to a provisioner. Works wherever the host cluster's API server is \
             reachable, whatever the virtual cluster's `expose`. Ephemeral: none of its values \
             are written to the plan or the state (Terraform 1.10 or later). In a run that \
             creates the virtual cluster, its values are unknown while planning and known once \
             the virtual cluster is created; opening waits up to three minutes for a \
             control-plane pod that is starting. Needs the provider's `kubernetes` block.",
        )
        .attr(
            Attribute::required(ID, Type::String)
                .validate(VirtualClusterId)
                .describe(
                    "The virtual cluster's `id`, `<namespace>/<name>`, e.g. \
                     `gpufleet_virtual_cluster.prod.id`.",
                ),
        )
        .attr(
            Attribute::optional(TTL, Type::String)
                .validate(PositiveDuration::new())
                .describe(
                    "How long the token is valid, from 10 minutes to 24 hours; an hour when \
                     unset. A run that lasts longer gets a warning when the token is about to \
                     expire.",
                ),
        )
        .attr(Attribute::computed("host", Type::String).describe(
            "The connection's local URL (`https://127.0.0.1:<port>`), for the `kubernetes` \
                 and `helm` providers' `host`.",
        ))
        .attr(
            Attribute::computed("tls_server_name", Type::String).describe(
                "The name the API server's certificate is checked against, for the \
                 providers' `tls_server_name`; null when it is `host` itself.",
            ),
        )
        .attr(
            Attribute::computed("cluster_ca_certificate", Type::String)
                .describe("PEM CA certificate of the virtual API server."),
        )
        .attr(
            Attribute::computed("token", Type::String)
                .sensitive()
                .describe("A bearer token issued inside the virtual cluster, valid until `expires_at`."),
        )
        .attr(
            Attribute::computed("kubeconfig", Type::String)
                .sensitive()
                .describe("A kubeconfig with the connection's address, CA and token."),
        )
        .attr(
            Attribute::computed("expires_at", Type::String)
                .describe("When the token expires, in RFC 3339 (UTC)."),
        ),
    )
}

/// An open connection in the context's handles; dropping it closes the tunnel.
struct Connection(Box<dyn OpenTunnel>);

/// `<namespace>/<name>`, both DNS labels, as the virtual cluster's `id` has them.
#[derive(Debug, Clone, Copy)]
struct VirtualClusterId;

impl VirtualClusterId {
    /// The namespace and name, or a sentence saying what is wrong.
    fn parse(id: &str) -> Result<(&str, &str), String> {
        let Some((namespace, name)) = id.split_once('/') else {
            return Err(format!(
                "{id:?} is not a virtual cluster's id: write `<namespace>/<name>`, for example \
                 `gpufleet_virtual_cluster.prod.id` or \"vc-prod/prod\""
            ));
        };
        let mut d = Diagnostics::new();
        DnsLabel::new(63).validate(
            &AttrPath::attr("namespace"),
            &Value::string(namespace),
            &mut d,
        );
        DnsLabel::new(NAME_MAX).validate(&AttrPath::attr("name"), &Value::string(name), &mut d);
        if d.has_error() {
            let reasons: Vec<String> = d.iter().map(|x| x.detail.clone()).collect();
            return Err(format!(
                "{id:?} is not a virtual cluster's id (`<namespace>/<name>`): {}",
                reasons.join(" ")
            ));
        }
        Ok((namespace, name))
    }
}

impl Validator for VirtualClusterId {
    fn description(&self) -> String {
        format!("Both parts are DNS labels; the name has at most {NAME_MAX} characters.")
    }

    fn validate(&self, path: &AttrPath, value: &Value, diags: &mut Diagnostics) {
        let Some(id) = value.as_str() else { return };
        if let Err(problem) = VirtualClusterId::parse(id) {
            diags.error_at(path.clone(), "Invalid Virtual Cluster ID", problem);
        }
    }
}

/// The token's lifetime from `credentials_ttl`, or the diagnostic at it.
fn token_ttl(config: &Value) -> Result<Duration, Diagnostic> {
    let Some(text) = config.get(TTL).as_str() else {
        return Ok(DEFAULT_TTL);
    };
    let invalid = |detail: String| {
        Diagnostic::error("Invalid Credentials TTL", detail).with_path(AttrPath::attr(TTL))
    };
    let ttl = PositiveDuration::parse(text)
        .map_err(|problem| invalid(format!("{TTL} is {text:?}; it {problem}.")))?;
    if !(MIN_TTL..=MAX_TTL).contains(&ttl) {
        return Err(invalid(format!(
            "{TTL} is {text:?}; tokens are issued for at least 10m (the TokenRequest API's \
             minimum) and at most 24h."
        )));
    }
    Ok(ttl)
}

/// When Terraform should come back if the run is still going: at four fifths of the token's
/// remaining life, so the warning arrives while the token still works.
fn renew_time(expires_at: SystemTime) -> SystemTime {
    let now = SystemTime::now();
    let left = expires_at.duration_since(now).unwrap_or_default();
    now + left.mul_f64(0.8)
}

fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

/// The configuration with the tunnel's values filled in.
fn result(config: &Value, tunnel: &dyn OpenTunnel) -> Value {
    let access = tunnel.access();
    let mut result = config.clone();
    result.set_attr("host", Value::string(&access.host));
    result.set_attr(
        "tls_server_name",
        access
            .tls_server_name
            .as_deref()
            .map_or(Value::Null, Value::string),
    );
    result.set_attr(
        "cluster_ca_certificate",
        Value::string(&access.cluster_ca_certificate),
    );
    result.set_attr("token", Value::string(&access.token));
    result.set_attr("kubeconfig", Value::string(&access.kubeconfig));
    result.set_attr("expires_at", Value::string(rfc3339(access.expires_at)));
    result
}

/// The diagnostic for private data that names no connection at all (a bug, not a closed
/// connection).
fn bad_private(e: &PrivateError) -> Diagnostic {
    Diagnostic::error(
        "Invalid Connection Data",
        format!(
            "Terraform handed back data that names no {TYPE_NAME} ({e}). This is a bug in \
             gpufleet or Terraform."
        ),
    )
}

#[async_trait]
impl<B: TunnelsBackend> EphemeralKind for VirtualClusterConnection<B> {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        connection_schema()
    }

    fn validate(&self, config: &Value) -> Diagnostics {
        // A malformed duration is the attribute validator's to report; only the bounds are
        // checked here.
        let parses = config
            .get(TTL)
            .as_str()
            .is_some_and(|t| PositiveDuration::parse(t).is_ok());
        match token_ttl(config) {
            Err(d) if parses => d.into(),
            _ => Diagnostics::new(),
        }
    }

    async fn open(&self, ctx: &Context, config: Value) -> OpenResponse {
        let id = config.get(ID).as_str().unwrap_or_default().to_owned();
        let (namespace, name) = match VirtualClusterId::parse(&id) {
            Ok(parts) => parts,
            Err(problem) => {
                return OpenResponse::refused(
                    Diagnostic::error("Invalid Virtual Cluster ID", problem)
                        .with_path(AttrPath::attr(ID)),
                );
            }
        };
        let ttl = match token_ttl(&config) {
            Ok(ttl) => ttl,
            Err(d) => return OpenResponse::refused(d),
        };
        if ctx.virtual_clusters.creating(&id) {
            tracing::debug!(virtual_cluster = %id, "planned for creation: connection values unknown");
            return OpenResponse::not_yet_known();
        }
        let tunnel = match self
            .0
            .open_tunnel(ctx, TYPE_NAME, namespace, name, ttl)
            .await
        {
            Ok(t) => t,
            Err(OpenTunnelError::Settings(d)) => return OpenResponse::refused(d),
            Err(OpenTunnelError::Tunnel(e)) => {
                return OpenResponse::refused(
                    Diagnostic::error(
                        "Cannot Connect to Virtual Cluster",
                        format!("Could not open a connection to the virtual cluster {id}: {e}"),
                    )
                    .with_path(AttrPath::attr(ID)),
                );
            }
        };
        let result = result(&config, tunnel.as_ref());
        let renew_at = renew_time(tunnel.access().expires_at);
        let handle = ctx.handles.insert(Connection(tunnel));
        tracing::debug!(virtual_cluster = %id, %handle, "connection opened");
        OpenResponse {
            result,
            private: Some(handle.to_private()),
            renew_at: Some(renew_at),
            diagnostics: Diagnostics::new(),
        }
    }

    async fn renew(&self, ctx: &Context, private: Option<&[u8]>) -> RenewResponse {
        let mut resp = RenewResponse {
            private: private.map(<[u8]>::to_vec),
            renew_at: None,
            diagnostics: Diagnostics::new(),
        };
        let handle = match HandleId::from_private(private) {
            Ok(h) => h,
            Err(e @ PrivateError::OtherProcess(_)) => {
                resp.diagnostics.push(Diagnostic::error(
                    "Connection Closed",
                    format!("The {TYPE_NAME} is no longer open: {e}."),
                ));
                return resp;
            }
            Err(e) => {
                resp.diagnostics.push(bad_private(&e));
                return resp;
            }
        };
        let expires_at = ctx
            .handles
            .with(handle, |c: &Connection| c.0.access().expires_at);
        match expires_at {
            // A token from the TokenRequest API cannot be extended, and the values Terraform
            // already handed out cannot change: say so while the token still works.
            Some(expires_at) => resp.diagnostics.push(Diagnostic::warning(
                "Connection Credentials Expire Soon",
                format!(
                    "The token of a {TYPE_NAME} expires at {} and cannot be extended during \
                     the run; what still uses it after then will be refused. Set a longer \
                     {TTL} (up to 24h) for runs this long.",
                    rfc3339(expires_at)
                ),
            )),
            None => resp.diagnostics.push(Diagnostic::error(
                "Connection Closed",
                format!("The {TYPE_NAME} ({handle}) is no longer open."),
            )),
        }
        resp
    }

    async fn close(&self, ctx: &Context, private: Option<&[u8]>) -> Diagnostics {
        match HandleId::from_private(private) {
            Ok(handle) => {
                let closed = ctx.handles.close(handle);
                tracing::debug!(%handle, closed, "connection closed");
                Diagnostics::new()
            }
            // Its process has ended, and the tunnel with it.
            Err(PrivateError::OtherProcess(_)) => Diagnostics::new(),
            // Nothing was opened: the values were not known yet.
            Err(PrivateError::Missing) => Diagnostics::new(),
            Err(e) => bad_private(&e).into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_namespace_slash_name() {
        assert_eq!(
            VirtualClusterId::parse("vc-prod/prod"),
            Ok(("vc-prod", "prod"))
        );
        for bad in ["prod", "vc-prod/", "/prod", "VC/prod", "vc-prod/prod/x", ""] {
            assert!(VirtualClusterId::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn ttl_defaults_to_an_hour_and_is_bounded() {
        let config = |ttl: Value| Value::object([(ID, Value::string("vc-a/a")), (TTL, ttl)]);
        assert_eq!(token_ttl(&config(Value::Null)).ok(), Some(DEFAULT_TTL));
        assert_eq!(
            token_ttl(&config(Value::string("2h"))).ok(),
            Some(Duration::from_secs(7200))
        );
        for bad in ["5m", "25h", "soon"] {
            let d = token_ttl(&config(Value::string(bad))).expect_err(bad);
            assert_eq!(d.path, Some(AttrPath::attr(TTL)), "{bad}");
        }
    }

    /// A backend that must not be asked: opening is decided before it.
    struct NoTunnels;

    #[async_trait]
    impl TunnelsBackend for NoTunnels {
        async fn open_tunnel(
            &self,
            _ctx: &Context,
            _needed_by: &str,
            _namespace: &str,
            _name: &str,
            _token_ttl: Duration,
        ) -> Result<Box<dyn OpenTunnel>, OpenTunnelError> {
            panic!("no tunnel may be opened to a virtual cluster that does not exist yet")
        }
    }

    #[tokio::test]
    async fn a_virtual_cluster_planned_for_creation_opens_as_unknown_without_a_tunnel() {
        let ctx = Context::default();
        ctx.virtual_clusters.planned("vc-a/a", true, None);
        let config = Value::object([(ID, Value::string("vc-a/a")), (TTL, Value::Null)]);
        let opened = VirtualClusterConnection(NoTunnels).open(&ctx, config).await;
        assert!(opened.diagnostics.is_empty(), "{:?}", opened.diagnostics);
        assert!(opened.result.is_unknown());
        assert!(opened.private.is_none(), "nothing to renew or close");
        assert!(
            VirtualClusterConnection(NoTunnels)
                .close(&ctx, None)
                .await
                .is_empty(),
            "closing what was never opened is harmless"
        );
    }

    #[test]
    fn renewal_comes_before_expiry() {
        let expires = SystemTime::now() + Duration::from_secs(3600);
        let at = renew_time(expires);
        assert!(at < expires);
        assert!(at > SystemTime::now());
    }
}
