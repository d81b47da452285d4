//! Diagnostics: how the engine reports problems to the user.
//!
//! Validation collects every problem before returning, so a user fixes a configuration in one
//! pass; apply may stop at the first error. A diagnostic with a path is shown by Terraform on
//! the offending line of configuration.

use crate::path::AttrPath;

/// How serious a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Severity {
    /// The operation failed.
    Error,
    /// The operation went on, but the user should look.
    Warning,
}

/// One problem, with a short title-style summary and an actionable detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// A short, title-case summary ("Unknown GPU Product").
    pub summary: String,
    /// What is wrong and what to do about it.
    pub detail: String,
    /// The attribute the problem is about, if any.
    pub path: Option<AttrPath>,
}

impl Diagnostic {
    /// An error without a path.
    pub fn error(summary: impl Into<String>, detail: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            summary: summary.into(),
            detail: detail.into(),
            path: None,
        }
    }

    /// A warning without a path.
    pub fn warning(summary: impl Into<String>, detail: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(summary, detail)
        }
    }

    /// This diagnostic, pointed at an attribute.
    #[must_use]
    pub fn with_path(mut self, path: AttrPath) -> Diagnostic {
        self.path = Some(path);
        self
    }
}

/// An ordered collection of diagnostics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    /// No diagnostics.
    pub fn new() -> Diagnostics {
        Diagnostics::default()
    }

    /// Adds one diagnostic.
    pub fn push(&mut self, d: Diagnostic) {
        self.0.push(d);
    }

    /// Adds an error pointed at `path`.
    pub fn error_at(
        &mut self,
        path: AttrPath,
        summary: impl Into<String>,
        detail: impl Into<String>,
    ) {
        self.push(Diagnostic::error(summary, detail).with_path(path));
    }

    /// Adds all of `other`.
    pub fn extend(&mut self, other: Diagnostics) {
        self.0.extend(other.0);
    }

    /// Whether any diagnostic is an error.
    pub fn has_error(&self) -> bool {
        self.0.iter().any(|d| d.severity == Severity::Error)
    }

    /// Whether there are none at all.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Iterates over the diagnostics.
    pub fn iter(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter()
    }

    /// These diagnostics with every path moved into the block `name`, for a configuration that
    /// Terraform nests in a block of its own (a list block's filters sit in `config { }`).
    #[must_use]
    pub fn nested_in(mut self, name: &str) -> Diagnostics {
        for d in &mut self.0 {
            if let Some(path) = &mut d.path {
                path.0
                    .insert(0, crate::path::PathStep::Attr(name.to_owned()));
            }
        }
        self
    }
}

impl From<Diagnostic> for Diagnostics {
    fn from(d: Diagnostic) -> Diagnostics {
        Diagnostics(vec![d])
    }
}

impl IntoIterator for Diagnostics {
    type Item = Diagnostic;
    type IntoIter = std::vec::IntoIter<Diagnostic>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}
