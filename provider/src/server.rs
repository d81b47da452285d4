//! The tfplugin6 `Provider` service: one method per RPC, each delegating to `rpc::<name>`.
//!
//! User-facing problems are diagnostics inside a successful reply; a gRPC error is only
//! returned for an RPC gpufleet does not support.

use std::sync::{Arc, RwLock};

use gpufleet_engine::{
    context::Context,
    kinds::{ActionKind, DataSourceKind, EphemeralKind, FunctionKind, ListKind, ResourceKind},
    open_handles::OpenHandles,
    planned_pools::PlannedPools,
    planned_releases::PlannedReleases,
    planned_virtual_clusters::PlannedVirtualClusters,
    provider_config::ProviderSettings,
    registry,
};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming, codegen::BoxStream};

use crate::{proto::tfplugin6 as pb, rpc};

/// The kinds a server offers; the engine's registry in production, more in protocol tests.
#[derive(Clone)]
pub struct Kinds {
    /// Managed resource types.
    pub resources: Vec<&'static dyn ResourceKind>,
    /// Data source types.
    pub data_sources: Vec<&'static dyn DataSourceKind>,
    /// Ephemeral resource types.
    pub ephemeral_resources: Vec<&'static dyn EphemeralKind>,
    /// List resources.
    pub list_resources: Vec<&'static dyn ListKind>,
    /// Actions.
    pub actions: Vec<&'static dyn ActionKind>,
    /// Functions.
    pub functions: Vec<&'static dyn FunctionKind>,
}

impl Default for Kinds {
    fn default() -> Kinds {
        Kinds {
            resources: registry::RESOURCES.to_vec(),
            data_sources: registry::DATA_SOURCES.to_vec(),
            ephemeral_resources: registry::EPHEMERAL_RESOURCES.to_vec(),
            list_resources: registry::LIST_RESOURCES.to_vec(),
            actions: registry::ACTIONS.to_vec(),
            functions: registry::FUNCTIONS.to_vec(),
        }
    }
}

impl std::fmt::Debug for Kinds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kinds")
            .field(
                "resources",
                &self
                    .resources
                    .iter()
                    .map(|r| r.type_name())
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl Kinds {
    /// A resource type by name.
    pub fn resource(&self, name: &str) -> Option<&'static dyn ResourceKind> {
        self.resources
            .iter()
            .copied()
            .find(|r| r.type_name() == name)
    }

    /// A data source type by name.
    pub fn data_source(&self, name: &str) -> Option<&'static dyn DataSourceKind> {
        self.data_sources
            .iter()
            .copied()
            .find(|d| d.type_name() == name)
    }

    /// An ephemeral resource type by name.
    pub fn ephemeral_resource(&self, name: &str) -> Option<&'static dyn EphemeralKind> {
        self.ephemeral_resources
            .iter()
            .copied()
            .find(|e| e.type_name() == name)
    }

    /// A list resource type by name.
    pub fn list_resource(&self, name: &str) -> Option<&'static dyn ListKind> {
        self.list_resources
            .iter()
            .copied()
            .find(|l| l.type_name() == name)
    }

    /// An action type by name.
    pub fn action(&self, name: &str) -> Option<&'static dyn ActionKind> {
        self.actions.iter().copied().find(|a| a.type_name() == name)
    }

    /// A function by name.
    pub fn function(&self, name: &str) -> Option<&'static dyn FunctionKind> {
        self.functions.iter().copied().find(|f| f.name() == name)
    }
}

/// State shared by all RPCs of one provider process.
#[derive(Debug)]
pub struct Shared {
    /// What is served.
    pub kinds: Kinds,
    /// Settings from ConfigureProvider; defaults until then.
    pub settings: RwLock<Arc<ProviderSettings>>,
    /// Cancelled by StopProvider: in-flight operations give up, the server keeps running.
    pub cancel: CancellationToken,
    /// What ephemeral resources hold open; dropped, and so closed, with the process.
    pub handles: Arc<OpenHandles>,
    /// What this run has planned for virtual clusters and not yet applied.
    pub virtual_clusters: Arc<PlannedVirtualClusters>,
    /// What this run has planned for node pools and not yet applied.
    pub pools: Arc<PlannedPools>,
    /// What the replacements this run plans release first.
    pub releases: Arc<PlannedReleases>,
}

impl Shared {
    /// The context operations run with.
    pub fn context(&self) -> Context {
        let settings = match self.settings.read() {
            Ok(s) => Arc::clone(&s),
            // A panic elsewhere while holding the lock leaves valid settings behind.
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        };
        Context {
            settings,
            cancel: self.cancel.clone(),
            handles: Arc::clone(&self.handles),
            virtual_clusters: Arc::clone(&self.virtual_clusters),
            pools: Arc::clone(&self.pools),
            releases: Arc::clone(&self.releases),
        }
    }
}

/// The tfplugin6 provider service.
#[derive(Debug, Clone)]
pub struct ProviderService {
    shared: Arc<Shared>,
}

impl ProviderService {
    /// Serves the engine's registry.
    pub fn new(_shutdown: CancellationToken) -> ProviderService {
        ProviderService::with_kinds(Kinds::default())
    }

    /// Serves the given kinds.
    pub fn with_kinds(kinds: Kinds) -> ProviderService {
        ProviderService {
            shared: Arc::new(Shared {
                kinds,
                settings: RwLock::new(Arc::new(ProviderSettings::default())),
                cancel: CancellationToken::new(),
                handles: Arc::default(),
                virtual_clusters: Arc::default(),
                pools: Arc::default(),
                releases: Arc::default(),
            }),
        }
    }
}

fn unsupported<T>(rpc: &str) -> Result<Response<T>, Status> {
    Err(Status::unimplemented(format!(
        "{rpc} is not supported by gpufleet"
    )))
}

macro_rules! handle {
    ($self:ident, $req:ident, $module:ident) => {{
        let started = std::time::Instant::now();
        let resp = rpc::$module::handle(&$self.shared, $req.into_inner()).await;
        tracing::debug!(
            rpc = stringify!($module),
            elapsed_us = started.elapsed().as_micros() as u64,
            "rpc served"
        );
        Ok(Response::new(resp))
    }};
}

#[tonic::async_trait]
impl pb::provider_server::Provider for ProviderService {
    async fn get_metadata(
        &self,
        req: Request<pb::get_metadata::Request>,
    ) -> Result<Response<pb::get_metadata::Response>, Status> {
        handle!(self, req, get_metadata)
    }

    async fn get_provider_schema(
        &self,
        req: Request<pb::get_provider_schema::Request>,
    ) -> Result<Response<pb::get_provider_schema::Response>, Status> {
        handle!(self, req, get_provider_schema)
    }

    async fn validate_provider_config(
        &self,
        req: Request<pb::validate_provider_config::Request>,
    ) -> Result<Response<pb::validate_provider_config::Response>, Status> {
        handle!(self, req, validate_provider_config)
    }

    async fn validate_resource_config(
        &self,
        req: Request<pb::validate_resource_config::Request>,
    ) -> Result<Response<pb::validate_resource_config::Response>, Status> {
        handle!(self, req, validate_resource_config)
    }

    async fn validate_data_resource_config(
        &self,
        req: Request<pb::validate_data_resource_config::Request>,
    ) -> Result<Response<pb::validate_data_resource_config::Response>, Status> {
        handle!(self, req, validate_data_resource_config)
    }

    async fn upgrade_resource_state(
        &self,
        req: Request<pb::upgrade_resource_state::Request>,
    ) -> Result<Response<pb::upgrade_resource_state::Response>, Status> {
        handle!(self, req, upgrade_resource_state)
    }

    async fn get_resource_identity_schemas(
        &self,
        req: Request<pb::get_resource_identity_schemas::Request>,
    ) -> Result<Response<pb::get_resource_identity_schemas::Response>, Status> {
        handle!(self, req, get_resource_identity_schemas)
    }

    async fn upgrade_resource_identity(
        &self,
        req: Request<pb::upgrade_resource_identity::Request>,
    ) -> Result<Response<pb::upgrade_resource_identity::Response>, Status> {
        handle!(self, req, upgrade_resource_identity)
    }

    async fn configure_provider(
        &self,
        req: Request<pb::configure_provider::Request>,
    ) -> Result<Response<pb::configure_provider::Response>, Status> {
        handle!(self, req, configure_provider)
    }

    async fn read_resource(
        &self,
        req: Request<pb::read_resource::Request>,
    ) -> Result<Response<pb::read_resource::Response>, Status> {
        handle!(self, req, read_resource)
    }

    async fn plan_resource_change(
        &self,
        req: Request<pb::plan_resource_change::Request>,
    ) -> Result<Response<pb::plan_resource_change::Response>, Status> {
        handle!(self, req, plan_resource_change)
    }

    async fn apply_resource_change(
        &self,
        req: Request<pb::apply_resource_change::Request>,
    ) -> Result<Response<pb::apply_resource_change::Response>, Status> {
        handle!(self, req, apply_resource_change)
    }

    async fn import_resource_state(
        &self,
        req: Request<pb::import_resource_state::Request>,
    ) -> Result<Response<pb::import_resource_state::Response>, Status> {
        handle!(self, req, import_resource_state)
    }

    async fn read_data_source(
        &self,
        req: Request<pb::read_data_source::Request>,
    ) -> Result<Response<pb::read_data_source::Response>, Status> {
        handle!(self, req, read_data_source)
    }

    async fn get_functions(
        &self,
        req: Request<pb::get_functions::Request>,
    ) -> Result<Response<pb::get_functions::Response>, Status> {
        handle!(self, req, get_functions)
    }

    async fn call_function(
        &self,
        req: Request<pb::call_function::Request>,
    ) -> Result<Response<pb::call_function::Response>, Status> {
        handle!(self, req, call_function)
    }

    async fn validate_ephemeral_resource_config(
        &self,
        req: Request<pb::validate_ephemeral_resource_config::Request>,
    ) -> Result<Response<pb::validate_ephemeral_resource_config::Response>, Status> {
        handle!(self, req, validate_ephemeral_resource_config)
    }

    async fn open_ephemeral_resource(
        &self,
        req: Request<pb::open_ephemeral_resource::Request>,
    ) -> Result<Response<pb::open_ephemeral_resource::Response>, Status> {
        handle!(self, req, open_ephemeral_resource)
    }

    async fn renew_ephemeral_resource(
        &self,
        req: Request<pb::renew_ephemeral_resource::Request>,
    ) -> Result<Response<pb::renew_ephemeral_resource::Response>, Status> {
        handle!(self, req, renew_ephemeral_resource)
    }

    async fn close_ephemeral_resource(
        &self,
        req: Request<pb::close_ephemeral_resource::Request>,
    ) -> Result<Response<pb::close_ephemeral_resource::Response>, Status> {
        handle!(self, req, close_ephemeral_resource)
    }

    async fn stop_provider(
        &self,
        req: Request<pb::stop_provider::Request>,
    ) -> Result<Response<pb::stop_provider::Response>, Status> {
        handle!(self, req, stop_provider)
    }

    // Everything below is protocol that gpufleet does not offer; Terraform only calls these
    // for features a schema would have to announce.

    async fn move_resource_state(
        &self,
        _req: Request<pb::move_resource_state::Request>,
    ) -> Result<Response<pb::move_resource_state::Response>, Status> {
        unsupported("MoveResourceState")
    }

    async fn generate_resource_config(
        &self,
        _req: Request<pb::generate_resource_config::Request>,
    ) -> Result<Response<pb::generate_resource_config::Response>, Status> {
        unsupported("GenerateResourceConfig")
    }

    async fn list_resource(
        &self,
        req: Request<pb::list_resource::Request>,
    ) -> Result<Response<BoxStream<pb::list_resource::Event>>, Status> {
        let started = std::time::Instant::now();
        let events = rpc::list_resource::handle(&self.shared, req.into_inner()).await;
        tracing::debug!(
            rpc = "list_resource",
            events = events.len(),
            elapsed_us = started.elapsed().as_micros() as u64,
            "rpc served"
        );
        let stream = tokio_stream::iter(events.into_iter().map(Ok));
        Ok(Response::new(Box::pin(stream)))
    }

    async fn validate_list_resource_config(
        &self,
        req: Request<pb::validate_list_resource_config::Request>,
    ) -> Result<Response<pb::validate_list_resource_config::Response>, Status> {
        handle!(self, req, validate_list_resource_config)
    }

    async fn validate_state_store_config(
        &self,
        _req: Request<pb::validate_state_store::Request>,
    ) -> Result<Response<pb::validate_state_store::Response>, Status> {
        unsupported("ValidateStateStoreConfig")
    }

    async fn configure_state_store(
        &self,
        _req: Request<pb::configure_state_store::Request>,
    ) -> Result<Response<pb::configure_state_store::Response>, Status> {
        unsupported("ConfigureStateStore")
    }

    async fn read_state_bytes(
        &self,
        _req: Request<pb::read_state_bytes::Request>,
    ) -> Result<Response<BoxStream<pb::read_state_bytes::Response>>, Status> {
        unsupported("ReadStateBytes")
    }

    async fn write_state_bytes(
        &self,
        _req: Request<Streaming<pb::write_state_bytes::RequestChunk>>,
    ) -> Result<Response<pb::write_state_bytes::Response>, Status> {
        unsupported("WriteStateBytes")
    }

    async fn lock_state(
        &self,
        _req: Request<pb::lock_state::Request>,
    ) -> Result<Response<pb::lock_state::Response>, Status> {
        unsupported("LockState")
    }

    async fn unlock_state(
        &self,
        _req: Request<pb::unlock_state::Request>,
    ) -> Result<Response<pb::unlock_state::Response>, Status> {
        unsupported("UnlockState")
    }

    async fn get_states(
        &self,
        _req: Request<pb::get_states::Request>,
    ) -> Result<Response<pb::get_states::Response>, Status> {
        unsupported("GetStates")
    }

    async fn delete_state(
        &self,
        _req: Request<pb::delete_state::Request>,
    ) -> Result<Response<pb::delete_state::Response>, Status> {
        unsupported("DeleteState")
    }

    async fn plan_action(
        &self,
        req: Request<pb::plan_action::Request>,
    ) -> Result<Response<pb::plan_action::Response>, Status> {
        handle!(self, req, plan_action)
    }

    async fn invoke_action(
        &self,
        req: Request<pb::invoke_action::Request>,
    ) -> Result<Response<BoxStream<pb::invoke_action::Event>>, Status> {
        let events = rpc::invoke_action::handle(&self.shared, req.into_inner());
        let stream = tokio_stream::wrappers::ReceiverStream::new(events);
        Ok(Response::new(Box::pin(tokio_stream::StreamExt::map(
            stream, Ok,
        ))))
    }

    async fn validate_action_config(
        &self,
        req: Request<pb::validate_action_config::Request>,
    ) -> Result<Response<pb::validate_action_config::Response>, Status> {
        handle!(self, req, validate_action_config)
    }
}
