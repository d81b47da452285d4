//! Engine diagnostics and paths to tfplugin6 ones.

use gpufleet_engine::{
    diag::{Diagnostic, Diagnostics, Severity},
    path::{AttrPath, PathStep},
};

use crate::proto::tfplugin6 as pb;

/// An engine path as a tfplugin6 attribute path.
pub fn attribute_path(path: &AttrPath) -> pb::AttributePath {
    use pb::attribute_path::{Step, step::Selector};
    pb::AttributePath {
        steps: path
            .0
            .iter()
            .map(|s| Step {
                selector: Some(match s {
                    PathStep::Attr(n) => Selector::AttributeName(n.clone()),
                    PathStep::Key(k) => Selector::ElementKeyString(k.clone()),
                    PathStep::Index(i) => Selector::ElementKeyInt(*i),
                }),
            })
            .collect(),
    }
}

/// One engine diagnostic as a tfplugin6 one. A root path is sent as no path, since Terraform
/// would otherwise point at the whole block for what is a general problem.
pub fn diagnostic(d: &Diagnostic) -> pb::Diagnostic {
    pb::Diagnostic {
        severity: match d.severity {
            Severity::Error => pb::diagnostic::Severity::Error,
            Severity::Warning => pb::diagnostic::Severity::Warning,
        } as i32,
        summary: d.summary.clone(),
        detail: d.detail.clone(),
        attribute: d.path.as_ref().filter(|p| !p.is_root()).map(attribute_path),
    }
}

/// Engine diagnostics as tfplugin6 ones.
pub fn diagnostics(ds: &Diagnostics) -> Vec<pb::Diagnostic> {
    ds.iter().map(diagnostic).collect()
}
