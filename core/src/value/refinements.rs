//! What is already known about an unknown value ("refined unknowns").
//!
//! Terraform may tell a provider that a value it cannot know yet is at least not null, starts
//! with a prefix, lies within number bounds or has a length within bounds. A provider may pass
//! such refinements on, but whatever it promises at plan time must still hold after apply.

use bigdecimal::BigDecimal;

/// One end of a number range.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NumberBound {
    /// The bound itself.
    pub value: BigDecimal,
    /// Whether the bound is part of the range.
    pub inclusive: bool,
}

/// Refinements of an unknown value. The default is "nothing known".
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Refinements {
    /// The value is definitely not null.
    pub not_null: bool,
    /// A string value starts with this.
    pub string_prefix: Option<String>,
    /// A number value is at least (or above) this.
    pub number_lower: Option<NumberBound>,
    /// A number value is at most (or below) this.
    pub number_upper: Option<NumberBound>,
    /// A collection has at least this many elements.
    pub length_lower: Option<u64>,
    /// A collection has at most this many elements.
    pub length_upper: Option<u64>,
}

impl Refinements {
    /// Whether nothing at all is known, so the unknown must be encoded without refinements.
    pub fn is_empty(&self) -> bool {
        *self == Refinements::default()
    }
}
