//! The schema of `gpufleet_virtual_cluster`, shared with the data source's descriptions.

use super::{
    expose::{Expose, SERVICE_TYPES},
    persistence::{DEFAULT_SIZE, Persistence},
    quantity::{PositiveQuantity, Quantity},
    versions::{SupportedKubernetesVersion, default_kubernetes_version},
};
use crate::{
    schema::{AttrMode, Attribute, Block, Nesting, Schema},
    timeouts,
    validate::{DnsLabel, DnsSubdomain, HostAddress, IntBetween, OneOf, PositiveDuration},
    value::{Type, Value},
};

// Attribute names: the schema declares them and `config` decodes them, so no other module
// reads an attribute by a name of its own; what writes state names attributes by these.
pub(super) const ID: &str = "id";
pub(super) const NAME: &str = "name";
pub(super) const NAMESPACE: &str = "namespace";
pub(super) const KUBERNETES_VERSION: &str = "kubernetes_version";
pub(super) const ISOLATION: &str = "isolation";
pub(super) const QUOTA: &str = "quota";
pub(super) const QUOTA_GPUS: &str = "gpus";
pub(super) const QUOTA_CPU: &str = "cpu";
pub(super) const QUOTA_MEMORY: &str = "memory";
pub(super) const QUOTA_PODS: &str = "pods";
pub(super) const LIMIT_RANGE: &str = "limit_range";
pub(super) const DEFAULT_CPU: &str = "default_cpu";
pub(super) const DEFAULT_MEMORY: &str = "default_memory";
pub(super) const DEFAULT_REQUEST_CPU: &str = "default_request_cpu";
pub(super) const DEFAULT_REQUEST_MEMORY: &str = "default_request_memory";
pub(super) const NETWORK_ISOLATION: &str = "network_isolation";
pub(super) const POD_SECURITY: &str = "pod_security";
pub(super) const SLEEP: &str = "sleep";
pub(super) const AFTER_INACTIVITY: &str = "after_inactivity";
pub(super) const PAUSED: &str = "paused";
pub(super) const PERSISTENCE: &str = "persistence";
pub(super) const SIZE: &str = "size";
pub(super) const STORAGE_CLASS: &str = "storage_class";
pub(super) const EXPOSE: &str = "expose";
pub(super) const EXPOSE_TYPE: &str = "type";
/// `expose.host`; the computed URL is [`HOST`].
pub(super) const EXPOSE_HOST: &str = "host";
pub(super) const LABELS: &str = "labels";
pub(super) const VALUES_OVERRIDE: &str = "values_override";
pub(super) const ADMIN_CREDENTIALS_IN_STATE: &str = "admin_credentials_in_state";
pub(super) const ENDPOINT: &str = "endpoint";
pub(super) const HOST: &str = "host";
pub(super) const KUBECONFIG: &str = "kubeconfig";
pub(super) const CLUSTER_CA_CERTIFICATE: &str = "cluster_ca_certificate";
pub(super) const CLIENT_CERTIFICATE: &str = "client_certificate";
pub(super) const CLIENT_KEY: &str = "client_key";
pub(super) const STATUS: &str = "status";
pub(super) const VCLUSTER_VERSION: &str = "vcluster_version";
pub(super) const DRIFT: &str = "drift";

/// The isolation tiers, as the `isolation` attribute spells them.
pub const ISOLATIONS: &[&str] = &["shared", "dedicated", "private"];

/// The pod security levels.
pub const POD_SECURITY_LEVELS: &[&str] = &["privileged", "baseline", "restricted"];

/// Names are DNS labels of at most this many characters, so that every derived name
/// (`vc-workload-<name>`, `<name>-headless`) stays a valid object name.
pub const NAME_MAX: usize = 52;

/// `persistence`'s value for `p`.
pub(super) fn persistence_value(p: &Persistence) -> Value {
    Value::object([
        (SIZE, Value::string(&*p.size)),
        (STORAGE_CLASS, p.storage_class.clone().into()),
    ])
}

/// `expose`'s value for `e`.
pub(super) fn expose_value(e: &Expose) -> Value {
    Value::object([
        (EXPOSE_TYPE, Value::string(e.service_type.as_str())),
        (EXPOSE_HOST, e.host.clone().into()),
    ])
}

fn quota_attributes() -> Vec<Attribute> {
    vec![
        Attribute::optional(QUOTA_GPUS, Type::Number)
            .validate(IntBetween::at_least(0))
            .describe("GPUs the tenant's pods may request in total (`requests.nvidia.com/gpu`)."),
        Attribute::optional(QUOTA_CPU, Type::String)
            .validate(Quantity)
            .describe(
                "CPU the tenant's pods may request in total (`requests.cpu`), e.g. `\"64\"`.",
            ),
        Attribute::optional(QUOTA_MEMORY, Type::String)
            .validate(Quantity)
            .describe(
                "Memory the tenant's pods may request in total (`requests.memory`), e.g. \
                 `\"512Gi\"`.",
            ),
        Attribute::optional(QUOTA_PODS, Type::Number)
            .validate(IntBetween::at_least(1))
            .describe(
                "How many pods may exist in the host namespace (`count/pods`), the virtual \
                 cluster's own control-plane pod included.",
            ),
    ]
}

fn limit_range_attributes() -> Vec<Attribute> {
    let q = |name: &'static str, text: &'static str| {
        Attribute::optional(name, Type::String)
            .validate(Quantity)
            .describe(text)
    };
    vec![
        q(DEFAULT_CPU, "CPU limit of a container that sets none."),
        q(
            DEFAULT_MEMORY,
            "Memory limit of a container that sets none.",
        ),
        q(
            DEFAULT_REQUEST_CPU,
            "CPU request of a container that sets none. Null: the API server uses \
             `default_cpu`.",
        ),
        q(
            DEFAULT_REQUEST_MEMORY,
            "Memory request of a container that sets none. Null: the API server uses \
             `default_memory`.",
        ),
    ]
}

fn persistence_attributes() -> Vec<Attribute> {
    vec![
        Attribute::optional(SIZE, Type::String)
            .default(DEFAULT_SIZE)
            .validate(PositiveQuantity)
            .describe(
                "Storage the claim requests (`resources.requests.storage`). Changing it replaces \
                 the virtual cluster, with empty data.",
            ),
        Attribute::optional(STORAGE_CLASS, Type::String)
            .validate(DnsSubdomain)
            .describe(
                "The StorageClass of the claim (`storageClassName`). Null (the default) leaves \
                 it to the host cluster's default StorageClass, which must then exist. Changing \
                 it replaces the virtual cluster, with empty data.",
            ),
    ]
}

fn expose_attributes() -> Vec<Attribute> {
    vec![
        Attribute::optional(EXPOSE_TYPE, Type::String)
            .default("ClusterIP")
            .validate(OneOf::new(SERVICE_TYPES))
            .describe(
                "The type of the API server's Service `<name>` \
                 (`controlPlane.service.spec.type`): `ClusterIP` (reachable inside \
                 the host cluster at `https://<name>.<namespace>.svc:443`, or through a proxy \
                 named by `host`; from outside, use the ephemeral resource \
                 `gpufleet_virtual_cluster_connection`), `NodePort` (a port on \
                 every host node; the URL is the control-plane pod's node address and the \
                 node port) or `LoadBalancer` (apply waits, within the create or update \
                 timeout, until the host cluster's load balancer controller has given the \
                 Service an address; the URL is that address and the Service's port, 443).",
            ),
        Attribute::optional(EXPOSE_HOST, Type::String)
            .validate(HostAddress)
            .describe(
                "A DNS name or IP address that reaches the control plane from outside, such \
                 as a DNS record for the load balancer or an ingress or TCP proxy in front of \
                 the Service (TLS passed through). It is added to the API server's serving \
                 certificate (`controlPlane.proxy.extraSANs`) and becomes the host of the URL \
                 in `host`, `endpoint` and `kubeconfig`: `https://<host>:443` for ClusterIP \
                 and LoadBalancer, `https://<host>:<node port>` for NodePort.",
            ),
    ]
}

/// The resource's schema.
pub fn resource_schema() -> Schema {
    Schema::new(
        Block::new(
            "A tenant's virtual Kubernetes control plane (open-source vCluster) in a namespace of \
             the host cluster. gpufleet renders what the pinned vCluster chart would create \
             there (the control plane as a StatefulSet, Services, ServiceAccounts, Role and \
             RoleBinding, the ClusterRole and ClusterRoleBinding that let it read host nodes, \
             the `vc-config-<name>` Secret holding the complete vcluster.yaml: the chart's \
             values, gpufleet's settings and `values_override`) plus the tenant's ResourceQuota, \
             LimitRange, NetworkPolicies and pod security labels, writes them with server-side \
             apply, and waits until the control plane is ready the way `vcluster connect` does. \
             Edits made with kubectl are reverted; a replica count or a label of `labels` that \
             another controller owns stays with it, with a warning. Taints act on the host \
             nodes only: the virtual cluster runs no taint eviction, so a taint on a virtual \
             node (or a stale copy of a host node's) evicts nothing. Needs the provider's \
             `kubernetes` block.",
        )
        .attr(
            Attribute::computed(ID, Type::String)
                .use_state_for_unknown()
                .describe("`<namespace>/<name>`."),
        )
        .attr(
            Attribute::required(NAME, Type::String)
                .requires_replace()
                .validate(DnsLabel::new(NAME_MAX))
                .describe(
                    "Name of the virtual cluster (and of its StatefulSet and Service).",
                ),
        )
        .attr(
            Attribute::optional_computed(NAMESPACE, Type::String)
                .requires_replace()
                .validate(DnsLabel::new(63))
                .describe(
                    "The host namespace the virtual cluster lives in; defaults to `vc-<name>`. \
                     gpufleet creates it and deletes it with the virtual cluster, so it must not \
                     be a namespace anything else uses.",
                ),
        )
        .attr(
            Attribute::optional(KUBERNETES_VERSION, Type::String)
                .default(default_kubernetes_version())
                .validate(SupportedKubernetesVersion)
                .describe(
                    "Kubernetes minor version of the virtual control plane. Upgrades happen in \
                     place (the control plane restarts); downgrades are refused.",
                ),
        )
        .attr(
            Attribute::optional(ISOLATION, Type::String)
                .default("shared")
                .requires_replace()
                .validate(OneOf::new(ISOLATIONS))
                .describe(
                    "The tenancy tier, fixed at creation: `shared` (tenant pods run on the \
                     shared host nodes), `dedicated` (only on nodes labelled and tainted \
                     `gpufleet.dev/tenant=<name>`, which GPU node pools of this virtual cluster \
                     provide) or `private` (as `dedicated`, but only pools that hold whole servers \
                     for the tenant, `bcm` or `auto`, may provide the nodes; vCluster's own \
                     private-nodes mode is a vCluster Pro feature and is not used). \
                     **A change creates its API server, data and kubeconfig anew.**",
                ),
        )
        .attr(
            Attribute::nested(
                QUOTA,
                Nesting::Single,
                AttrMode::Optional,
                quota_attributes(),
            )
            .describe(
                "A ResourceQuota `vc-<name>` on the host namespace, which bounds everything \
                     the tenant runs. Without it, there is none. Changes made outside Terraform \
                     show up here on refresh and are reverted by the next apply.",
            ),
        )
        .attr(
            Attribute::nested(
                LIMIT_RANGE,
                Nesting::Single,
                AttrMode::Optional,
                limit_range_attributes(),
            )
            .describe(
                "A LimitRange `vc-<name>` with container defaults, so that pods without requests \
                 still count against `quota`. Without it, there is none.",
            ),
        )
        .attr(
            Attribute::optional(NETWORK_ISOLATION, Type::Bool)
                .default(true)
                .describe(
                    "vCluster's NetworkPolicies (`policies.networkPolicy`): `vc-work-<name>` \
                     lets the tenant's pods reach each other, the control plane, DNS and public \
                     addresses (not private ranges) and be reached only by each other and the \
                     control plane; `vc-cp-<name>`, `vc-kube-dns-<name>` and \
                     `vc-snapshot-<name>` do the same for the control plane, its DNS and \
                     snapshots. The API server port (8443) stays open to all.",
                ),
        )
        .attr(
            Attribute::optional(POD_SECURITY, Type::String)
                .default("baseline")
                .validate(OneOf::new(POD_SECURITY_LEVELS))
                .describe(
                    "Pod Security Standard enforced on the host namespace \
                     (`pod-security.kubernetes.io/enforce`) and by the virtual cluster \
                     (`policies.podSecurityStandard`).",
                ),
        )
        .attr(
            Attribute::nested(
                SLEEP,
                Nesting::Single,
                AttrMode::Optional,
                vec![
                    Attribute::required(AFTER_INACTIVITY, Type::String)
                        .validate(PositiveDuration::new())
                        .describe(
                            "Put the virtual cluster to sleep after this long without \
                             API activity.",
                        ),
                ],
            )
            .describe(
                "vCluster's sleep mode (`sleep.auto.afterInactivity`), a vCluster Platform \
                 feature that open-source vCluster lacks. gpufleet never renders it (with or \
                 without vCluster Platform): it leaves it out of vcluster.yaml and plans with a \
                 warning, and the virtual cluster never sleeps. Use `paused` instead.",
            ),
        )
        .attr(
            Attribute::optional(PAUSED, Type::Bool)
                .default(false)
                .describe(
                    "Pause the virtual cluster as `vcluster pause` does: annotate its \
                     StatefulSet `loft.sh/paused`, scale it to zero, wait for the control plane \
                     to stop, then delete the pods it synced into the host namespace (its \
                     Services, volume claims and other objects stay). `status` is then \
                     `Paused`. The control plane's data stays on its volume claim \
                     (`persistence`), so the tenant's objects and the control plane's \
                     certificates survive the pause. `false` resumes it as `vcluster resume` does: the \
                     control plane starts again on the same data and recreates the pods.",
                ),
        )
        .attr(
            Attribute::nested(
                PERSISTENCE,
                Nesting::Single,
                AttrMode::Optional,
                persistence_attributes(),
            )
            .default(persistence_value(&Persistence::default()))
            .describe(
                "The volume claim that keeps the control plane's data (the tenant's objects in \
                 its SQLite database, and its certificates) across restarts, pauses, upgrades \
                 and rescheduling. It is the claim the vCluster chart makes: the StatefulSet's claim \
                 template `data` (`controlPlane.statefulSet.persistence.volumeClaim`, \
                 ReadWriteOnce, `persistentVolumeClaimRetentionPolicy.whenDeleted: Retain`), \
                 from which the control-plane pod gets the PersistentVolumeClaim \
                 `data-<name>-0` in the host namespace. Destroying the virtual cluster deletes \
                 the claim with the namespace (the StorageClass's reclaim policy decides what \
                 becomes of the volume). A StatefulSet's volume claims cannot change, so \
                 **changing `size` or `storage_class` replaces the virtual cluster, and the new \
                 one starts with empty data** (a size written differently but of the same \
                 amount, `5120Mi` for `5Gi`, changes nothing). A virtual cluster made by a \
                 gpufleet release without a claim, whose data was lost on every restart, is \
                 replaced the same way. Refresh and import read the claim from the \
                 StatefulSet.",
            ),
        )
        .attr(
            Attribute::nested(
                EXPOSE,
                Nesting::Single,
                AttrMode::Optional,
                expose_attributes(),
            )
            .default(expose_value(&Expose::default()))
            .describe(
                "How the virtual API server is reached from outside the host cluster: the type \
                 of its Service `<name>` and, optionally, a DNS name or address in front of \
                 it. Without it, the Service is a ClusterIP Service, reached inside the host cluster at its \
                 cluster DNS name `https://<name>.<namespace>.svc:443` (which gpufleet adds to \
                 the serving certificate and writes into the control plane's exported \
                 kubeconfig); a plan that creates such a virtual cluster warns that clients \
                 outside the host cluster reach it through the ephemeral resource \
                 `gpufleet_virtual_cluster_connection`. The computed `host`, `endpoint` and \
                 `kubeconfig` follow it once the address exists. The API server's serving \
                 certificate always covers the Service's node addresses (NodePort) and load \
                 balancer addresses (LoadBalancer), and `host`. Changing it is an in-place \
                 update: the Service changes type (Kubernetes releases node ports that are no \
                 longer needed) and the control plane restarts with the new configuration. \
                 Refresh and import read the type from the Service and `host` from \
                 vcluster.yaml.",
            ),
        )
        .attr(
            Attribute::optional(LABELS, Type::map(Type::String)).describe(
                "Labels for every host object of the virtual cluster. Keys gpufleet sets itself \
                 (`app`, `release`, `app.kubernetes.io/managed-by`, `gpufleet.dev/*`, \
                 `pod-security.kubernetes.io/*`) are refused.",
            ),
        )
        .attr(
            Attribute::optional(VALUES_OVERRIDE, Type::String)
                .describe(super::unrendered::override_description()),
        )
        .attr(
            Attribute::optional(ADMIN_CREDENTIALS_IN_STATE, Type::Bool).describe(
                "Whether the admin credentials (`kubeconfig`, `client_certificate`, \
                 `client_key`) are recorded in Terraform state. Unset means `true`. Set \
                 `false` when people and providers reach the virtual cluster through the \
                 ephemeral resource `gpufleet_virtual_cluster_connection`, whose short-lived \
                 token never reaches state: the three attributes are then null, and anyone who \
                 can read the state cannot use it to administer the tenant. The credentials \
                 stay in the host Secret `vc-<name>`. Changing it changes nothing on the host \
                 cluster.",
            ),
        )
        .attr(
            Attribute::computed(ENDPOINT, Type::String).describe(
                "The virtual API server's URL, as `expose` makes it reachable: the server in \
                 its kubeconfig for a ClusterIP Service without `expose.host` \
                 (`https://<name>.<namespace>.svc:443`, inside the host cluster only), else \
                 `https://<node address or load balancer address or expose.host>:<port>`. \
                 The same as `host`.",
            ),
        )
        .attr(
            Attribute::computed(HOST, Type::String).describe(
                "The virtual API server's URL (the same as `endpoint`), named as the \
                 `kubernetes` and `helm` providers name their setting: `host = \
                 gpufleet_virtual_cluster.x.host`.",
            ),
        )
        .attr(
            Attribute::computed(KUBECONFIG, Type::String)
                .sensitive()
                .describe(
                    "An admin kubeconfig of the virtual cluster: the Secret `vc-<name>` key \
                     `config`, with its cluster's `server` set to `endpoint`. Null when \
                     `admin_credentials_in_state` is `false`.",
                ),
        )
        .attr(
            Attribute::computed(CLUSTER_CA_CERTIFICATE, Type::String)
                .describe("PEM CA certificate of the virtual API server."),
        )
        .attr(
            Attribute::computed(CLIENT_CERTIFICATE, Type::String).describe(
                "PEM client certificate of the virtual cluster's admin user (Secret \
                 `vc-<name>` key `client-certificate`), for the `kubernetes` and `helm` \
                 providers' `client_certificate`. Null when `admin_credentials_in_state` is \
                 `false`.",
            ),
        )
        .attr(
            Attribute::computed(CLIENT_KEY, Type::String)
                .sensitive()
                .describe(
                    "PEM private key of the virtual cluster's admin user (Secret `vc-<name>` \
                     key `client-key`), for the `kubernetes` and `helm` providers' \
                     `client_key`. Null when `admin_credentials_in_state` is `false`.",
                ),
        )
        .attr(Attribute::computed(STATUS, Type::String).describe(
            "`Running` when the control-plane pod is ready and its kubeconfig written, \
             `Paused` when scaled to zero, `Pending` otherwise.",
        ))
        .attr(
            Attribute::computed(VCLUSTER_VERSION, Type::String).describe(
                "The vCluster release whose chart gpufleet renders (pinned by the provider).",
            ),
        )
        .attr(
            Attribute::computed(DRIFT, Type::list(Type::String)).describe(
                "Differences found on refresh between the host objects and what gpufleet renders \
             (a missing object such as a deleted NetworkPolicy, a RoleBinding's subjects or a \
             label edited outside Terraform, …; every object compared is listed under Host \
             Objects in the resource's docs). A non-empty list makes the plan show a change; \
             the next apply repairs them, so it is empty after every apply.",
            ),
        )
        .block(timeouts::block(
            "How long operations may take. Defaults: create 10m, update 10m, delete 10m, \
             read 2m. Create and update include waiting for the control plane to be ready (or, \
             when pausing, to stop); delete includes waiting for the namespace to finish \
             terminating.",
        )),
    )
}
