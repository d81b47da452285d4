//! The validator interface. Concrete validators live in `crate::validate`.

use std::fmt::Debug;

use crate::{diag::Diagnostics, path::AttrPath, value::Value};

/// A check on one attribute's known, non-null value, run offline at validate time.
///
/// Validators are never given null or unknown values: an unknown value cannot be judged yet,
/// and whether null is allowed is the attribute mode's business.
pub trait Validator: Debug + Send + Sync {
    /// A markdown sentence for the docs ("Must be between 1 and 4094.").
    fn description(&self) -> String;

    /// Whether an attribute's own description `prose` already says all that
    /// [`description`](Validator::description) would, so that it is not appended again.
    fn stated_in(&self, prose: &str) -> bool {
        let _ = prose;
        false
    }

    /// Appends a diagnostic at `path` for each problem with `value`.
    fn validate(&self, path: &AttrPath, value: &Value, diags: &mut Diagnostics);
}
