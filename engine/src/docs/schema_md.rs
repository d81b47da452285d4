//! Renders a schema block as the `## Schema` section of a page, the way `tfplugindocs` does:
//! `### Required` / `### Optional` / `### Read-Only` lists of `` - `name` (Type) description ``,
//! then one `### Nested Schema for `path`` section per nested block, nested attribute or
//! object-typed attribute, each behind an `<a id="...">` anchor the parent line links to.

use std::collections::{BTreeMap, VecDeque};

use crate::{
    schema::{AttrMode, AttrType, Attribute, Block, FieldDocs, NestedBlock, Nesting},
    value::{Type, Value},
};

/// Which list an attribute or block is shown in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    Required,
    Optional,
    ReadOnly,
}

impl Group {
    const ALL: [Group; 3] = [Group::Required, Group::Optional, Group::ReadOnly];

    fn of_mode(mode: AttrMode) -> Group {
        match mode {
            AttrMode::Required => Group::Required,
            AttrMode::Optional | AttrMode::OptionalComputed => Group::Optional,
            AttrMode::Computed => Group::ReadOnly,
        }
    }

    fn title(self) -> &'static str {
        match self {
            Group::Required => "Required",
            Group::Optional => "Optional",
            Group::ReadOnly => "Read-Only",
        }
    }
}

/// One entry of a block: an attribute or a nested block type.
#[derive(Clone, Copy)]
enum Item<'a> {
    Attr(&'a Attribute),
    Block(&'a NestedBlock),
}

impl Item<'_> {
    fn name(&self) -> &'static str {
        match self {
            Item::Attr(a) => a.name,
            Item::Block(b) => b.type_name,
        }
    }

    fn group(&self) -> Group {
        match self {
            Item::Attr(a) => Group::of_mode(a.mode),
            Item::Block(b) if b.min_items > 0 || b.nesting == Nesting::Group => Group::Required,
            Item::Block(_) => Group::Optional,
        }
    }
}

/// A nested schema section still to be written.
enum Pending<'a> {
    Items {
        path: String,
        anchor: String,
        items: Vec<Item<'a>>,
    },
    Object {
        path: String,
        anchor: String,
        fields: &'a BTreeMap<String, Type>,
        group: Group,
        /// Descriptions of the fields, and the object's path relative to their value.
        docs: &'a FieldDocs,
        relative: String,
    },
}

/// Writes one schema and the nested sections it needs.
struct Writer<'a> {
    out: String,
    pending: VecDeque<Pending<'a>>,
    /// Resource schemas say which attributes force replacement.
    resource: bool,
}

/// The `## Schema` section of `block`. `resource` adds "Changing this forces a new resource."
/// where the schema says so.
pub(super) fn schema(block: &Block, resource: bool) -> String {
    let mut w = Writer {
        out: String::from("## Schema\n\n"),
        pending: VecDeque::new(),
        resource,
    };
    w.items("", &block_items(block), true);
    w.drain();
    w.finish()
}

/// A list of the attributes of the object inside `ty` (under lists, sets and maps), described
/// by `docs`, with nested sections for objects within it, anchored under `path`. Empty when
/// `ty` holds no object.
pub(super) fn object_fields<'a>(path: &str, ty: &'a Type, docs: &'a FieldDocs) -> String {
    let Some(fields) = inner_object(ty) else {
        return String::new();
    };
    let mut w = Writer {
        out: String::new(),
        pending: VecDeque::new(),
        resource: false,
    };
    w.object(path, fields, None, docs, "");
    w.drain();
    w.finish()
}

impl<'a> Writer<'a> {
    fn finish(self) -> String {
        format!("{}\n", self.out.trim_end())
    }

    /// Writes the pending sections depth first: each section's own nested sections come right
    /// after it, before its siblings'.
    fn drain(&mut self) {
        while let Some(p) = self.pending.pop_front() {
            let siblings = std::mem::take(&mut self.pending);
            let (path, anchor) = match &p {
                Pending::Items { path, anchor, .. } | Pending::Object { path, anchor, .. } => {
                    (path.clone(), anchor.clone())
                }
            };
            self.out.push_str(&format!(
                "<a id=\"{anchor}\"></a>\n### Nested Schema for `{path}`\n\n"
            ));
            match p {
                Pending::Items { items, .. } => self.items(&path, &items, false),
                Pending::Object {
                    fields,
                    group,
                    docs,
                    relative,
                    ..
                } => self.object(&path, fields, Some(group), docs, &relative),
            }
            self.pending.extend(siblings);
        }
    }

    /// Required, Optional and Read-Only lists of `items`, sorted by name.
    fn items(&mut self, path: &str, items: &[Item<'a>], top: bool) {
        let mut sorted = items.to_vec();
        sorted.sort_by_key(Item::name);
        for group in Group::ALL {
            let members: Vec<&Item<'a>> = sorted.iter().filter(|i| i.group() == group).collect();
            if members.is_empty() {
                continue;
            }
            if top {
                self.out.push_str(&format!("### {}\n\n", group.title()));
            } else {
                self.out.push_str(&format!("{}:\n\n", group.title()));
            }
            for item in members {
                let line = match item {
                    Item::Attr(a) => self.attribute_line(path, a),
                    Item::Block(b) => self.block_line(path, b),
                };
                self.out.push_str(&line);
                self.out.push('\n');
            }
            self.out.push('\n');
        }
    }

    /// The fields of an object type, under the parent's group heading (none at top level),
    /// described by `docs` (`relative` is the object's path within their value).
    fn object(
        &mut self,
        path: &str,
        fields: &'a BTreeMap<String, Type>,
        group: Option<Group>,
        docs: &'a FieldDocs,
        relative: &str,
    ) {
        if let Some(g) = group {
            self.out.push_str(&format!("{}:\n\n", g.title()));
        }
        for (name, ty) in fields {
            let mut text = Vec::new();
            let field = join(relative, name);
            push_nonempty(&mut text, docs.get(&field));
            let child = join(path, name);
            if let Some(inner) = inner_object(ty) {
                let anchor = anchor("nestedobjatt", &child);
                text.push(see_below(&anchor));
                self.pending.push_back(Pending::Object {
                    path: child,
                    anchor,
                    fields: inner,
                    group: group.unwrap_or(Group::ReadOnly),
                    docs,
                    relative: field,
                });
            }
            let line = item_line(name, &type_label(ty), &text);
            self.out.push_str(&line);
            self.out.push('\n');
        }
        self.out.push('\n');
    }

    fn attribute_line(&mut self, path: &str, a: &'a Attribute) -> String {
        let child = join(path, a.name);
        let mut label = match &a.ty {
            AttrType::Plain(t) => type_label(t),
            AttrType::Nested { nesting, .. } => match nesting {
                Nesting::Single | Nesting::Group => "Attributes".to_owned(),
                Nesting::List => "Attributes List".to_owned(),
                Nesting::Set => "Attributes Set".to_owned(),
                Nesting::Map => "Attributes Map".to_owned(),
            },
        };
        if a.sensitive {
            label.push_str(", Sensitive");
        }
        if a.write_only {
            label.push_str(", Write-only");
        }
        if a.deprecated.is_some() {
            label.push_str(", Deprecated");
        }

        let mut text = Vec::new();
        if let Some(msg) = a.deprecated {
            text.push(format!("**Deprecated:** {msg}"));
        }
        push_nonempty(&mut text, a.description);
        text.extend(appended(a, self.resource));

        match &a.ty {
            AttrType::Nested { attributes, .. } => {
                let anchor = anchor("nestedatt", &child);
                text.push(see_below(&anchor));
                self.pending.push_back(Pending::Items {
                    path: child,
                    anchor,
                    items: attributes.iter().map(Item::Attr).collect(),
                });
            }
            AttrType::Plain(t) => {
                if let Some(fields) = inner_object(t) {
                    let anchor = anchor("nestedatt", &child);
                    text.push(see_below(&anchor));
                    self.pending.push_back(Pending::Object {
                        path: child,
                        anchor,
                        fields,
                        group: Group::of_mode(a.mode),
                        docs: &a.field_docs,
                        relative: String::new(),
                    });
                }
            }
        }
        item_line(a.name, &label, &text)
    }

    fn block_line(&mut self, path: &str, b: &'a NestedBlock) -> String {
        let child = join(path, b.type_name);
        let mut label = match b.nesting {
            Nesting::Single if b.min_items > 0 => "Block, Required".to_owned(),
            Nesting::Single => "Block, Optional".to_owned(),
            Nesting::Group => "Block".to_owned(),
            Nesting::List => "Block List".to_owned(),
            Nesting::Set => "Block Set".to_owned(),
            Nesting::Map => "Block Map".to_owned(),
        };
        if !matches!(b.nesting, Nesting::Single | Nesting::Group) {
            if b.min_items > 0 {
                label.push_str(&format!(", Min: {}", b.min_items));
            }
            if b.max_items > 0 {
                label.push_str(&format!(", Max: {}", b.max_items));
            }
        }
        if b.block.deprecated.is_some() {
            label.push_str(", Deprecated");
        }
        let mut text = Vec::new();
        if let Some(msg) = b.block.deprecated {
            text.push(format!("**Deprecated:** {msg}"));
        }
        push_nonempty(&mut text, b.block.description);
        let anchor = anchor("nestedblock", &child);
        text.push(see_below(&anchor));
        self.pending.push_back(Pending::Items {
            path: child,
            anchor,
            items: block_items(&b.block),
        });
        item_line(b.type_name, &label, &text)
    }
}

/// What resource pages append to attributes whose change replaces the object.
pub(super) const REPLACES: &str = "Changing this forces a new resource.";

/// The sentences the docs append to an attribute's own description, in order: the rules of
/// its validators that the description does not already state, its default and, on resource
/// pages (`resource`), that changing it replaces the object.
pub(super) fn appended(a: &Attribute, resource: bool) -> Vec<String> {
    let mut text = a.validator_sentences();
    if let Some(d) = &a.default {
        text.push(format!("Defaults to `{}`.", hcl_literal(d)));
    }
    if resource && a.requires_replace {
        text.push(REPLACES.to_owned());
    }
    text
}

fn block_items(block: &Block) -> Vec<Item<'_>> {
    block
        .attributes
        .iter()
        .map(Item::Attr)
        .chain(block.blocks.iter().map(Item::Block))
        .collect()
}

fn item_line(name: &str, label: &str, text: &[String]) -> String {
    let mut line = format!("- `{name}` ({label})");
    if !text.is_empty() {
        line.push(' ');
        line.push_str(&text.join(" "));
    }
    line
}

fn push_nonempty(text: &mut Vec<String>, s: &str) {
    let s = s.trim();
    if !s.is_empty() {
        text.push(s.to_owned());
    }
}

fn see_below(anchor: &str) -> String {
    format!("(see [below for nested schema](#{anchor}))")
}

fn anchor(kind: &str, path: &str) -> String {
    format!("{kind}--{}", path.replace('.', "--"))
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

/// The object type inside `ty`, looking through lists, sets and maps.
fn inner_object(ty: &Type) -> Option<&BTreeMap<String, Type>> {
    match ty {
        Type::Object(fields) => Some(fields),
        Type::List(e) | Type::Set(e) | Type::Map(e) => inner_object(e),
        _ => None,
    }
}

/// A type as `tfplugindocs` labels it: `String`, `List of Object`, `Map of Number`.
pub(super) fn type_label(ty: &Type) -> String {
    match ty {
        Type::String => "String".to_owned(),
        Type::Number => "Number".to_owned(),
        Type::Bool => "Boolean".to_owned(),
        Type::Dynamic => "Dynamic".to_owned(),
        Type::List(e) => format!("List of {}", type_label(e)),
        Type::Set(e) => format!("Set of {}", type_label(e)),
        Type::Map(e) => format!("Map of {}", type_label(e)),
        Type::Object(_) => "Object".to_owned(),
        Type::Tuple(_) => "Tuple".to_owned(),
    }
}

/// A type as function signatures write it: `string`, `list of object`.
pub(super) fn type_signature(ty: &Type) -> String {
    match ty {
        Type::String => "string".to_owned(),
        Type::Number => "number".to_owned(),
        Type::Bool => "bool".to_owned(),
        Type::Dynamic => "dynamic".to_owned(),
        Type::List(e) => format!("list of {}", type_signature(e)),
        Type::Set(e) => format!("set of {}", type_signature(e)),
        Type::Map(e) => format!("map of {}", type_signature(e)),
        Type::Object(_) => "object".to_owned(),
        Type::Tuple(_) => "tuple".to_owned(),
    }
}

/// A value as an HCL literal, for "Defaults to ..." sentences.
pub(super) fn hcl_literal(v: &Value) -> String {
    match v {
        Value::Null => "null".to_owned(),
        Value::Unknown(_) => "(known after apply)".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("{s:?}").replace("${", "$${"),
        Value::List(xs) | Value::Set(xs) | Value::Tuple(xs) => {
            let items: Vec<String> = xs.iter().map(hcl_literal).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Map(m) | Value::Object(m) => {
            if m.is_empty() {
                return "{}".to_owned();
            }
            let items: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{} = {}", hcl_key(k), hcl_literal(v)))
                .collect();
            format!("{{ {} }}", items.join(", "))
        }
        Value::Dynamic(d) => hcl_literal(&d.1),
    }
}

fn hcl_key(k: &str) -> String {
    let ident = k.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ident {
        k.to_owned()
    } else {
        format!("{k:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::OneOf;

    #[test]
    fn types_are_labelled_like_tfplugindocs() {
        assert_eq!(type_label(&Type::map(Type::Number)), "Map of Number");
        assert_eq!(type_label(&Type::list(Type::String)), "List of String");
        assert_eq!(type_label(&Type::Bool), "Boolean");
        assert_eq!(
            type_signature(&Type::list(Type::object([("a", Type::String)]))),
            "list of object"
        );
    }

    #[test]
    fn attribute_lines_carry_rules() {
        let block = Block::new("x")
            .attr(Attribute::required("name", Type::String).describe("The name."))
            .attr(
                Attribute::optional("power", Type::String)
                    .describe("Power state.")
                    .validate(OneOf::new(&["on", "off"]))
                    .default("on")
                    .requires_replace(),
            )
            .attr(
                Attribute::optional("token", Type::String)
                    .describe("A token.")
                    .sensitive(),
            )
            .attr(Attribute::computed("id", Type::String).describe("The id."));
        let md = schema(&block, true);
        assert!(
            md.contains("### Required\n\n- `name` (String) The name.\n"),
            "{md}"
        );
        assert!(
            md.contains(
                "- `power` (String) Power state. Must be one of `on`, `off`. \
                 Defaults to `\"on\"`. Changing this forces a new resource.\n"
            ),
            "{md}"
        );
        assert!(
            md.contains("- `token` (String, Sensitive) A token.\n"),
            "{md}"
        );
        assert!(
            md.contains("### Read-Only\n\n- `id` (String) The id.\n"),
            "{md}"
        );
    }

    #[test]
    fn nested_blocks_attributes_and_objects_get_sections() {
        let obj = Type::object([
            ("a", Type::String),
            ("inner", Type::list(Type::object([("b", Type::Number)]))),
        ]);
        let block = Block::new("x")
            .attr(Attribute::computed("things", Type::list(obj)).describe("Things."))
            .attr(
                Attribute::nested(
                    "rules",
                    Nesting::List,
                    AttrMode::Optional,
                    vec![Attribute::required("port", Type::Number).describe("Port.")],
                )
                .describe("Rules."),
            )
            .block(NestedBlock::single(
                "conn",
                Block::new("Connection.")
                    .attr(Attribute::optional("host", Type::String).describe("Host.")),
            ));
        let md = schema(&block, false);
        for needle in [
            "- `conn` (Block, Optional) Connection. (see [below for nested schema](#nestedblock--conn))",
            "- `rules` (Attributes List) Rules. (see [below for nested schema](#nestedatt--rules))",
            "- `things` (List of Object) Things. (see [below for nested schema](#nestedatt--things))",
            "<a id=\"nestedblock--conn\"></a>\n### Nested Schema for `conn`\n\nOptional:\n\n- `host` (String) Host.\n",
            "<a id=\"nestedatt--rules\"></a>\n### Nested Schema for `rules`\n\nRequired:\n\n- `port` (Number) Port.\n",
            "### Nested Schema for `things`\n\nRead-Only:\n\n- `a` (String)\n- `inner` (List of Object) (see [below for nested schema](#nestedobjatt--things--inner))\n",
            "<a id=\"nestedobjatt--things--inner\"></a>\n### Nested Schema for `things.inner`\n\nRead-Only:\n\n- `b` (Number)\n",
        ] {
            assert!(md.contains(needle), "missing {needle:?} in:\n{md}");
        }
    }

    #[test]
    fn literals_are_hcl() {
        let v = Value::object([
            ("a", Value::int(1)),
            ("b c", Value::List(vec![true.into()])),
        ]);
        assert_eq!(hcl_literal(&v), "{ a = 1, \"b c\" = [true] }");
    }
}
