//! Schemas: the single declaration of every attribute of every resource, data source, function
//! and the provider itself.
//!
//! The provider crate renders these into tfplugin6 schemas, the docs generator renders them
//! into markdown, and validation, defaults and plan modifiers are driven from them, so an
//! attribute's type, mode, description and rules are written exactly once.

mod field_docs;
mod function;
mod validator;

use std::sync::Arc;

pub use field_docs::FieldDocs;
pub use function::{FunctionSignature, Parameter};
pub use validator::Validator;

use crate::value::{Type, Value};

/// Whether the user sets an attribute, the provider does, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttrMode {
    /// The user must set it.
    Required,
    /// The user may set it; otherwise it is null (or its default).
    Optional,
    /// Only the provider sets it.
    Computed,
    /// The user may set it; otherwise the provider chooses.
    OptionalComputed,
}

impl AttrMode {
    /// Whether the user must set it.
    pub fn is_required(self) -> bool {
        self == AttrMode::Required
    }

    /// Whether the user may set it.
    pub fn is_optional(self) -> bool {
        matches!(self, AttrMode::Optional | AttrMode::OptionalComputed)
    }

    /// Whether the provider may set it.
    pub fn is_computed(self) -> bool {
        matches!(self, AttrMode::Computed | AttrMode::OptionalComputed)
    }
}

/// How nested attributes or blocks repeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nesting {
    /// At most one, as an object (or null).
    Single,
    /// An ordered list of objects.
    List,
    /// An unordered set of objects.
    Set,
    /// Objects by string key.
    Map,
    /// Exactly one block, never null (blocks only).
    Group,
}

/// The type of an attribute: a plain type or nested attributes.
#[derive(Debug, Clone)]
pub enum AttrType {
    /// A plain cty type.
    Plain(Type),
    /// Nested attributes with their own modes and descriptions.
    Nested {
        /// How the nested objects repeat (never [`Nesting::Group`]).
        nesting: Nesting,
        /// The attributes of each nested object.
        attributes: Vec<Attribute>,
    },
}

/// One attribute.
#[derive(Debug, Clone)]
pub struct Attribute {
    /// Its name: lowercase letters, digits and underscores.
    pub name: &'static str,
    /// Its type.
    pub ty: AttrType,
    /// Who sets it.
    pub mode: AttrMode,
    /// Never shown in plans or logs.
    pub sensitive: bool,
    /// Present only in configuration, never stored in state.
    pub write_only: bool,
    /// Changing it destroys and recreates the object.
    pub requires_replace: bool,
    /// A computed value that, once known, does not change on update: the plan keeps the prior
    /// value instead of marking it unknown.
    pub use_state_for_unknown: bool,
    /// The value used when the configuration leaves it null (attribute must be computed).
    pub default: Option<Value>,
    /// Checks run at validate time on known values.
    pub validators: Vec<Arc<dyn Validator>>,
    /// Markdown description for docs and the language server.
    pub description: &'static str,
    /// A deprecation message, if the attribute is deprecated.
    pub deprecated: Option<&'static str>,
    /// Descriptions of the fields of a plain object-typed value (nested attributes describe
    /// themselves).
    pub field_docs: FieldDocs,
}

impl Attribute {
    fn with_mode(name: &'static str, ty: AttrType, mode: AttrMode) -> Attribute {
        Attribute {
            name,
            ty,
            mode,
            sensitive: false,
            write_only: false,
            requires_replace: false,
            use_state_for_unknown: false,
            default: None,
            validators: Vec::new(),
            description: "",
            deprecated: None,
            field_docs: FieldDocs::new(),
        }
    }

    /// A required attribute.
    pub fn required(name: &'static str, ty: Type) -> Attribute {
        Attribute::with_mode(name, AttrType::Plain(ty), AttrMode::Required)
    }

    /// An optional attribute.
    pub fn optional(name: &'static str, ty: Type) -> Attribute {
        Attribute::with_mode(name, AttrType::Plain(ty), AttrMode::Optional)
    }

    /// A computed attribute.
    pub fn computed(name: &'static str, ty: Type) -> Attribute {
        Attribute::with_mode(name, AttrType::Plain(ty), AttrMode::Computed)
    }

    /// An optional attribute the provider fills in when unset.
    pub fn optional_computed(name: &'static str, ty: Type) -> Attribute {
        Attribute::with_mode(name, AttrType::Plain(ty), AttrMode::OptionalComputed)
    }

    /// Nested attributes.
    pub fn nested(
        name: &'static str,
        nesting: Nesting,
        mode: AttrMode,
        attributes: Vec<Attribute>,
    ) -> Attribute {
        Attribute::with_mode(
            name,
            AttrType::Nested {
                nesting,
                attributes,
            },
            mode,
        )
    }

    /// Sets the markdown description.
    #[must_use]
    pub fn describe(mut self, description: &'static str) -> Attribute {
        self.description = description;
        self
    }

    /// Sets the descriptions of the fields of its object-typed value.
    #[must_use]
    pub fn describe_fields(mut self, docs: FieldDocs) -> Attribute {
        self.field_docs = docs;
        self
    }

    /// The sentences of its validators that the description does not already say, in order:
    /// what the docs and language servers show after the description.
    pub fn validator_sentences(&self) -> Vec<String> {
        self.validators
            .iter()
            .filter(|v| !v.stated_in(self.description))
            .map(|v| v.description())
            .collect()
    }

    /// Marks the attribute sensitive.
    #[must_use]
    pub fn sensitive(mut self) -> Attribute {
        self.sensitive = true;
        self
    }

    /// Marks the attribute write-only.
    #[must_use]
    pub fn write_only(mut self) -> Attribute {
        self.write_only = true;
        self
    }

    /// Changing the attribute replaces the object.
    #[must_use]
    pub fn requires_replace(mut self) -> Attribute {
        self.requires_replace = true;
        self
    }

    /// Keeps the prior computed value in plans for updates.
    #[must_use]
    pub fn use_state_for_unknown(mut self) -> Attribute {
        self.use_state_for_unknown = true;
        self
    }

    /// Sets a default; the attribute becomes optional and computed.
    #[must_use]
    pub fn default(mut self, value: impl Into<Value>) -> Attribute {
        self.default = Some(value.into());
        self.mode = AttrMode::OptionalComputed;
        self
    }

    /// Adds a validator.
    #[must_use]
    pub fn validate(mut self, v: impl Validator + 'static) -> Attribute {
        self.validators.push(Arc::new(v));
        self
    }

    /// Marks the attribute deprecated.
    #[must_use]
    pub fn deprecate(mut self, message: &'static str) -> Attribute {
        self.deprecated = Some(message);
        self
    }

    /// The cty type of the attribute's value.
    pub fn value_type(&self) -> Type {
        match &self.ty {
            AttrType::Plain(t) => t.clone(),
            AttrType::Nested {
                nesting,
                attributes,
            } => {
                let obj = Type::Object(
                    attributes
                        .iter()
                        .map(|a| (a.name.to_owned(), a.value_type()))
                        .collect(),
                );
                wrap_nesting(*nesting, obj)
            }
        }
    }
}

/// A nested block type.
#[derive(Debug, Clone)]
pub struct NestedBlock {
    /// The block's type name as written in configuration.
    pub type_name: &'static str,
    /// How it repeats.
    pub nesting: Nesting,
    /// The block's contents.
    pub block: Block,
    /// At least this many (0: none required).
    pub min_items: u32,
    /// At most this many (0: no limit).
    pub max_items: u32,
}

impl NestedBlock {
    /// A block that appears at most once.
    pub fn single(type_name: &'static str, block: Block) -> NestedBlock {
        NestedBlock {
            type_name,
            nesting: Nesting::Single,
            block,
            min_items: 0,
            max_items: 0,
        }
    }

    /// A block that may repeat, as a list.
    pub fn list(type_name: &'static str, block: Block) -> NestedBlock {
        NestedBlock {
            type_name,
            nesting: Nesting::List,
            block,
            min_items: 0,
            max_items: 0,
        }
    }

    /// The cty type of the block's value.
    pub fn value_type(&self) -> Type {
        wrap_nesting(self.nesting, self.block.value_type())
    }
}

fn wrap_nesting(nesting: Nesting, obj: Type) -> Type {
    match nesting {
        Nesting::Single | Nesting::Group => obj,
        Nesting::List => Type::list(obj),
        Nesting::Set => Type::set(obj),
        Nesting::Map => Type::map(obj),
    }
}

/// A block: attributes and nested blocks.
#[derive(Debug, Clone, Default)]
pub struct Block {
    /// The attributes, in declaration order.
    pub attributes: Vec<Attribute>,
    /// The nested block types, in declaration order.
    pub blocks: Vec<NestedBlock>,
    /// Markdown description.
    pub description: &'static str,
    /// A deprecation message, if deprecated.
    pub deprecated: Option<&'static str>,
}

impl Block {
    /// An empty block with a description.
    pub fn new(description: &'static str) -> Block {
        Block {
            description,
            ..Block::default()
        }
    }

    /// Adds an attribute.
    #[must_use]
    pub fn attr(mut self, a: Attribute) -> Block {
        self.attributes.push(a);
        self
    }

    /// Adds a nested block type.
    #[must_use]
    pub fn block(mut self, b: NestedBlock) -> Block {
        self.blocks.push(b);
        self
    }

    /// `v` with every top-level write-only attribute set to null. Terraform hands the
    /// provider a write-only value in the configuration and the proposed state, and requires
    /// the planned and new state to hold null there: the value is used during the call and
    /// never stored.
    #[must_use]
    pub fn without_write_only(&self, v: Value) -> Value {
        let mut v = v;
        for a in self.attributes.iter().filter(|a| a.write_only) {
            if v.attr(a.name).is_some_and(|x| !x.is_null()) {
                v.set_attr(a.name, Value::Null);
            }
        }
        v
    }

    /// An attribute by name.
    pub fn attribute(&self, name: &str) -> Option<&Attribute> {
        self.attributes.iter().find(|a| a.name == name)
    }

    /// A nested block type by name.
    pub fn nested_block(&self, name: &str) -> Option<&NestedBlock> {
        self.blocks.iter().find(|b| b.type_name == name)
    }

    /// `partial` with every attribute and block type of this block present: those it lacks
    /// are null, so the value conforms to the schema (import skeletons use this).
    pub fn complete(&self, partial: &Value) -> Value {
        let names = self
            .attributes
            .iter()
            .map(|a| a.name)
            .chain(self.blocks.iter().map(|b| b.type_name));
        Value::object(names.map(|n| (n, partial.get(n).clone())))
    }

    /// The object type of the block's value: every attribute and block type.
    pub fn value_type(&self) -> Type {
        Type::Object(
            self.attributes
                .iter()
                .map(|a| (a.name.to_owned(), a.value_type()))
                .chain(
                    self.blocks
                        .iter()
                        .map(|b| (b.type_name.to_owned(), b.value_type())),
                )
                .collect(),
        )
    }
}

/// A versioned schema of a resource, data source or the provider configuration.
#[derive(Debug, Clone)]
pub struct Schema {
    /// Incremented whenever stored state needs upgrading.
    pub version: i64,
    /// The top-level block.
    pub block: Block,
}

impl Schema {
    /// A schema at version 0.
    pub fn new(block: Block) -> Schema {
        Schema { version: 0, block }
    }

    /// The object type of the whole value.
    pub fn value_type(&self) -> Type {
        self.block.value_type()
    }
}
