//! The one error every suite parser returns.

use std::fmt;

/// Why a benchmark log could not be read: the suite, the 1-based line of the log when one
/// line is to blame, and what was wrong with it.
///
/// Displayed as `cannot read nccl-all-reduce output (line 42): …`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ParseError {
    /// The suite whose parser failed.
    pub suite: &'static str,
    /// The 1-based line of the log at fault, if one is.
    pub line: Option<usize>,
    /// What was wrong, in lowercase prose.
    pub message: String,
}

impl ParseError {
    /// An error about the log as a whole.
    pub(crate) fn whole(suite: &'static str, message: impl Into<String>) -> ParseError {
        ParseError {
            suite,
            line: None,
            message: message.into(),
        }
    }

    /// An error about one line of the log.
    pub(crate) fn at(suite: &'static str, line: usize, message: impl Into<String>) -> ParseError {
        ParseError {
            suite,
            line: Some(line),
            message: message.into(),
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(
                f,
                "cannot read {} output (line {line}): {}",
                self.suite, self.message
            ),
            None => write!(f, "cannot read {} output: {}", self.suite, self.message),
        }
    }
}
