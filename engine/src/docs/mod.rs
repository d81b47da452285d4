//! The Terraform Registry docs, generated from the schemas so they can never drift from the
//! code.
//!
//! [`render_all`] renders one markdown page per entry of [`crate::registry`] plus the provider
//! page (which lists them all), in the layout `tfplugindocs` produces and the Registry expects:
//!
//! | Page                          | Example it embeds (under `examples/`)          |
//! |-------------------------------|------------------------------------------------|
//! | `index.md`                    | `provider/provider.tf`                         |
//! | `resources/<short name>.md`   | `resources/<type>/resource.tf` (+ `import.sh`) |
//! | `data-sources/<short name>.md`| `data-sources/<type>/data-source.tf`           |
//! | `ephemeral-resources/<short name>.md` | `ephemeral-resources/<type>/ephemeral-resource.tf` |
//! | `list-resources/<short name>.md` | `list-resources/<type>/list-resource.tfquery.hcl` |
//! | `actions/<short name>.md`     | `actions/<type>/action.tf`                     |
//! | `functions/<name>.md`         | `functions/<name>/function.tf`                 |
//!
//! `<short name>` is the type name without [`TYPE_PREFIX`]. Every page must show an example,
//! so a missing example file is an error naming the files to write. The module does no I/O
//! besides reading those example files; the `gpufleet-docs` binary writes the pages.

mod audit;
mod check;
mod claims;
mod code_span;
mod pages;
mod schema_md;

use std::{
    collections::BTreeMap,
    io,
    path::{Path, PathBuf},
};

pub use audit::restatements;
pub use check::{STALE_MESSAGE, stale_report};
pub use claims::{GuideChecker, GuideContext, GuideReport};

use crate::{
    provider_config,
    registry::{self, TYPE_PREFIX},
    schema::{AttrType, Attribute, Block, FieldDocs},
};

/// The provider's name as Terraform users write it (`provider "gpufleet"`).
pub const PROVIDER_NAME: &str = "gpufleet";

/// Subdirectories of `docs/` whose pages are all generated; anything else in them is stale.
/// (`docs/guides/` is written by hand and never touched.)
pub const GENERATED_DIRS: &[&str] = &[
    "resources",
    "data-sources",
    "ephemeral-resources",
    "list-resources",
    "actions",
    "functions",
];

/// The generated page at the root of `docs/`.
pub const INDEX_PAGE: &str = "index.md";

/// Why the docs could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum DocsError {
    /// Example files that pages embed do not exist; the docs would be incomplete.
    #[error(
        "the docs need example files that do not exist; write these under {}:\n{}",
        .examples_dir.display(),
        bullet_list(.files)
    )]
    MissingExamples {
        /// The examples directory that was searched.
        examples_dir: PathBuf,
        /// The missing files, relative to `examples_dir`.
        files: Vec<PathBuf>,
    },
    /// An example file exists but could not be read.
    #[error("cannot read example {}: {source}", .path.display())]
    Io {
        /// The file that could not be read.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

fn bullet_list(files: &[PathBuf]) -> String {
    files
        .iter()
        .map(|f| format!("  - {}", f.display()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The type name without the `gpufleet_` prefix, as used in page file names.
fn short_name(type_name: &str) -> &str {
    type_name.strip_prefix(TYPE_PREFIX).unwrap_or(type_name)
}

/// Example file of the provider page, relative to the examples directory.
pub fn provider_example() -> PathBuf {
    PathBuf::from("provider").join("provider.tf")
}

/// Example file of a resource page, relative to the examples directory.
pub fn resource_example(type_name: &str) -> PathBuf {
    PathBuf::from("resources")
        .join(type_name)
        .join("resource.tf")
}

/// Optional import example of a resource page, relative to the examples directory.
pub fn resource_import_example(type_name: &str) -> PathBuf {
    PathBuf::from("resources").join(type_name).join("import.sh")
}

/// Example file of a data source page, relative to the examples directory.
pub fn data_source_example(type_name: &str) -> PathBuf {
    PathBuf::from("data-sources")
        .join(type_name)
        .join("data-source.tf")
}

/// Example file of an ephemeral resource page, relative to the examples directory.
pub fn ephemeral_resource_example(type_name: &str) -> PathBuf {
    PathBuf::from("ephemeral-resources")
        .join(type_name)
        .join("ephemeral-resource.tf")
}

/// Example file of a list resource page, relative to the examples directory: a query file,
/// since `list` blocks live only there.
pub fn list_resource_example(type_name: &str) -> PathBuf {
    PathBuf::from("list-resources")
        .join(type_name)
        .join("list-resource.tfquery.hcl")
}

/// Example file of an action page, relative to the examples directory.
pub fn action_example(type_name: &str) -> PathBuf {
    PathBuf::from("actions").join(type_name).join("action.tf")
}

/// Example file of a function page, relative to the examples directory.
pub fn function_example(name: &str) -> PathBuf {
    PathBuf::from("functions").join(name).join("function.tf")
}

/// Every example file the docs require, relative to the examples directory.
pub fn required_examples() -> Vec<PathBuf> {
    let mut files = vec![provider_example()];
    files.extend(
        registry::RESOURCES
            .iter()
            .map(|r| resource_example(r.type_name())),
    );
    files.extend(
        registry::DATA_SOURCES
            .iter()
            .map(|d| data_source_example(d.type_name())),
    );
    files.extend(
        registry::EPHEMERAL_RESOURCES
            .iter()
            .map(|e| ephemeral_resource_example(e.type_name())),
    );
    files.extend(
        registry::LIST_RESOURCES
            .iter()
            .map(|l| list_resource_example(l.type_name())),
    );
    files.extend(
        registry::ACTIONS
            .iter()
            .map(|a| action_example(a.type_name())),
    );
    files.extend(
        registry::FUNCTIONS
            .iter()
            .map(|f| function_example(f.name())),
    );
    files
}

/// Reads example files, remembering the missing ones so that one error can list them all.
struct Examples<'a> {
    dir: &'a Path,
    missing: Vec<PathBuf>,
}

impl Examples<'_> {
    /// A required example; `None` (and remembered) when it does not exist.
    fn required(&mut self, rel: PathBuf) -> Result<Option<String>, DocsError> {
        let found = self.optional(&rel)?;
        if found.is_none() {
            self.missing.push(rel);
        }
        Ok(found)
    }

    /// An optional example; `None` when it does not exist.
    fn optional(&self, rel: &Path) -> Result<Option<String>, DocsError> {
        let path = self.dir.join(rel);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(DocsError::Io { path, source }),
        }
    }
}

/// Renders every docs page, keyed by its path relative to `docs/`.
///
/// `examples_dir` is the workspace's `examples/` directory. Fails with
/// [`DocsError::MissingExamples`] listing every required example file that does not exist.
pub fn render_all(examples_dir: &Path) -> Result<BTreeMap<PathBuf, String>, DocsError> {
    let mut ex = Examples {
        dir: examples_dir,
        missing: Vec::new(),
    };
    let mut out = BTreeMap::new();

    let example = ex.required(provider_example())?;
    out.insert(
        PathBuf::from(INDEX_PAGE),
        pages::provider(&provider_config::schema(), example.as_deref()),
    );

    for r in registry::RESOURCES {
        let name = r.type_name();
        let example = ex.required(resource_example(name))?;
        let import = ex.optional(&resource_import_example(name))?;
        let mut sections = r.docs_sections();
        if let Some(checks) = crate::plan::backend_facts::docs_section(name) {
            sections.push(("Checked At Plan Against The Backend", checks));
        }
        let page = pages::resource(
            name,
            &r.schema(),
            example.as_deref(),
            &sections,
            import.as_deref(),
        );
        out.insert(
            Path::new("resources").join(format!("{}.md", short_name(name))),
            page,
        );
    }

    for d in registry::DATA_SOURCES {
        let name = d.type_name();
        let example = ex.required(data_source_example(name))?;
        out.insert(
            Path::new("data-sources").join(format!("{}.md", short_name(name))),
            pages::data_source(name, &d.schema(), example.as_deref()),
        );
    }

    for e in registry::EPHEMERAL_RESOURCES {
        let name = e.type_name();
        let example = ex.required(ephemeral_resource_example(name))?;
        out.insert(
            Path::new("ephemeral-resources").join(format!("{}.md", short_name(name))),
            pages::ephemeral_resource(name, &e.schema(), example.as_deref()),
        );
    }

    for l in registry::LIST_RESOURCES {
        let name = l.type_name();
        let example = ex.required(list_resource_example(name))?;
        out.insert(
            Path::new("list-resources").join(format!("{}.md", short_name(name))),
            pages::list_resource(name, &l.schema(), example.as_deref()),
        );
    }

    for a in registry::ACTIONS {
        let name = a.type_name();
        let example = ex.required(action_example(name))?;
        out.insert(
            Path::new("actions").join(format!("{}.md", short_name(name))),
            pages::action(name, &a.schema(), example.as_deref()),
        );
    }

    for f in registry::FUNCTIONS {
        let name = f.name();
        let example = ex.required(function_example(name))?;
        out.insert(
            Path::new("functions").join(format!("{name}.md")),
            pages::function(name, &f.signature(), example.as_deref()),
        );
    }

    if ex.missing.is_empty() {
        Ok(out)
    } else {
        Err(DocsError::MissingExamples {
            examples_dir: examples_dir.to_path_buf(),
            files: ex.missing,
        })
    }
}

/// Every description the docs would show empty: attributes, nested attributes, blocks and the
/// fields of object-typed attributes of the provider, every resource, data source and
/// ephemeral resource (as `<where>: <path>`), and every function's summary, description,
/// parameters and result fields. A field description for a field that does not exist is
/// listed too, so that descriptions cannot outlive their fields.
pub fn missing_descriptions() -> Vec<String> {
    let mut missing = Vec::new();
    block_missing(
        "provider",
        "",
        &provider_config::schema().block,
        &mut missing,
    );
    for r in registry::RESOURCES {
        let at = format!("resource {}", r.type_name());
        block_missing(&at, "", &r.schema().block, &mut missing);
    }
    for d in registry::DATA_SOURCES {
        let at = format!("data source {}", d.type_name());
        block_missing(&at, "", &d.schema().block, &mut missing);
    }
    for e in registry::EPHEMERAL_RESOURCES {
        let at = format!("ephemeral resource {}", e.type_name());
        block_missing(&at, "", &e.schema().block, &mut missing);
    }
    for l in registry::LIST_RESOURCES {
        let at = format!("list resource {}", l.type_name());
        block_missing(&at, "", &l.schema().block, &mut missing);
    }
    for a in registry::ACTIONS {
        let at = format!("action {}", a.type_name());
        block_missing(&at, "", &a.schema().block, &mut missing);
    }
    for f in registry::FUNCTIONS {
        let sig = f.signature();
        let at = format!("function {}", f.name());
        if sig.summary.trim().is_empty() {
            missing.push(format!("{at}: (summary)"));
        }
        if sig.description.trim().is_empty() {
            missing.push(format!("{at}: (description)"));
        }
        for p in sig.parameters.iter().chain(&sig.variadic) {
            if p.description.trim().is_empty() {
                missing.push(format!("{at}: parameter {}", p.name));
            }
        }
        fields_missing(
            &at,
            "result",
            &sig.return_type,
            &sig.return_docs,
            &mut missing,
        );
    }
    missing
}

/// The fields of the objects in `ty` that `docs` leaves undescribed, and the paths `docs`
/// describes that `ty` does not have.
fn fields_missing(
    at: &str,
    path: &str,
    ty: &crate::value::Type,
    docs: &FieldDocs,
    missing: &mut Vec<String>,
) {
    let fields = FieldDocs::field_paths(ty);
    for f in &fields {
        if docs.get(f).trim().is_empty() {
            missing.push(format!("{at}: {}", join(path, f)));
        }
    }
    for d in docs.paths().filter(|d| !fields.iter().any(|f| f == d)) {
        missing.push(format!(
            "{at}: {} (described, but no such field)",
            join(path, d)
        ));
    }
}

fn block_missing(at: &str, prefix: &str, block: &Block, missing: &mut Vec<String>) {
    if block.description.trim().is_empty() {
        let what = if prefix.is_empty() {
            "(description)"
        } else {
            prefix
        };
        missing.push(format!("{at}: {what}"));
    }
    attrs_missing(at, prefix, &block.attributes, missing);
    for b in &block.blocks {
        block_missing(at, &join(prefix, b.type_name), &b.block, missing);
    }
}

fn attrs_missing(at: &str, prefix: &str, attrs: &[Attribute], missing: &mut Vec<String>) {
    for a in attrs {
        let path = join(prefix, a.name);
        if a.description.trim().is_empty() {
            missing.push(format!("{at}: {path}"));
        }
        match &a.ty {
            AttrType::Nested { attributes, .. } => attrs_missing(at, &path, attributes, missing),
            AttrType::Plain(ty) => fields_missing(at, &path, ty, &a.field_docs, missing),
        }
    }
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}.{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_examples_are_all_listed() {
        let dir = std::env::temp_dir().join("gpufleet-docs-no-examples-here");
        let err = render_all(&dir).expect_err("no examples");
        let text = err.to_string();
        for f in required_examples() {
            assert!(text.contains(&f.display().to_string()), "{text}");
        }
    }

    #[test]
    fn short_names_drop_the_prefix() {
        assert_eq!(short_name("gpufleet_gpu_catalog"), "gpu_catalog");
        assert_eq!(short_name("other"), "other");
    }
}
