//! `gpufleet_benchmark_run`: runs a benchmark's definition on demand, such as a
//! `gpufleet_benchmark` again after maintenance, or a smoke test after a pool is created.
//!
//! The run is the one an apply of `gpufleet_benchmark` makes: the same validation, plan-time
//! checks against the pool, Job, gang start, parsing, thresholds and cleanup, and it takes
//! its turn on the pool with the resource's runs. Actions give nothing back to Terraform, so
//! each run's record (status, results, environment, its hash) is kept in a ConfigMap beside
//! the run's objects, `gfb-<name>-run-<time>`, labelled with the benchmark's name.
use async_trait::async_trait;
use serde_json::{Value as Json, json};

use crate::{
    backends::kube::{
        MANAGED_BY, MANAGED_BY_VALUE,
        host::{FromSettings, HostObjects, ObjectsBackend},
    },
    context::Context,
    diag::{Diagnostic, Diagnostics},
    kinds::{ActionKind, ProgressSink, ResourceKind},
    path::AttrPath,
    plan::plan_resource,
    resources::benchmark::{
        Benchmark,
        apply::run,
        archive::{self, RECORD_LABEL},
        render::BENCHMARK_LABEL,
        schema::{ENDPOINT_API_KEY, ENDPOINT_API_KEY_VERSION, ENDPOINT_SUITES, benchmark_schema},
    },
    schema::{AttrMode, Attribute, Block, Nesting, Schema},
    timeouts,
    validate::PositiveDuration,
    value::{Type, Value, display_number},
};

/// The action type name.
pub const TYPE_NAME: &str = "gpufleet_benchmark_run";

/// The attribute that holds the definition.
const BENCHMARK: &str = "benchmark";

/// The default of `timeout` when the definition has no `timeouts.create` either: the
/// resource's default create timeout.
const DEFAULT_TIMEOUT: &str = "30m";

/// The `gpufleet_benchmark_run` action over a host-objects backend. The registry uses
/// `BenchmarkRun(FromSettings)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct BenchmarkRun<B = FromSettings>(pub B);

/// What an attribute of the resource means in a run on demand, where the resource's words
/// would be wrong (a run on demand is never tainted, re-checked or unique).
fn on_demand_description(name: &str) -> Option<&'static str> {
    Some(match name {
        "name" => {
            "Name of the benchmark: the Job is `gfb-<name>`, and the record \
             `gfb-<name>-run-<time>`. A resource's definition keeps the resource's name, so the \
             run takes its turn with the resource's own runs."
        }
        "thresholds" => {
            "Metric name → bounds (`min`, `max`). A metric outside its bounds fails the run; \
             the record says which. Names must be metrics of the suite."
        }
        "on_failure" => {
            "`fail` (the default): a failed run fails the action, after its record is kept. \
             `record`: the record says `failed` and the action succeeds."
        }
        _ => return None,
    })
}

/// The resource's own arguments, as `benchmark`'s nested attributes: what a definition is.
/// Those that only make sense for a resource (`triggers`, the write-only key and its version)
/// are left out, and nothing is computed: an action plans no values. The resource's
/// `timeouts` come along as an object, so a resource's definition keeps its create timeout.
fn definition_attributes() -> Vec<Attribute> {
    let left_out = ["triggers", ENDPOINT_API_KEY, ENDPOINT_API_KEY_VERSION];
    let mut attributes: Vec<Attribute> = benchmark_schema()
        .block
        .attributes
        .into_iter()
        .filter(|a| a.mode != AttrMode::Computed && !left_out.contains(&a.name))
        .map(|mut a| {
            if a.mode == AttrMode::OptionalComputed {
                a.mode = AttrMode::Optional;
            }
            a.default = None;
            a.requires_replace = false;
            a.use_state_for_unknown = false;
            if let Some(text) = on_demand_description(a.name) {
                a.description = text;
            }
            a
        })
        .collect();
    attributes.push(
        Attribute::nested(
            timeouts::BLOCK_NAME,
            Nesting::Single,
            AttrMode::Optional,
            ["create", "read", "update", "delete"]
                .into_iter()
                .map(|op| {
                    Attribute::optional(op, Type::String)
                        .validate(PositiveDuration::new())
                        .describe("As in the resource's `timeouts` block.")
                })
                .collect(),
        )
        .describe(
            "The resource's `timeouts` (a resource's definition brings them along): \
             `create` bounds the run when the action's `timeout` is unset.",
        ),
    );
    attributes
}

fn action_schema() -> Schema {
    Schema::new(
        Block::new(
            "Runs a benchmark definition once, on demand: a `gpufleet_benchmark` again \
             (`benchmark = gpufleet_benchmark.nccl`), or a definition of its own, such as a \
             smoke test that a pool's `action_trigger` runs after the pool is created. The run \
             is the one the resource makes, checked the same way at plan, and it takes its turn \
             on the pool with the resource's runs. Its record (status, results, environment and \
             its hash) is kept in the ConfigMap `gfb-<name>-run-<time>` in the run's \
             namespace, labelled `gpufleet.dev/record=run` and \
             `gpufleet.dev/benchmark=<name>`, and its archive (every pod's log, the objects \
             and the record, laid out as the resource's `archive`) in the ConfigMaps \
             `gfb-<name>-archive-<time>-<n>` that the record names, labelled \
             `gpufleet.dev/record=run-archive`. Both stay until you delete them; the action \
             changes no Terraform state. A run that fails (the tool's verdict or a threshold) fails the \
             action unless `on_failure = \"record\"`.",
        )
        .attr(
            Attribute::nested(
                BENCHMARK,
                Nesting::Single,
                AttrMode::Required,
                definition_attributes(),
            )
            .describe(
                "The definition: a `gpufleet_benchmark` resource, whose computed attributes are \
                 ignored, or an object of the same arguments with the same defaults and rules.",
            ),
        )
        .attr(
            Attribute::optional("endpoint_api_key", Type::String)
                .sensitive()
                .describe(
                    "The API key of the endpoint an `aiperf` or `custom` run reaches, as the \
                     resource's `endpoint_api_key_wo`. Sensitive: Terraform shows it nowhere \
                     and actions keep no state, but a saved plan file (`-out`) holds it, as it \
                     holds every sensitive value, so invoke without `-out` or keep plan files \
                     as secret as the key. On the host it is in the Secret \
                     `gfb-<name>-endpoint` only while the run lasts.",
                ),
        )
        .attr(
            Attribute::optional("timeout", Type::String)
                .validate(PositiveDuration::new())
                .describe(
                    "How long the run may take once it has its turn on the pool, its start \
                     included, as the resource's create timeout. Unset means the \
                     definition's `timeouts.create`, else `30m`.",
                ),
        ),
    )
}

/// The resource configuration the definition in `config` stands for: its arguments, every
/// other attribute null, and the action's timeout as the create timeout.
fn resource_config(config: &Value) -> Value {
    let block = benchmark_schema().block;
    let definition = config.get(BENCHMARK);
    let mut resource = block.complete(definition);
    let timeout = config
        .get("timeout")
        .as_str()
        .or_else(|| definition.get(timeouts::BLOCK_NAME).get("create").as_str())
        .unwrap_or(DEFAULT_TIMEOUT);
    resource.set_attr(
        timeouts::BLOCK_NAME,
        Value::object([
            ("create", Value::string(timeout)),
            ("read", Value::Null),
            ("update", Value::Null),
            ("delete", Value::Null),
        ]),
    );
    resource
}

/// The key's own rule: only a run that reaches an endpoint takes one.
fn key_checks(config: &Value) -> Diagnostics {
    let mut d = Diagnostics::new();
    let suite = config.get(BENCHMARK).get("suite").as_str();
    if !config.get("endpoint_api_key").is_null()
        && let Some(suite) = suite.filter(|s| !ENDPOINT_SUITES.contains(s))
    {
        d.error_at(
            AttrPath::attr("endpoint_api_key"),
            "Endpoint Key Without An Endpoint",
            format!(
                "endpoint_api_key: suite {suite:?} reaches no endpoint; only {} runs take a key.",
                ENDPOINT_SUITES.join(" and ")
            ),
        );
    }
    d
}

/// `gfb-<name>-run-20261128t101500z` from the run's start: sortable, one per run.
fn record_name(name: &str, started_at: &str) -> String {
    format!("gfb-{name}-run-{}", archive::stamp(started_at))
}

/// The ConfigMap that keeps the record `state` of a run.
fn record_configmap(state: &Value) -> Option<Json> {
    let (name, namespace) = (
        state.get("name").as_str()?,
        state.get("namespace").as_str()?,
    );
    let started_at = state.get("started_at").as_str().unwrap_or_default();
    // The run's record, and where its archive is (which holds the same record).
    let mut fields = archive::RECORD_FIELDS.to_vec();
    fields.push("archive");
    let record = archive::fields_json(state, &fields);
    Some(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": record_name(name, started_at),
            "namespace": namespace,
            "labels": {
                MANAGED_BY: MANAGED_BY_VALUE,
                BENCHMARK_LABEL: name,
                RECORD_LABEL: "run",
            },
        },
        "data": {
            "record.json": record,
            "raw_output": state.get("raw_output").as_str().unwrap_or_default(),
        },
    }))
}

/// `status passed: busbw_gbps = 182.3, algbw_gbps = 97.1`.
fn summary(state: &Value) -> String {
    let status = state.get("status").as_str().unwrap_or("unknown");
    let results: Vec<String> = state
        .get("results")
        .as_map()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some(format!("{k} = {}", display_number(v.as_number()?))))
        .collect();
    if results.is_empty() {
        format!("status {status}")
    } else {
        format!("status {status}: {}", results.join(", "))
    }
}

/// Keeps the record of `state` and says where; a record that could not be kept is a warning,
/// since the run itself is over and told.
async fn keep_record(
    cluster: &dyn HostObjects,
    state: &Value,
    progress: ProgressSink<'_>,
) -> Diagnostics {
    let Some(configmap) = record_configmap(state) else {
        return Diagnostics::new();
    };
    let name = configmap["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let namespace = state.get("namespace").as_str().unwrap_or_default();
    match cluster.apply(&configmap).await {
        Ok(()) => {
            progress(format!("record kept in ConfigMap {namespace}/{name}"));
            Diagnostics::new()
        }
        Err(e) => Diagnostic::warning(
            "Benchmark Record Not Kept",
            format!(
                "{TYPE_NAME}: the run ended ({}), but its record could not be written to \
                 ConfigMap {namespace}/{name}: {e}.",
                summary(state)
            ),
        )
        .into(),
    }
}

#[async_trait]
impl<B: ObjectsBackend + Clone> ActionKind for BenchmarkRun<B> {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        action_schema()
    }

    fn validate(&self, config: &Value) -> Diagnostics {
        let mut d = key_checks(config);
        let definition = config.get(BENCHMARK);
        if definition.as_object().is_some() {
            d.extend(
                Benchmark(self.0.clone())
                    .validate(&resource_config(config))
                    .nested_in(BENCHMARK),
            );
        }
        d
    }

    async fn plan(&self, ctx: &Context, config: &Value) -> Diagnostics {
        if config.get(BENCHMARK).as_object().is_none() {
            return Diagnostics::new();
        }
        let resource = resource_config(config);
        let kind = Benchmark(self.0.clone());
        let planned = plan_resource(&kind, ctx, Value::Null, resource.clone(), resource).await;
        planned.diagnostics.nested_in(BENCHMARK)
    }

    async fn invoke(
        &self,
        ctx: &Context,
        config: Value,
        progress: ProgressSink<'_>,
    ) -> Diagnostics {
        // Terraform validated the configuration; checked again, since a run costs GPU time.
        let invalid = self.validate(&config);
        if invalid.has_error() {
            return invalid;
        }
        let resource = resource_config(&config);
        let kind = Benchmark(self.0.clone());
        let planned = plan_resource(&kind, ctx, Value::Null, resource.clone(), resource).await;
        if planned.diagnostics.has_error() {
            return planned.diagnostics.nested_in(BENCHMARK);
        }
        let cluster = match self.0.connect(ctx, TYPE_NAME).await {
            Ok(cluster) => cluster,
            Err(diagnostics) => return diagnostics,
        };
        let key = config.get("endpoint_api_key").as_str();
        let done = run(
            cluster.as_ref(),
            ctx,
            &planned.planned,
            key,
            archive::Keeper::OnDemand,
            progress,
        )
        .await;
        let mut diagnostics = planned.diagnostics.nested_in(BENCHMARK);
        if !done.new_state.is_null() {
            progress(summary(&done.new_state));
            diagnostics.extend(keep_record(cluster.as_ref(), &done.new_state, progress).await);
        }
        diagnostics.extend(done.diagnostics);
        diagnostics
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_definition_is_the_resource_arguments_and_nothing_computed() {
        let names: Vec<&str> = definition_attributes().iter().map(|a| a.name).collect();
        for wanted in [
            "name",
            "suite",
            "node_pool_id",
            "nodes",
            "thresholds",
            "on_failure",
        ] {
            assert!(names.contains(&wanted), "{wanted} missing from {names:?}");
        }
        for computed in ["id", "status", "results", "environment", "triggers"] {
            assert!(!names.contains(&computed), "{computed} in {names:?}");
        }
        assert!(
            definition_attributes().iter().all(|a| a.default.is_none()
                && matches!(a.mode, AttrMode::Required | AttrMode::Optional))
        );
    }

    #[test]
    fn a_record_is_named_by_its_start_and_keeps_the_results() {
        let state = Value::object([
            ("name", Value::string("smoke")),
            ("namespace", Value::string("vc-a")),
            ("status", Value::string("passed")),
            ("started_at", Value::string("2026-11-28T10:15:00Z")),
            (
                "results",
                Value::Map(
                    [(
                        "busbw_gbps".to_owned(),
                        Value::Number("182.30".parse().expect("n")),
                    )]
                    .into(),
                ),
            ),
        ]);
        let cm = record_configmap(&state).expect("record");
        assert_eq!(cm["metadata"]["name"], "gfb-smoke-run-20261128t101500z");
        assert_eq!(cm["metadata"]["labels"][BENCHMARK_LABEL], "smoke");
        let record: Json =
            serde_json::from_str(cm["data"]["record.json"].as_str().expect("text")).expect("json");
        assert_eq!(record["results"]["busbw_gbps"], json!(182.3));
        assert_eq!(summary(&state), "status passed: busbw_gbps = 182.3");
    }

    #[test]
    fn a_key_for_a_suite_without_an_endpoint_is_refused_on_the_key() {
        let config = Value::object([
            (
                BENCHMARK,
                Value::object([("suite", Value::string("nccl-all-reduce"))]),
            ),
            ("endpoint_api_key", Value::string("sk-1")),
        ]);
        let d = key_checks(&config);
        assert!(d.has_error());
        let text = format!("{d:?}");
        assert!(text.contains("endpoint_api_key"), "{text}");
        assert!(!text.contains("sk-1"), "the key leaked: {text}");
    }
}
