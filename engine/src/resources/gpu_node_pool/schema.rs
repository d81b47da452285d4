//! The schema of `gpufleet_gpu_node_pool`.

use super::choices::{CLOUD_NAMES, Source};
use crate::{
    schema::{AttrMode, Attribute, Block, Nesting, Schema},
    timeouts,
    validate::{DnsLabel, IntBetween, OneOf, PositiveDuration},
    value::Type,
};

// Attribute names: the schema declares them and `config` decodes them, so no other module
// reads an attribute by a name of its own.
pub(super) const ID: &str = "id";
pub(super) const NAME: &str = "name";
pub(super) const VIRTUAL_CLUSTER_ID: &str = "virtual_cluster_id";
pub(super) const ISOLATION: &str = "isolation";
pub(super) const GPU_PRODUCT: &str = "gpu_product";
pub(super) const NODE_COUNT: &str = "node_count";
pub(super) const AUTOSCALING: &str = "autoscaling";
pub(super) const MIN_NODES: &str = "min_nodes";
pub(super) const MAX_NODES: &str = "max_nodes";
pub(super) const SOURCE: &str = "source";
pub(super) const SHARING: &str = "sharing";
pub(super) const STRATEGY: &str = "strategy";
pub(super) const REPLICAS: &str = "replicas";
pub(super) const MIG_CONFIG: &str = "mig_config";
pub(super) const PLACEMENT: &str = "placement";
pub(super) const TOPOLOGY_KEY: &str = "topology_key";
pub(super) const POLICY: &str = "policy";
pub(super) const NODE_LABELS: &str = "node_labels";
pub(super) const NODE_TAINTS: &str = "node_taints";
pub(super) const TAINT_KEY: &str = "key";
pub(super) const TAINT_VALUE: &str = "value";
pub(super) const TAINT_EFFECT: &str = "effect";
pub(super) const DRAIN_TIMEOUT: &str = "drain_timeout";
pub(super) const KARPENTER_NODE_CLASS: &str = "karpenter_node_class";
pub(super) const KARPENTER: &str = "karpenter";
pub(super) const KARPENTER_PROVIDER: &str = "provider";
pub(super) const GPUS_PER_NODE: &str = "gpus_per_node";
pub(super) const REQUIREMENTS: &str = "requirements";
pub(super) const REQUIREMENT_KEY: &str = "key";
pub(super) const REQUIREMENT_OPERATOR: &str = "operator";
pub(super) const REQUIREMENT_VALUES: &str = "values";
pub(super) const REQUIREMENT_MIN_VALUES: &str = "min_values";
pub(super) const NODES: &str = "nodes";
pub(super) const GPUS: &str = "gpus";
pub(super) const ALLOCATABLE: &str = "allocatable";
pub(super) const STATUS: &str = "status";

/// The default `drain_timeout`.
pub(super) const DEFAULT_DRAIN_TIMEOUT: &str = "5m";

/// The Karpenter node class of a pool that names none.
pub(super) const DEFAULT_NODE_CLASS: &str = "karpenter.k8s.aws/EC2NodeClass/default";

/// The node-selector operators Karpenter's NodePool accepts (its CRD's enum, v1.8).
const OPERATORS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"];

fn sharing_attributes() -> Vec<Attribute> {
    vec![
        Attribute::optional(STRATEGY, Type::String)
            .default("none")
            .validate(OneOf::new(&["none", "time-slicing", "mig"]))
            .describe(
                "`none` (whole GPUs), `time-slicing` (each GPU advertised `replicas` times, \
                 through the NVIDIA device plugin's time-slicing config; no memory or fault \
                 isolation), or `mig` (GPUs partitioned by the MIG manager into `mig_config`).",
            ),
        Attribute::optional(REPLICAS, Type::Number).describe(
            "With `time-slicing`: how many pods may share one GPU, from 2 (the NVIDIA device \
             plugin refuses fewer) to 48 (GKE's maximum of time-sharing clients per GPU); plan \
             refuses other values. The pool's nodes get the label \
             `nvidia.com/device-plugin.config=<pool>`, and the key `<pool>` of the ConfigMap \
             `gpufleet-device-plugin-config` holds the device plugin's config. The ConfigMap \
             is in the GPU Operator's namespace (its ClusterPolicy's `status.namespace`, or \
             the provider's `kubernetes.device_plugin_namespace`), and the ClusterPolicy's \
             `devicePlugin.config.name` is set to it when unset; a ClusterPolicy that names \
             another ConfigMap fails the apply. Without the GPU Operator, set \
             `device_plugin_namespace` and deploy the device plugin with \
             `config.name=gpufleet-device-plugin-config`.",
        ),
        Attribute::optional(MIG_CONFIG, Type::String).describe(
            "With `mig`: a config of the GPU Operator's default MIG configs, set as the node \
             label `nvidia.com/mig.config`: `all-<profile>` (every GPU filled with one \
             profile, e.g. `all-1g.10gb`; just `<profile>` means the same), `all-balanced` \
             (the product's mixed layout, e.g. 2 × `1g.5gb`, 1 × `2g.10gb` and 1 × `3g.20gb` \
             per A100 40GB), `all-enabled` (MIG on, no instances) or `all-disabled` (MIG \
             off). The profiles must exist for `gpu_product` (see \
             `provider::gpufleet::mig_profiles`). Apply waits until the MIG manager reports \
             `nvidia.com/mig.config.state=success` on every node, and fails naming the nodes \
             where it reports `failed`. A node the pool lets go gets the provider's \
             `kubernetes.default_mig_config` (`all-disabled` by default) and is free again \
             only once the MIG manager reports `success` for it.",
        ),
    ]
}

fn placement_attributes() -> Vec<Attribute> {
    vec![
        Attribute::optional(TOPOLOGY_KEY, Type::String).describe(
            "The node label that names a topology domain. When not set, the first of these \
             that every candidate node carries: `nvidia.com/gpu.clique` (GPU feature \
             discovery's NVLink domain on multi-node NVLink systems such as GB200 NVL72), \
             `network.topology.nvidia.com/accelerator` and `network.topology.nvidia.com/block` \
             (NVIDIA topograph's NVLink domain and switch block), then \
             `topology.kubernetes.io/zone`. A key that some candidate nodes lack fails the \
             apply and names them; with none of these labels anywhere, all nodes are one \
             domain. BCM pools always place by BCM's rack.",
        ),
        Attribute::optional(POLICY, Type::String)
            .default("pack")
            .validate(OneOf::new(&["pack", "spread"]))
            .describe(
                "`pack` claims nodes in as few domains as possible (NVLink and rack locality \
                 for training); `spread` in as many as possible (failure isolation for \
                 inference). Within a domain, nodes that run no pods a claim would have to \
                 move (another tenant's control plane, say) are claimed first.",
            ),
    ]
}

fn taint_attributes() -> Vec<Attribute> {
    vec![
        Attribute::required(TAINT_KEY, Type::String).describe("Taint key."),
        Attribute::optional(TAINT_VALUE, Type::String).describe("Taint value; may be left out."),
        Attribute::required(TAINT_EFFECT, Type::String)
            .validate(OneOf::new(&["NoSchedule", "PreferNoSchedule", "NoExecute"]))
            .describe("What the taint does to pods that do not tolerate it."),
    ]
}

/// The resource schema.
pub fn pool_schema() -> Schema {
    Schema::new(
        Block::new(
            "GPU capacity for one virtual cluster: nodes of one GPU product, labelled, tainted \
             and configured for the virtual cluster's isolation tier and the chosen GPU \
             sharing mode. With `source = \"host\"` the pool claims free, Ready host-cluster \
             nodes; every claim is a write guarded by the node's resource version, so pools \
             applied at the same time never share a node. With `source = \"auto\"` it emits a \
             Karpenter `NodePool` (`karpenter.sh/v1`) and holds what Karpenter launches. \
             On the `dedicated` and `private` tiers, pods outside the virtual cluster's host \
             namespace that were already on a claimed node are evicted (DaemonSet pods stay). \
             Destroying the pool drains its nodes and leaves them exactly as it found them; \
             destroying an `auto` pool deletes its NodePool and returns once Karpenter has \
             terminated the instances it launched for it. \
             Needs the provider's `kubernetes` block.",
        )
        .attr(
            Attribute::computed(ID, Type::String)
                .use_state_for_unknown()
                .describe("`<virtual cluster id>/<name>`, i.e. `<host namespace>/<virtual cluster>/<name>`; the import id."),
        )
        .attr(
            Attribute::required(NAME, Type::String)
                .requires_replace()
                .validate(DnsLabel::new(63))
                .describe(
                    "Name of the pool, unique within its virtual cluster. Nodes carry \
                     `gpufleet.dev/pool=<virtual cluster>.<name>`.",
                ),
        )
        .attr(
            Attribute::required(VIRTUAL_CLUSTER_ID, Type::String)
                .requires_replace()
                .describe(
                    "The `id` of the `gpufleet_virtual_cluster` (`<host namespace>/<name>`) the \
                     pool serves. Its namespace's `gpufleet.dev/isolation` label decides the \
                     tier: `shared` nodes are labelled only; `dedicated` and `private` nodes \
                     also get `gpufleet.dev/tenant=<name>` and the taint \
                     `gpufleet.dev/tenant=<name>:NoSchedule`.",
                ),
        )
        .attr(
            Attribute::optional_computed(ISOLATION, Type::String)
                .validate(OneOf::new(&["shared", "dedicated", "private"]))
                .describe(
                    "The tier of the virtual cluster the pool serves. A plan that changes \
                     the tier checks the tier rules (no `host` pool for `private`) against the \
                     new tier and replaces the pool, so it releases its nodes before its \
                     virtual cluster is replaced and then takes nodes labelled and tainted \
                     for the new tier. When left out, it is the tier the same plan gives the \
                     virtual cluster (when the configuration also manages it), else the one \
                     its host namespace carries (`gpufleet.dev/isolation`); a tier that \
                     changed since the pool was applied replaces the pool. Set it to the \
                     virtual cluster's `isolation` (`gpufleet_virtual_cluster.<x>.isolation`) \
                     when the virtual cluster is managed elsewhere, so the pool's own \
                     configuration says which tier it was written for. A value that \
                     disagrees with the virtual cluster is refused. Changing it replaces the \
                     pool.",
                ),
        )
        .attr(
            Attribute::required(GPU_PRODUCT, Type::String)
                .requires_replace()
                .describe(
                    "The GPU product, as GPU feature discovery writes it in the \
                     `nvidia.com/gpu.product` label (e.g. `NVIDIA-H100-80GB-HBM3`; catalog \
                     aliases work too). Must be in `gpufleet_gpu_catalog`.",
                ),
        )
        .attr(
            Attribute::optional(NODE_COUNT, Type::Number)
                .validate(IntBetween::new(1, 10_000))
                .describe(
                    "How many nodes the pool holds. Exactly one of `node_count` and \
                     `autoscaling` must be set. Raising it claims more nodes; lowering it \
                     drains and releases the emptiest nodes first.",
                ),
        )
        .attr(
            Attribute::nested(
                AUTOSCALING,
                Nesting::Single,
                AttrMode::Optional,
                vec![
                    Attribute::required(MIN_NODES, Type::Number)
                        .validate(IntBetween::new(0, 10_000))
                        .describe("Fewest nodes."),
                    Attribute::required(MAX_NODES, Type::Number)
                        .validate(IntBetween::new(1, 10_000))
                        .describe("Most nodes; also the Karpenter `nodes` limit."),
                ],
            )
            .describe(
                "Let the pool grow and shrink between `min_nodes` and `max_nodes` (only with \
                 `source = \"auto\"`: Karpenter launches nodes as pods need them).",
            ),
        )
        .attr(
            Attribute::optional(SOURCE, Type::String)
                .default(Source::DEFAULT.as_str())
                .requires_replace()
                .validate(OneOf::new(&["host", "bcm", "auto"]))
                .describe(
                    "Where nodes come from: `host` claims existing host-cluster nodes (not for \
                     `private` virtual clusters); `auto` emits a Karpenter `NodePool` named \
                     `gpufleet-<virtual cluster>-<name>`; `bcm` claims free bare-metal \
                     nodes of `gpu_product` in Base Command Manager for the virtual cluster \
                     (recorded on each device), provisions them until they are `UP`, then \
                     claims their host-cluster nodes of the same names, and wipes them (FULL \
                     reinstall) when they are released; it needs the provider's `bcm` block.",
                ),
        )
        .attr(
            Attribute::nested(SHARING, Nesting::Single, AttrMode::Optional, sharing_attributes())
                .describe("How pods share the pool's GPUs. Leaving it out means whole GPUs."),
        )
        .attr(
            Attribute::nested(
                PLACEMENT,
                Nesting::Single,
                AttrMode::Optional,
                placement_attributes(),
            )
            .describe(
                "Which free nodes a `host` or `bcm` pool claims (a `bcm` pool places by the \
                 BCM rack of each server). Leaving it out packs by rack.",
            ),
        )
        .attr(
            Attribute::optional(NODE_LABELS, Type::map(Type::String)).describe(
                "Extra labels for the pool's nodes. A value a node already had is restored \
                 when the pool releases it. Keys gpufleet manages (`gpufleet.dev/pool`, \
                 `gpufleet.dev/tenant`, `gpufleet.dev/isolation`, \
                 `nvidia.com/device-plugin.config`, `nvidia.com/mig.config`) are refused.",
            ),
        )
        .attr(
            Attribute::nested(NODE_TAINTS, Nesting::List, AttrMode::Optional, taint_attributes())
                .describe(
                    "Extra taints for the pool's nodes (the tenant taint of dedicated and \
                     private tiers is added on its own).",
                ),
        )
        .attr(
            Attribute::optional(DRAIN_TIMEOUT, Type::String)
                .default(DEFAULT_DRAIN_TIMEOUT)
                .validate(PositiveDuration::new())
                .describe(
                    "How long to wait for a node's pods to be evicted (disruption budgets \
                     apply) before scaling down or destroying fails.",
                ),
        )
        .attr(
            Attribute::optional(KARPENTER_NODE_CLASS, Type::String).describe(
                "With `source = \"auto\"`: the node class the Karpenter `NodePool` refers \
                 to, as `<group>/<kind>/<name>`. Defaults to \
                 `karpenter.k8s.aws/EC2NodeClass/default`.",
            ),
        )
        .attr(karpenter_attribute())
        .attr(
            Attribute::computed(NODES, Type::list(Type::String))
                .describe("Names of the nodes the pool holds, sorted."),
        )
        .attr(
            Attribute::computed(GPUS, Type::Number)
                .describe("Physical GPUs on the pool's nodes."),
        )
        .attr(
            Attribute::computed(ALLOCATABLE, Type::map(Type::Number)).describe(
                "What the tenant can request, by resource name: `nvidia.com/gpu` (with whole \
                 GPUs, as the nodes' device plugin advertises them; GPUs × `replicas` with \
                 time-slicing) or, with MIG, by each node's MIG strategy (GFD's \
                 `nvidia.com/mig.strategy` label; `mixed` when it is missing): \
                 `nvidia.com/mig-<profile>` per profile under `mixed` (GPUs × instances of \
                 that profile per GPU), `nvidia.com/gpu` under `single` (GPUs × instances per \
                 GPU).",
            ),
        )
        .attr(Attribute::computed(STATUS, Type::String).describe(
            "`ready` when the pool holds `node_count` correctly configured nodes, `degraded` \
             when a refresh found fewer (the next apply repairs it; a node the MIG manager \
             failed on counts as not configured), `pending` while an `auto` pool has no nodes \
             yet or the MIG manager has not reported `success` on every node.",
        ))
        .block(timeouts::block(
            "How long operations may take. Defaults: create 10m, update 20m, delete 20m, \
             read 2m. Update and delete include draining nodes.",
        )),
    )
}

/// The `karpenter` attribute's nested attributes.
fn karpenter_attribute() -> Attribute {
    Attribute::nested(
        KARPENTER,
        Nesting::Single,
        AttrMode::Optional,
        vec![
            Attribute::optional(KARPENTER_PROVIDER, Type::String)
                .validate(OneOf::new(CLOUD_NAMES))
                .describe(
                    "The cloud's Karpenter provider, whose instance labels tell the GPUs an \
                     instance has: `aws` (requires `karpenter.k8s.aws/instance-gpu-name`, \
                     `-manufacturer`, `-count`, and `-memory` for the A100s), `azure` \
                     (`karpenter.azure.com/sku-gpu-name`, `-manufacturer`, `-count`), or \
                     `generic` (only `requirements` choose instances). Defaults to the \
                     provider of `karpenter_node_class`'s group (`karpenter.k8s.aws`: `aws`, \
                     `karpenter.azure.com`: `azure`), else `generic`. A product the cloud \
                     offers no instance for is refused at plan.",
                ),
            Attribute::optional(GPUS_PER_NODE, Type::Number)
                .validate(IntBetween::new(1, 64))
                .describe(
                    "GPUs per node Karpenter may launch: the GPU count requirement and the \
                     `nvidia.com/gpu` limit (`max_nodes` × this). Defaults to the product's \
                     (8 on HGX baseboards, 4 in GB200 and GB300 trays, as \
                     `gpufleet_gpu_catalog` shows); for PCIe cards, whose servers differ, \
                     leaving it out allows every count the cloud offers and sets no GPU limit.",
                ),
            Attribute::nested(
                REQUIREMENTS,
                Nesting::List,
                AttrMode::Optional,
                vec![
                    Attribute::required(REQUIREMENT_KEY, Type::String)
                        .describe("Node label key, e.g. `karpenter.sh/capacity-type`."),
                    Attribute::required(REQUIREMENT_OPERATOR, Type::String)
                        .validate(OneOf::new(OPERATORS))
                        .describe("How the node label is compared with `values`."),
                    Attribute::optional(REQUIREMENT_VALUES, Type::list(Type::String)).describe(
                        "Values: at least one for `In` and `NotIn`, none for `Exists` and \
                         `DoesNotExist`, one whole number for `Gt` and `Lt`.",
                    ),
                    Attribute::optional(REQUIREMENT_MIN_VALUES, Type::Number)
                        .validate(IntBetween::new(1, 50))
                        .describe(
                            "Karpenter's `minValues` for the key; with `In`, at most the \
                             number of `values`.",
                        ),
                ],
            )
            .describe(
                "More requirements for the NodePool, e.g. capacity type or instance family. \
                 Without one on `karpenter.sh/capacity-type`, gpufleet requires `on-demand` \
                 capacity (Karpenter alone would launch the cheapest, spot where the cloud \
                 offers it). Keys gpufleet sets from `gpu_product` and `gpus_per_node` (the \
                 GPU product label and, with `aws` or `azure`, the GPU keys) are refused: use \
                 `generic` to write GPU requirements yourself. So are the keys Karpenter's \
                 NodePool restricts (`kubernetes.io/hostname`, `karpenter.sh/nodepool`, and \
                 the `kubernetes.io`, `k8s.io` and `karpenter.sh` domains but for its \
                 well-known labels).",
            ),
        ],
    )
    .describe(
        "With `source = \"auto\"`: what the Karpenter `NodePool` may launch. Leaving it out \
         constrains instances by the GPU labels of the node class's cloud.",
    )
}
