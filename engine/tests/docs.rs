//! The committed Registry docs match the schemas, every schema is described, no description
//! repeats itself, and every page has its example.

use std::{
    collections::BTreeMap,
    fs, io,
    path::{Path, PathBuf},
};

use gpufleet_engine::{
    docs::{self, GENERATED_DIRS, INDEX_PAGE, STALE_MESSAGE},
    registry,
};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("engine/ has a parent")
        .to_path_buf()
}

/// `index.md` and the markdown pages in the generated directories of `docs/`.
fn committed_pages(docs_dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut pages = BTreeMap::new();
    if let Ok(text) = fs::read_to_string(docs_dir.join(INDEX_PAGE)) {
        pages.insert(PathBuf::from(INDEX_PAGE), text);
    }
    for dir in GENERATED_DIRS {
        let entries = match fs::read_dir(docs_dir.join(dir)) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => panic!("cannot read docs/{dir}: {e}"),
        };
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.extension().is_some_and(|e| e == "md") {
                let name = path.file_name().expect("file name");
                let text = fs::read_to_string(&path).expect("readable page");
                pages.insert(Path::new(dir).join(name), text);
            }
        }
    }
    pages
}

#[test]
fn committed_docs_are_up_to_date() {
    let root = workspace_root();
    let generated = docs::render_all(&root.join("examples")).unwrap_or_else(|e| panic!("{e}"));
    let committed = committed_pages(&root.join("docs"));
    if let Some(report) = docs::stale_report(&committed, &generated) {
        panic!("{report}");
    }
    // The report the test relies on starts with the instruction to regenerate.
    assert!(
        docs::stale_report(&BTreeMap::new(), &generated)
            .is_some_and(|r| r.starts_with(STALE_MESSAGE))
    );
}

#[test]
fn every_schema_is_described() {
    let missing = docs::missing_descriptions();
    assert!(
        missing.is_empty(),
        "these have no description, so their docs would be empty:\n  {}",
        missing.join("\n  ")
    );
}

#[test]
fn every_description_says_each_thing_once() {
    let found = docs::restatements();
    assert!(
        found.is_empty(),
        "these generated descriptions repeat themselves; say each rule once, and leave what \
         the docs append (validator rules, `Defaults to`, `Changing this forces a new \
         resource.`) to the schema:\n  {}",
        found.join("\n  ")
    );
}

#[test]
fn every_page_has_an_example() {
    let examples = workspace_root().join("examples");
    let mut wanted: Vec<PathBuf> = registry::RESOURCES
        .iter()
        .map(|r| docs::resource_example(r.type_name()))
        .collect();
    wanted.extend(
        registry::DATA_SOURCES
            .iter()
            .map(|d| docs::data_source_example(d.type_name())),
    );
    wanted.extend(docs::required_examples());
    let missing: Vec<String> = wanted
        .iter()
        .filter(|f| !examples.join(f).is_file())
        .map(|f| format!("examples/{}", f.display()))
        .collect();
    assert!(
        missing.is_empty(),
        "write these example files:\n  {}",
        missing.join("\n  ")
    );
}
