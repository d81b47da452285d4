//! One module per RPC: decode the request, call the engine, encode the reply.

pub mod apply_resource_change;
pub mod call_function;
pub mod close_ephemeral_resource;
pub mod configure_provider;
pub mod get_functions;
pub mod get_metadata;
pub mod get_provider_schema;
pub mod get_resource_identity_schemas;
pub mod import_resource_state;
pub mod invoke_action;
pub mod list_resource;
pub mod open_ephemeral_resource;
pub mod plan_action;
pub mod plan_resource_change;
pub mod read_data_source;
pub mod read_resource;
pub mod renew_ephemeral_resource;
pub mod stop_provider;
pub mod upgrade_resource_identity;
pub mod upgrade_resource_state;
pub mod validate_action_config;
pub mod validate_data_resource_config;
pub mod validate_ephemeral_resource_config;
pub mod validate_list_resource_config;
pub mod validate_provider_config;
pub mod validate_resource_config;

use gpufleet_engine::{
    diag::Diagnostic,
    kinds::{ActionKind, DataSourceKind, EphemeralKind, ListKind, ResourceKind},
    value::{Type, Value},
};

use crate::{convert, proto::tfplugin6 as pb, server::Shared};

/// The diagnostic for a type name this provider does not serve.
fn unknown_type(kind: &str, name: &str) -> Diagnostic {
    Diagnostic::error(
        format!("Unknown {kind} Type"),
        format!(
            "gpufleet has no {kind} type named {name:?}. Check the name, or upgrade the provider."
        ),
    )
}

/// Looks up a resource kind or says which one is missing.
fn resource(shared: &Shared, name: &str) -> Result<&'static dyn ResourceKind, Diagnostic> {
    shared
        .kinds
        .resource(name)
        .ok_or_else(|| unknown_type("Resource", name))
}

/// A resource request's kind, its value type, and the values the request carries decoded
/// against that type, in the order given: the preamble the resource RPCs share. The first
/// value that does not decode is the error.
fn resource_values<const N: usize>(
    shared: &Shared,
    type_name: &str,
    values: [(Option<&pb::DynamicValue>, &str); N],
) -> Result<(&'static dyn ResourceKind, Type, [Value; N]), Diagnostic> {
    let kind = resource(shared, type_name)?;
    let ty = kind.schema().value_type();
    let mut failed = None;
    let decoded = values.map(|(dv, what)| {
        convert::decode(dv, &ty, what).unwrap_or_else(|d| {
            failed.get_or_insert(d);
            Value::Null
        })
    });
    match failed {
        Some(d) => Err(d),
        None => Ok((kind, ty, decoded)),
    }
}

/// Looks up a data source kind or says which one is missing.
fn data_source(shared: &Shared, name: &str) -> Result<&'static dyn DataSourceKind, Diagnostic> {
    shared
        .kinds
        .data_source(name)
        .ok_or_else(|| unknown_type("Data Source", name))
}

/// Looks up an ephemeral resource kind or says which one is missing.
fn ephemeral_resource(
    shared: &Shared,
    name: &str,
) -> Result<&'static dyn EphemeralKind, Diagnostic> {
    shared
        .kinds
        .ephemeral_resource(name)
        .ok_or_else(|| unknown_type("Ephemeral Resource", name))
}

/// Looks up an action kind or says which one is missing.
fn action(shared: &Shared, name: &str) -> Result<&'static dyn ActionKind, Diagnostic> {
    shared
        .kinds
        .action(name)
        .ok_or_else(|| unknown_type("Action", name))
}

/// An action's configuration, decoded and checked as ValidateActionConfig checks it: the
/// attribute validators and the action's own offline checks.
fn action_config(
    kind: &dyn ActionKind,
    config: Option<&pb::DynamicValue>,
) -> Result<(Value, gpufleet_engine::diag::Diagnostics), Diagnostic> {
    let schema = kind.schema();
    let config = convert::decode(config, &schema.value_type(), "action configuration")?;
    let config = schema.block.complete(&config);
    let mut diags = gpufleet_engine::validate::validate_block(&schema.block, &config);
    diags.extend(kind.validate(&config));
    Ok((config, diags))
}

/// The block of a `list` block that holds the list resource's own configuration; paths in
/// its diagnostics start there.
const LIST_CONFIG_BLOCK: &str = "config";

/// Looks up a list resource kind or says which one is missing.
fn list_resource(shared: &Shared, name: &str) -> Result<&'static dyn ListKind, Diagnostic> {
    shared
        .kinds
        .list_resource(name)
        .ok_or_else(|| unknown_type("List Resource", name))
}

/// The identity of a resource instance, derived from its state, if the type has one and the
/// identifying attributes are known (a plan may know them long before the rest).
fn identity(kind: &dyn ResourceKind, state: &Value) -> Option<pb::ResourceIdentityData> {
    let names = kind.identity_attributes();
    if names.is_empty() || state.is_null() {
        return None;
    }
    let value = Value::object(names.iter().map(|n| (*n, state.get(n).clone())));
    if !value.is_wholly_known() {
        return None;
    }
    convert::encode(&value, &identity_type(kind), "resource identity")
        .ok()
        .map(|dv| pb::ResourceIdentityData {
            identity_data: Some(dv),
        })
}

/// The object type of a resource's identity.
fn identity_type(kind: &dyn ResourceKind) -> gpufleet_engine::value::Type {
    let schema = kind.schema();
    gpufleet_engine::value::Type::object(kind.identity_attributes().iter().filter_map(|n| {
        schema
            .block
            .attribute(n)
            .map(|a| ((*n).to_owned(), a.value_type()))
    }))
}
