//! Every Terraform file (and query file) under `examples/` and `modules/` is checked against the
//! provider's own schemas, without Terraform: an unknown resource, data source, ephemeral or
//! list resource type, an unknown or computed-only attribute, an unknown nested block, a
//! missing required attribute or an unknown provider function fails here, naming the file and
//! the path inside it. The HCL snippets of the guides and the README are checked the same way,
//! and so are the claims their prose makes about types, attributes, defaults and limits.

use std::path::{Path, PathBuf};

use gpufleet_engine::{
    docs::{GuideChecker, GuideContext},
    provider_config,
    registry::{self, TYPE_PREFIX},
    schema::{AttrType, Attribute, Block, Nesting},
};
use hcl::{Body, Expression, ObjectKey, Structure};

/// Arguments Terraform itself understands in every resource or data block.
const META_ARGUMENTS: &[&str] = &["count", "for_each", "provider", "depends_on"];
/// Blocks Terraform itself understands inside resources.
const META_BLOCKS: &[&str] = &["lifecycle", "provisioner", "connection"];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("engine/ has a parent")
        .to_path_buf()
}

fn tf_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            // Terraform's own working directories never hold sources.
            if path.file_name().is_some_and(|n| n == ".terraform") {
                continue;
            }
            tf_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "tf")
            || path.to_string_lossy().ends_with(".tfquery.hcl")
        {
            out.push(path);
        }
    }
}

/// Problems found in one file's text, each as `path: message`.
fn check_text(text: &str) -> Vec<String> {
    let body = match hcl::parse(text) {
        Ok(body) => body,
        Err(e) => return vec![format!("does not parse: {e}")],
    };
    let mut problems = Vec::new();
    for block in body.blocks() {
        let labels: Vec<&str> = block.labels().iter().map(hcl::BlockLabel::as_str).collect();
        match (block.identifier(), labels.as_slice()) {
            ("resource", [ty, name]) if ty.starts_with(TYPE_PREFIX) => {
                match registry::resource(ty) {
                    Some(kind) => check_body(
                        block.body(),
                        &kind.schema().block,
                        &format!("{ty}.{name}"),
                        true,
                        &mut problems,
                    ),
                    None => problems.push(format!("resource {ty}.{name}: unknown resource type")),
                }
            }
            ("data", [ty, name]) if ty.starts_with(TYPE_PREFIX) => {
                match registry::data_source(ty) {
                    Some(kind) => check_body(
                        block.body(),
                        &kind.schema().block,
                        &format!("data.{ty}.{name}"),
                        true,
                        &mut problems,
                    ),
                    None => problems.push(format!("data.{ty}.{name}: unknown data source type")),
                }
            }
            ("ephemeral", [ty, name]) if ty.starts_with(TYPE_PREFIX) => {
                match registry::ephemeral_resource(ty) {
                    Some(kind) => check_body(
                        block.body(),
                        &kind.schema().block,
                        &format!("ephemeral.{ty}.{name}"),
                        true,
                        &mut problems,
                    ),
                    None => problems.push(format!(
                        "ephemeral.{ty}.{name}: unknown ephemeral resource type"
                    )),
                }
            }
            ("list", [ty, name]) if ty.starts_with(TYPE_PREFIX) => {
                check_list_block(block, ty, name, &mut problems);
            }
            ("action", [ty, name]) if ty.starts_with(TYPE_PREFIX) => {
                check_action_block(block, ty, name, &mut problems);
            }
            ("provider", ["gpufleet"]) => {
                let mut body = block.body().clone();
                body.0
                    .retain(|s| !matches!(s, Structure::Attribute(a) if a.key() == "alias"));
                check_body(
                    &body,
                    &provider_config::schema().block,
                    "provider.gpufleet",
                    false,
                    &mut problems,
                );
            }
            _ => {}
        }
    }
    // Provider functions appear inside expressions anywhere; their names are plain text.
    for (at, _) in text.match_indices("provider::gpufleet::") {
        let name: String = text[at + "provider::gpufleet::".len()..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if registry::function(&name).is_none() {
            problems.push(format!("provider::gpufleet::{name}: unknown function"));
        }
    }
    problems
}

/// Arguments Terraform itself understands in a `list` block of a query file.
const LIST_ARGUMENTS: &[&str] = &["provider", "include_resource", "limit", "count", "for_each"];

/// A `list` block of a query file: Terraform's own arguments, and the list resource's
/// filters inside `config`.
fn check_list_block(block: &hcl::Block, ty: &str, name: &str, problems: &mut Vec<String>) {
    let Some(kind) = registry::list_resource(ty) else {
        problems.push(format!("list.{ty}.{name}: unknown list resource type"));
        return;
    };
    for structure in block.body().iter() {
        match structure {
            Structure::Attribute(a) if LIST_ARGUMENTS.contains(&a.key()) => {}
            Structure::Attribute(a) => {
                problems.push(format!("list.{ty}.{name}.{}: unknown argument", a.key()));
            }
            Structure::Block(b) if b.identifier() == "config" => check_body(
                b.body(),
                &kind.schema().block,
                &format!("list.{ty}.{name}.config"),
                false,
                problems,
            ),
            Structure::Block(b) => problems.push(format!(
                "list.{ty}.{name}.{}: unknown block",
                b.identifier()
            )),
        }
    }
}

/// Arguments Terraform itself understands in an `action` block.
const ACTION_ARGUMENTS: &[&str] = &["provider", "count", "for_each"];

/// An `action` block: Terraform's own arguments, and the action's attributes inside
/// `config`.
fn check_action_block(block: &hcl::Block, ty: &str, name: &str, problems: &mut Vec<String>) {
    let Some(kind) = registry::action(ty) else {
        problems.push(format!("action.{ty}.{name}: unknown action type"));
        return;
    };
    let mut configured = false;
    for structure in block.body().iter() {
        match structure {
            Structure::Attribute(a) if ACTION_ARGUMENTS.contains(&a.key()) => {}
            Structure::Attribute(a) => {
                problems.push(format!("action.{ty}.{name}.{}: unknown argument", a.key()));
            }
            Structure::Block(b) if b.identifier() == "config" => {
                configured = true;
                check_body(
                    b.body(),
                    &kind.schema().block,
                    &format!("action.{ty}.{name}.config"),
                    false,
                    problems,
                );
            }
            Structure::Block(b) => problems.push(format!(
                "action.{ty}.{name}.{}: unknown block",
                b.identifier()
            )),
        }
    }
    if !configured {
        check_body(
            &Body::default(),
            &kind.schema().block,
            &format!("action.{ty}.{name}.config"),
            false,
            problems,
        );
    }
}

fn check_body(body: &Body, block: &Block, path: &str, meta: bool, problems: &mut Vec<String>) {
    let mut set = Vec::new();
    for structure in body.iter() {
        match structure {
            Structure::Attribute(a) => {
                let key = a.key();
                set.push(key.to_owned());
                if meta && META_ARGUMENTS.contains(&key) {
                    continue;
                }
                match block.attribute(key) {
                    None => problems.push(format!("{path}.{key}: unknown attribute")),
                    Some(attr) if !attr.mode.is_required() && !attr.mode.is_optional() => {
                        problems.push(format!("{path}.{key}: computed attribute cannot be set"));
                    }
                    Some(attr) => {
                        check_nested_value(attr, a.expr(), &format!("{path}.{key}"), problems);
                    }
                }
            }
            Structure::Block(b) => {
                let ident = b.identifier();
                if meta && META_BLOCKS.contains(&ident) {
                    continue;
                }
                // `dynamic "x" { content { … } }` generates blocks of type x.
                let (name, inner) = if ident == "dynamic" {
                    let label = b
                        .labels()
                        .first()
                        .map(hcl::BlockLabel::as_str)
                        .unwrap_or_default();
                    let content = b
                        .body()
                        .blocks()
                        .find(|c| c.identifier() == "content")
                        .map(|c| c.body().clone())
                        .unwrap_or_default();
                    (label.to_owned(), content)
                } else {
                    (ident.to_owned(), b.body().clone())
                };
                set.push(name.clone());
                match block.nested_block(&name) {
                    Some(nested) => {
                        check_body(
                            &inner,
                            &nested.block,
                            &format!("{path}.{name}"),
                            false,
                            problems,
                        );
                    }
                    None => problems.push(format!("{path}.{name}: unknown block")),
                }
            }
        }
    }
    for attr in &block.attributes {
        if attr.mode.is_required() && !set.iter().any(|s| s == attr.name) {
            problems.push(format!("{path}.{}: required attribute missing", attr.name));
        }
    }
}

/// Checks the keys of literal objects given to nested attributes.
fn check_nested_value(attr: &Attribute, expr: &Expression, path: &str, problems: &mut Vec<String>) {
    let AttrType::Nested {
        attributes,
        nesting,
    } = &attr.ty
    else {
        return;
    };
    let objects: Vec<&hcl::Object<ObjectKey, Expression>> = match expr {
        // A map of nested objects: the keys are the user's, the values are the objects.
        Expression::Object(o) if *nesting == Nesting::Map => o
            .values()
            .filter_map(|v| match v {
                Expression::Object(o) => Some(o),
                _ => None,
            })
            .collect(),
        Expression::Object(o) => vec![o],
        Expression::Array(items) => items
            .iter()
            .filter_map(|i| match i {
                Expression::Object(o) => Some(o),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    for object in objects {
        for (key, value) in object {
            let key = match key {
                ObjectKey::Identifier(i) => i.to_string(),
                ObjectKey::Expression(Expression::String(s)) => s.clone(),
                _ => continue,
            };
            match attributes.iter().find(|a| a.name == key) {
                None => problems.push(format!("{path}.{key}: unknown attribute")),
                Some(a) if !a.mode.is_required() && !a.mode.is_optional() => {
                    problems.push(format!("{path}.{key}: computed attribute cannot be set"));
                }
                Some(a) => check_nested_value(a, value, &format!("{path}.{key}"), problems),
            }
        }
    }
}

#[test]
fn examples_and_modules_match_the_schemas() {
    let root = workspace_root();
    let mut files = Vec::new();
    tf_files(&root.join("examples"), &mut files);
    tf_files(&root.join("modules"), &mut files);
    assert!(
        !files.is_empty(),
        "no Terraform files found under examples/"
    );
    let mut problems = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("readable .tf file");
        let rel = file
            .strip_prefix(&root)
            .unwrap_or(file)
            .display()
            .to_string();
        problems.extend(check_text(&text).into_iter().map(|p| format!("{rel}: {p}")));
    }
    assert!(
        problems.is_empty(),
        "examples disagree with the schemas:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_check_catches_what_terraform_would_reject() {
    let problems = check_text(
        r#"
        provider "gpufleet" {
          netris {
            endpoint = "https://n"
            colour   = "blue"
          }
        }
        resource "gpufleet_warp_drive" "x" {}
        data "gpufleet_gpu_catalog" "x" {
          product  = "NVIDIA-H100-80GB-HBM3"
          wattage  = 700
          gpu      = {}
        }
        data "gpufleet_gpu_catalog" "y" {
          not_a_block {}
        }
        ephemeral "gpufleet_virtual_cluster_connection" "c" {
          token = "t"
        }
        ephemeral "gpufleet_tunnel_to_nowhere" "x" {}
        list "gpufleet_bcm_node" "l" {
          provider = gpufleet
          colour   = "blue"
          config {
            rack = "r1"
            zone = "z"
          }
        }
        list "gpufleet_gpu_catalog" "l" {}
        action "gpufleet_bcm_node_power" "a" {
          config {
            hostname = "gpu-01"
          }
        }
        action "gpufleet_node_teleport" "a" {}
        output "p" { value = provider::gpufleet::no_such_function("x") }
        "#,
    );
    let expected = [
        "provider.gpufleet.netris.colour: unknown attribute",
        "resource gpufleet_warp_drive.x: unknown resource type",
        "data.gpufleet_gpu_catalog.x.wattage: unknown attribute",
        "data.gpufleet_gpu_catalog.x.gpu: computed attribute cannot be set",
        "data.gpufleet_gpu_catalog.y.not_a_block: unknown block",
        "ephemeral.gpufleet_virtual_cluster_connection.c.token: computed attribute cannot be set",
        "ephemeral.gpufleet_virtual_cluster_connection.c.virtual_cluster_id: required attribute missing",
        "ephemeral.gpufleet_tunnel_to_nowhere.x: unknown ephemeral resource type",
        "list.gpufleet_bcm_node.l.colour: unknown argument",
        "list.gpufleet_bcm_node.l.config.zone: unknown attribute",
        "list.gpufleet_gpu_catalog.l: unknown list resource type",
        "action.gpufleet_bcm_node_power.a.config.operation: required attribute missing",
        "action.gpufleet_node_teleport.a: unknown action type",
        "provider::gpufleet::no_such_function: unknown function",
    ];
    for e in expected {
        assert!(
            problems.iter().any(|p| p == e),
            "missing {e:?} in {problems:#?}"
        );
    }
}

/// The `hcl` and `terraform` fenced blocks of a markdown text, with the line each starts on.
fn hcl_snippets(markdown: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (i, line) in markdown.lines().enumerate() {
        let fence = line.trim_start();
        match &mut current {
            None if fence == "```hcl" || fence == "```terraform" => {
                current = Some((i + 2, String::new()));
            }
            Some(_) if fence.starts_with("```") => out.extend(current.take()),
            Some((_, text)) => {
                text.push_str(line);
                text.push('\n');
            }
            None => {}
        }
    }
    out
}

/// The guides and the README.
fn guide_pages(root: &Path) -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root.join("docs/guides"))
        .expect("docs/guides")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.push(root.join("README.md"));
    pages.sort();
    pages
}

/// Every input of the shipped modules, with its default as an HCL literal.
fn module_inputs(root: &Path) -> GuideContext {
    let mut files = Vec::new();
    tf_files(&root.join("modules"), &mut files);
    let mut context = GuideContext::default();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable module file");
        let body: Body = hcl::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for block in body.blocks().filter(|b| b.identifier() == "variable") {
            let Some(name) = block.labels().first() else {
                continue;
            };
            let default = block
                .body()
                .attributes()
                .find(|a| a.key() == "default")
                .map(|a| hcl::format::to_string(a.expr()).unwrap_or_default());
            context
                .module_inputs
                .entry(name.as_str().to_owned())
                .or_default()
                .push(default);
        }
    }
    context
}

#[test]
fn guide_and_readme_claims_match_the_schemas() {
    let root = workspace_root();
    let context = module_inputs(&root);
    assert!(
        context.module_inputs.contains_key("network"),
        "the module inputs were not read"
    );
    let checker = GuideChecker::new(context);
    let mut problems = Vec::new();
    let mut checked = 0;
    for page in guide_pages(&root) {
        let text = std::fs::read_to_string(&page).expect("readable page");
        let rel = page
            .strip_prefix(&root)
            .unwrap_or(&page)
            .display()
            .to_string();
        let report = checker.check(&text);
        checked += report.checked;
        problems.extend(report.problems.into_iter().map(|p| format!("{rel}: {p}")));
    }
    println!("{checked} claims checked");
    // The guides make well over a hundred such claims; far fewer means the reader broke.
    assert!(
        checked > 100,
        "only {checked} claims were found in the guides"
    );
    assert!(
        problems.is_empty(),
        "the guides say what the schemas do not:\n{}",
        problems.join("\n")
    );
}

#[test]
fn guide_and_readme_snippets_match_the_schemas() {
    let root = workspace_root();
    let pages = guide_pages(&root);
    let mut problems = Vec::new();
    let mut snippets = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).expect("readable page");
        let rel = page
            .strip_prefix(&root)
            .unwrap_or(page)
            .display()
            .to_string();
        for (line, hcl) in hcl_snippets(&text) {
            // CLI configuration (`~/.terraformrc`) is not the Terraform language, and quotes
            // its keys where the language does not.
            if hcl.contains("provider_installation {") {
                continue;
            }
            snippets += 1;
            problems.extend(
                check_text(&hcl)
                    .into_iter()
                    .map(|p| format!("{rel}:{line}: {p}")),
            );
        }
    }
    assert!(snippets > 0, "no HCL snippets found in the guides");
    assert!(
        problems.is_empty(),
        "snippets in the guides disagree with the schemas:\n{}",
        problems.join("\n")
    );
}
