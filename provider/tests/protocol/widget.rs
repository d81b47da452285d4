//! `test_widget`: a resource kind that lives only in this test binary, backed by an in-memory
//! store, so every RPC of the resource lifecycle can be driven without a backend.
//!
//! Its schema has one of everything the generic planner and the codecs care about: a required
//! attribute that forces replacement, an optional attribute with a default, an optional and
//! computed one, a computed id kept across updates, a computed status, a sensitive attribute, a
//! single nested block and a list nested block. It is at schema version 1; version 0 called
//! `size` `size_gb`.
//!
//! Some names switch on test behaviour:
//! - `fail-…`: apply fails and creates nothing.
//! - `await-stop-…`: apply waits for StopProvider (at most `timeouts.create`) and then fails
//!   with a "cancelled" error, returning the half-made object.
//! - `drift-secret-…`: apply returns a different `secret` than planned (a provider bug the
//!   consistency checks must catch without printing the secret).

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use async_trait::async_trait;
use gpufleet_engine::{
    context::Context,
    diag::{Diagnostic, Diagnostics},
    kinds::{
        ActionKind, ApplyRequest, ApplyResponse, ListKind, ListRequest, ListResponse, Listed,
        PlanRequest, PlanResponse, ProgressSink, ReadResponse, ResourceKind,
    },
    path::AttrPath,
    schema::{Attribute, Block, NestedBlock, Schema},
    value::{Refinements, Type, Value},
};
use tokio::sync::Notify;

/// The type name the widget is served under.
pub(crate) const TYPE: &str = "test_widget";

/// The default of `size`.
pub(crate) const DEFAULT_SIZE: i64 = 10;

/// The zone apply picks when the configuration leaves `zone` unset.
pub(crate) const DEFAULT_ZONE: &str = "zone-a";

/// The prefix of every widget id.
pub(crate) const ID_PREFIX: &str = "w-";

/// How long an `await-stop-…` widget waits for StopProvider when `timeouts.create` is unset.
const DEFAULT_CREATE_TIMEOUT: Duration = Duration::from_secs(30);

/// Every widget that exists, by id.
static STORE: Mutex<BTreeMap<String, Value>> = Mutex::new(BTreeMap::new());

/// The number of the next widget id.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Signals, by widget name, that an apply has started waiting for StopProvider.
static APPLYING: Mutex<BTreeMap<String, Arc<Notify>>> = Mutex::new(BTreeMap::new());

/// The `test_widget` resource kind.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TestWidget;

fn store() -> std::sync::MutexGuard<'static, BTreeMap<String, Value>> {
    STORE.lock().unwrap_or_else(PoisonError::into_inner)
}

fn applying(name: &str) -> Arc<Notify> {
    let mut map = APPLYING.lock().unwrap_or_else(PoisonError::into_inner);
    Arc::clone(map.entry(name.to_owned()).or_default())
}

/// Resolves once an apply of the widget called `name` is waiting for StopProvider (at once if
/// it already is).
pub(crate) async fn started_applying(name: &str) {
    applying(name).notified().await;
}

/// The stored widget with this id, as the backend sees it.
pub(crate) fn stored(id: &str) -> Option<Value> {
    store().get(id).cloned()
}

/// Deletes a widget behind Terraform's back.
pub(crate) fn delete_out_of_band(id: &str) -> bool {
    store().remove(id).is_some()
}

impl TestWidget {
    fn find(state: &Value) -> Option<Value> {
        let store = store();
        match (state.get("id").as_str(), state.get("name").as_str()) {
            (Some(id), _) => store.get(id).cloned(),
            (None, Some(name)) => store
                .values()
                .find(|w| w.get("name").as_str() == Some(name))
                .cloned(),
            (None, None) => None,
        }
    }
}

fn port_block() -> Block {
    Block::new("A port the widget listens on.")
        .attr(Attribute::required("number", Type::Number).describe("Port number, 1 to 65535."))
        .attr(
            // The generic planner fills the default inside list blocks too.
            Attribute::optional("protocol", Type::String)
                .default("tcp")
                .describe("`tcp` or `udp`."),
        )
}

fn timeouts_block() -> Block {
    Block::new("How long operations may take.").attr(
        Attribute::optional("create", Type::String)
            .describe("How long apply waits, as a duration such as `30s`."),
    )
}

fn create_timeout(planned: &Value) -> Duration {
    planned
        .get("timeouts")
        .get("create")
        .as_str()
        .and_then(|t| humantime::parse_duration(t).ok())
        .unwrap_or(DEFAULT_CREATE_TIMEOUT)
}

#[async_trait]
impl ResourceKind for TestWidget {
    fn type_name(&self) -> &'static str {
        TYPE
    }

    fn schema(&self) -> Schema {
        Schema {
            version: 1,
            block: Block::new("A widget that exists only in the protocol tests' memory.")
                .attr(
                    Attribute::required("name", Type::String)
                        .requires_replace()
                        .describe("Unique name; changing it replaces the widget."),
                )
                .attr(
                    Attribute::optional("size", Type::Number)
                        .default(Value::int(DEFAULT_SIZE))
                        .describe("Size in GB."),
                )
                .attr(
                    Attribute::optional_computed("zone", Type::String)
                        .describe("Zone; chosen by the backend when unset."),
                )
                .attr(
                    Attribute::computed("id", Type::String)
                        .use_state_for_unknown()
                        .describe("Backend id."),
                )
                .attr(Attribute::computed("status", Type::String).describe("Backend status."))
                .attr(
                    Attribute::optional("secret", Type::String)
                        .sensitive()
                        .describe("A secret the widget keeps."),
                )
                .block(NestedBlock::single("timeouts", timeouts_block()))
                .block(NestedBlock::list("port", port_block())),
        }
    }

    fn validate(&self, config: &Value) -> Diagnostics {
        let mut diags = Diagnostics::new();
        if let Some(secret) = config.get("secret").as_str()
            && secret.len() < 12
        {
            diags.error_at(
                AttrPath::attr("secret"),
                "Weak Widget Secret",
                "A widget secret must be at least 12 characters long.",
            );
        }
        for (i, port) in config
            .get("port")
            .as_seq()
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            if let Some(n) = port.get("number").as_i64()
                && !(1..=65535).contains(&n)
            {
                diags.error_at(
                    AttrPath::attr("port").push_index(i).push_attr("number"),
                    "Invalid Port Number",
                    format!("Port numbers run from 1 to 65535, not {n}."),
                );
            }
        }
        diags
    }

    async fn plan(&self, ctx: &Context, req: PlanRequest) -> PlanResponse {
        let mut diagnostics = Diagnostics::new();
        if ctx.settings.is_pending("kubernetes") {
            diagnostics.push(Diagnostic::warning(
                "Provider Configuration Pending",
                "The provider's kubernetes block is not known yet.",
            ));
        }
        let mut planned = req.proposed;
        if let Some(obj) = planned.as_object_mut() {
            // A new widget's id is not known yet, but its prefix is.
            if req.prior.is_null() && obj.get("id").is_some_and(Value::is_unknown) {
                obj.insert(
                    "id".to_owned(),
                    Value::Unknown(Box::new(Refinements {
                        not_null: true,
                        string_prefix: Some(ID_PREFIX.to_owned()),
                        ..Refinements::default()
                    })),
                );
            }
        }
        PlanResponse {
            planned,
            requires_replace: Vec::new(),
            diagnostics,
        }
    }

    async fn apply(&self, ctx: &Context, req: ApplyRequest) -> ApplyResponse {
        if req.planned.is_null() {
            if let Some(id) = req.prior.get("id").as_str() {
                store().remove(id);
            }
            return ApplyResponse {
                new_state: Value::Null,
                diagnostics: Diagnostics::new(),
            };
        }
        let name = req
            .planned
            .get("name")
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if name.starts_with("fail-") {
            return ApplyResponse {
                new_state: req.prior,
                diagnostics: Diagnostic::error(
                    "Widget Creation Failed",
                    format!("The backend refused widget {name:?}."),
                )
                .into(),
            };
        }
        let mut state = req.planned.as_object().cloned().unwrap_or_default();
        if state.get("id").is_none_or(Value::is_unknown) {
            let n = NEXT_ID.fetch_add(1, Ordering::Relaxed);
            state.insert("id".to_owned(), Value::string(format!("{ID_PREFIX}{n}")));
        }
        if state.get("zone").is_none_or(Value::is_unknown) {
            let zone = match req.prior.get("zone") {
                Value::String(z) => Value::string(z.clone()),
                _ => Value::string(DEFAULT_ZONE),
            };
            state.insert("zone".to_owned(), zone);
        }
        state.insert("status".to_owned(), Value::string("ready"));
        if name.starts_with("drift-secret-") {
            state.insert(
                "secret".to_owned(),
                Value::string("something-else-entirely"),
            );
        }
        let id = state
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();

        if name.starts_with("await-stop-") {
            let timeout = create_timeout(&req.planned);
            applying(&name).notify_one();
            let waited = tokio::time::timeout(timeout, ctx.cancel.cancelled()).await;
            state.insert("status".to_owned(), Value::string("cancelled"));
            let new_state = Value::Object(state);
            store().insert(id, new_state.clone());
            let diagnostic = match waited {
                Ok(()) => Diagnostic::error(
                    "Widget Creation Cancelled",
                    format!("Creating widget {name:?} was cancelled; it is left half-made."),
                ),
                Err(_) => Diagnostic::error(
                    "Widget Creation Timed Out",
                    format!("Widget {name:?} was not ready within {timeout:?}."),
                ),
            };
            return ApplyResponse {
                new_state,
                diagnostics: diagnostic.into(),
            };
        }

        let new_state = Value::Object(state);
        store().insert(id, new_state.clone());
        ApplyResponse {
            new_state,
            diagnostics: Diagnostics::new(),
        }
    }

    async fn read(&self, _ctx: &Context, state: Value) -> ReadResponse {
        ReadResponse {
            new_state: TestWidget::find(&state).unwrap_or(Value::Null),
            diagnostics: Diagnostics::new(),
        }
    }

    async fn import(&self, _ctx: &Context, id: &str) -> Result<Value, Diagnostics> {
        if id.is_empty() {
            return Err(Diagnostic::error(
                "Missing Import ID",
                "Import a widget by its id, e.g. `w-1`.",
            )
            .into());
        }
        Ok(Value::object([("id", Value::string(id))]))
    }

    fn identity_attributes(&self) -> &'static [&'static str] {
        &["name"]
    }

    fn upgrade_state(
        &self,
        version: i64,
        mut state: serde_json::Value,
    ) -> Result<serde_json::Value, Diagnostics> {
        if version == 0
            && let Some(obj) = state.as_object_mut()
            && let Some(size) = obj.remove("size_gb")
        {
            obj.insert("size".to_owned(), size);
        }
        Ok(state)
    }
}

// ---------------------------------------------------------------------------------------------
// Configurations, as Terraform decodes them: every attribute present, unset ones null, no
// `timeouts` block, an empty list of `port` blocks.

/// The configuration `resource "test_widget" "x" { name = <name> }`.
pub(crate) fn config(name: &str) -> Value {
    Value::object([
        ("name", Value::string(name)),
        ("size", Value::Null),
        ("zone", Value::Null),
        ("id", Value::Null),
        ("status", Value::Null),
        ("secret", Value::Null),
        ("timeouts", Value::Null),
        ("port", Value::List(Vec::new())),
    ])
}

/// `value` with `attr` set.
pub(crate) fn with(mut value: Value, attr: &str, v: Value) -> Value {
    value
        .as_object_mut()
        .expect("an object")
        .insert(attr.to_owned(), v);
    value
}

/// A `port` block.
pub(crate) fn port(number: i64, protocol: Option<&str>) -> Value {
    Value::object([
        ("number", Value::int(number)),
        ("protocol", protocol.map_or(Value::Null, Value::string)),
    ])
}

/// A `timeouts` block with `create` set.
pub(crate) fn timeouts(create: &str) -> Value {
    Value::object([("create", Value::string(create))])
}

/// `test_widget`'s list resource: the stored widgets, filtered by `zone`, by name.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TestWidgetList;

#[async_trait]
impl ListKind for TestWidgetList {
    fn type_name(&self) -> &'static str {
        TYPE
    }

    fn schema(&self) -> Schema {
        Schema::new(
            Block::new("Finds widgets.").attr(
                Attribute::optional("zone", Type::String).describe("Only widgets in this zone."),
            ),
        )
    }

    fn validate(&self, config: &Value) -> Diagnostics {
        let mut diags = Diagnostics::new();
        if let Some(zone) = config.get("zone").as_str()
            && !zone.starts_with("zone-")
        {
            diags.error_at(
                AttrPath::attr("zone"),
                "Invalid Zone",
                format!("zone: {zone:?} is not a zone; zones are named `zone-<letter>`."),
            );
        }
        diags
    }

    async fn list(&self, _ctx: &Context, req: ListRequest) -> ListResponse {
        let zone = req.config.get("zone").as_str().map(str::to_owned);
        let mut found: Vec<Value> = store()
            .values()
            .filter(|w| {
                zone.as_deref()
                    .is_none_or(|z| w.get("zone").as_str() == Some(z))
            })
            .cloned()
            .collect();
        found.sort_by(|a, b| a.get("name").as_str().cmp(&b.get("name").as_str()));
        let schema = TestWidget.schema();
        ListResponse {
            results: found
                .into_iter()
                .take(req.limit)
                .map(|w| Listed {
                    display_name: w.get("name").as_str().unwrap_or_default().to_owned(),
                    state: if req.include_resource {
                        w
                    } else {
                        schema
                            .block
                            .complete(&Value::object([("name", w.get("name").clone())]))
                    },
                })
                .collect(),
            diagnostics: Diagnostics::new(),
        }
    }
}

/// `test_widget_poke`: an action that reports each of its `steps` as progress, and fails
/// when a step is `fail`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TestWidgetPoke;

/// The poke action's type name.
pub(crate) const POKE: &str = "test_widget_poke";

#[async_trait]
impl ActionKind for TestWidgetPoke {
    fn type_name(&self) -> &'static str {
        POKE
    }

    fn schema(&self) -> Schema {
        Schema::new(
            Block::new("Pokes widgets.").attr(
                Attribute::required("steps", Type::list(Type::String))
                    .describe("What to report, in order."),
            ),
        )
    }

    async fn invoke(
        &self,
        _ctx: &Context,
        config: Value,
        progress: ProgressSink<'_>,
    ) -> Diagnostics {
        for step in config.get("steps").as_seq().unwrap_or_default() {
            let step = step.as_str().unwrap_or_default();
            if step == "fail" {
                return Diagnostic::error("Poke Failed", "the widget did not like it").into();
            }
            progress(step.to_owned());
        }
        Diagnostics::new()
    }
}
