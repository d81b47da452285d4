//! StopProvider: cancel in-flight work (the user pressed Ctrl-C). The server keeps running;
//! Terraform still needs it to record what was achieved.

use crate::{proto::tfplugin6 as pb, server::Shared};

pub(crate) async fn handle(
    shared: &Shared,
    _req: pb::stop_provider::Request,
) -> pb::stop_provider::Response {
    tracing::info!("stop requested: cancelling in-flight operations");
    shared.cancel.cancel();
    pb::stop_provider::Response::default()
}
