//! Attribute paths: where in a configuration a diagnostic points.

use std::fmt;

/// One step into a value.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PathStep {
    /// An object attribute or nested block by name.
    Attr(String),
    /// A map element by key.
    Key(String),
    /// A list or tuple element by index.
    Index(i64),
}

/// A path from the root of a resource's configuration to one attribute or element.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AttrPath(pub Vec<PathStep>);

impl AttrPath {
    /// The root path (the whole object).
    pub fn root() -> AttrPath {
        AttrPath(Vec::new())
    }

    /// A path to a top-level attribute.
    pub fn attr(name: impl Into<String>) -> AttrPath {
        AttrPath(vec![PathStep::Attr(name.into())])
    }

    /// This path extended by an attribute step.
    #[must_use]
    pub fn push_attr(&self, name: impl Into<String>) -> AttrPath {
        self.with(PathStep::Attr(name.into()))
    }

    /// This path extended by a map key step.
    #[must_use]
    pub fn push_key(&self, key: impl Into<String>) -> AttrPath {
        self.with(PathStep::Key(key.into()))
    }

    /// This path extended by a list index step.
    #[must_use]
    pub fn push_index(&self, index: usize) -> AttrPath {
        self.with(PathStep::Index(i64::try_from(index).unwrap_or(i64::MAX)))
    }

    fn with(&self, step: PathStep) -> AttrPath {
        let mut steps = self.0.clone();
        steps.push(step);
        AttrPath(steps)
    }

    /// Whether this is the root path.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for AttrPath {
    /// Renders the path the way Terraform writes references: `a.b["k"][0]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, step) in self.0.iter().enumerate() {
            match step {
                PathStep::Attr(name) if i == 0 => f.write_str(name)?,
                PathStep::Attr(name) => write!(f, ".{name}")?,
                PathStep::Key(key) => write!(f, "[{key:?}]")?,
                PathStep::Index(idx) => write!(f, "[{idx}]")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_like_terraform() {
        let p = AttrPath::attr("sharing")
            .push_attr("mig_config")
            .push_key("gpu-0")
            .push_index(2);
        assert_eq!(p.to_string(), "sharing.mig_config[\"gpu-0\"][2]");
    }
}
