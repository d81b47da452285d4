//! Engine schemas to tfplugin6 schemas. Descriptions are markdown.

use gpufleet_engine::schema::{
    AttrType, Attribute, Block, FunctionSignature, NestedBlock, Nesting, Parameter, Schema,
};

use crate::{codec::type_json, proto::tfplugin6 as pb};

/// A schema as tfplugin6 describes it.
pub fn schema(s: &Schema) -> pb::Schema {
    pb::Schema {
        version: s.version,
        block: Some(block(&s.block, s.version)),
    }
}

fn block(b: &Block, version: i64) -> pb::schema::Block {
    pb::schema::Block {
        version,
        attributes: b.attributes.iter().map(attribute).collect(),
        block_types: b.blocks.iter().map(nested_block).collect(),
        description: b.description.to_owned(),
        description_kind: pb::StringKind::Markdown as i32,
        deprecated: b.deprecated.is_some(),
    }
}

fn attribute(a: &Attribute) -> pb::schema::Attribute {
    let (ty, nested_type) = match &a.ty {
        AttrType::Plain(t) => (type_json::type_to_json_bytes(t), None),
        AttrType::Nested {
            nesting,
            attributes,
        } => (
            Vec::new(),
            Some(pb::schema::Object {
                attributes: attributes.iter().map(attribute).collect(),
                nesting: object_nesting(*nesting) as i32,
                ..Default::default()
            }),
        ),
    };
    pb::schema::Attribute {
        name: a.name.to_owned(),
        r#type: ty,
        nested_type,
        description: describe_attribute(a),
        required: a.mode.is_required(),
        optional: a.mode.is_optional(),
        computed: a.mode.is_computed(),
        sensitive: a.sensitive,
        description_kind: pb::StringKind::Markdown as i32,
        deprecated: a.deprecated.is_some(),
        write_only: a.write_only,
    }
}

/// The description shown by language servers: the schema's own text plus its rules, so the
/// rules are documented where they are enforced.
fn describe_attribute(a: &Attribute) -> String {
    let mut text = a.description.to_owned();
    for sentence in a.validator_sentences() {
        text.push(' ');
        text.push_str(&sentence);
    }
    text
}

fn nested_block(b: &NestedBlock) -> pb::schema::NestedBlock {
    use pb::schema::nested_block::NestingMode;
    pb::schema::NestedBlock {
        type_name: b.type_name.to_owned(),
        block: Some(block(&b.block, 0)),
        nesting: match b.nesting {
            Nesting::Single => NestingMode::Single,
            Nesting::List => NestingMode::List,
            Nesting::Set => NestingMode::Set,
            Nesting::Map => NestingMode::Map,
            Nesting::Group => NestingMode::Group,
        } as i32,
        min_items: b.min_items.into(),
        max_items: b.max_items.into(),
    }
}

fn object_nesting(n: Nesting) -> pb::schema::object::NestingMode {
    use pb::schema::object::NestingMode;
    match n {
        // Nested attributes have no group mode; a group behaves like a single object.
        Nesting::Single | Nesting::Group => NestingMode::Single,
        Nesting::List => NestingMode::List,
        Nesting::Set => NestingMode::Set,
        Nesting::Map => NestingMode::Map,
    }
}

/// A function signature as tfplugin6 describes it.
pub fn function(f: &FunctionSignature) -> pb::Function {
    pb::Function {
        parameters: f.parameters.iter().map(parameter).collect(),
        variadic_parameter: f.variadic.as_ref().map(parameter),
        r#return: Some(pb::function::Return {
            r#type: type_json::type_to_json_bytes(&f.return_type),
        }),
        summary: f.summary.to_owned(),
        description: f.description.to_owned(),
        description_kind: pb::StringKind::Markdown as i32,
        deprecation_message: String::new(),
    }
}

fn parameter(p: &Parameter) -> pb::function::Parameter {
    pb::function::Parameter {
        name: p.name.to_owned(),
        r#type: type_json::type_to_json_bytes(&p.ty),
        allow_null_value: p.allow_null,
        allow_unknown_values: p.allow_unknown,
        description: p.description.to_owned(),
        description_kind: pb::StringKind::Markdown as i32,
    }
}

/// An identity schema from the names of identifying attributes of a resource schema.
pub fn identity_schema(s: &Schema, names: &[&str]) -> pb::ResourceIdentitySchema {
    pb::ResourceIdentitySchema {
        version: 0,
        identity_attributes: names
            .iter()
            .filter_map(|n| s.block.attribute(n))
            .map(|a| pb::resource_identity_schema::IdentityAttribute {
                name: a.name.to_owned(),
                r#type: type_json::type_to_json_bytes(&a.value_type()),
                required_for_import: true,
                optional_for_import: false,
                description: a.description.to_owned(),
            })
            .collect(),
    }
}
