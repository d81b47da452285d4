//! GetProviderSchema, GetMetadata, GetFunctions and GetResourceIdentitySchemas: what Terraform
//! learns about the provider before it does anything else.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value as Json, json};
use terraform_provider_gpufleet::{proto::tfplugin6 as pb, server::Kinds};

use crate::{
    support::{Harness, assert_no_errors, wire_attribute_type, wire_block_type},
    widget,
};

/// Whether a name matches `^[a-z0-9_]+$`, as Terraform requires of type and attribute names.
fn is_snake_case(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// Every problem with the names, modes and types of a block, with `at` naming where it is.
fn block_problems(block: &pb::schema::Block, at: &str, problems: &mut Vec<String>) {
    for a in &block.attributes {
        attribute_problems(a, &format!("{at}.{}", a.name), problems);
    }
    for nb in &block.block_types {
        let at = format!("{at}.{}", nb.type_name);
        if !is_snake_case(&nb.type_name) {
            problems.push(format!("{at}: block type name is not snake_case"));
        }
        match &nb.block {
            Some(b) => block_problems(b, &at, problems),
            None => problems.push(format!("{at}: nested block without a block")),
        }
    }
}

fn attribute_problems(a: &pb::schema::Attribute, at: &str, problems: &mut Vec<String>) {
    if !is_snake_case(&a.name) {
        problems.push(format!("{at}: attribute name is not snake_case"));
    }
    // Exactly one of required, optional, computed, optional+computed.
    let mode_ok = matches!(
        (a.required, a.optional, a.computed),
        (true, false, false) | (false, true, false | true) | (false, false, true)
    );
    if !mode_ok {
        problems.push(format!(
            "{at}: invalid mode required={} optional={} computed={}",
            a.required, a.optional, a.computed
        ));
    }
    match (&a.r#type[..], &a.nested_type) {
        ([], Some(nested)) => {
            for n in &nested.attributes {
                attribute_problems(n, &format!("{at}.{}", n.name), problems);
            }
        }
        ([_, ..], None) => {
            if let Err(e) = terraform_provider_gpufleet::codec::type_from_json_bytes(&a.r#type) {
                problems.push(format!("{at}: type is not type JSON: {e}"));
            }
        }
        ([], None) => problems.push(format!("{at}: neither type nor nested_type")),
        ([_, ..], Some(_)) => problems.push(format!("{at}: both type and nested_type")),
    }
}

fn schema_problems(schema: Option<&pb::Schema>, at: &str, problems: &mut Vec<String>) {
    match schema.and_then(|s| s.block.as_ref()) {
        Some(block) => block_problems(block, at, problems),
        None => problems.push(format!("{at}: schema without a block")),
    }
}

fn attribute<'a>(block: &'a pb::schema::Block, name: &str) -> &'a pb::schema::Attribute {
    block
        .attributes
        .iter()
        .find(|a| a.name == name)
        .unwrap_or_else(|| panic!("no attribute {name}"))
}

#[tokio::test]
async fn provider_block_has_backend_blocks_with_sensitive_secrets() {
    let h = Harness::start().await;
    let provider = h
        .wire_schema()
        .provider
        .as_ref()
        .and_then(|s| s.block.as_ref())
        .expect("provider schema");
    let names: BTreeSet<&str> = provider
        .block_types
        .iter()
        .map(|b| b.type_name.as_str())
        .collect();
    assert_eq!(
        names,
        BTreeSet::from(["bcm", "gpu_product", "kubernetes", "netris"])
    );

    let expected_secrets = [
        ("kubernetes", &["token", "client_key"][..]),
        ("bcm", &["client_key", "password"][..]),
        ("netris", &["password"][..]),
    ];
    for (block_name, secrets) in expected_secrets {
        let nb = provider
            .block_types
            .iter()
            .find(|b| b.type_name == block_name)
            .expect("backend block");
        assert_eq!(
            nb.nesting(),
            pb::schema::nested_block::NestingMode::Single,
            "{block_name} is a single block"
        );
        let block = nb.block.as_ref().expect("backend block body");
        for a in &block.attributes {
            let secret = secrets.contains(&a.name.as_str());
            assert_eq!(
                a.sensitive, secret,
                "{block_name}.{} sensitive should be {secret}",
                a.name
            );
            assert!(
                a.optional && !a.required && !a.computed,
                "{block_name}.{} is optional",
                a.name
            );
        }
        for s in secrets {
            assert!(attribute(block, s).sensitive);
        }
    }
}

#[tokio::test]
async fn schema_offers_gpu_catalog_mig_profiles_and_capabilities() {
    let h = Harness::start().await;
    let schema = h.wire_schema();
    let catalog = schema
        .data_source_schemas
        .get("gpufleet_gpu_catalog")
        .and_then(|s| s.block.as_ref())
        .expect("gpufleet_gpu_catalog schema");
    assert!(attribute(catalog, "product").optional);
    assert!(attribute(catalog, "gpus").computed);

    let f = schema
        .functions
        .get("mig_profiles")
        .expect("mig_profiles function");
    assert_eq!(f.parameters.len(), 1);
    assert_eq!(f.parameters[0].name, "product");
    assert!(!f.summary.is_empty());

    let caps = schema
        .server_capabilities
        .as_ref()
        .expect("server capabilities");
    assert!(caps.plan_destroy, "destroys must be planned");
    assert!(caps.get_provider_schema_optional);
    assert!(
        !caps.move_resource_state,
        "MoveResourceState is not implemented"
    );
    assert!(
        !caps.generate_resource_config,
        "GenerateResourceConfig is not implemented"
    );

    let widget = schema
        .resource_schemas
        .get(widget::TYPE)
        .expect("test_widget is served");
    assert_eq!(widget.version, 1);
}

#[tokio::test]
async fn every_name_is_snake_case_and_every_attribute_well_formed() {
    let h = Harness::start().await;
    let schema = h.wire_schema();
    let mut problems = Vec::new();
    schema_problems(schema.provider.as_ref(), "provider", &mut problems);
    for (name, s) in &schema.resource_schemas {
        if !is_snake_case(name) {
            problems.push(format!("resource type {name} is not snake_case"));
        }
        schema_problems(Some(s), name, &mut problems);
    }
    for (name, s) in &schema.data_source_schemas {
        if !is_snake_case(name) {
            problems.push(format!("data source type {name} is not snake_case"));
        }
        schema_problems(Some(s), name, &mut problems);
    }
    for (name, s) in &schema.ephemeral_resource_schemas {
        if !is_snake_case(name) {
            problems.push(format!("ephemeral resource type {name} is not snake_case"));
        }
        schema_problems(Some(s), name, &mut problems);
    }
    for (name, f) in &schema.functions {
        if !is_snake_case(name) {
            problems.push(format!("function {name} is not snake_case"));
        }
        for p in f.parameters.iter().chain(&f.variadic_parameter) {
            if !is_snake_case(&p.name) {
                problems.push(format!("{name}({}): parameter is not snake_case", p.name));
            }
            if let Err(e) = terraform_provider_gpufleet::codec::type_from_json_bytes(&p.r#type) {
                problems.push(format!("{name}({}): type is not type JSON: {e}", p.name));
            }
        }
        let ret = f
            .r#return
            .as_ref()
            .map(|r| r.r#type.as_slice())
            .unwrap_or_default();
        if let Err(e) = terraform_provider_gpufleet::codec::type_from_json_bytes(ret) {
            problems.push(format!("{name}: return type is not type JSON: {e}"));
        }
    }
    assert!(
        problems.is_empty(),
        "schema problems:\n{}",
        problems.join("\n")
    );
}

#[tokio::test]
async fn wire_schemas_imply_the_engine_value_types() {
    let h = Harness::start().await;
    let kinds = crate::support::test_kinds();
    let schema = h.wire_schema();
    for kind in &kinds.resources {
        let wire = schema
            .resource_schemas
            .get(kind.type_name())
            .unwrap_or_else(|| panic!("{} missing", kind.type_name()));
        let block = wire.block.as_ref().expect("block");
        assert_eq!(wire.version, kind.schema().version, "{}", kind.type_name());
        assert_eq!(block.version, kind.schema().version, "{}", kind.type_name());
        assert_eq!(
            wire_block_type(block),
            kind.schema().value_type(),
            "{}",
            kind.type_name()
        );
    }
    for kind in &kinds.ephemeral_resources {
        let wire = schema
            .ephemeral_resource_schemas
            .get(kind.type_name())
            .and_then(|s| s.block.as_ref())
            .unwrap_or_else(|| panic!("{} missing", kind.type_name()));
        assert_eq!(
            wire_block_type(wire),
            kind.schema().value_type(),
            "{}",
            kind.type_name()
        );
    }
    for kind in &kinds.data_sources {
        let wire = schema
            .data_source_schemas
            .get(kind.type_name())
            .and_then(|s| s.block.as_ref())
            .unwrap_or_else(|| panic!("{} missing", kind.type_name()));
        assert_eq!(
            wire_block_type(wire),
            kind.schema().value_type(),
            "{}",
            kind.type_name()
        );
    }
    let provider = gpufleet_engine::provider_config::schema();
    assert_eq!(h.provider_type(), provider.value_type());

    // Spot-check the widget's attribute flags, which come from the engine's modes.
    let widget = schema.resource_schemas[widget::TYPE]
        .block
        .as_ref()
        .expect("block");
    let name = attribute(widget, "name");
    assert!(name.required && !name.optional && !name.computed);
    let size = attribute(widget, "size");
    assert!(
        size.optional && size.computed,
        "a default makes size optional+computed"
    );
    let id = attribute(widget, "id");
    assert!(id.computed && !id.optional);
    assert!(attribute(widget, "secret").sensitive);
    assert_eq!(
        wire_attribute_type(size),
        gpufleet_engine::value::Type::Number
    );
}

#[tokio::test]
async fn metadata_lists_the_same_names_as_the_schema() {
    let h = Harness::start().await;
    let meta = h.metadata().await;
    assert_no_errors(&meta.diagnostics, "GetMetadata");
    let schema = h.wire_schema();

    let resources: BTreeSet<&str> = meta
        .resources
        .iter()
        .map(|r| r.type_name.as_str())
        .collect();
    let data_sources: BTreeSet<&str> = meta
        .data_sources
        .iter()
        .map(|d| d.type_name.as_str())
        .collect();
    let functions: BTreeSet<&str> = meta.functions.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        resources,
        schema.resource_schemas.keys().map(String::as_str).collect()
    );
    assert_eq!(
        data_sources,
        schema
            .data_source_schemas
            .keys()
            .map(String::as_str)
            .collect()
    );
    let ephemeral: BTreeSet<&str> = meta
        .ephemeral_resources
        .iter()
        .map(|e| e.type_name.as_str())
        .collect();
    assert_eq!(
        ephemeral,
        schema
            .ephemeral_resource_schemas
            .keys()
            .map(String::as_str)
            .collect()
    );
    assert!(ephemeral.contains("gpufleet_virtual_cluster_connection"));
    assert_eq!(
        functions,
        schema.functions.keys().map(String::as_str).collect()
    );
    assert!(resources.contains(widget::TYPE));
    assert!(data_sources.contains("gpufleet_gpu_catalog"));
    assert!(functions.contains("mig_profiles"));
    assert_eq!(meta.server_capabilities, schema.server_capabilities);

    let fns = h
        .client()
        .get_functions(pb::get_functions::Request {})
        .await
        .expect("GetFunctions")
        .into_inner();
    assert_no_errors(&fns.diagnostics, "GetFunctions");
    assert_eq!(
        fns.functions, schema.functions,
        "GetFunctions agrees with GetProviderSchema"
    );
}

#[tokio::test]
async fn identity_schemas_list_the_widget_name() {
    let h = Harness::start().await;
    let resp = h
        .client()
        .get_resource_identity_schemas(pb::get_resource_identity_schemas::Request {})
        .await
        .expect("GetResourceIdentitySchemas")
        .into_inner();
    assert_no_errors(&resp.diagnostics, "GetResourceIdentitySchemas");
    let widget = resp
        .identity_schemas
        .get(widget::TYPE)
        .expect("test_widget identity");
    assert_eq!(widget.version, 0);
    let names: Vec<&str> = widget
        .identity_attributes
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    assert_eq!(names, ["name"]);
    let name = &widget.identity_attributes[0];
    assert!(name.required_for_import);
    assert_eq!(
        terraform_provider_gpufleet::codec::type_from_json_bytes(&name.r#type).expect("type"),
        gpufleet_engine::value::Type::String
    );
}

// ---------------------------------------------------------------------------------------------
// The snapshot of the production schema, so that schema changes show up in review.

fn type_json(bytes: &[u8]) -> Json {
    serde_json::from_slice(bytes).expect("type JSON")
}

fn render_attribute(a: &pb::schema::Attribute) -> Json {
    let mode = match (a.required, a.optional, a.computed) {
        (true, _, _) => "required",
        (_, true, true) => "optional+computed",
        (_, true, false) => "optional",
        _ => "computed",
    };
    let mut out = serde_json::Map::new();
    out.insert("name".into(), json!(a.name));
    out.insert("mode".into(), json!(mode));
    match &a.nested_type {
        Some(n) => {
            out.insert(
                "nested_type".into(),
                json!({
                    "nesting": format!("{:?}", n.nesting()),
                    "attributes": n.attributes.iter().map(render_attribute).collect::<Vec<_>>(),
                }),
            );
        }
        None => {
            out.insert("type".into(), type_json(&a.r#type));
        }
    }
    for (flag, set) in [
        ("sensitive", a.sensitive),
        ("write_only", a.write_only),
        ("deprecated", a.deprecated),
    ] {
        if set {
            out.insert(flag.into(), json!(true));
        }
    }
    out.insert("description".into(), json!(a.description));
    Json::Object(out)
}

fn render_block(b: &pb::schema::Block) -> Json {
    json!({
        "description": b.description,
        "deprecated": b.deprecated,
        "attributes": b.attributes.iter().map(render_attribute).collect::<Vec<_>>(),
        "block_types": b.block_types.iter().map(|nb| json!({
            "type_name": nb.type_name,
            "nesting": format!("{:?}", nb.nesting()),
            "min_items": nb.min_items,
            "max_items": nb.max_items,
            "block": nb.block.as_ref().map(render_block),
        })).collect::<Vec<_>>(),
    })
}

fn render_schema(s: &pb::Schema) -> Json {
    json!({ "version": s.version, "block": s.block.as_ref().map(render_block) })
}

fn render_function(f: &pb::Function) -> Json {
    let param = |p: &pb::function::Parameter| {
        json!({
            "name": p.name,
            "type": type_json(&p.r#type),
            "allow_null_value": p.allow_null_value,
            "allow_unknown_values": p.allow_unknown_values,
            "description": p.description,
        })
    };
    json!({
        "summary": f.summary,
        "description": f.description,
        "parameters": f.parameters.iter().map(param).collect::<Vec<_>>(),
        "variadic_parameter": f.variadic_parameter.as_ref().map(param),
        "return": f.r#return.as_ref().map(|r| type_json(&r.r#type)),
        "deprecation_message": f.deprecation_message,
    })
}

fn sorted<T>(m: &std::collections::HashMap<String, T>, render: impl Fn(&T) -> Json) -> Json {
    let sorted: BTreeMap<&String, &T> = m.iter().collect();
    Json::Object(
        sorted
            .into_iter()
            .map(|(k, v)| (k.clone(), render(v)))
            .collect(),
    )
}

#[tokio::test]
async fn production_schema_snapshot() {
    let h = Harness::start_with(Kinds::default()).await;
    let s = h.wire_schema();
    let caps = s.server_capabilities.as_ref().expect("capabilities");
    let rendered = json!({
        "provider": s.provider.as_ref().map(render_schema),
        "resource_schemas": sorted(&s.resource_schemas, render_schema),
        "data_source_schemas": sorted(&s.data_source_schemas, render_schema),
        "ephemeral_resource_schemas": sorted(&s.ephemeral_resource_schemas, render_schema),
        "functions": sorted(&s.functions, render_function),
        "server_capabilities": {
            "plan_destroy": caps.plan_destroy,
            "get_provider_schema_optional": caps.get_provider_schema_optional,
            "move_resource_state": caps.move_resource_state,
            "generate_resource_config": caps.generate_resource_config,
        },
    });
    // Rendered by serde_json rather than insta's own serializer: with the workspace's
    // `arbitrary_precision` feature, insta would show every number as a private wrapper.
    let text = serde_json::to_string_pretty(&rendered).expect("render JSON");
    insta::assert_snapshot!("provider_schema", text);
}
