//! `gpufleet-docs`: regenerates the Terraform Registry docs in `docs/` from the engine's
//! schemas and the HCL in `examples/`.
//!
//! ```text
//! cargo run -p gpufleet-engine --bin gpufleet-docs            # rewrite docs/
//! cargo run -p gpufleet-engine --bin gpufleet-docs -- --check # exit 1 if docs/ is stale
//! ```
//!
//! Pages in `docs/resources/`, `docs/data-sources/`, `docs/ephemeral-resources/` and
//! `docs/functions/` that are no longer generated are deleted; `docs/guides/` is never
//! touched.

use std::{
    collections::BTreeMap,
    fs, io,
    path::{Path, PathBuf},
    process::ExitCode,
};

use gpufleet_engine::docs::{self, GENERATED_DIRS, INDEX_PAGE};

const USAGE: &str = "usage: gpufleet-docs [--check]\n\n\
    Regenerates docs/ from the provider's schemas and examples/.\n\
    --check  change nothing; exit 1 and show what differs if docs/ is stale";

fn main() -> ExitCode {
    let mut check = false;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--check" => check = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("gpufleet-docs: unknown argument {other:?}\n\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    match run(check) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("gpufleet-docs: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(check: bool) -> Result<ExitCode, String> {
    let root = workspace_root()?;
    let docs_dir = root.join("docs");
    let generated = docs::render_all(&root.join("examples")).map_err(|e| e.to_string())?;
    let committed = read_generated_pages(&docs_dir)
        .map_err(|e| format!("cannot read {}: {e}", docs_dir.display()))?;

    if check {
        return Ok(match docs::stale_report(&committed, &generated) {
            None => {
                println!("gpufleet-docs: docs/ is up to date");
                ExitCode::SUCCESS
            }
            Some(report) => {
                eprintln!("{report}");
                ExitCode::FAILURE
            }
        });
    }

    for (rel, text) in &generated {
        let path = docs_dir.join(rel);
        if committed.get(rel) == Some(text) {
            continue;
        }
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        println!("wrote   docs/{}", rel.display());
    }
    for rel in committed.keys().filter(|r| !generated.contains_key(*r)) {
        let path = docs_dir.join(rel);
        fs::remove_file(&path).map_err(|e| format!("cannot delete {}: {e}", path.display()))?;
        println!("deleted docs/{}", rel.display());
    }
    println!(
        "gpufleet-docs: {} pages in {}",
        generated.len(),
        docs_dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The workspace root: the parent of this crate's manifest directory when it has `examples/`,
/// else the current directory.
fn workspace_root() -> Result<PathBuf, String> {
    let from_manifest = Path::new(env!("CARGO_MANIFEST_DIR")).parent();
    if let Some(root) = from_manifest.filter(|r| r.join("examples").is_dir()) {
        return Ok(root.to_path_buf());
    }
    let cwd = std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?;
    if cwd.join("examples").is_dir() {
        Ok(cwd)
    } else {
        Err(format!(
            "cannot find the workspace root (a directory with examples/); tried {} and {}",
            from_manifest.map_or_else(String::new, |p| p.display().to_string()),
            cwd.display()
        ))
    }
}

/// The pages under `docs_dir` that the generator owns: `index.md` and the markdown files in
/// [`GENERATED_DIRS`], keyed by path relative to `docs_dir`.
fn read_generated_pages(docs_dir: &Path) -> io::Result<BTreeMap<PathBuf, String>> {
    let mut pages = BTreeMap::new();
    match fs::read_to_string(docs_dir.join(INDEX_PAGE)) {
        Ok(text) => {
            pages.insert(PathBuf::from(INDEX_PAGE), text);
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    for dir in GENERATED_DIRS {
        let entries = match fs::read_dir(docs_dir.join(dir)) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for entry in entries {
            let path = entry?.path();
            if path.is_file()
                && path.extension().is_some_and(|e| e == "md")
                && let Some(name) = path.file_name()
            {
                pages.insert(Path::new(dir).join(name), fs::read_to_string(&path)?);
            }
        }
    }
    Ok(pages)
}
