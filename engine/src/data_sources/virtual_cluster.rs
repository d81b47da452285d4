//! `gpufleet_virtual_cluster` (data source): a virtual cluster looked up by name, whether or
//! not this configuration manages it, for modules that hand a tenant's kubeconfig to other
//! providers.

use async_trait::async_trait;

use crate::{
    backends::kube::host::{FromSettings, ObjectsBackend},
    context::Context,
    diag::{Diagnostic, Diagnostics},
    kinds::{DataSourceKind, ReadResponse},
    resources::virtual_cluster::{
        self as vc, import_skeleton, read_virtual_cluster, schema::NAME_MAX,
    },
    schema::{AttrMode, Attribute, Block, Nesting, Schema},
    validate::DnsLabel,
    value::{Type, Value},
};

/// The `gpufleet_virtual_cluster` data source over a host [`ObjectsBackend`].
#[derive(Debug, Clone, Copy, Default)]
pub struct VirtualClusterData<B = FromSettings>(pub B);

/// The attributes copied from the resource's observed state.
const COPIED: &[&str] = &[
    "id",
    "namespace",
    "isolation",
    "status",
    "endpoint",
    "host",
    "kubernetes_version",
    "vcluster_version",
    "paused",
    "kubeconfig",
    "cluster_ca_certificate",
    "client_certificate",
    "client_key",
    "expose",
];

fn data_schema() -> Schema {
    Schema::new(
        Block::new(
            "Looks up a virtual cluster by name in the host cluster: its tier, status, \
             endpoint, versions and credentials (a kubeconfig, and the host, CA, client \
             certificate and key the `kubernetes` and `helm` providers take). Finds virtual clusters that gpufleet created, \
             in this configuration or another. Needs the provider's `kubernetes` block.",
        )
        .attr(
            Attribute::required("name", Type::String)
                .validate(DnsLabel::new(NAME_MAX))
                .describe("Name of the virtual cluster."),
        )
        .attr(
            Attribute::optional_computed("namespace", Type::String)
                .validate(DnsLabel::new(63))
                .describe("Its host namespace; defaults to `vc-<name>`."),
        )
        .attr(Attribute::computed("id", Type::String).describe("`<namespace>/<name>`."))
        .attr(
            Attribute::computed("isolation", Type::String)
                .describe("The tier: `shared`, `dedicated` or `private`."),
        )
        .attr(
            Attribute::computed("status", Type::String)
                .describe("`Running`, `Paused` or `Pending`."),
        )
        .attr(
            Attribute::computed("endpoint", Type::String).describe(
                "The virtual API server's URL, as the resource's `expose` makes it reachable.",
            ),
        )
        .attr(
            Attribute::computed("host", Type::String).describe(
                "The virtual API server's URL (the same as `endpoint`), for the `kubernetes` \
                 and `helm` providers' `host`.",
            ),
        )
        .attr(
            Attribute::nested(
                "expose",
                Nesting::Single,
                AttrMode::Computed,
                vec![
                    Attribute::computed("type", Type::String).describe(
                        "The type of its Service: `ClusterIP`, `NodePort` or `LoadBalancer`.",
                    ),
                    Attribute::computed("host", Type::String).describe(
                        "The DNS name or address in its serving certificate and URL; null \
                         when none was set.",
                    ),
                ],
            )
            .describe("How it is reached from outside the host cluster."),
        )
        .attr(
            Attribute::computed("kubernetes_version", Type::String)
                .describe("Kubernetes minor version of the control plane."),
        )
        .attr(
            Attribute::computed("vcluster_version", Type::String)
                .describe("The vCluster release it was rendered from."),
        )
        .attr(Attribute::computed("paused", Type::Bool).describe("Whether it is scaled to zero."))
        .attr(
            Attribute::computed("kubeconfig", Type::String)
                .sensitive()
                .describe("An admin kubeconfig of the virtual cluster, pointing at `endpoint`."),
        )
        .attr(
            Attribute::computed("cluster_ca_certificate", Type::String)
                .describe("PEM CA certificate of the virtual API server."),
        )
        .attr(
            Attribute::computed("client_certificate", Type::String)
                .describe("PEM client certificate of the virtual cluster's admin user."),
        )
        .attr(
            Attribute::computed("client_key", Type::String)
                .sensitive()
                .describe("PEM private key of the virtual cluster's admin user."),
        ),
    )
}

#[async_trait]
impl<B: ObjectsBackend> DataSourceKind for VirtualClusterData<B> {
    fn type_name(&self) -> &'static str {
        vc::TYPE_NAME
    }

    fn schema(&self) -> Schema {
        data_schema()
    }

    async fn read(&self, ctx: &Context, config: Value) -> ReadResponse {
        let name = config.get("name").as_str().unwrap_or_default().to_owned();
        let id = match config.get("namespace").as_str() {
            Some(ns) => format!("{ns}/{name}"),
            None => name.clone(),
        };
        let fail = |diagnostics: Diagnostics| ReadResponse::refused(config.clone(), diagnostics);
        let skeleton = match import_skeleton(&id) {
            Ok(s) => s,
            Err(d) => return fail(d),
        };
        let host = match self.0.connect(ctx, vc::TYPE_NAME).await {
            Ok(h) => h,
            Err(d) => return fail(d),
        };
        let r = read_virtual_cluster(host.as_ref(), ctx, &skeleton).await;
        if r.diagnostics.has_error() {
            return fail(r.diagnostics);
        }
        if r.new_state.is_null() {
            let ns = skeleton.get("namespace").as_str().unwrap_or_default();
            return fail(
                Diagnostic::error(
                    "Virtual Cluster Not Found",
                    format!(
                        "no virtual cluster {name:?} in namespace {ns}: the namespace does not \
                         exist or was not created by gpufleet for it."
                    ),
                )
                .into(),
            );
        }
        let mut out = config.clone();
        if let Some(m) = out.as_object_mut() {
            for k in COPIED {
                m.insert((*k).to_owned(), r.new_state.get(k).clone());
            }
        }
        ReadResponse {
            new_state: out,
            diagnostics: r.diagnostics,
        }
    }
}
