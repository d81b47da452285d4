//! Signatures of provider-defined functions.

use super::FieldDocs;
use crate::value::Type;

/// One positional parameter of a function.
#[derive(Debug, Clone)]
pub struct Parameter {
    /// Its name, for docs and error messages.
    pub name: &'static str,
    /// Its type.
    pub ty: Type,
    /// Whether null may be passed.
    pub allow_null: bool,
    /// Whether an unknown value may be passed (otherwise Terraform returns unknown itself).
    pub allow_unknown: bool,
    /// Markdown description.
    pub description: &'static str,
}

impl Parameter {
    /// A parameter that must be known and non-null.
    pub fn new(name: &'static str, ty: Type, description: &'static str) -> Parameter {
        Parameter {
            name,
            ty,
            allow_null: false,
            allow_unknown: false,
            description,
        }
    }
}

/// The signature and docs of a function.
#[derive(Debug, Clone)]
pub struct FunctionSignature {
    /// Positional parameters.
    pub parameters: Vec<Parameter>,
    /// A trailing variadic parameter, if any.
    pub variadic: Option<Parameter>,
    /// The result type.
    pub return_type: Type,
    /// Descriptions of the fields of the objects in the result.
    pub return_docs: FieldDocs,
    /// One-line summary.
    pub summary: &'static str,
    /// Markdown description.
    pub description: &'static str,
}
