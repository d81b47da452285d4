//! ListResource: what a `list` block of `terraform query` finds, one event per object, each
//! with the identity an import block takes and, when asked, the object as a read records it.
//! Problems travel in a last event of their own (without an identity, as Terraform expects).

use gpufleet_engine::{
    diag::{Diagnostic, Diagnostics},
    kinds::{ListKind, ListRequest, ResourceKind},
    validate,
};

use crate::{convert, proto::tfplugin6 as pb, server::Shared};

pub(crate) async fn handle(
    shared: &Shared,
    req: pb::list_resource::Request,
) -> Vec<pb::list_resource::Event> {
    let mut events = Vec::new();
    // Either way, what went wrong is reported after what was found.
    let diagnostics = list(shared, &req, &mut events)
        .await
        .unwrap_or_else(|stopped| stopped);
    if !diagnostics.is_empty() {
        events.push(pb::list_resource::Event {
            diagnostic: convert::diagnostics(&diagnostics),
            ..Default::default()
        });
    }
    events
}

/// Fills `events` with the results; returns the problems to report after them.
async fn list(
    shared: &Shared,
    req: &pb::list_resource::Request,
    events: &mut Vec<pb::list_resource::Event>,
) -> Result<Diagnostics, Diagnostics> {
    let (lister, resource) = kinds(shared, &req.type_name)?;
    let schema = lister.schema();
    let config = convert::decode(req.config.as_ref(), &schema.value_type(), "configuration")?;
    // A list block without `config` lists everything: every filter null.
    let config = schema.block.complete(&config);
    let mut diags = validate::validate_block(&schema.block, &config);
    diags.extend(lister.validate(&config));
    let mut diags = diags.nested_in(super::LIST_CONFIG_BLOCK);
    let ctx = shared.context();
    diags.extend(ctx.settings.check_needed(&req.type_name, &config));
    if diags.has_error() {
        return Err(diags);
    }
    let found = lister
        .list(
            &ctx,
            ListRequest {
                config,
                include_resource: req.include_resource_object,
                limit: usize::try_from(req.limit).unwrap_or(0),
            },
        )
        .await;
    diags.extend(found.diagnostics);
    let state_type = resource.schema().value_type();
    for listed in found.results {
        let Some(identity) = super::identity(resource, &listed.state) else {
            diags.push(Diagnostic::error(
                "Incomplete List Result",
                format!(
                    "{} found {:?} without the attributes that identify it. This is a bug in \
                     gpufleet.",
                    req.type_name, listed.display_name
                ),
            ));
            break;
        };
        let resource_object = if req.include_resource_object {
            Some(convert::encode(
                &listed.state,
                &state_type,
                "listed resource",
            )?)
        } else {
            None
        };
        events.push(pb::list_resource::Event {
            identity: Some(identity),
            display_name: listed.display_name,
            resource_object,
            diagnostic: Vec::new(),
        });
    }
    Ok(diags)
}

/// The list resource kind and the managed resource kind of the same name, whose schema and
/// identity the results take.
fn kinds(
    shared: &Shared,
    name: &str,
) -> Result<(&'static dyn ListKind, &'static dyn ResourceKind), Diagnostic> {
    let lister = super::list_resource(shared, name)?;
    let resource = super::resource(shared, name)?;
    Ok((lister, resource))
}
