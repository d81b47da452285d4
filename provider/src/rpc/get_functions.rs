//! GetFunctions: the signatures of provider-defined functions.

use crate::{convert, proto::tfplugin6 as pb, server::Shared};

pub(crate) async fn handle(
    shared: &Shared,
    _req: pb::get_functions::Request,
) -> pb::get_functions::Response {
    pb::get_functions::Response {
        functions: shared
            .kinds
            .functions
            .iter()
            .map(|f| (f.name().to_owned(), convert::function(&f.signature())))
            .collect(),
        diagnostics: Vec::new(),
    }
}
