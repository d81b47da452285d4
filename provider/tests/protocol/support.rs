//! The test harness: a provider server on an in-memory transport, a tfplugin6 client, and
//! helpers that drive resources the way Terraform core does.
//!
//! The resource helpers are the point. [`Harness::plan`] builds the proposed new state with a
//! port of Terraform's `objchange.ProposedNew`, validates the configuration, plans, and then
//! checks the answer with [`consistency::assert_plan_valid`], as Terraform does before it
//! accepts a plan; a replacement is re-planned as a create, as Terraform does. [`Harness::apply`]
//! re-plans with the final configuration and checks it with
//! [`consistency::assert_final_plan_consistent`], applies, and checks the new state with
//! [`consistency::assert_object_compatible`]. [`Harness::read`] runs the refresh checks. A
//! broken rule fails the test with Terraform's own wording, so every test that plans or applies
//! also tests the provider against Terraform's rules.

use std::{
    collections::BTreeMap,
    sync::{Mutex, PoisonError},
};

use gpufleet_engine::{
    consistency::{self, PathError, proposed_new},
    kinds::{ActionKind, ListKind, ResourceKind},
    path::{AttrPath, PathStep},
    registry,
    schema::Schema,
    value::{Type, Value},
};
use hyper_util::rt::TokioIo;
use terraform_provider_gpufleet::{
    codec::{msgpack, type_json},
    proto::tfplugin6::{
        self as pb, provider_client::ProviderClient, provider_server::ProviderServer,
    },
    server::{Kinds, ProviderService},
};
use tokio::task::JoinHandle;
use tonic::transport::{Channel, Endpoint, Server, Uri};

use crate::widget::{TestWidget, TestWidgetList, TestWidgetPoke};

/// The production kinds plus `test_widget`, its list resource and its action.
pub(crate) fn test_kinds() -> Kinds {
    let widget: &'static dyn ResourceKind = &TestWidget;
    let widgets: &'static dyn ListKind = &TestWidgetList;
    let poke: &'static dyn ActionKind = &TestWidgetPoke;
    Kinds {
        resources: registry::RESOURCES
            .iter()
            .copied()
            .chain([widget])
            .collect(),
        list_resources: registry::LIST_RESOURCES
            .iter()
            .copied()
            .chain([widgets])
            .collect(),
        actions: registry::ACTIONS.iter().copied().chain([poke]).collect(),
        ..Kinds::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Values on the wire

/// A value as Terraform sends it: msgpack under the given type.
pub(crate) fn dv(value: &Value, ty: &Type) -> pb::DynamicValue {
    let msgpack =
        msgpack::encode(value, ty).unwrap_or_else(|e| panic!("encoding {value:?} as {ty}: {e}"));
    pb::DynamicValue {
        msgpack,
        json: Vec::new(),
    }
}

/// A value the provider sent; absent or empty is null. The provider must always send msgpack.
pub(crate) fn from_dv(dv: Option<&pb::DynamicValue>, ty: &Type) -> Value {
    let Some(dv) = dv else { return Value::Null };
    assert!(
        dv.json.is_empty(),
        "the provider sent JSON; Terraform expects msgpack"
    );
    if dv.msgpack.is_empty() {
        return Value::Null;
    }
    msgpack::decode(&dv.msgpack, ty)
        .unwrap_or_else(|e| panic!("decoding a {ty} from the provider: {e}"))
}

/// A wire attribute path as an engine path.
pub(crate) fn engine_path(p: &pb::AttributePath) -> AttrPath {
    use pb::attribute_path::step::Selector;
    AttrPath(
        p.steps
            .iter()
            .map(|s| match &s.selector {
                Some(Selector::AttributeName(n)) => PathStep::Attr(n.clone()),
                Some(Selector::ElementKeyString(k)) => PathStep::Key(k.clone()),
                Some(Selector::ElementKeyInt(i)) => PathStep::Index(*i),
                None => panic!("attribute path step without a selector: {p:?}"),
            })
            .collect(),
    )
}

/// The error diagnostics among `diags`.
pub(crate) fn errors(diags: &[pb::Diagnostic]) -> Vec<&pb::Diagnostic> {
    diags
        .iter()
        .filter(|d| d.severity() == pb::diagnostic::Severity::Error)
        .collect()
}

/// Whether any of `diags` is an error.
pub(crate) fn has_error(diags: &[pb::Diagnostic]) -> bool {
    !errors(diags).is_empty()
}

/// Diagnostics rendered one per line, for assertion messages.
pub(crate) fn show(diags: &[pb::Diagnostic]) -> String {
    diags
        .iter()
        .map(|d| {
            let path = d
                .attribute
                .as_ref()
                .map(|p| format!(" at {}", engine_path(p)))
                .unwrap_or_default();
            format!("{:?}{path}: {}: {}", d.severity(), d.summary, d.detail)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Fails the test when `diags` has an error.
#[track_caller]
pub(crate) fn assert_no_errors(diags: &[pb::Diagnostic], what: &str) {
    assert!(!has_error(diags), "{what} failed:\n{}", show(diags));
}

/// The one error in `diags`, or a failed test.
#[track_caller]
pub(crate) fn single_error<'a>(diags: &'a [pb::Diagnostic], what: &str) -> &'a pb::Diagnostic {
    match errors(diags).as_slice() {
        [one] => one,
        other => panic!(
            "{what}: expected exactly one error, got {}:\n{}",
            other.len(),
            show(diags)
        ),
    }
}

/// Fails the test with Terraform's complaint when a consistency rule is broken.
#[track_caller]
fn assert_rules(errs: &[PathError], summary: &str, context: &str) {
    if !errs.is_empty() {
        let list: Vec<String> = errs.iter().map(|e| format!("  - {e}")).collect();
        panic!("{summary} ({context}):\n{}", list.join("\n"));
    }
}

// ---------------------------------------------------------------------------------------------
// Paths into values and types

/// The value at `path`; steps through null give null, as `hcl.ApplyPath` would fail there.
fn value_at(v: &Value, path: &AttrPath) -> Value {
    let mut cur = v.clone();
    for step in &path.0 {
        cur = match (step, &cur) {
            (_, Value::Unknown(_)) => return Value::unknown(),
            (PathStep::Attr(n), _) => cur.get(n).clone(),
            (PathStep::Key(k), Value::Map(m) | Value::Object(m)) => {
                m.get(k).cloned().unwrap_or(Value::Null)
            }
            (PathStep::Index(i), _) => usize::try_from(*i)
                .ok()
                .and_then(|i| cur.as_seq().and_then(|s| s.get(i)).cloned())
                .unwrap_or(Value::Null),
            _ => Value::Null,
        };
    }
    cur
}

/// Whether `path` leads somewhere in a value of type `ty`.
fn path_exists(ty: &Type, path: &AttrPath) -> bool {
    let mut cur = ty;
    for step in &path.0 {
        cur = match (step, cur) {
            (PathStep::Attr(n), Type::Object(attrs)) => match attrs.get(n) {
                Some(t) => t,
                None => return false,
            },
            (PathStep::Key(_), Type::Map(e)) | (PathStep::Index(_), Type::List(e)) => e,
            (PathStep::Index(i), Type::Tuple(ts)) => {
                match usize::try_from(*i).ok().and_then(|i| ts.get(i)) {
                    Some(t) => t,
                    None => return false,
                }
            }
            (_, Type::Dynamic) => return true,
            _ => return false,
        };
    }
    true
}

// ---------------------------------------------------------------------------------------------
// The harness

/// What Terraform decides to do with a resource instance after planning it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Nothing changes.
    NoOp,
    /// A new object.
    Create,
    /// The object changes in place.
    Update,
    /// The object is destroyed and created again.
    Replace,
    /// The object is destroyed.
    Delete,
}

/// A checked plan.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// The resource type.
    pub(crate) type_name: String,
    /// The prior state planned from.
    pub(crate) prior: Value,
    /// The proposed new state sent to the provider.
    pub(crate) proposed: Value,
    /// The planned new state (for a replacement, the planned create).
    pub(crate) planned: Value,
    /// The provider's private data for apply.
    pub(crate) private: Vec<u8>,
    /// The paths the provider said force replacement.
    pub(crate) requires_replace: Vec<AttrPath>,
    /// What Terraform would do.
    pub(crate) action: Action,
    /// The planned identity, if the provider sent one.
    pub(crate) identity: Option<Value>,
    /// Every diagnostic of validation and planning.
    pub(crate) diagnostics: Vec<pb::Diagnostic>,
}

/// A checked apply.
#[derive(Debug, Clone)]
pub(crate) struct Applied {
    /// The new state.
    pub(crate) new_state: Value,
    /// The new identity, if the provider sent one.
    pub(crate) identity: Option<Value>,
    /// The diagnostics of apply (and of the apply-time plan).
    pub(crate) diagnostics: Vec<pb::Diagnostic>,
}

/// What a list block found: (display name, identity, object or null) per result, and every
/// diagnostic of every event.
#[derive(Debug)]
pub(crate) struct Listing {
    pub(crate) results: Vec<(String, Value, Value)>,
    pub(crate) diagnostics: Vec<pb::Diagnostic>,
}

/// A checked refresh.
#[derive(Debug, Clone)]
pub(crate) struct Read {
    /// The refreshed state; null when the object is gone.
    pub(crate) new_state: Value,
    /// The new identity, if the provider sent one.
    pub(crate) identity: Option<Value>,
    /// The diagnostics.
    pub(crate) diagnostics: Vec<pb::Diagnostic>,
}

/// A checked open of an ephemeral resource.
#[derive(Debug, Clone)]
pub(crate) struct Opened {
    /// The result; null when the open failed.
    pub(crate) result: Value,
    /// The private data Terraform hands back on renew and close.
    pub(crate) private: Option<Vec<u8>>,
    /// When Terraform should renew.
    pub(crate) renew_at: Option<prost_types::Timestamp>,
    /// Why the provider deferred, if it did.
    pub(crate) deferred: Option<pb::Deferred>,
    /// The diagnostics of validation and open.
    pub(crate) diagnostics: Vec<pb::Diagnostic>,
}

/// A provider server on an in-memory connection, with a client playing Terraform.
pub(crate) struct Harness {
    client: ProviderClient<Channel>,
    kinds: Kinds,
    schema: pb::get_provider_schema::Response,
    seen: Mutex<Vec<pb::Diagnostic>>,
    server: JoinHandle<()>,
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl Harness {
    /// A server with the production kinds plus `test_widget`.
    pub(crate) async fn start() -> Harness {
        Harness::start_with(test_kinds()).await
    }

    /// A server with exactly the given kinds.
    pub(crate) async fn start_with(kinds: Kinds) -> Harness {
        let (client_io, server_io) = tokio::io::duplex(1 << 20);
        let service = ProviderService::with_kinds(kinds.clone());
        let server = tokio::spawn(async move {
            let served = Server::builder()
                .add_service(ProviderServer::new(service))
                .serve_with_incoming(tokio_stream::once(Ok::<_, std::io::Error>(server_io)))
                .await;
            if let Err(e) = served {
                panic!("provider server failed: {e}");
            }
        });
        let mut client_io = Some(client_io);
        let channel = Endpoint::try_from("http://[::]:50051")
            .expect("static endpoint")
            .connect_with_connector(tower::service_fn(move |_: Uri| {
                let io = client_io.take();
                async move {
                    io.map(TokioIo::new)
                        .ok_or_else(|| std::io::Error::other("the in-memory connection is used up"))
                }
            }))
            .await
            .expect("connect to the in-memory provider server");
        let mut client = ProviderClient::new(channel);
        let schema = client
            .get_provider_schema(pb::get_provider_schema::Request {})
            .await
            .expect("GetProviderSchema")
            .into_inner();
        assert_no_errors(&schema.diagnostics, "GetProviderSchema");
        Harness {
            client,
            kinds,
            schema,
            seen: Mutex::new(Vec::new()),
            server,
        }
    }

    /// A client for raw RPCs; clones share the connection.
    pub(crate) fn client(&self) -> ProviderClient<Channel> {
        self.client.clone()
    }

    /// GetMetadata's answer.
    pub(crate) async fn metadata(&self) -> pb::get_metadata::Response {
        self.client()
            .get_metadata(pb::get_metadata::Request {})
            .await
            .expect("GetMetadata")
            .into_inner()
    }

    /// The schemas as fetched from GetProviderSchema when the harness started.
    pub(crate) fn wire_schema(&self) -> &pb::get_provider_schema::Response {
        &self.schema
    }

    /// The engine schema of a resource type served by this harness.
    pub(crate) fn resource_schema(&self, type_name: &str) -> Schema {
        self.kinds
            .resource(type_name)
            .unwrap_or_else(|| panic!("the harness serves no resource type {type_name}"))
            .schema()
    }

    /// The object type of a resource type's identity, if it has one.
    pub(crate) fn identity_type(&self, type_name: &str) -> Option<Type> {
        let kind = self.kinds.resource(type_name)?;
        let names = kind.identity_attributes();
        if names.is_empty() {
            return None;
        }
        let schema = kind.schema();
        Some(Type::object(names.iter().map(|n| {
            let attr = schema
                .block
                .attribute(n)
                .unwrap_or_else(|| panic!("identity attribute {n} is not in the schema"));
            (*n, attr.value_type())
        })))
    }

    /// Every diagnostic any helper has seen, summaries and details, one per line.
    pub(crate) fn all_diagnostic_text(&self) -> String {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        show(&seen)
    }

    /// Records diagnostics for [`Harness::all_diagnostic_text`].
    pub(crate) fn record(&self, diags: &[pb::Diagnostic]) {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(diags);
    }

    /// Decodes an identity and checks that it is the identity of `state`.
    #[track_caller]
    fn checked_identity(
        &self,
        type_name: &str,
        identity: Option<&pb::ResourceIdentityData>,
        state: &Value,
        what: &str,
    ) -> Option<Value> {
        let ty = self.identity_type(type_name)?;
        let identity = identity
            .and_then(|i| i.identity_data.as_ref())
            .map(|dv| from_dv(Some(dv), &ty));
        if state.is_null() || !state.is_wholly_known() {
            return identity;
        }
        let Type::Object(attrs) = &ty else {
            unreachable!("identity types are objects")
        };
        let expected = Value::object(attrs.keys().map(|n| (n.clone(), state.get(n).clone())));
        assert_eq!(
            identity.as_ref(),
            Some(&expected),
            "{what}: the identity does not match the state"
        );
        identity
    }

    /// Validates, then plans a change of a managed resource like Terraform core: proposed new
    /// state from prior and config, PlanResourceChange, the plan-validity rules, the action,
    /// and for a replacement a second plan from a null prior. `config` null plans a destroy.
    ///
    /// On error diagnostics the plan is returned unchecked with a null planned state, as
    /// Terraform stops there.
    pub(crate) async fn plan(&self, type_name: &str, prior: &Value, config: &Value) -> Plan {
        let schema = self.resource_schema(type_name);
        let ty = schema.value_type();
        let mut diagnostics = Vec::new();
        if !config.is_null() {
            let resp = self
                .client()
                .validate_resource_config(pb::validate_resource_config::Request {
                    type_name: type_name.to_owned(),
                    config: Some(dv(config, &ty)),
                    client_capabilities: Some(client_capabilities()),
                })
                .await
                .expect("ValidateResourceConfig")
                .into_inner();
            self.record(&resp.diagnostics);
            diagnostics.extend(resp.diagnostics);
        }
        let mut plan = Plan {
            type_name: type_name.to_owned(),
            prior: prior.clone(),
            proposed: Value::Null,
            planned: Value::Null,
            private: Vec::new(),
            requires_replace: Vec::new(),
            action: Action::NoOp,
            identity: None,
            diagnostics,
        };
        if has_error(&plan.diagnostics) {
            return plan;
        }

        // Destroy plans are sent with a null proposed state and configuration.
        plan.proposed = if config.is_null() {
            Value::Null
        } else {
            proposed_new(&schema.block, prior, config)
        };
        let resp = self
            .plan_rpc(type_name, prior, &plan.proposed, config)
            .await;
        plan.diagnostics.extend(resp.diagnostics.iter().cloned());
        if has_error(&resp.diagnostics) {
            return plan;
        }
        plan.planned = from_dv(resp.planned_state.as_ref(), &ty);
        plan.private = resp.planned_private;
        plan.requires_replace = resp.requires_replace.iter().map(engine_path).collect();
        assert_rules(
            &consistency::assert_plan_valid(&schema.block, prior, config, &plan.planned),
            "Provider produced invalid plan",
            &format!("{type_name}, {}", change_kind(prior, config)),
        );

        // Terraform replaces when a path that the provider says forces replacement changes.
        let mut changed_forcing = Vec::new();
        for path in &plan.requires_replace {
            assert!(
                path_exists(&ty, path),
                "Provider produced invalid plan: \"requires replacement\" on the non-existent \
                 attribute path {path}"
            );
            if prior.is_null() {
                continue;
            }
            let (before, after) = (value_at(prior, path), value_at(&plan.planned, path));
            if !after.is_wholly_known() || before != after {
                changed_forcing.push(path.clone());
            }
        }
        plan.action = if prior.is_null() && plan.planned.is_null() {
            Action::NoOp
        } else if prior.is_null() {
            Action::Create
        } else if plan.planned.is_null() {
            Action::Delete
        } else if !changed_forcing.is_empty() {
            Action::Replace
        } else if plan.planned.is_wholly_known() && plan.planned == *prior {
            Action::NoOp
        } else {
            Action::Update
        };
        plan.identity = self.checked_identity(
            type_name,
            resp.planned_identity.as_ref(),
            &plan.planned,
            "planned identity",
        );

        if plan.action == Action::Replace {
            // The new object is planned as a create.
            let proposed = proposed_new(&schema.block, &Value::Null, config);
            let resp = self
                .plan_rpc(type_name, &Value::Null, &proposed, config)
                .await;
            plan.diagnostics.extend(resp.diagnostics.iter().cloned());
            assert_no_errors(&resp.diagnostics, "planning the replacement");
            plan.planned = from_dv(resp.planned_state.as_ref(), &ty);
            plan.private = resp.planned_private;
            assert_rules(
                &consistency::assert_plan_valid(&schema.block, &Value::Null, config, &plan.planned),
                "Provider produced invalid plan",
                &format!("{type_name}, create replacing the prior object"),
            );
        }
        plan
    }

    async fn plan_rpc(
        &self,
        type_name: &str,
        prior: &Value,
        proposed: &Value,
        config: &Value,
    ) -> pb::plan_resource_change::Response {
        let ty = self.resource_schema(type_name).value_type();
        let resp = self
            .client()
            .plan_resource_change(pb::plan_resource_change::Request {
                type_name: type_name.to_owned(),
                prior_state: Some(dv(prior, &ty)),
                proposed_new_state: Some(dv(proposed, &ty)),
                config: Some(dv(config, &ty)),
                prior_private: Vec::new(),
                provider_meta: None,
                client_capabilities: Some(client_capabilities()),
                prior_identity: None,
            })
            .await
            .expect("PlanResourceChange")
            .into_inner();
        self.record(&resp.diagnostics);
        assert!(
            !resp.legacy_type_system,
            "gpufleet must never claim the legacy type system"
        );
        resp
    }

    /// Applies a plan like Terraform core. A no-op applies nothing; a delete applies the
    /// destroy; a replacement destroys, then creates. Creates and updates are re-planned with
    /// `final_config` (the configuration with everything known), checked against the plan,
    /// applied, and the new state is checked against the apply-time plan.
    pub(crate) async fn apply(&self, plan: &Plan, final_config: &Value) -> Applied {
        assert_no_errors(&plan.diagnostics, "the plan being applied");
        match plan.action {
            Action::NoOp => Applied {
                new_state: plan.prior.clone(),
                identity: None,
                diagnostics: Vec::new(),
            },
            Action::Delete => {
                self.apply_rpc(plan, &plan.prior, &Value::Null, &Value::Null, &plan.private)
                    .await
            }
            Action::Replace => {
                let destroyed = self
                    .apply_rpc(plan, &plan.prior, &Value::Null, &Value::Null, &[])
                    .await;
                if has_error(&destroyed.diagnostics) {
                    return destroyed;
                }
                self.apply_change(plan, &Value::Null, final_config, Action::Create)
                    .await
            }
            Action::Create | Action::Update => {
                self.apply_change(plan, &plan.prior, final_config, plan.action)
                    .await
            }
        }
    }

    async fn apply_change(
        &self,
        plan: &Plan,
        prior: &Value,
        final_config: &Value,
        expected: Action,
    ) -> Applied {
        let schema = self.resource_schema(&plan.type_name);
        let final_plan = self.plan(&plan.type_name, prior, final_config).await;
        assert_no_errors(&final_plan.diagnostics, "the apply-time plan");
        let same_action = final_plan.action == expected
            || (expected == Action::Update && final_plan.action == Action::NoOp);
        assert!(
            same_action,
            "Provider produced inconsistent final plan: planned to {expected:?}, but now to {:?}",
            final_plan.action
        );
        assert_rules(
            &consistency::assert_final_plan_consistent(
                &schema.block,
                &plan.planned,
                &final_plan.planned,
            ),
            "Provider produced inconsistent final plan",
            &plan.type_name,
        );
        if final_plan.action == Action::NoOp {
            return Applied {
                new_state: prior.clone(),
                identity: None,
                diagnostics: final_plan.diagnostics,
            };
        }
        let mut applied = self
            .apply_rpc(
                plan,
                prior,
                &final_plan.planned,
                final_config,
                &final_plan.private,
            )
            .await;
        // Like Terraform, a failed apply is only held to a wholly known, conforming state
        // (checked in `apply_rpc`): it reports what was achieved, not what was planned.
        if !has_error(&applied.diagnostics) {
            assert_rules(
                &consistency::assert_object_compatible(
                    &schema.block,
                    &final_plan.planned,
                    &applied.new_state,
                ),
                "Provider produced inconsistent result after apply",
                &plan.type_name,
            );
        }
        let mut diagnostics = final_plan.diagnostics;
        diagnostics.append(&mut applied.diagnostics);
        applied.diagnostics = diagnostics;
        applied
    }

    async fn apply_rpc(
        &self,
        plan: &Plan,
        prior: &Value,
        planned: &Value,
        config: &Value,
        private: &[u8],
    ) -> Applied {
        let type_name = plan.type_name.as_str();
        let schema = self.resource_schema(type_name);
        let ty = schema.value_type();
        let resp = self
            .client()
            .apply_resource_change(pb::apply_resource_change::Request {
                type_name: type_name.to_owned(),
                prior_state: Some(dv(prior, &ty)),
                planned_state: Some(dv(planned, &ty)),
                config: Some(dv(config, &ty)),
                planned_private: private.to_vec(),
                provider_meta: None,
                planned_identity: None,
            })
            .await
            .expect("ApplyResourceChange")
            .into_inner();
        self.record(&resp.diagnostics);
        assert!(
            !resp.legacy_type_system,
            "gpufleet must never claim the legacy type system"
        );
        let new_state = from_dv(resp.new_state.as_ref(), &ty);
        // Even a failed apply must return a state Terraform can store.
        assert_rules(
            &consistency::assert_wholly_known_conformant(&ty, &new_state, "new state after apply"),
            "Provider returned invalid result object after apply",
            type_name,
        );
        if planned.is_null() && !has_error(&resp.diagnostics) {
            assert!(
                new_state.is_null(),
                "Provider returned invalid result object after apply: a destroy left {new_state:?}"
            );
        }
        let identity = if has_error(&resp.diagnostics) {
            None
        } else {
            self.checked_identity(
                type_name,
                resp.new_identity.as_ref(),
                &new_state,
                "new identity",
            )
        };
        Applied {
            new_state,
            identity,
            diagnostics: resp.diagnostics,
        }
    }

    /// Plans and applies creating a resource from a wholly known configuration, failing the
    /// test on any error; returns the new state.
    pub(crate) async fn create(&self, type_name: &str, config: &Value) -> Value {
        let plan = self.plan(type_name, &Value::Null, config).await;
        assert_no_errors(&plan.diagnostics, "planning the create");
        assert_eq!(plan.action, Action::Create);
        let applied = self.apply(&plan, config).await;
        assert_no_errors(&applied.diagnostics, "applying the create");
        applied.new_state
    }

    /// Refreshes a resource like Terraform core: ReadResource, then the refresh checks.
    pub(crate) async fn read(&self, type_name: &str, state: &Value) -> Read {
        let schema = self.resource_schema(type_name);
        let ty = schema.value_type();
        let resp = self
            .client()
            .read_resource(pb::read_resource::Request {
                type_name: type_name.to_owned(),
                current_state: Some(dv(state, &ty)),
                private: Vec::new(),
                provider_meta: None,
                client_capabilities: Some(client_capabilities()),
                current_identity: None,
            })
            .await
            .expect("ReadResource")
            .into_inner();
        self.record(&resp.diagnostics);
        let new_state = from_dv(resp.new_state.as_ref(), &ty);
        assert_rules(
            &consistency::assert_wholly_known_conformant(&ty, &new_state, "refreshed state"),
            "Provider produced invalid object",
            type_name,
        );
        assert_rules(
            &consistency::assert_write_only_null(&schema.block, &new_state),
            "Provider produced invalid object",
            type_name,
        );
        let identity = self.checked_identity(
            type_name,
            resp.new_identity.as_ref(),
            &new_state,
            "refreshed identity",
        );
        Read {
            new_state,
            identity,
            diagnostics: resp.diagnostics,
        }
    }

    /// ImportResourceState by id (when `identity` is `None`) or by identity; returns the
    /// imported states and the diagnostics. Terraform reads each imported state next.
    pub(crate) async fn import(
        &self,
        type_name: &str,
        id: &str,
        identity: Option<&Value>,
    ) -> (Vec<Value>, Vec<pb::Diagnostic>) {
        let ty = self.resource_schema(type_name).value_type();
        let identity = identity.map(|v| {
            let ity = self
                .identity_type(type_name)
                .unwrap_or_else(|| panic!("{type_name} has no identity"));
            pb::ResourceIdentityData {
                identity_data: Some(dv(v, &ity)),
            }
        });
        let resp = self
            .client()
            .import_resource_state(pb::import_resource_state::Request {
                type_name: type_name.to_owned(),
                id: id.to_owned(),
                client_capabilities: Some(client_capabilities()),
                identity,
            })
            .await
            .expect("ImportResourceState")
            .into_inner();
        self.record(&resp.diagnostics);
        let states = resp
            .imported_resources
            .iter()
            .map(|r| {
                assert_eq!(r.type_name, type_name, "imported a different resource type");
                let state = from_dv(r.state.as_ref(), &ty);
                assert!(
                    state.conforms_to(&ty),
                    "imported state does not fit the schema: {state:?}"
                );
                state
            })
            .collect();
        (states, resp.diagnostics)
    }

    /// Runs a list block like Terraform core (`terraform query`): ValidateListResourceConfig,
    /// then ListResource, reading at most `limit` events. Every result must carry an identity
    /// that fits the resource's identity schema and, when the resource was asked for, a wholly
    /// known object of the resource's schema whose identity it is; only an event with
    /// diagnostics may come without an identity, and none may follow an error.
    pub(crate) async fn list(
        &self,
        type_name: &str,
        config: &Value,
        include_resource: bool,
        limit: i64,
    ) -> Listing {
        let list_type = self
            .kinds
            .list_resource(type_name)
            .unwrap_or_else(|| panic!("the harness serves no list resource {type_name}"))
            .schema()
            .value_type();
        let validated = self
            .client()
            .validate_list_resource_config(pb::validate_list_resource_config::Request {
                type_name: type_name.to_owned(),
                config: Some(dv(config, &list_type)),
                include_resource_object: None,
                limit: None,
            })
            .await
            .expect("ValidateListResourceConfig")
            .into_inner();
        self.record(&validated.diagnostics);
        if has_error(&validated.diagnostics) {
            return Listing {
                results: Vec::new(),
                diagnostics: validated.diagnostics,
            };
        }
        let mut stream = self
            .client()
            .list_resource(pb::list_resource::Request {
                type_name: type_name.to_owned(),
                config: Some(dv(config, &list_type)),
                include_resource_object: include_resource,
                limit,
            })
            .await
            .expect("ListResource")
            .into_inner();
        let ty = self.resource_schema(type_name).value_type();
        let mut listing = Listing {
            results: Vec::new(),
            diagnostics: Vec::new(),
        };
        while let Some(event) = stream.message().await.expect("a ListResource event") {
            assert!(
                !has_error(&listing.diagnostics),
                "an event followed an error: {event:?}"
            );
            self.record(&event.diagnostic);
            listing.diagnostics.extend(event.diagnostic.iter().cloned());
            let Some(identity) = event.identity.as_ref() else {
                assert!(
                    !event.diagnostic.is_empty(),
                    "a result without an identity: {event:?}"
                );
                continue;
            };
            assert!(
                !event.display_name.is_empty(),
                "a result without a display name"
            );
            let state = if include_resource {
                let dv = event
                    .resource_object
                    .as_ref()
                    .expect("the resource object was asked for");
                let state = from_dv(Some(dv), &ty);
                assert_rules(
                    &consistency::assert_wholly_known_conformant(&ty, &state, "listed object"),
                    "Provider produced invalid object",
                    type_name,
                );
                state
            } else {
                assert!(
                    event.resource_object.is_none(),
                    "an object nobody asked for: {event:?}"
                );
                Value::Null
            };
            let identity = self
                .checked_identity(type_name, Some(identity), &state, "listed identity")
                .expect("the listed type has an identity");
            listing.results.push((event.display_name, identity, state));
        }
        assert!(
            i64::try_from(listing.results.len()).unwrap_or(i64::MAX) <= limit,
            "{} results for a limit of {limit}",
            listing.results.len()
        );
        listing
    }

    /// Reads a data source like Terraform core, checking a successful result is a wholly known,
    /// conforming, non-null object.
    pub(crate) async fn read_data_source(
        &self,
        type_name: &str,
        config: &Value,
    ) -> (Value, Vec<pb::Diagnostic>) {
        let ty = self
            .kinds
            .data_source(type_name)
            .unwrap_or_else(|| panic!("the harness serves no data source {type_name}"))
            .schema()
            .value_type();
        let resp = self
            .client()
            .read_data_source(pb::read_data_source::Request {
                type_name: type_name.to_owned(),
                config: Some(dv(config, &ty)),
                provider_meta: None,
                client_capabilities: Some(client_capabilities()),
            })
            .await
            .expect("ReadDataSource")
            .into_inner();
        self.record(&resp.diagnostics);
        let state = from_dv(resp.state.as_ref(), &ty);
        if !has_error(&resp.diagnostics) {
            assert_rules(
                &consistency::assert_data_source_result(&ty, &state),
                "Provider produced invalid object",
                type_name,
            );
        }
        (state, resp.diagnostics)
    }

    /// Validates, then opens an ephemeral resource like Terraform core at apply: a wholly
    /// known configuration, ValidateEphemeralResourceConfig, OpenEphemeralResource, and the
    /// checks Terraform makes on the result (it fits the schema, is wholly known, and keeps
    /// the configuration as the plan rules keep it for a create). Stops after validation
    /// errors, as Terraform does.
    pub(crate) async fn open_ephemeral(&self, type_name: &str, config: &Value) -> Opened {
        let ty = self.ephemeral_schema(type_name).value_type();
        let resp = self
            .client()
            .validate_ephemeral_resource_config(pb::validate_ephemeral_resource_config::Request {
                type_name: type_name.to_owned(),
                config: Some(dv(config, &ty)),
            })
            .await
            .expect("ValidateEphemeralResourceConfig")
            .into_inner();
        self.record(&resp.diagnostics);
        let mut opened = Opened {
            result: Value::Null,
            private: None,
            renew_at: None,
            deferred: None,
            diagnostics: resp.diagnostics,
        };
        if has_error(&opened.diagnostics) {
            return opened;
        }
        let resp = self
            .open_ephemeral_rpc(type_name, config, client_capabilities())
            .await;
        opened.diagnostics.extend(resp.diagnostics.iter().cloned());
        if has_error(&resp.diagnostics) {
            assert!(
                resp.private.is_none(),
                "a failed open hands Terraform nothing to close"
            );
            return opened;
        }
        opened.result = from_dv(resp.result.as_ref(), &ty);
        self.check_ephemeral_result(type_name, config, &opened.result);
        opened.private = resp.private;
        opened.renew_at = resp.renew_at;
        opened.deferred = resp.deferred;
        opened
    }

    /// OpenEphemeralResource as sent, unchecked, with the given client capabilities.
    pub(crate) async fn open_ephemeral_rpc(
        &self,
        type_name: &str,
        config: &Value,
        capabilities: pb::ClientCapabilities,
    ) -> pb::open_ephemeral_resource::Response {
        let ty = self.ephemeral_schema(type_name).value_type();
        let resp = self
            .client()
            .open_ephemeral_resource(pb::open_ephemeral_resource::Request {
                type_name: type_name.to_owned(),
                config: Some(dv(config, &ty)),
                client_capabilities: Some(capabilities),
            })
            .await
            .expect("OpenEphemeralResource")
            .into_inner();
        self.record(&resp.diagnostics);
        resp
    }

    /// Terraform's checks of an opened ephemeral resource's result.
    #[track_caller]
    pub(crate) fn check_ephemeral_result(&self, type_name: &str, config: &Value, result: &Value) {
        let schema = self.ephemeral_schema(type_name);
        assert_rules(
            &consistency::assert_wholly_known_conformant(
                &schema.value_type(),
                result,
                "ephemeral resource result",
            ),
            "Provider produced invalid ephemeral resource instance",
            type_name,
        );
        assert_rules(
            &consistency::assert_plan_valid(&schema.block, &Value::Null, config, result),
            "Provider produced invalid ephemeral resource instance",
            type_name,
        );
    }

    /// RenewEphemeralResource.
    pub(crate) async fn renew_ephemeral(
        &self,
        type_name: &str,
        private: Option<Vec<u8>>,
    ) -> pb::renew_ephemeral_resource::Response {
        let resp = self
            .client()
            .renew_ephemeral_resource(pb::renew_ephemeral_resource::Request {
                type_name: type_name.to_owned(),
                private,
            })
            .await
            .expect("RenewEphemeralResource")
            .into_inner();
        self.record(&resp.diagnostics);
        resp
    }

    /// CloseEphemeralResource; returns its diagnostics.
    pub(crate) async fn close_ephemeral(
        &self,
        type_name: &str,
        private: Option<Vec<u8>>,
    ) -> Vec<pb::Diagnostic> {
        let resp = self
            .client()
            .close_ephemeral_resource(pb::close_ephemeral_resource::Request {
                type_name: type_name.to_owned(),
                private,
            })
            .await
            .expect("CloseEphemeralResource")
            .into_inner();
        self.record(&resp.diagnostics);
        resp.diagnostics
    }

    /// The engine schema of an ephemeral resource type served by this harness.
    pub(crate) fn ephemeral_schema(&self, type_name: &str) -> Schema {
        self.kinds
            .ephemeral_resource(type_name)
            .unwrap_or_else(|| panic!("the harness serves no ephemeral resource {type_name}"))
            .schema()
    }

    /// UpgradeResourceState with raw JSON state; a successful result is checked like any
    /// stored state (wholly known, conforming, write-only attributes null).
    pub(crate) async fn upgrade_state(
        &self,
        type_name: &str,
        version: i64,
        json: &[u8],
    ) -> (Value, Vec<pb::Diagnostic>) {
        let schema = self.resource_schema(type_name);
        let ty = schema.value_type();
        let resp = self
            .client()
            .upgrade_resource_state(pb::upgrade_resource_state::Request {
                type_name: type_name.to_owned(),
                version,
                raw_state: Some(pb::RawState {
                    json: json.to_vec(),
                    flatmap: Default::default(),
                }),
            })
            .await
            .expect("UpgradeResourceState")
            .into_inner();
        self.record(&resp.diagnostics);
        let state = from_dv(resp.upgraded_state.as_ref(), &ty);
        if !has_error(&resp.diagnostics) {
            assert_rules(
                &consistency::assert_wholly_known_conformant(&ty, &state, "upgraded state"),
                "Provider produced invalid object",
                type_name,
            );
            assert_rules(
                &consistency::assert_write_only_null(&schema.block, &state),
                "Provider produced invalid object",
                type_name,
            );
        }
        (state, resp.diagnostics)
    }

    /// The object type of the provider block.
    pub(crate) fn provider_type(&self) -> Type {
        let block = self
            .schema
            .provider
            .as_ref()
            .and_then(|s| s.block.as_ref())
            .expect("the provider schema has a block");
        wire_block_type(block)
    }
}

/// Which change a plan is for, for messages. Values are not printed: they may be secret.
fn change_kind(prior: &Value, config: &Value) -> &'static str {
    match (prior.is_null(), config.is_null()) {
        (true, _) => "create",
        (false, true) => "destroy",
        (false, false) => "update",
    }
}

/// What Terraform announces about itself.
pub(crate) fn client_capabilities() -> pb::ClientCapabilities {
    pb::ClientCapabilities {
        deferral_allowed: false,
        write_only_attributes_allowed: true,
    }
}

/// The object type a wire block implies, as Terraform derives it from the schema it fetched.
pub(crate) fn wire_block_type(block: &pb::schema::Block) -> Type {
    use pb::schema::nested_block::NestingMode;
    let attrs = block
        .attributes
        .iter()
        .map(|a| (a.name.clone(), wire_attribute_type(a)));
    let blocks = block.block_types.iter().map(|nb| {
        let inner = nb
            .block
            .as_ref()
            .map_or_else(|| Type::Object(BTreeMap::new()), wire_block_type);
        let ty = match nb.nesting() {
            NestingMode::Single | NestingMode::Group => inner,
            NestingMode::List => Type::list(inner),
            NestingMode::Set => Type::set(inner),
            NestingMode::Map => Type::map(inner),
            NestingMode::Invalid => panic!("block {} has no nesting mode", nb.type_name),
        };
        (nb.type_name.clone(), ty)
    });
    Type::Object(attrs.chain(blocks).collect())
}

/// The type of a wire attribute: its type JSON, or its nested object type.
pub(crate) fn wire_attribute_type(a: &pb::schema::Attribute) -> Type {
    use pb::schema::object::NestingMode;
    if let Some(nested) = &a.nested_type {
        let inner = Type::Object(
            nested
                .attributes
                .iter()
                .map(|a| (a.name.clone(), wire_attribute_type(a)))
                .collect(),
        );
        return match nested.nesting() {
            NestingMode::Single => inner,
            NestingMode::List => Type::list(inner),
            NestingMode::Set => Type::set(inner),
            NestingMode::Map => Type::map(inner),
            NestingMode::Invalid => panic!("nested attribute {} has no nesting mode", a.name),
        };
    }
    type_json::type_from_json_bytes(&a.r#type)
        .unwrap_or_else(|e| panic!("attribute {}: its type is not type JSON: {e}", a.name))
}
