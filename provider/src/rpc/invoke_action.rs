//! InvokeAction: runs the action in a task of its own and streams what it reports as
//! progress events, as they happen, then one completed event with how it ended.

use std::sync::Arc;

use gpufleet_engine::diag::Diagnostics;
use tokio::sync::mpsc;

use crate::{convert, proto::tfplugin6 as pb, server::Shared};

/// Events buffered before the action waits for Terraform to read them.
const EVENT_BUFFER: usize = 16;

pub(crate) fn handle(
    shared: &Arc<Shared>,
    req: pb::invoke_action::Request,
) -> mpsc::Receiver<pb::invoke_action::Event> {
    let (tx, rx) = mpsc::channel(EVENT_BUFFER);
    let shared = Arc::clone(shared);
    tokio::spawn(async move {
        let diagnostics = invoke(&shared, &req, &tx).await;
        let completed = pb::invoke_action::Event {
            r#type: Some(pb::invoke_action::event::Type::Completed(
                pb::invoke_action::event::Completed {
                    diagnostics: convert::diagnostics(&diagnostics),
                },
            )),
        };
        // Terraform may have gone; nobody is left to tell.
        let _ = tx.send(completed).await;
    });
    rx
}

async fn invoke(
    shared: &Shared,
    req: &pb::invoke_action::Request,
    tx: &mpsc::Sender<pb::invoke_action::Event>,
) -> Diagnostics {
    let kind = match super::action(shared, &req.action_type) {
        Ok(k) => k,
        Err(d) => return d.into(),
    };
    let (config, mut diags) = match super::action_config(kind, req.config.as_ref()) {
        Ok(checked) => checked,
        Err(d) => return d.into(),
    };
    let ctx = shared.context();
    diags.extend(ctx.settings.check_needed(&req.action_type, &config));
    if diags.has_error() {
        return diags;
    }
    if !config.is_wholly_known() {
        diags.push(gpufleet_engine::diag::Diagnostic::error(
            "Action Configuration Not Known",
            format!(
                "{} was invoked with values that are not known yet. This is a bug in \
                 Terraform or gpufleet.",
                req.action_type
            ),
        ));
        return diags;
    }
    let report = |message: String| {
        tracing::info!(action = %req.action_type, "{message}");
        // A full buffer means Terraform reads slowly; progress is worth dropping, not
        // waiting for.
        let _ = tx.try_send(pb::invoke_action::Event {
            r#type: Some(pb::invoke_action::event::Type::Progress(
                pb::invoke_action::event::Progress { message },
            )),
        });
    };
    diags.extend(kind.invoke(&ctx, config, &report).await);
    diags
}
