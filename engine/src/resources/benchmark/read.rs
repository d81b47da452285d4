//! Refresh and import of a `gpufleet_benchmark`.
//!
//! A finished run leaves nothing on the cluster, so a refresh has nothing to observe: the
//! record is returned as stored. A record is made by a run, so there is nothing to import.

use crate::{
    diag::{Diagnostic, Diagnostics},
    kinds::ReadResponse,
    value::Value,
};

use super::TYPE_NAME;

/// The refreshed state: the record as stored.
pub(super) fn read_record(state: Value) -> ReadResponse {
    ReadResponse::observed(state)
}

/// Import is refused: the record is of a run made by Terraform.
pub(super) fn import_refused(id: &str) -> Diagnostics {
    Diagnostic::error(
        "Import Not Supported",
        format!(
            "{TYPE_NAME} is the record of a run made by Terraform and cannot be imported \
             ({id:?}); declare it and apply to run it."
        ),
    )
    .into()
}
