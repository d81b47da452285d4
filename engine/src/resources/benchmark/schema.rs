//! The attributes of `gpufleet_benchmark`.

use super::units::Per;
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
pub(super) const NAMESPACE: &str = "namespace";
pub(super) const NODE_POOL_ID: &str = "node_pool_id";
pub(super) const SUITE: &str = "suite";
pub(super) const IMAGE: &str = "image";
pub(super) const COMMAND: &str = "command";
pub(super) const NODES: &str = "nodes";
pub(super) const REPEATS: &str = "repeats";
pub(super) const PER: &str = "per";
pub(super) const UNIT_TOLERANCE: &str = "unit_tolerance";
pub(super) const PRESCREEN: &str = "prescreen";
pub(super) const LAUNCHER: &str = "launcher";
pub(super) const ALLOW_NODE_DIFFERENCES: &str = "allow_node_differences";
pub(super) const GPUS_PER_NODE: &str = "gpus_per_node";
pub(super) const PARAMETERS: &str = "parameters";
pub(super) const THRESHOLDS: &str = "thresholds";
pub(super) const THRESHOLD_MIN: &str = "min";
pub(super) const THRESHOLD_MAX: &str = "max";
pub(super) const BASELINE: &str = "baseline";
pub(super) const MIN_RATIO: &str = "min_ratio";
pub(super) const ALLOW_DIFFERENCES: &str = "allow_differences";
pub(super) const BASELINE_SOURCE: &str = "source";
pub(super) const ON_FAILURE: &str = "on_failure";
pub(super) const TRIGGERS: &str = "triggers";
pub(super) const START_TIMEOUT: &str = "start_timeout";
pub(super) const STATUS: &str = "status";
pub(super) const FAILURES: &str = "failures";
/// The run's `results`, and the reference's in `baseline`.
pub(super) const RESULTS: &str = "results";
pub(super) const REPEAT_RESULTS: &str = "repeat_results";
pub(super) const SPREAD: &str = "spread";
pub(super) const NODE_RESULTS: &str = "node_results";
pub(super) const UNIT_RESULTS: &str = "unit_results";
/// The run's `environment`, and the reference run's in `baseline`.
pub(super) const ENVIRONMENT: &str = "environment";
pub(super) const NODE_ENVIRONMENTS: &str = "node_environments";
pub(super) const ENVIRONMENT_HASH: &str = "environment_hash";
pub(super) const RAW_OUTPUT: &str = "raw_output";
pub(super) const ARCHIVE: &str = "archive";
pub(super) const ARCHIVE_CONFIGMAPS: &str = "configmaps";
pub(super) const ARCHIVE_SHA256: &str = "sha256";
pub(super) const STARTED_AT: &str = "started_at";
pub(super) const FINISHED_AT: &str = "finished_at";

/// Longest benchmark name: the Job is `gfb-<name>`, and its pods' hostnames
/// (`<job>-<index>`) must stay DNS labels.
pub const NAME_MAX: usize = 40;

/// The suites `suite` accepts, in the order the docs list them.
pub const SUITE_NAMES: &[&str] = &[
    "nccl-all-reduce",
    "nvbandwidth",
    "dcgm-diag",
    "aiperf",
    "gpu-burn",
    "custom",
];

/// The write-only API key of the endpoint a run reaches.
pub const ENDPOINT_API_KEY: &str = "endpoint_api_key_wo";
/// The version a user changes with the write-only key.
pub const ENDPOINT_API_KEY_VERSION: &str = "endpoint_api_key_wo_version";
/// The suites that reach an endpoint, and so may take its key.
pub const ENDPOINT_SUITES: &[&str] = &["aiperf", "custom"];

/// What `launcher` accepts.
pub const LAUNCHERS: &[&str] = &["auto", "mpi-operator", "gpufleet"];

/// The per-node environment fields that must match across a run's nodes unless
/// `allow_node_differences` lists them.
pub const NODE_FIELDS: &[&str] = &["driver_version", "cuda_version", "gpu_product", "gpu_count"];

/// How much of the pod log `raw_output` keeps: its last 16 KiB (results are printed last).
pub const RAW_OUTPUT_MAX: usize = 16 * 1024;

/// The default of `start_timeout`.
pub const DEFAULT_START_TIMEOUT: &str = "5m";

fn threshold_attributes() -> Vec<Attribute> {
    vec![
        Attribute::optional(THRESHOLD_MIN, Type::Number)
            .describe("The run fails when the metric is below this value."),
        Attribute::optional(THRESHOLD_MAX, Type::Number)
            .describe("The run fails when the metric is above this value."),
    ]
}

fn baseline_attributes() -> Vec<Attribute> {
    vec![
        Attribute::required(RESULTS, Type::map(Type::Number)).describe(
            "The reference values by metric: another run's results \
             (`gpufleet_benchmark.reference.results`) or published figures. Each must be a \
             metric of the suite.",
        ),
        Attribute::optional(ENVIRONMENT, Type::map(Type::String)).describe(
            "The reference run's `environment`. When set, the two runs are compared only if \
             the fields that must match do: `suite`, `image_digest`, `parameters`, `launcher`, \
             `gpu_product`, `gpu_count`, `driver_version`, `cuda_version`, \
             `gpu_operator_version`, `device_plugin_version`, `sharing`, the tool's own \
             versions, `ranks` and the number of `nodes` (`node_count`); a field recorded on \
             one side only differs too. Otherwise the run fails naming each field that \
             differs, with both values.",
        ),
        Attribute::optional(MIN_RATIO, Type::Number).describe(
            "The share of each reference value the run must reach, above 0 and at most 1; \
             0.95 when unset. A metric where lower is better (errors, latency) may rise to \
             the reference divided by the ratio.",
        ),
        Attribute::optional(ALLOW_DIFFERENCES, Type::list(Type::String)).describe(
            "Fields of `environment` that may differ from the reference's, such as \
             `driver_version` when comparing across a driver upgrade.",
        ),
        Attribute::optional(BASELINE_SOURCE, Type::String).describe(
            "Where published figures come from (a document and its version); failures name \
             it.",
        ),
    ]
}

/// The resource schema.
pub fn benchmark_schema() -> Schema {
    Schema::new(
        Block::new(
            "One benchmark run on a GPU node pool, in the virtual cluster's host namespace and on \
             the pool's nodes: an Indexed Job with one pod per node (and a headless Service when \
             `nodes` > 1), or, for an `nccl-all-reduce` across nodes, one MPI world of \
             `nodes` × `gpus_per_node` ranks (see `launcher`). The result log is parsed into \
             `results`, checked against `thresholds`, and recorded with the environment it ran \
             in, so runs can be compared (`environment_hash`). Everything the run made is \
             removed when it ends; the resource is the record. Changing what runs (suite, image, \
             command, parameters, placement, `triggers`) runs it again. Runs on the same pool \
             take turns, across provider processes and pipelines, on a `coordination.k8s.io` \
             Lease named `gpufleet-turn-<virtual cluster>-<pool>` in the pool's host namespace, \
             so they never share GPUs. Needs the provider's `kubernetes` block.",
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
                    "Name of the benchmark, unique in its namespace. The Job is `gfb-<name>`.",
                ),
        )
        .attr(
            Attribute::optional(VIRTUAL_CLUSTER_ID, Type::String)
                .requires_replace()
                .describe(
                    "The `id` of the `gpufleet_virtual_cluster` (`<host namespace>/<name>`) to \
                     run for: the Job runs in its host namespace, and its vCluster and \
                     Kubernetes versions are recorded. Set this or `namespace`.",
                ),
        )
        .attr(
            Attribute::optional_computed(NAMESPACE, Type::String)
                .requires_replace()
                .validate(DnsLabel::new(63))
                .describe(
                    "The host namespace to run in; must exist. Defaults to the namespace of \
                     `virtual_cluster_id`.",
                ),
        )
        .attr(
            Attribute::optional(NODE_POOL_ID, Type::String)
                .requires_replace()
                .describe(
                    "The `id` of the `gpufleet_gpu_node_pool` \
                     (`<namespace>/<virtual cluster>/<pool>`) to run on: the pods select its \
                     nodes (`gpufleet.dev/pool`) and tolerate their taints. Without it the pods \
                     go wherever the scheduler finds GPUs.",
                ),
        )
        .attr(
            Attribute::required(SUITE, Type::String)
                .requires_replace()
                .validate(OneOf::new(SUITE_NAMES))
                .describe(
                    "What runs and how its output is read: `nccl-all-reduce` (nccl-tests), \
                     `nvbandwidth`, `dcgm-diag` (`dcgmi diag -j`), `aiperf`, `gpu-burn`, or \
                     `custom` (a command whose last line is a JSON object of metrics). The \
                     container is named after the suite.",
                ),
        )
        .attr(
            Attribute::required(IMAGE, Type::String)
                .requires_replace()
                .describe(
                    "The container image. Pin it by digest (`…@sha256:…`) for reproducible \
                     runs; the digest the node pulled is recorded in `environment` either way.",
                ),
        )
        .attr(
            Attribute::optional(COMMAND, Type::list(Type::String))
                .requires_replace()
                .describe(
                    "The container's command. Defaults to the suite's usual invocation built \
                     from `parameters`; required for `custom`.",
                ),
        )
        .attr(
            Attribute::optional(NODES, Type::Number)
                .default(1)
                .requires_replace()
                .validate(IntBetween::new(1, 256))
                .describe(
                    "How many nodes run at once, one pod per node. Above 1 the pods start as a \
                     gang: all must be running together, on distinct nodes, within `start_timeout`, \
                     or the run fails and everything is removed. A pod that could only run after \
                     another had finished (too few free nodes) fails the run too.",
                ),
        )
        .attr(
            Attribute::optional(REPEATS, Type::Number)
                .default(1)
                .requires_replace()
                .validate(IntBetween::new(1, 10))
                .describe(
                    "How many times the run executes, one after another in one turn on the \
                     pool, each a complete run with its own pods. `results` and \
                     `node_results` hold each metric's median over the repeats, thresholds \
                     judge the medians, `repeat_results` keeps every repeat's numbers and \
                     `spread` each metric's range. The create timeout covers all of them.",
                ),
        )
        .attr(
            Attribute::optional(PER, Type::String)
                .requires_replace()
                .validate(OneOf::new(Per::NAMES))
                .describe(
                    "Runs the benchmark once on each scalable unit of the pool, in turn: \
                     `block` (NVIDIA topograph's `network.topology.nvidia.com/block`, a switch \
                     block), `clique` (GPU feature discovery's `nvidia.com/gpu.clique`, a \
                     multi-node NVLink domain) or `zone` (`topology.kubernetes.io/zone`). Each \
                     run takes `nodes` nodes of one unit, `repeats` times. `unit_results` \
                     keeps each unit's results, `results` each metric's worst unit, \
                     thresholds judge each unit and a failure names it, and a unit further \
                     than `unit_tolerance` from the best unit fails the run. Needs \
                     `node_pool_id`; a pool whose nodes do not all carry the unit's label, or \
                     with a unit of fewer than `nodes` nodes, is refused at plan. Unset: one \
                     run on the pool.",
                ),
        )
        .attr(
            Attribute::optional(PRESCREEN, Type::Bool)
                .default(false)
                .requires_replace()
                .describe(
                    "Prescreens each node before the run measures anything: one pod per node \
                     of the gang, in the run's image with its GPUs, prints `nvidia-smi -q`, \
                     `nvidia-smi topo -m`, `ibstat`, the kernel command line and the `NCCL_*` \
                     environment (with `MELLANOX_VISIBLE_DEVICES` and `NVSHMEM_HCA_LIST`). `node_environments` records each node's GPU UUIDs, serials, \
                     bus ids, VBIOS and lifetime uncorrectable ECC counts, the driver and CUDA \
                     versions the driver reports, the \
                     HCAs (port, link layer, state, rate, firmware), the kernel command line \
                     and the NCCL environment. A node fails, and the run stops before any \
                     benchmark pod starts, when `nvidia-smi` sees no GPU or fewer than asked, \
                     a GPU has uncorrectable ECC errors or memory awaiting a row remapping or \
                     page retirement, the driver differs from the node's labels or from the \
                     other nodes' (unless `allow_node_differences` lists `driver_version`), \
                     an InfiniBand port is not Active, or, for `nccl-all-reduce`, the node \
                     has InfiniBand HCAs and neither `NCCL_IB_HCA` nor `MELLANOX_VISIBLE_DEVICES` is \
                     set. The run then takes \
                     exactly the nodes that passed; each unit of `per` is prescreened before \
                     its run. The prescreen pods' logs are in the archive.",
                ),
        )
        .attr(
            Attribute::optional(UNIT_TOLERANCE, Type::Number)
                .describe(
                    "With `per`: how far each unit may fall short of the best unit, as a \
                     share (default 0.05, the reference architecture's \"within 5%\"): below \
                     the best × (1 − tolerance), or where lower is better above the best ÷ \
                     (1 − tolerance), fails the run naming the metric, both units and both \
                     values. A change re-checks the recorded run at plan without running \
                     again.",
                ),
        )
        .attr(
            Attribute::optional(LAUNCHER, Type::String)
                .default("auto")
                .requires_replace()
                .validate(OneOf::new(LAUNCHERS))
                .describe(
                    "How an `nccl-all-reduce` run of more than one node starts its MPI world \
                     (`nodes` × `gpus_per_node` ranks, one per GPU). `mpi-operator`: an \
                     `MPIJob` (`kubeflow.org/v2beta1`) that the Kubeflow MPI Operator expands \
                     into a launcher running `mpirun` and one worker per node. `gpufleet`: an \
                     Indexed Job whose pods run the SSH daemon, pod 0 also running `mpirun` \
                     over a hostfile of the pods' stable names, with a key pair in a Secret. \
                     `auto`: `mpi-operator` when the host cluster serves \
                     `MPIJob`, else `gpufleet`. Other suites and single-node runs run one \
                     pod per node either way.",
                ),
        )
        .attr(
            Attribute::optional(ALLOW_NODE_DIFFERENCES, Type::set(Type::String))
                .requires_replace()
                .describe(
                    "Environment fields the nodes of one run may differ in. By default a run \
                     whose nodes differ in any hashed per-node field (`driver_version`, \
                     `cuda_version`, `gpu_product`, `gpu_count`) fails, naming the field and \
                     the nodes: its result would mix two setups.",
                ),
        )
        .attr(
            Attribute::optional(GPUS_PER_NODE, Type::Number)
                .default(1)
                .requires_replace()
                .validate(IntBetween::new(1, 64))
                .describe("`nvidia.com/gpu` each pod requests."),
        )
        .attr(
            Attribute::optional(PARAMETERS, Type::map(Type::String))
                .requires_replace()
                .describe(
                    "Suite parameters, recorded and hashed: `min_bytes`, `max_bytes`, \
                     `step_factor` for `nccl-all-reduce` (defaults `8`, `8G`, `2`). \
                     `nvbandwidth`: `testcases` (names or indexes, comma-separated), \
                     `buffer_size` (MiB), `samples`. `dcgm-diag`: `level` (1 to 4, default `2`), \
                     `host_engine` (`embedded`, the default: the container starts \
                     `nv-hostengine`; or `<host>[:<port>]` of a running host engine). `aiperf`: \
                     `model` and `url` (required), `endpoint_type` (default `chat`), `streaming` \
                     (`true`, the default, or `false`; time to first token and inter-token \
                     latency need `true`), `concurrency` (default `1`). `gpu-burn`: `seconds` \
                     (default `60`), `doubles` and `tensor_cores` (`true` or `false`), `memory` \
                     (MB or `N%`). The benchmarks guide says what each suite runs and needs in \
                     its image. Every entry is also set as an environment variable \
                     `GPUFLEET_PARAM_<KEY>` in the container.",
                ),
        )
        .attr(
            Attribute::optional(ENDPOINT_API_KEY, Type::String)
                .sensitive()
                .write_only()
                .describe(
                    "The API key of the endpoint an `aiperf` run profiles (AIPerf sends it as \
                     `Authorization: Bearer`), or of whatever a `custom` run reaches. The run's \
                     container reads it from `GPUFLEET_ENDPOINT_API_KEY`, set from a Secret that \
                     lives only as long as the run. Write-only (Terraform 1.11 or later): it is \
                     never in the plan or the state, so feed it from an ephemeral variable or \
                     resource. Keep secrets out of `parameters`, which are recorded.",
                ),
        )
        .attr(
            Attribute::optional(ENDPOINT_API_KEY_VERSION, Type::Number)
                .validate(IntBetween::new(0, i64::MAX))
                .describe(
                    "A number to change when `endpoint_api_key_wo` changes, since Terraform \
                     cannot see a write-only value. Changing it updates the resource in place \
                     and does not run the benchmark again: the key is read when a run starts.",
                ),
        )
        .attr(
            Attribute::nested(
                THRESHOLDS,
                Nesting::Map,
                AttrMode::Optional,
                threshold_attributes(),
            )
            .describe(
                "Metric name → bounds (`min`, `max`). A metric outside its bounds fails the run. \
                 Names must be metrics of the suite (see the benchmarks guide). Changing \
                 thresholds re-checks the recorded results without running again.",
            ),
        )
        .attr(
            Attribute::nested(
                BASELINE,
                Nesting::Single,
                AttrMode::Optional,
                baseline_attributes(),
            )
            .describe(
                "A reference the results must reach: each metric of `baseline.results` must be \
                 at least `min_ratio` of its reference value (for a metric where lower is \
                 better, at most the reference divided by it), judged on `results`. A miss \
                 fails the run, naming the metric and both values. Changing the baseline \
                 re-checks the recorded results without running again.",
            ),
        )
        .attr(
            Attribute::optional(ON_FAILURE, Type::String)
                .default("fail")
                .validate(OneOf::new(&["fail", "record"]))
                .describe(
                    "`fail`: a failed run is an apply error naming each metric, its value and \
                     its bound; the run is still recorded, and tainted so the next apply runs it \
                     again. `record`: the run is recorded with `status = \"failed\"` and no \
                     error.",
                ),
        )
        .attr(
            Attribute::optional(TRIGGERS, Type::map(Type::String))
                .requires_replace()
                .describe("Arbitrary values; changing any of them runs the benchmark again."),
        )
        .attr(
            Attribute::optional(START_TIMEOUT, Type::String)
                .default(DEFAULT_START_TIMEOUT)
                .validate(PositiveDuration::new())
                .describe(
                    "How long every pod may take to be scheduled and running (the gang \
                     deadline).",
                ),
        )
        .attr(Attribute::computed(STATUS, Type::String).describe(
            "`passed`, or `failed` when the tool reported a failure, the output could not \
                 be read, or a metric is outside its thresholds.",
        ))
        .attr(
            Attribute::computed(FAILURES, Type::list(Type::String)).describe(
                "Why the run failed, one entry per reason: the tool's own verdict (a failed \
                 test, a FAULTY GPU, a non-zero exit) and every broken threshold (prefixed \
                 `threshold: `, naming the metric, its value and its bound, and the node when \
                 several ran the tool). Empty when it passed.",
            ),
        )
        .attr(
            Attribute::computed(RESULTS, Type::map(Type::Number))
                .use_state_for_unknown()
                .describe(
                    "Metric name → value, as the tool printed it. When several nodes each ran \
                     the tool, each metric's worst node (see `node_results`).",
                ),
        )
        .attr(
            Attribute::computed(REPEAT_RESULTS, Type::list(Type::map(Type::Number)))
                .use_state_for_unknown()
                .describe(
                    "Each repeat's results, in the order they ran (one entry unless `repeats` \
                     is above 1).",
                ),
        )
        .attr(
            Attribute::computed(SPREAD, Type::map(Type::Number))
                .use_state_for_unknown()
                .describe(
                    "Metric name → the largest minus the smallest of its values over the \
                     repeats: 0 for a single run. A wide spread says the median is not yet a \
                     stable figure.",
                ),
        )
        .attr(
            Attribute::computed(NODE_RESULTS, Type::map(Type::map(Type::Number)))
                .use_state_for_unknown()
                .describe(
                    "Node → metric name → value, for runs in which each node runs the tool on \
                     its own; empty for one MPI world across nodes (`nccl-all-reduce` with \
                     `nodes` above 1), whose numbers belong to the whole world. With more than \
                     one node, thresholds apply to each node and a failure names it, and \
                     `results` keeps each metric's worst node: the lowest where higher is \
                     better, the highest where lower is better (a custom metric: the highest \
                     when its threshold sets only `max`, else the lowest).",
                ),
        )
        .attr(
            Attribute::computed(UNIT_RESULTS, Type::map(Type::map(Type::Number)))
                .use_state_for_unknown()
                .describe(
                    "With `per`: unit (its label's value) → metric name → value, each unit's \
                     results as a run on that unit alone records them (the median over \
                     repeats; the worst node where each node runs the tool on its own). \
                     Empty without `per`.",
                ),
        )
        .attr(
            Attribute::computed(ENVIRONMENT, Type::map(Type::String))
                .use_state_for_unknown()
                .describe(
                    "What the run ran on: `kubernetes_version`, `vcluster_version`, \
                     `virtual_cluster_kubernetes_version`, `nodes` (comma-separated, in rank \
                     order; every node of every repeat and unit), `node_count` (how many ran \
                     at once), `gpu_product`, `gpu_count`, `driver_version`, `cuda_version` (the \
                     nodes' common value, or their distinct values comma-separated when \
                     `allow_node_differences` lets them differ), `gpu_operator_version` and \
                     `device_plugin_version` (from the GPU Operator's ClusterPolicy), the \
                     versions the tool printed (`nccl_version` and `nccl_tests_version` for \
                     `nccl-all-reduce`, `dcgm_version` for `dcgm-diag`), `launcher`, `ranks` and \
                     `ranks_by_host` (the MPI world the log shows), `image`, `image_digest`, `suite`, `parameters` (JSON), `node_pool_id`, `sharing`, \
                     `started_at`, `finished_at`. Values that could not be found are empty.",
                ),
        )
        .attr(
            Attribute::computed(
                NODE_ENVIRONMENTS,
                Type::map(Type::map(Type::String)),
            )
            .use_state_for_unknown()
            .describe(
                "Each node of the run → what it was: `driver_version`, `cuda_version`, \
                 `gpu_product`, `gpu_count` (from GPU Feature Discovery's labels), \
                 `nvlink_domain` (GFD's `nvidia.com/gpu.clique`, else topograph's accelerator \
                 label), `block` (topograph's network block), `zone`, and `ranks`, the MPI \
                 ranks the log shows on it.",
            ),
        )
        .attr(
            Attribute::computed(ENVIRONMENT_HASH, Type::String)
                .use_state_for_unknown()
                .describe(
                    "SHA-256 (hex) of exactly what must match for two runs to be comparable: \
                     suite, image (digest when known), command, parameters, launcher, nodes, \
                     GPUs per node, each node's GPU product and count, driver and CUDA \
                     versions (as a multiset: which nodes does not matter), the GPU Operator \
                     and device plugin versions, the tool's own versions (NCCL, DCGM), sharing \
                     mode, Kubernetes and vCluster versions. Not times, node names, racks or \
                     pool ids.",
                ),
        )
        .attr(
            Attribute::computed(RAW_OUTPUT, Type::String)
                .use_state_for_unknown()
                .describe(
                    "The end of the result log, at most 16 KiB: the MPI launcher's (or pod \
                     0's) for one MPI world, else every node's, each under a `==> node <name> \
                     <==` line. The full logs are parsed.",
                ),
        )
        .attr(
            Attribute::nested(
                ARCHIVE,
                Nesting::Single,
                AttrMode::Computed,
                vec![
                    Attribute::computed(ARCHIVE_CONFIGMAPS, Type::list(Type::String))
                        .describe("The ConfigMaps of the archive, in order: `index.json` is in the first."),
                    Attribute::computed(ARCHIVE_SHA256, Type::String).describe(
                        "The archive's SHA-256 (hex), over the list of its files and their \
                         digests, as `index.json` records it.",
                    ),
                ],
            )
            .use_state_for_unknown()
            .describe(
                "Where the run's archive is: everything a reviewer needs to audit it, as \
                 files in the ConfigMaps `gfb-<name>-archive-<n>` of the run's namespace \
                 (labelled `gpufleet.dev/record=archive` and `gpufleet.dev/benchmark=<name>`; \
                 the next run overwrites them), each key one file: `archive.json` (when it was \
                 written), `index.json` (every file with its part, size, SHA-256 and the bytes \
                 cut from its start, the files left out for room, and the archive's SHA-256), \
                 `record.json` (status, failures, results, spread, repeat, node and unit \
                 results, environment, node environments, environment hash, times: the verdict \
                 as of the run), `parameters.json` (the definition that ran), `objects.json` \
                 (the Job or MPIJob as sent; Secrets only by name), `repeat-<r>.<pod>.log` \
                 (every pod's log as the kubelet still has it when the run ends, the endpoint \
                 key replaced by `(redacted)`; an MPI world's ranks all print to its \
                 launcher's) and `prescreen.<pod>.log`. A part holds at most 900 KiB and an \
                 archive at most 8 parts; a log larger than a part keeps its end; the part \
                 holding `index.json` is written last. Destroy removes the archive while its \
                 index is the recorded one; null when it could not be written (a warning says \
                 why).",
            ),
        )
        .attr(
            Attribute::computed(STARTED_AT, Type::String)
                .use_state_for_unknown()
                .describe("When the run started (RFC 3339)."),
        )
        .attr(
            Attribute::computed(FINISHED_AT, Type::String)
                .use_state_for_unknown()
                .describe("When the run finished (RFC 3339)."),
        )
        .block(timeouts::block(
            "How long operations may take. Defaults: create 30m (the whole run, start included), \
             delete 5m, read 1m.",
        )),
    )
}
