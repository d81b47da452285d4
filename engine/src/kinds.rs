//! The interfaces every resource, data source, ephemeral resource and function implements, with one request and
//! response type per operation.
//!
//! The provider crate dispatches RPCs into these by type name; it never looks inside. The
//! generic parts of planning (defaults, unknown computed values, requires-replace) are done by
//! `crate::plan` before and after a kind's own `plan`, so kinds only add what is theirs.

use std::time::SystemTime;

use async_trait::async_trait;

use crate::{
    context::Context,
    diag::Diagnostics,
    path::AttrPath,
    schema::{FunctionSignature, Schema},
    value::Value,
};

/// What `ResourceKind::plan` is given.
#[derive(Debug, Clone)]
pub struct PlanRequest {
    /// State before the change; null on create.
    pub prior: Value,
    /// The proposed new state with defaults applied and unset computed values unknown.
    pub proposed: Value,
    /// The configuration as written; may contain unknowns.
    pub config: Value,
}

/// What `ResourceKind::plan` returns.
#[derive(Debug, Clone)]
pub struct PlanResponse {
    /// The planned state.
    pub planned: Value,
    /// Attributes whose change forces replacement, beyond those the schema marks.
    pub requires_replace: Vec<AttrPath>,
    /// Problems found; an error fails the plan.
    pub diagnostics: Diagnostics,
}

/// What `ResourceKind::apply` is given.
#[derive(Debug, Clone)]
pub struct ApplyRequest {
    /// State before the change; null on create.
    pub prior: Value,
    /// The planned state; null on destroy.
    pub planned: Value,
    /// The configuration; null on destroy.
    pub config: Value,
}

/// What `ResourceKind::apply` returns.
#[derive(Debug, Clone)]
pub struct ApplyResponse {
    /// The new state. On error it is whatever was achieved, so nothing is orphaned; null means
    /// nothing exists.
    pub new_state: Value,
    /// Problems found.
    pub diagnostics: Diagnostics,
}

/// What `ResourceKind::read` returns.
#[derive(Debug, Clone)]
pub struct ReadResponse {
    /// The observed state, normalised against the prior one; null when the object is gone.
    pub new_state: Value,
    /// Problems found.
    pub diagnostics: Diagnostics,
}

impl ApplyResponse {
    /// An apply that ended with `new_state` and nothing to report.
    pub fn done(new_state: Value) -> ApplyResponse {
        ApplyResponse {
            new_state,
            diagnostics: Diagnostics::new(),
        }
    }

    /// An apply that stopped with `diagnostics`, leaving `new_state` recorded.
    pub fn refused(new_state: Value, diagnostics: Diagnostics) -> ApplyResponse {
        ApplyResponse {
            new_state,
            diagnostics,
        }
    }
}

impl ReadResponse {
    /// A read that observed `new_state`.
    pub fn observed(new_state: Value) -> ReadResponse {
        ReadResponse {
            new_state,
            diagnostics: Diagnostics::new(),
        }
    }

    /// A read that failed with `diagnostics`, keeping `state` as it was.
    pub fn refused(state: Value, diagnostics: Diagnostics) -> ReadResponse {
        ReadResponse {
            new_state: state,
            diagnostics,
        }
    }
}

/// A managed resource type.
#[async_trait]
pub trait ResourceKind: Send + Sync {
    /// The full type name, e.g. `gpufleet_network_segment`.
    fn type_name(&self) -> &'static str;

    /// The schema, the single source of truth for this type's attributes.
    fn schema(&self) -> Schema;

    /// Offline checks across attributes, beyond the per-attribute validators. The config may
    /// contain unknowns, which must be tolerated.
    fn validate(&self, _config: &Value) -> Diagnostics {
        Diagnostics::new()
    }

    /// Refines the generic plan: fills what can be known, marks what will change as unknown.
    async fn plan(&self, ctx: &Context, req: PlanRequest) -> PlanResponse;

    /// Makes the remote objects match the plan.
    async fn apply(&self, ctx: &Context, req: ApplyRequest) -> ApplyResponse;

    /// Observes the remote objects behind `state`.
    async fn read(&self, ctx: &Context, state: Value) -> ReadResponse;

    /// Turns an import id into a state skeleton that `read` can complete.
    async fn import(&self, ctx: &Context, id: &str) -> Result<Value, Diagnostics>;

    /// Names of the attributes that identify an instance, for import by identity and for
    /// Terraform's resource identity. Empty when the type has no identity.
    fn identity_attributes(&self) -> &'static [&'static str] {
        &[]
    }

    /// Sections the resource's docs page adds after its schema, as (heading, markdown),
    /// generated from the code they describe. None by default.
    fn docs_sections(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    /// Upgrades state stored under an older schema version (given as JSON) to the current one.
    /// The default accepts the current version only.
    fn upgrade_state(
        &self,
        version: i64,
        state: serde_json::Value,
    ) -> Result<serde_json::Value, Diagnostics> {
        let _ = version;
        Ok(state)
    }
}

/// A data source type.
#[async_trait]
pub trait DataSourceKind: Send + Sync {
    /// The full type name, e.g. `gpufleet_gpu_catalog`.
    fn type_name(&self) -> &'static str;

    /// The schema.
    fn schema(&self) -> Schema;

    /// Offline checks across attributes, beyond the per-attribute validators.
    fn validate(&self, _config: &Value) -> Diagnostics {
        Diagnostics::new()
    }

    /// Reads the data; the result must be wholly known.
    async fn read(&self, ctx: &Context, config: Value) -> ReadResponse;
}

/// What `ListKind::list` is given.
#[derive(Debug, Clone)]
pub struct ListRequest {
    /// The list block's `config`, wholly known (every attribute null when the block is left
    /// out).
    pub config: Value,
    /// Whether each result must carry the full resource object, as `include_resource = true`
    /// (or `-generate-config-out`) asks.
    pub include_resource: bool,
    /// The most results Terraform wants.
    pub limit: usize,
}

/// One object a list found.
#[derive(Debug, Clone)]
pub struct Listed {
    /// What Terraform shows for it, e.g. `acme-net (tenant acme)`.
    pub display_name: String,
    /// Its state as a read (after an import) would record it: only the identifying attributes
    /// are needed when the request did not ask for the resource, every attribute when it did.
    pub state: Value,
}

/// What `ListKind::list` returns.
#[derive(Debug, Clone, Default)]
pub struct ListResponse {
    /// What was found, in a stable order, at most the request's limit.
    pub results: Vec<Listed>,
    /// Problems found; an error ends the listing.
    pub diagnostics: Diagnostics,
}

/// A list resource: finds the objects a managed resource type of the same name could import,
/// for `terraform query` (Terraform 1.14 and newer).
#[async_trait]
pub trait ListKind: Send + Sync {
    /// The full type name, the same as the managed resource's, e.g. `gpufleet_bcm_node`.
    fn type_name(&self) -> &'static str;

    /// The schema of the list block's `config` (its filters).
    fn schema(&self) -> Schema;

    /// Offline checks of the filters, beyond the per-attribute validators.
    fn validate(&self, _config: &Value) -> Diagnostics {
        Diagnostics::new()
    }

    /// Finds the matching objects.
    async fn list(&self, ctx: &Context, req: ListRequest) -> ListResponse;
}

/// What `EphemeralKind::open` returns.
#[derive(Debug, Clone)]
pub struct OpenResponse {
    /// The configuration with every computed attribute filled; null on error, wholly
    /// unknown from [`OpenResponse::not_yet_known`].
    pub result: Value,
    /// What renew and close need, handed back by Terraform; never shown to users.
    pub private: Option<Vec<u8>>,
    /// When Terraform should call renew if the run is still going then.
    pub renew_at: Option<SystemTime>,
    /// Problems found; an error fails the run.
    pub diagnostics: Diagnostics,
}

impl OpenResponse {
    /// An open that failed with `diagnostics`: no result, nothing to renew or close.
    pub fn refused(diagnostics: impl Into<Diagnostics>) -> OpenResponse {
        OpenResponse {
            result: Value::Null,
            private: None,
            renew_at: None,
            diagnostics: diagnostics.into(),
        }
    }

    /// An open whose values cannot be known yet, because what it opens is only created by
    /// this run's apply: Terraform gets the configuration with every computed attribute
    /// unknown (as for a configuration it cannot know yet), and nothing to renew or close.
    pub fn not_yet_known() -> OpenResponse {
        OpenResponse {
            result: Value::unknown(),
            private: None,
            renew_at: None,
            diagnostics: Diagnostics::new(),
        }
    }
}

/// What `EphemeralKind::renew` returns.
#[derive(Debug, Clone, Default)]
pub struct RenewResponse {
    /// The private data for the next renew or the close.
    pub private: Option<Vec<u8>>,
    /// When to renew again; none when renewing again would not help.
    pub renew_at: Option<SystemTime>,
    /// Problems found.
    pub diagnostics: Diagnostics,
}

/// An ephemeral resource type: something that exists only while one Terraform run needs it
/// (a connection, a lease), whose values never reach the plan or the state.
#[async_trait]
pub trait EphemeralKind: Send + Sync {
    /// The full type name, e.g. `gpufleet_virtual_cluster_connection`.
    fn type_name(&self) -> &'static str;

    /// The schema, the single source of truth for this type's attributes.
    fn schema(&self) -> Schema;

    /// Offline checks across attributes, beyond the per-attribute validators. The config may
    /// contain unknowns, which must be tolerated.
    fn validate(&self, _config: &Value) -> Diagnostics {
        Diagnostics::new()
    }

    /// Opens the resource for a wholly known, validated `config`.
    async fn open(&self, ctx: &Context, config: Value) -> OpenResponse;

    /// Extends what `open` made, given the private data of the open or last renew.
    async fn renew(&self, ctx: &Context, private: Option<&[u8]>) -> RenewResponse;

    /// Releases what `open` made. Closing what is already gone is not an error.
    async fn close(&self, ctx: &Context, private: Option<&[u8]>) -> Diagnostics;
}

/// Where an action reports what it is doing while it runs; Terraform shows each message as
/// it comes.
pub type ProgressSink<'a> = &'a (dyn Fn(String) + Send + Sync);

/// An action: a day-2 operation run by `terraform apply -invoke=action.<type>.<name>` or by a
/// resource's `action_trigger` (Terraform 1.14 and newer). It changes no state.
#[async_trait]
pub trait ActionKind: Send + Sync {
    /// The full type name, e.g. `gpufleet_bcm_node_power`.
    fn type_name(&self) -> &'static str;

    /// The schema of the action's `config` block.
    fn schema(&self) -> Schema;

    /// Offline checks across attributes, beyond the per-attribute validators. The config may
    /// contain unknowns, which must be tolerated.
    fn validate(&self, _config: &Value) -> Diagnostics {
        Diagnostics::new()
    }

    /// What the backend already knows that refuses the action (a node another tenant holds),
    /// checked when the plan is made so a refused action costs nothing. The config may
    /// contain unknowns; then only what is known is checked.
    async fn plan(&self, _ctx: &Context, _config: &Value) -> Diagnostics {
        Diagnostics::new()
    }

    /// Runs the action for a wholly known `config`, reporting progress as it goes; the
    /// diagnostics say how it ended.
    async fn invoke(&self, ctx: &Context, config: Value, progress: ProgressSink<'_>)
    -> Diagnostics;
}

/// An error from a function call, optionally blaming one argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionError {
    /// What went wrong, as a sentence.
    pub text: String,
    /// The zero-based argument at fault, if one is.
    pub argument: Option<usize>,
}

/// A provider-defined function, `provider::gpufleet::<name>(...)`.
pub trait FunctionKind: Send + Sync {
    /// The function's name without the `provider::gpufleet::` prefix.
    fn name(&self) -> &'static str;

    /// Parameters, result type and docs.
    fn signature(&self) -> FunctionSignature;

    /// Computes the result. Functions are pure: no backends, no context.
    fn call(&self, args: &[Value]) -> Result<Value, FunctionError>;
}
