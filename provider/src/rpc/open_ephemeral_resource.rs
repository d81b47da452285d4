//! OpenEphemeralResource: validate, open, and insist on a wholly known result that keeps the
//! configuration, as Terraform does, unless the kind says its values cannot be known yet
//! (then every computed attribute is unknown).
//!
//! Terraform opens an ephemeral resource only once its configuration is wholly known (at plan
//! time it skips the call and treats the result as unknown). A client that asks earlier is
//! told to defer when it allows deferrals, and gets an error on the unknown attributes
//! otherwise; nothing is opened either way.

use gpufleet_engine::{
    diag::{Diagnostic, Diagnostics},
    kinds::EphemeralKind,
    path::AttrPath,
    schema::Schema,
    validate,
    value::Value,
};

use crate::{convert, proto::tfplugin6 as pb, server::Shared};

pub(crate) async fn handle(
    shared: &Shared,
    req: pb::open_ephemeral_resource::Request,
) -> pb::open_ephemeral_resource::Response {
    let mut resp = pb::open_ephemeral_resource::Response::default();
    let kind = match super::ephemeral_resource(shared, &req.type_name) {
        Ok(k) => k,
        Err(d) => {
            resp.diagnostics.push(convert::diagnostic(&d));
            return resp;
        }
    };
    let schema = kind.schema();
    let ty = schema.value_type();
    let config = match convert::decode(req.config.as_ref(), &ty, "configuration") {
        Ok(c) => c,
        Err(d) => {
            resp.diagnostics.push(convert::diagnostic(&d));
            return resp;
        }
    };
    if !config.is_wholly_known() {
        let deferral_allowed = req
            .client_capabilities
            .as_ref()
            .is_some_and(|c| c.deferral_allowed);
        if deferral_allowed {
            resp.deferred = Some(pb::Deferred {
                reason: pb::deferred::Reason::ResourceConfigUnknown.into(),
            });
            match convert::encode(&unknown_result(&schema, &config), &ty, "deferred result") {
                Ok(dv) => resp.result = Some(dv),
                Err(d) => resp.diagnostics.push(convert::diagnostic(&d)),
            }
        } else {
            resp.diagnostics = convert::diagnostics(&unknown_config(&req.type_name, &config));
        }
        return resp;
    }
    let mut checks = validate::validate_block(&schema.block, &config);
    checks.extend(kind.validate(&config));
    if checks.has_error() {
        resp.diagnostics = convert::diagnostics(&checks);
        return resp;
    }

    let ctx = shared.context();
    let opened = kind.open(&ctx, config.clone()).await;
    resp.diagnostics = convert::diagnostics(&opened.diagnostics);
    if opened.diagnostics.has_error() {
        return resp;
    }
    let encoded = if opened.result.is_unknown() && opened.private.is_none() {
        // Not yet known (`OpenResponse::not_yet_known`): what Terraform itself plans for an
        // ephemeral resource it cannot open yet.
        convert::encode(
            &unknown_result(&schema, &config),
            &ty,
            "ephemeral resource result",
        )
    } else if opened.result.is_null() || !opened.result.is_wholly_known() {
        Err(Diagnostic::error(
            "Incomplete Ephemeral Resource Result",
            format!(
                "{} returned a result that is not wholly known. This is a bug in gpufleet.",
                req.type_name
            ),
        ))
    } else {
        convert::encode(&opened.result, &ty, "ephemeral resource result")
    };
    match encoded {
        Ok(dv) => {
            resp.result = Some(dv);
            resp.private = opened.private;
            resp.renew_at = opened.renew_at.map(prost_types::Timestamp::from);
        }
        Err(d) => {
            // Terraform will not close what it never got: release it here.
            close_unreturned(kind, &ctx, opened.private.as_deref()).await;
            resp.diagnostics.push(convert::diagnostic(&d));
        }
    }
    resp
}

/// The result of a deferred open: the configuration as written, every computed attribute
/// unknown.
fn unknown_result(schema: &Schema, config: &Value) -> Value {
    let mut result = config.clone();
    for attr in &schema.block.attributes {
        if attr.mode.is_computed() && config.get(attr.name).is_null() {
            result.set_attr(attr.name, Value::unknown());
        }
    }
    result
}

/// One error per attribute whose value is not known yet.
fn unknown_config(type_name: &str, config: &Value) -> Diagnostics {
    let mut diags = Diagnostics::new();
    let unknown = config
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, v)| !v.is_wholly_known());
    for (name, _) in unknown {
        diags.push(
            Diagnostic::error(
                "Ephemeral Resource Configuration Unknown",
                format!(
                    "{type_name} can only be opened once {name} is known. Terraform opens \
                     ephemeral resources only with a known configuration; apply what {name} \
                     depends on first."
                ),
            )
            .with_path(AttrPath::attr(name)),
        );
    }
    if diags.is_empty() {
        diags.push(Diagnostic::error(
            "Ephemeral Resource Configuration Unknown",
            format!("{type_name} can only be opened once its configuration is known."),
        ));
    }
    diags
}

async fn close_unreturned(
    kind: &dyn EphemeralKind,
    ctx: &gpufleet_engine::context::Context,
    private: Option<&[u8]>,
) {
    let diags = kind.close(ctx, private).await;
    if diags.has_error() {
        tracing::warn!(
            "closing an ephemeral resource whose result could not be returned failed: {}",
            diags
                .iter()
                .map(|d| d.summary.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
}
