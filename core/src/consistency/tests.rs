//! Named-case tables for each check, many ported from Terraform's `plan_valid_test.go` and
//! `compatible_test.go`. Each case lists the substrings its errors must contain, one per error;
//! an empty list means the value is valid.

use std::collections::BTreeMap;

use super::*;
use crate::{
    schema::{AttrMode, Attribute, Block, NestedBlock, Nesting},
    value::{NumberBound, Refinements, Type, Value},
};

// ---------------------------------------------------------------------------------------------
// Builders.

fn s(x: &str) -> Value {
    Value::string(x)
}

fn n(x: i64) -> Value {
    Value::int(x)
}

fn null() -> Value {
    Value::Null
}

fn unk() -> Value {
    Value::unknown()
}

fn refined(r: Refinements) -> Value {
    Value::Unknown(Box::new(r))
}

fn not_null() -> Value {
    Value::unknown_not_null()
}

fn bound(value: i64, inclusive: bool) -> Option<NumberBound> {
    Some(NumberBound {
        value: value.into(),
        inclusive,
    })
}

fn obj<const N: usize>(attrs: [(&str, Value); N]) -> Value {
    Value::object(attrs)
}

fn empty_obj() -> Value {
    Value::Object(BTreeMap::new())
}

fn list<const N: usize>(xs: [Value; N]) -> Value {
    Value::List(xs.into())
}

fn set<const N: usize>(xs: [Value; N]) -> Value {
    Value::set(xs.into())
}

fn map<const N: usize>(xs: [(&str, Value); N]) -> Value {
    Value::Map(xs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

fn dynamic(ty: Type, v: Value) -> Value {
    Value::Dynamic(Box::new((ty, v)))
}

fn block(attrs: Vec<Attribute>, blocks: Vec<NestedBlock>) -> Block {
    Block {
        attributes: attrs,
        blocks,
        ..Block::default()
    }
}

fn nested_block(name: &'static str, nesting: Nesting, body: Block) -> NestedBlock {
    NestedBlock {
        type_name: name,
        nesting,
        block: body,
        min_items: 0,
        max_items: 0,
    }
}

fn opt(name: &'static str) -> Attribute {
    Attribute::optional(name, Type::String)
}

fn req(name: &'static str) -> Attribute {
    Attribute::required(name, Type::String)
}

fn comp(name: &'static str) -> Attribute {
    Attribute::computed(name, Type::String)
}

fn opt_comp(name: &'static str) -> Attribute {
    Attribute::optional_computed(name, Type::String)
}

fn nested(
    name: &'static str,
    nesting: Nesting,
    mode: AttrMode,
    attrs: Vec<Attribute>,
) -> Attribute {
    Attribute::nested(name, nesting, mode, attrs)
}

/// `a` (optional string) and a list block `b` holding `c` (optional string), the schema most
/// of Terraform's plan cases use.
fn a_and_b_list(c: Attribute) -> Block {
    block(
        vec![opt("a")],
        vec![nested_block("b", Nesting::List, block(vec![c], vec![]))],
    )
}

fn a_and_b(a: &str, c: &str) -> Value {
    obj([("a", s(a)), ("b", list([obj([("c", s(c))])]))])
}

/// A single block type `b` holding `c` (optional string), with the given nesting.
fn b_blocks(nesting: Nesting) -> Block {
    block(
        vec![],
        vec![nested_block("b", nesting, block(vec![opt("c")], vec![]))],
    )
}

fn c_obj(c: &str) -> Value {
    obj([("c", s(c))])
}

/// The secret that sensitive cases use; no message may ever contain it.
const SECRET: &str = "hunter2";

/// Compares errors with the expected substrings: each error must match one of them and each
/// must be matched, one error apiece.
fn check(name: &str, got: &[PathError], want: &[&str], failures: &mut Vec<String>) {
    let got: Vec<String> = got.iter().map(ToString::to_string).collect();
    let missing: Vec<&&str> = want
        .iter()
        .filter(|w| !got.iter().any(|g| g.contains(**w)))
        .collect();
    let extra: Vec<&String> = got
        .iter()
        .filter(|g| !want.iter().any(|w| g.contains(w)))
        .collect();
    if !missing.is_empty() || !extra.is_empty() || got.len() != want.len() {
        failures.push(format!(
            "{name}:\n    missing: {missing:?}\n    unexpected: {extra:?}\n    got: {got:?}"
        ));
    }
    if let Some(leak) = got.iter().find(|g| g.contains(SECRET)) {
        failures.push(format!("{name}: leaked a secret: {leak}"));
    }
}

fn finish(failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} failing case(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// assert_plan_valid

struct PlanCase {
    name: &'static str,
    schema: Block,
    prior: Value,
    config: Value,
    planned: Value,
    want: &'static [&'static str],
}

#[allow(clippy::too_many_lines)]
fn plan_cases() -> Vec<PlanCase> {
    vec![
        PlanCase {
            name: "all empty",
            schema: Block::default(),
            prior: empty_obj(),
            config: empty_obj(),
            planned: empty_obj(),
            want: &[],
        },
        PlanCase {
            name: "no computed, all match",
            schema: a_and_b_list(opt("c")),
            prior: a_and_b("a value", "c value"),
            config: a_and_b("a value", "c value"),
            planned: a_and_b("a value", "c value"),
            want: &[],
        },
        PlanCase {
            name: "create: plan matches config",
            schema: a_and_b_list(opt("c")),
            prior: null(),
            config: a_and_b("a value", "c value"),
            planned: a_and_b("a value", "c value"),
            want: &[],
        },
        PlanCase {
            name: "create: invalid change in nested block",
            schema: a_and_b_list(opt("c")),
            prior: null(),
            config: a_and_b("a value", "c value"),
            planned: a_and_b("a value", "new c value"),
            want: &[r#"b[0].c: planned value "new c value" does not match config value "c value""#],
        },
        PlanCase {
            name: "create: invalid change to sensitive value is redacted",
            schema: a_and_b_list(opt("c").sensitive()),
            prior: null(),
            config: a_and_b("a value", "c value"),
            planned: a_and_b("a value", SECRET),
            want: &["b[0].c: sensitive planned value does not match config value"],
        },
        PlanCase {
            name: "update: diff suppression keeps the prior value",
            schema: a_and_b_list(opt("c")),
            prior: a_and_b("a value", "c value"),
            config: a_and_b("a value", "new c value"),
            planned: a_and_b("a value", "c value"),
            want: &[],
        },
        PlanCase {
            name: "update: value matches neither config nor prior",
            schema: block(vec![opt("a")], vec![]),
            prior: obj([("a", s("old"))]),
            config: obj([("a", s("new"))]),
            planned: obj([("a", s("other"))]),
            want: &[
                r#"a: planned value "other" does not match config value "new" nor prior value "old""#,
            ],
        },
        PlanCase {
            name: "update: sensitive value matching neither is redacted",
            schema: block(vec![opt("a").sensitive()], vec![]),
            prior: obj([("a", s("old"))]),
            config: obj([("a", s("new"))]),
            planned: obj([("a", s(SECRET))]),
            want: &["a: sensitive planned value does not match config value nor prior value"],
        },
        PlanCase {
            name: "no computed, all null",
            schema: a_and_b_list(opt("c")),
            prior: obj([("a", null()), ("b", list([obj([("c", null())])]))]),
            config: obj([("a", null()), ("b", list([obj([("c", null())])]))]),
            planned: obj([("a", null()), ("b", list([obj([("c", null())])]))]),
            want: &[],
        },
        PlanCase {
            name: "destroy: null plan for null config",
            schema: block(vec![opt("a")], vec![]),
            prior: obj([("a", s("x"))]),
            config: null(),
            planned: null(),
            want: &[],
        },
        PlanCase {
            name: "destroy: object planned for null config",
            schema: block(vec![opt("a")], vec![]),
            prior: obj([("a", s("x"))]),
            config: null(),
            planned: obj([("a", s("x"))]),
            want: &["(root): planned for existence but config wants absence"],
        },
        PlanCase {
            name: "null plan for a configured object",
            schema: block(vec![opt("a")], vec![]),
            prior: null(),
            config: obj([("a", s("x"))]),
            planned: null(),
            want: &["(root): planned for absence but config wants existence"],
        },
        PlanCase {
            name: "optional, not computed: provider may not fill it in",
            schema: block(vec![opt("a")], vec![]),
            prior: null(),
            config: obj([("a", null())]),
            planned: obj([("a", s("x"))]),
            want: &[r#"a: planned value "x" for a non-computed attribute"#],
        },
        PlanCase {
            name: "optional, not computed, sensitive: redacted",
            schema: block(vec![opt("a").sensitive()], vec![]),
            prior: null(),
            config: obj([("a", null())]),
            planned: obj([("a", s(SECRET))]),
            want: &["a: sensitive planned value for a non-computed attribute"],
        },
        PlanCase {
            name: "optional+computed with null config may be unknown",
            schema: block(vec![opt_comp("a")], vec![]),
            prior: null(),
            config: obj([("a", null())]),
            planned: obj([("a", unk())]),
            want: &[],
        },
        PlanCase {
            name: "optional+computed with null config may be known",
            schema: block(vec![opt_comp("a")], vec![]),
            prior: obj([("a", s("old"))]),
            config: obj([("a", null())]),
            planned: obj([("a", s("default"))]),
            want: &[],
        },
        PlanCase {
            name: "optional+computed configured may not change",
            schema: block(vec![opt_comp("a")], vec![]),
            prior: null(),
            config: obj([("a", s("x"))]),
            planned: obj([("a", s("y"))]),
            want: &[r#"a: planned value "y" does not match config value "x""#],
        },
        PlanCase {
            name: "computed only value with config",
            schema: block(vec![comp("a")], vec![]),
            prior: obj([("a", s("old"))]),
            config: obj([("a", s("old"))]),
            planned: obj([("a", unk())]),
            want: &[],
        },
        PlanCase {
            name: "required: planned unknown for a known config value",
            schema: block(vec![req("a")], vec![]),
            prior: null(),
            config: obj([("a", s("x"))]),
            planned: obj([("a", unk())]),
            want: &[r#"a: planned value unknown does not match config value "x""#],
        },
        PlanCase {
            name: "unknown config value must stay unknown",
            schema: block(vec![opt_comp("a")], vec![]),
            prior: null(),
            config: obj([("a", unk())]),
            planned: obj([("a", s("x"))]),
            want: &[r#"a: planned value "x" does not match config value unknown"#],
        },
        PlanCase {
            name: "unknown config value planned unknown",
            schema: block(vec![req("a")], vec![]),
            prior: null(),
            config: obj([("a", unk())]),
            planned: obj([("a", unk())]),
            want: &[],
        },
        PlanCase {
            name: "refined unknown values can become less refined",
            schema: block(vec![req("a")], vec![]),
            prior: obj([("a", s("old"))]),
            config: obj([("a", not_null())]),
            planned: obj([("a", unk())]),
            want: &[],
        },
        PlanCase {
            name: "refined unknown values in collection elements can become less refined",
            schema: block(
                vec![Attribute::optional("m", Type::map(Type::String))],
                vec![],
            ),
            prior: null(),
            config: obj([("m", map([("key", not_null())]))]),
            planned: obj([("m", map([("key", unk())]))]),
            want: &[],
        },
        PlanCase {
            name: "planned value of the wrong type",
            schema: block(vec![opt("a")], vec![]),
            prior: null(),
            config: obj([("a", s("1"))]),
            planned: obj([("a", n(1))]),
            want: &["a: planned value has the wrong type: string required, but have number"],
        },
        PlanCase {
            name: "planned value missing an attribute",
            schema: block(vec![opt("a"), opt("b")], vec![]),
            prior: null(),
            config: obj([("a", s("x")), ("b", null())]),
            planned: obj([("a", s("x"))]),
            want: &[r#"(root): planned value has the wrong type: attribute "b" is required"#],
        },
        PlanCase {
            name: "write-only attribute planned null",
            schema: block(vec![opt("foo").write_only()], vec![]),
            prior: obj([("foo", null())]),
            config: obj([("foo", s(SECRET))]),
            planned: obj([("foo", null())]),
            want: &[],
        },
        PlanCase {
            name: "write-only attribute planned with its configured value",
            schema: block(vec![opt("foo").write_only()], vec![]),
            prior: null(),
            config: obj([("foo", s(SECRET))]),
            planned: obj([("foo", s(SECRET))]),
            want: &["foo: planned value for write-only attribute is not null"],
        },
        PlanCase {
            name: "nested write-only attributes planned null",
            schema: block(
                vec![],
                vec![nested_block(
                    "nested",
                    Nesting::List,
                    block(vec![opt("foo").write_only()], vec![]),
                )],
            ),
            prior: obj([("nested", list([obj([("foo", null())])]))]),
            config: obj([("nested", list([obj([("foo", s(SECRET))])]))]),
            planned: obj([("nested", list([obj([("foo", null())])]))]),
            want: &[],
        },
        // Collections of blocks are never null.
        PlanCase {
            name: "nested list, null in plan",
            schema: b_blocks(Nesting::List),
            prior: null(),
            config: obj([("b", list([]))]),
            planned: obj([("b", null())]),
            want: &[
                "b: attribute representing a list of nested blocks must be empty to indicate no blocks, not null",
            ],
        },
        PlanCase {
            name: "nested set, null in plan",
            schema: b_blocks(Nesting::Set),
            prior: null(),
            config: obj([("b", set([]))]),
            planned: obj([("b", null())]),
            want: &[
                "b: attribute representing a set of nested blocks must be empty to indicate no blocks, not null",
            ],
        },
        PlanCase {
            name: "nested map, null in plan",
            schema: b_blocks(Nesting::Map),
            prior: null(),
            config: obj([("b", map([]))]),
            planned: obj([("b", null())]),
            want: &[
                "b: attribute representing a map of nested blocks must be empty to indicate no blocks, not null",
            ],
        },
        PlanCase {
            name: "nested list, null in config is read as empty",
            schema: b_blocks(Nesting::List),
            prior: obj([("b", list([]))]),
            config: obj([("b", null())]),
            planned: obj([("b", list([]))]),
            want: &[],
        },
        PlanCase {
            name: "nested list, block count differs",
            schema: b_blocks(Nesting::List),
            prior: null(),
            config: obj([("b", list([c_obj("x")]))]),
            planned: obj([("b", list([c_obj("x"), c_obj("y")]))]),
            want: &["b: block count in plan (2) disagrees with count in config (1)"],
        },
        PlanCase {
            name: "nested list, wholly unknown block element",
            schema: b_blocks(Nesting::List),
            prior: null(),
            config: obj([("b", list([c_obj("x")]))]),
            planned: obj([("b", list([unk()]))]),
            want: &["b[0]: element representing nested block must not be unknown itself"],
        },
        PlanCase {
            name: "nested list, unknown nested dynamic",
            schema: block(
                vec![],
                vec![nested_block(
                    "a",
                    Nesting::List,
                    block(
                        vec![comp("computed")],
                        vec![nested_block(
                            "b",
                            Nesting::List,
                            block(vec![opt("c")], vec![]),
                        )],
                    ),
                )],
            ),
            prior: obj([(
                "a",
                list([obj([("computed", null()), ("b", list([c_obj("x")]))])]),
            )]),
            config: obj([("a", list([obj([("computed", null()), ("b", unk())])]))]),
            planned: obj([("a", list([obj([("computed", null()), ("b", unk())])]))]),
            want: &[],
        },
        PlanCase {
            name: "nested set, unknown dynamic cannot be planned",
            schema: block(
                vec![comp("computed")],
                vec![nested_block(
                    "b",
                    Nesting::Set,
                    block(vec![opt("c")], vec![]),
                )],
            ),
            prior: obj([("computed", null()), ("b", set([c_obj("x")]))]),
            config: obj([("computed", null()), ("b", unk())]),
            planned: obj([("computed", s("default")), ("b", set([c_obj("oops")]))]),
            want: &[r#"b: planned value toset([{c = "oops"}]) for unknown dynamic block"#],
        },
        PlanCase {
            name: "nested set, invalid change is not checked",
            schema: b_blocks(Nesting::Set),
            prior: obj([("b", set([c_obj("c value")]))]),
            config: obj([("b", set([c_obj("c value")]))]),
            planned: obj([("b", set([c_obj("new c value")]))]),
            want: &[],
        },
        PlanCase {
            name: "nested set, wholly unknown block element",
            schema: b_blocks(Nesting::Set),
            prior: null(),
            config: obj([("b", set([c_obj("x")]))]),
            planned: obj([("b", set([unk()]))]),
            want: &["b[0]: element representing nested block must not be unknown itself"],
        },
        PlanCase {
            name: "nested map, normal update",
            schema: b_blocks(Nesting::Map),
            prior: obj([("b", map([("boop", c_obj("hello"))]))]),
            config: obj([("b", map([("boop", c_obj("howdy"))]))]),
            planned: obj([("b", map([("boop", c_obj("howdy"))]))]),
            want: &[],
        },
        PlanCase {
            name: "nested map, block count differs",
            schema: b_blocks(Nesting::Map),
            prior: null(),
            config: obj([("b", map([("x", c_obj("1")), ("y", c_obj("2"))]))]),
            planned: obj([("b", map([("x", c_obj("1"))]))]),
            want: &["b: block count in plan (1) disagrees with count in config (2)"],
        },
        PlanCase {
            name: "nested map, keys differ",
            schema: b_blocks(Nesting::Map),
            prior: null(),
            config: obj([("b", map([("x", c_obj("1"))]))]),
            planned: obj([("b", map([("y", c_obj("1"))]))]),
            want: &[
                r#"b: block key "y" from plan is not present in config"#,
                r#"b: block key "x" from config is not present in plan"#,
            ],
        },
        PlanCase {
            name: "nested map, invalid change inside a block",
            schema: b_blocks(Nesting::Map),
            prior: null(),
            config: obj([("b", map([("x", c_obj("1"))]))]),
            planned: obj([("b", map([("x", c_obj("2"))]))]),
            want: &[r#"b["x"].c: planned value "2" does not match config value "1""#],
        },
        PlanCase {
            name: "single block planned absent",
            schema: b_blocks(Nesting::Single),
            prior: null(),
            config: obj([("b", c_obj("x"))]),
            planned: obj([("b", null())]),
            want: &["b: planned for absence but config wants existence"],
        },
        PlanCase {
            name: "group block attributes are checked",
            schema: b_blocks(Nesting::Group),
            prior: null(),
            config: obj([("b", c_obj("x"))]),
            planned: obj([("b", c_obj("y"))]),
            want: &[r#"b.c: planned value "y" does not match config value "x""#],
        },
        // Nested attributes.
        PlanCase {
            name: "NestedType attr, no computed, all match",
            schema: block(
                vec![nested(
                    "a",
                    Nesting::List,
                    AttrMode::Optional,
                    vec![opt("b")],
                )],
                vec![],
            ),
            prior: obj([("a", list([obj([("b", s("b value"))])]))]),
            config: obj([("a", list([obj([("b", s("b value"))])]))]),
            planned: obj([("a", list([obj([("b", s("b value"))])]))]),
            want: &[],
        },
        PlanCase {
            name: "NestedType, no computed, invalid change in plan",
            schema: block(
                vec![nested(
                    "a",
                    Nesting::List,
                    AttrMode::Optional,
                    vec![opt("b")],
                )],
                vec![],
            ),
            prior: null(),
            config: obj([("a", list([obj([("b", s("c value"))])]))]),
            planned: obj([("a", list([obj([("b", s("new c value"))])]))]),
            want: &[r#"a[0].b: planned value "new c value" does not match config value "c value""#],
        },
        PlanCase {
            name: "NestedType attr, no computed, invalid change in plan sensitive",
            schema: block(
                vec![nested(
                    "a",
                    Nesting::List,
                    AttrMode::Optional,
                    vec![opt("b").sensitive()],
                )],
                vec![],
            ),
            prior: null(),
            config: obj([("a", list([obj([("b", s("b value"))])]))]),
            planned: obj([("a", list([obj([("b", s(SECRET))])]))]),
            want: &["a[0].b: sensitive planned value does not match config value"],
        },
        PlanCase {
            name: "NestedType attr, no computed, diff suppression in plan",
            schema: block(
                vec![nested(
                    "a",
                    Nesting::List,
                    AttrMode::Optional,
                    vec![opt("b")],
                )],
                vec![],
            ),
            prior: obj([("a", list([obj([("b", s("b value"))])]))]),
            config: obj([("a", list([obj([("b", s("new b value"))])]))]),
            planned: obj([("a", list([obj([("b", s("b value"))])]))]),
            want: &[],
        },
        PlanCase {
            name: "NestedType NestingSet attribute to null",
            schema: block(
                vec![nested(
                    "bloop",
                    Nesting::Set,
                    AttrMode::Optional,
                    vec![req("blop")],
                )],
                vec![],
            ),
            prior: obj([("bloop", set([obj([("blop", s("ok"))])]))]),
            config: obj([("bloop", null())]),
            planned: obj([("bloop", null())]),
            want: &[],
        },
        PlanCase {
            name: "NestedType nested list attribute to null",
            schema: block(
                vec![nested(
                    "bloop",
                    Nesting::List,
                    AttrMode::Optional,
                    vec![opt("blop")],
                )],
                vec![],
            ),
            prior: obj([("bloop", list([obj([("blop", s("ok"))])]))]),
            config: obj([("bloop", null())]),
            planned: obj([("bloop", list([obj([("blop", s("ok"))])]))]),
            want: &[r#"bloop: planned value [{blop = "ok"}] for a non-computed attribute"#],
        },
        PlanCase {
            name: "NestedType nested computed list attribute",
            schema: block(
                vec![nested(
                    "bloop",
                    Nesting::List,
                    AttrMode::Computed,
                    vec![opt("blop")],
                )],
                vec![],
            ),
            prior: obj([("bloop", list([obj([("blop", s("ok"))])]))]),
            config: obj([("bloop", null())]),
            planned: obj([("bloop", list([obj([("blop", s("ok"))])]))]),
            want: &[],
        },
        PlanCase {
            name: "cannot replace config nested attr",
            schema: block(
                vec![nested(
                    "map",
                    Nesting::Map,
                    AttrMode::Optional,
                    vec![opt_comp("name")],
                )],
                vec![],
            ),
            prior: null(),
            config: obj([("map", map([("one", obj([("name", s("from_config"))]))]))]),
            planned: obj([("map", map([("one", obj([("name", s("from_provider"))]))]))]),
            want: &[
                r#"map["one"].name: planned value "from_provider" does not match config value "from_config""#,
            ],
        },
        PlanCase {
            name: "computed nested objects may be planned unknown",
            schema: block(
                vec![
                    nested("map", Nesting::Map, AttrMode::Computed, vec![opt("name")]),
                    nested("list", Nesting::List, AttrMode::Computed, vec![opt("name")]),
                    nested(
                        "single",
                        Nesting::Single,
                        AttrMode::Computed,
                        vec![opt("name")],
                    ),
                ],
                vec![],
            ),
            prior: null(),
            config: obj([("map", null()), ("list", null()), ("single", null())]),
            planned: obj([
                ("map", map([("one", unk())])),
                ("list", list([obj([("name", s("computed"))])])),
                ("single", unk()),
            ]),
            want: &[],
        },
        PlanCase {
            name: "nested collection attrs planned unknown",
            schema: block(
                vec![
                    nested(
                        "set",
                        Nesting::Set,
                        AttrMode::OptionalComputed,
                        vec![opt_comp("name")],
                    ),
                    nested(
                        "list",
                        Nesting::List,
                        AttrMode::OptionalComputed,
                        vec![opt_comp("name")],
                    ),
                    nested(
                        "map",
                        Nesting::Map,
                        AttrMode::OptionalComputed,
                        vec![opt_comp("name")],
                    ),
                ],
                vec![],
            ),
            prior: null(),
            config: obj([
                ("set", set([obj([("name", s("from_config"))])])),
                ("list", list([obj([("name", s("from_config"))])])),
                ("map", map([("key", obj([("name", s("from_config"))]))])),
            ]),
            planned: obj([("set", unk()), ("list", unk()), ("map", unk())]),
            want: &[
                "set: planned unknown for configured value",
                "list: planned unknown for configured value",
                "map: planned unknown for configured value",
            ],
        },
        PlanCase {
            name: "nested set values can contain computed unknown",
            schema: block(
                vec![nested(
                    "set",
                    Nesting::Set,
                    AttrMode::Optional,
                    vec![opt("input"), opt_comp("computed")],
                )],
                vec![],
            ),
            prior: null(),
            config: obj([(
                "set",
                set([
                    obj([("input", s("a")), ("computed", null())]),
                    obj([("input", s("b")), ("computed", null())]),
                ]),
            )]),
            planned: obj([(
                "set",
                set([
                    obj([("input", s("a")), ("computed", unk())]),
                    obj([("input", s("b")), ("computed", unk())]),
                ]),
            )]),
            want: &[],
        },
        PlanCase {
            name: "nested list attribute count differs",
            schema: block(
                vec![nested(
                    "a",
                    Nesting::List,
                    AttrMode::Optional,
                    vec![opt_comp("b")],
                )],
                vec![],
            ),
            prior: null(),
            config: obj([("a", list([obj([("b", s("x"))])]))]),
            planned: obj([("a", list([obj([("b", s("x"))]), obj([("b", s("y"))])]))]),
            want: &["a: count in plan (2) disagrees with count in config (1)"],
        },
        PlanCase {
            name: "nested map attribute keys differ",
            schema: block(
                vec![nested(
                    "m",
                    Nesting::Map,
                    AttrMode::Optional,
                    vec![opt_comp("b")],
                )],
                vec![],
            ),
            prior: null(),
            config: obj([("m", map([("one", obj([("b", null())]))]))]),
            planned: obj([("m", map([("two", obj([("b", null())]))]))]),
            want: &[
                r#"m: map key "two" from plan is not present in config"#,
                r#"m: map key "one" from config is not present in plan"#,
            ],
        },
        PlanCase {
            name: "nested set attribute cannot reach the configured length",
            schema: block(
                vec![nested(
                    "s",
                    Nesting::Set,
                    AttrMode::Optional,
                    vec![opt_comp("b")],
                )],
                vec![],
            ),
            prior: null(),
            config: obj([("s", set([obj([("b", s("x"))]), obj([("b", s("y"))])]))]),
            planned: obj([("s", set([obj([("b", s("x"))])]))]),
            want: &["s: count in plan (1) disagrees with count in config (2)"],
        },
        PlanCase {
            name: "nested single attribute planned absent",
            schema: block(
                vec![nested(
                    "n",
                    Nesting::Single,
                    AttrMode::Optional,
                    vec![opt("b")],
                )],
                vec![],
            ),
            prior: null(),
            config: obj([("n", obj([("b", s("x"))]))]),
            planned: obj([("n", null())]),
            want: &["n: planned for absence but config wants existence"],
        },
        PlanCase {
            name: "children of a sensitive nested attribute are redacted",
            schema: block(
                vec![nested("n", Nesting::Single, AttrMode::Optional, vec![opt("pw")]).sensitive()],
                vec![],
            ),
            prior: null(),
            config: obj([("n", obj([("pw", s("typed"))]))]),
            planned: obj([("n", obj([("pw", s(SECRET))]))]),
            want: &["n.pw: sensitive planned value does not match config value"],
        },
        PlanCase {
            name: "dynamic attribute compares values with their types",
            schema: block(vec![Attribute::optional("d", Type::Dynamic)], vec![]),
            prior: null(),
            config: obj([("d", dynamic(Type::String, s("a")))]),
            planned: obj([("d", dynamic(Type::String, s("b")))]),
            want: &[r#"d: planned value "b" does not match config value "a""#],
        },
        PlanCase {
            name: "dynamic attribute unchanged",
            schema: block(vec![Attribute::optional("d", Type::Dynamic)], vec![]),
            prior: null(),
            config: obj([("d", dynamic(Type::list(Type::Number), list([n(1)])))]),
            planned: obj([("d", dynamic(Type::list(Type::Number), list([n(1)])))]),
            want: &[],
        },
    ]
}

#[test]
fn plan_validity() {
    let cases = plan_cases();
    assert!(cases.len() >= 25);
    let mut failures = Vec::new();
    for case in &cases {
        let got = assert_plan_valid(&case.schema, &case.prior, &case.config, &case.planned);
        check(case.name, &got, case.want, &mut failures);
    }
    finish(&failures);
}

// ---------------------------------------------------------------------------------------------
// assert_object_compatible (apply)

struct CompatCase {
    name: &'static str,
    schema: Block,
    planned: Value,
    actual: Value,
    want: &'static [&'static str],
}

fn id_and(attr: Attribute) -> Block {
    block(vec![comp("id"), attr], vec![])
}

fn foo_blocks(name: &'static str, nesting: Nesting) -> Block {
    block(
        vec![],
        vec![nested_block(name, nesting, block(vec![opt("foo")], vec![]))],
    )
}

fn foo(v: Value) -> Value {
    obj([("foo", v)])
}

#[allow(clippy::too_many_lines)]
fn compat_cases() -> Vec<CompatCase> {
    vec![
        CompatCase {
            name: "all empty",
            schema: Block::default(),
            planned: empty_obj(),
            actual: empty_obj(),
            want: &[],
        },
        CompatCase {
            name: "delete: null stays null",
            schema: id_and(req("name")),
            planned: null(),
            actual: null(),
            want: &[],
        },
        CompatCase {
            name: "null root object became present",
            schema: id_and(req("name")),
            planned: null(),
            actual: obj([("id", s("i-1")), ("name", s("x"))]),
            want: &["(root): was absent, but now present"],
        },
        CompatCase {
            name: "computed id becomes known",
            schema: id_and(req("name")),
            planned: obj([("id", unk()), ("name", s("thingy"))]),
            actual: obj([("id", s("i-1")), ("name", s("thingy"))]),
            want: &[],
        },
        CompatCase {
            name: "unknown name becomes known",
            schema: id_and(req("name")),
            planned: obj([("id", unk()), ("name", unk())]),
            actual: obj([("id", s("i-1")), ("name", s("thingy"))]),
            want: &[],
        },
        CompatCase {
            name: "known value changed",
            schema: id_and(req("name")),
            planned: obj([("id", unk()), ("name", s("wotsit"))]),
            actual: obj([("id", s("i-1")), ("name", s("thingy"))]),
            want: &[r#"name: was "wotsit", but now "thingy""#],
        },
        CompatCase {
            name: "known number compares numerically",
            schema: id_and(Attribute::required("size", Type::Number)),
            planned: obj([
                ("id", unk()),
                ("size", Value::Number("1.50".parse().expect("number"))),
            ]),
            actual: obj([
                ("id", s("i-1")),
                ("size", Value::Number("1.5".parse().expect("number"))),
            ]),
            want: &[],
        },
        CompatCase {
            name: "wrong final value type",
            schema: block(vec![req("name")], vec![]),
            planned: obj([("name", unk())]),
            actual: obj([("name", n(0))]),
            want: &["name: wrong final value type: string required, but have number"],
        },
        CompatCase {
            name: "unknown left after apply",
            schema: id_and(req("name")),
            planned: obj([("id", unk()), ("name", s("x"))]),
            actual: obj([("id", unk()), ("name", s("x"))]),
            want: &["id: unknown value after apply"],
        },
        CompatCase {
            name: "write-only value returned after apply",
            schema: block(vec![opt("pw").write_only()], vec![]),
            planned: obj([("pw", null())]),
            actual: obj([("pw", s(SECRET))]),
            want: &["pw: write-only attribute value must be null"],
        },
        CompatCase {
            name: "not-null refinement violated",
            schema: block(vec![req("name")], vec![]),
            planned: obj([("name", not_null())]),
            actual: obj([("name", null())]),
            want: &[
                "name: final value null does not conform to planning placeholder unknown (not null)",
            ],
        },
        CompatCase {
            name: "prefix refinement violated",
            schema: block(vec![req("name")], vec![]),
            planned: obj([(
                "name",
                refined(Refinements {
                    not_null: true,
                    string_prefix: Some("boop:".to_owned()),
                    ..Refinements::default()
                }),
            )]),
            actual: obj([("name", s("thingy"))]),
            want: &[
                r#"name: final value "thingy" does not conform to planning placeholder unknown (not null, prefix "boop:")"#,
            ],
        },
        CompatCase {
            name: "prefix refinement satisfied",
            schema: block(vec![req("name")], vec![]),
            planned: obj([(
                "name",
                refined(Refinements {
                    string_prefix: Some("boop:".to_owned()),
                    ..Refinements::default()
                }),
            )]),
            actual: obj([("name", s("boop:thingy"))]),
            want: &[],
        },
        CompatCase {
            name: "number bounds violated",
            schema: block(vec![Attribute::computed("count", Type::Number)], vec![]),
            planned: obj([(
                "count",
                refined(Refinements {
                    number_lower: bound(1, true),
                    number_upper: bound(10, false),
                    ..Refinements::default()
                }),
            )]),
            actual: obj([("count", n(10))]),
            want: &[
                "count: final value 10 does not conform to planning placeholder unknown (>= 1, < 10)",
            ],
        },
        CompatCase {
            name: "number bounds satisfied",
            schema: block(vec![Attribute::computed("count", Type::Number)], vec![]),
            planned: obj([(
                "count",
                refined(Refinements {
                    number_lower: bound(1, true),
                    number_upper: bound(10, false),
                    ..Refinements::default()
                }),
            )]),
            actual: obj([("count", n(1))]),
            want: &[],
        },
        CompatCase {
            name: "length bounds violated",
            schema: block(
                vec![Attribute::computed("names", Type::list(Type::String))],
                vec![],
            ),
            planned: obj([(
                "names",
                refined(Refinements {
                    length_lower: Some(2),
                    ..Refinements::default()
                }),
            )]),
            actual: obj([("names", list([s("a")]))]),
            want: &[
                r#"names: final value ["a"] does not conform to planning placeholder unknown (length >= 2)"#,
            ],
        },
        CompatCase {
            name: "length bounds satisfied",
            schema: block(
                vec![Attribute::computed("names", Type::list(Type::String))],
                vec![],
            ),
            planned: obj([(
                "names",
                refined(Refinements {
                    length_lower: Some(2),
                    length_upper: Some(2),
                    ..Refinements::default()
                }),
            )]),
            actual: obj([("names", list([s("a"), s("b")]))]),
            want: &[],
        },
        CompatCase {
            name: "sensitive attribute changed is redacted",
            schema: id_and(req("name").sensitive()),
            planned: obj([("id", unk()), ("name", s("wotsit"))]),
            actual: obj([("id", s("i-1")), ("name", s(SECRET))]),
            want: &["name: inconsistent values for sensitive attribute"],
        },
        CompatCase {
            name: "dynamic planned unknown accepts anything",
            schema: id_and(Attribute::required("stuff", Type::Dynamic)),
            planned: obj([("id", unk()), ("stuff", unk())]),
            actual: obj([
                ("id", s("i-1")),
                ("stuff", dynamic(Type::String, s("thingy"))),
            ]),
            want: &[],
        },
        CompatCase {
            name: "dynamic value changed",
            schema: id_and(Attribute::required("stuff", Type::Dynamic)),
            planned: obj([("id", unk()), ("stuff", dynamic(Type::String, s("wotsit")))]),
            actual: obj([
                ("id", s("i-1")),
                ("stuff", dynamic(Type::String, s("thingy"))),
            ]),
            want: &[r#"stuff: was "wotsit", but now "thingy""#],
        },
        CompatCase {
            name: "dynamic type changed",
            schema: id_and(Attribute::required("stuff", Type::Dynamic)),
            planned: obj([("id", unk()), ("stuff", dynamic(Type::String, s("true")))]),
            actual: obj([
                ("id", s("i-1")),
                ("stuff", dynamic(Type::Bool, Value::Bool(true))),
            ]),
            want: &["stuff: wrong final value type: string required, but have bool"],
        },
        CompatCase {
            name: "dynamic object lost an attribute",
            schema: id_and(Attribute::required("stuff", Type::Dynamic)),
            planned: obj([
                ("id", unk()),
                (
                    "stuff",
                    dynamic(
                        Type::object([("nonsense", Type::String)]),
                        obj([("nonsense", s("yup"))]),
                    ),
                ),
            ]),
            actual: obj([
                ("id", s("i-1")),
                (
                    "stuff",
                    dynamic(Type::object::<[(&str, Type); 0], &str>([]), empty_obj()),
                ),
            ]),
            want: &[r#"stuff: wrong final value type: attribute "nonsense" is required"#],
        },
        CompatCase {
            name: "map unknown element became known",
            schema: id_and(Attribute::optional("tags", Type::map(Type::String))),
            planned: obj([("id", unk()), ("tags", map([("Name", unk())]))]),
            actual: obj([("id", s("i-1")), ("tags", map([("Name", s("thingy"))]))]),
            want: &[],
        },
        CompatCase {
            name: "map element changed",
            schema: id_and(Attribute::optional("tags", Type::map(Type::String))),
            planned: obj([("id", unk()), ("tags", map([("Name", s("wotsit"))]))]),
            actual: obj([("id", s("i-1")), ("tags", map([("Name", s("thingy"))]))]),
            want: &[r#"tags["Name"]: was "wotsit", but now "thingy""#],
        },
        CompatCase {
            name: "map element appeared",
            schema: id_and(Attribute::optional("tags", Type::map(Type::String))),
            planned: obj([("id", unk()), ("tags", map([("Name", s("thingy"))]))]),
            actual: obj([
                ("id", s("i-1")),
                (
                    "tags",
                    map([("Name", s("thingy")), ("Env", s("production"))]),
                ),
            ]),
            want: &[r#"tags: new element "Env" has appeared"#],
        },
        CompatCase {
            name: "map element vanished",
            schema: id_and(Attribute::optional("tags", Type::map(Type::String))),
            planned: obj([("id", unk()), ("tags", map([("Name", s("thingy"))]))]),
            actual: obj([("id", s("i-1")), ("tags", map([]))]),
            want: &[r#"tags: element "Name" has vanished"#],
        },
        CompatCase {
            name: "map unknown element became null",
            schema: id_and(Attribute::optional("tags", Type::map(Type::String))),
            planned: obj([("id", unk()), ("tags", map([("Name", unk())]))]),
            actual: obj([("id", s("i-1")), ("tags", map([("Name", null())]))]),
            want: &[],
        },
        CompatCase {
            name: "known value became null",
            schema: id_and(opt("name")),
            planned: obj([("id", unk()), ("name", s("x"))]),
            actual: obj([("id", s("i-1")), ("name", null())]),
            want: &[r#"name: was "x", but now null"#],
        },
        CompatCase {
            name: "set grew an element",
            schema: id_and(Attribute::optional("zones", Type::set(Type::String))),
            planned: obj([("id", unk()), ("zones", set([s("thingy")]))]),
            actual: obj([("id", s("i-1")), ("zones", set([s("thingy"), s("wotsit")]))]),
            want: &[
                r#"zones: actual set element "wotsit" does not correlate with any element in plan"#,
                "zones: length changed from 1 to 2",
            ],
        },
        CompatCase {
            name: "set unknowns coalesce",
            schema: id_and(Attribute::optional("zones", Type::set(Type::String))),
            planned: obj([("id", unk()), ("zones", set([unk(), unk()]))]),
            actual: obj([("id", s("i-1")), ("zones", set([s("thingy")]))]),
            want: &[],
        },
        CompatCase {
            name: "list unknown element resolved",
            schema: id_and(Attribute::optional("names", Type::list(Type::String))),
            planned: obj([("id", unk()), ("names", list([s("thingy"), unk()]))]),
            actual: obj([
                ("id", s("i-1")),
                ("names", list([s("thingy"), s("wotsit")])),
            ]),
            want: &[],
        },
        CompatCase {
            name: "list known element changed",
            schema: id_and(Attribute::optional("names", Type::list(Type::String))),
            planned: obj([("id", unk()), ("names", list([unk(), s("thingy")]))]),
            actual: obj([
                ("id", s("i-1")),
                ("names", list([s("thingy"), s("wotsit")])),
            ]),
            want: &[r#"names[1]: was "thingy", but now "wotsit""#],
        },
        CompatCase {
            name: "list element appeared",
            schema: id_and(Attribute::optional("names", Type::list(Type::String))),
            planned: obj([("id", unk()), ("names", list([unk()]))]),
            actual: obj([
                ("id", s("i-1")),
                ("names", list([s("thingy"), s("wotsit")])),
            ]),
            want: &["names: new element 1 has appeared"],
        },
        CompatCase {
            name: "unknown list became known",
            schema: id_and(Attribute::optional("names", Type::list(Type::String))),
            planned: obj([("id", unk()), ("names", unk())]),
            actual: obj([("id", s("i-1")), ("names", list([s("thingy")]))]),
            want: &[],
        },
        // Blocks.
        CompatCase {
            name: "single block absent became present",
            schema: foo_blocks("key", Nesting::Single),
            planned: obj([("key", null())]),
            actual: obj([("key", foo(s("hello")))]),
            want: &["key: was absent, but now present"],
        },
        CompatCase {
            name: "single block present became absent",
            schema: foo_blocks("key", Nesting::Single),
            planned: obj([("key", foo(s("hello")))]),
            actual: obj([("key", null())]),
            want: &["key: was present, but now absent"],
        },
        CompatCase {
            name: "unknown single block placeholder may become absent",
            schema: foo_blocks("key", Nesting::Single),
            planned: obj([("key", unk())]),
            actual: obj([("key", null())]),
            want: &[],
        },
        CompatCase {
            name: "unknown root object may expand into blocks",
            schema: foo_blocks("key", Nesting::List),
            planned: unk(),
            actual: obj([("key", list([foo(s("hello")), foo(s("world"))]))]),
            want: &[],
        },
        CompatCase {
            name: "list block count changed",
            schema: foo_blocks("key", Nesting::List),
            planned: obj([("key", list([foo(s("bar")), foo(s("bar"))]))]),
            actual: obj([("key", list([foo(s("bar"))]))]),
            want: &["key: block count changed from 2 to 1"],
        },
        CompatCase {
            name: "list block attribute changed",
            schema: foo_blocks("key", Nesting::List),
            planned: obj([("key", list([foo(s("bar"))]))]),
            actual: obj([("key", list([foo(s("baz"))]))]),
            want: &[r#"key[0].foo: was "bar", but now "baz""#],
        },
        CompatCase {
            name: "set block elements unchanged",
            schema: foo_blocks("block", Nesting::Set),
            planned: obj([("block", set([foo(s("hello")), foo(s("world"))]))]),
            actual: obj([("block", set([foo(s("hello")), foo(s("world"))]))]),
            want: &[],
        },
        CompatCase {
            name: "set block unknowns coalesce",
            schema: foo_blocks("block", Nesting::Set),
            planned: obj([("block", set([foo(unk()), foo(unk())]))]),
            actual: obj([("block", set([foo(s("hello"))]))]),
            want: &[],
        },
        CompatCase {
            name: "set block element does not correlate",
            schema: foo_blocks("block", Nesting::Set),
            planned: obj([("block", set([foo(s("hello")), foo(s("world"))]))]),
            actual: obj([("block", set([foo(s("howdy")), foo(s("world"))]))]),
            want: &[
                r#"block: planned set element {foo = "hello"} does not correlate with any element in actual"#,
            ],
        },
        CompatCase {
            name: "unknown set block may expand",
            schema: foo_blocks("block", Nesting::Set),
            planned: obj([("block", unk())]),
            actual: obj([(
                "block",
                set([foo(s("hello")), foo(s("world")), foo(s("nope"))]),
            )]),
            want: &[],
        },
        CompatCase {
            name: "partially known set block may shrink",
            schema: foo_blocks("block3", Nesting::Set),
            planned: obj([("block3", set([foo(s("a")), foo(unk())]))]),
            actual: obj([("block3", set([foo(s("a"))]))]),
            want: &[],
        },
        CompatCase {
            name: "set block with a sensitive attribute is redacted",
            schema: block(
                vec![],
                vec![nested_block(
                    "block",
                    Nesting::Set,
                    block(vec![opt("foo").sensitive()], vec![]),
                )],
            ),
            planned: obj([("block", set([foo(s(SECRET))]))]),
            actual: obj([("block", set([foo(s("other"))]))]),
            want: &[
                "block: planned set element (sensitive value) does not correlate with any element in actual",
            ],
        },
        CompatCase {
            name: "map block keys changed",
            schema: foo_blocks("block", Nesting::Map),
            planned: obj([("block", map([("a", foo(s("1"))), ("b", foo(s("2")))]))]),
            actual: obj([("block", map([("a", foo(s("1"))), ("c", foo(s("2")))]))]),
            want: &[
                r#"block: block key "b" has vanished"#,
                r#"block: new block key "c" has appeared"#,
            ],
        },
        CompatCase {
            name: "map block count changed",
            schema: foo_blocks("block", Nesting::Map),
            planned: obj([("block", map([("a", foo(s("1")))]))]),
            actual: obj([("block", map([("a", foo(s("1"))), ("c", foo(s("2")))]))]),
            want: &["block: block count changed from 1 to 2"],
        },
        // Nested attributes.
        CompatCase {
            name: "nested list attribute element changed",
            schema: block(
                vec![nested(
                    "a",
                    Nesting::List,
                    AttrMode::Optional,
                    vec![opt("b")],
                )],
                vec![],
            ),
            planned: obj([("a", list([obj([("b", s("x"))])]))]),
            actual: obj([("a", list([obj([("b", s("y"))])]))]),
            want: &[r#"a[0].b: was "x", but now "y""#],
        },
        CompatCase {
            name: "sensitive child of a nested attribute is redacted",
            schema: block(
                vec![nested(
                    "n",
                    Nesting::Single,
                    AttrMode::Optional,
                    vec![opt("user"), opt("pw").sensitive()],
                )],
                vec![],
            ),
            planned: obj([("n", obj([("user", s("a")), ("pw", s("x"))]))]),
            actual: obj([("n", obj([("user", s("b")), ("pw", s(SECRET))]))]),
            want: &[
                r#"n.user: was "a", but now "b""#,
                "n.pw: inconsistent values for sensitive attribute",
            ],
        },
        CompatCase {
            name: "nested set attribute element does not correlate, redacted",
            schema: block(
                vec![nested(
                    "s",
                    Nesting::Set,
                    AttrMode::Optional,
                    vec![opt("pw").sensitive()],
                )],
                vec![],
            ),
            planned: obj([("s", set([obj([("pw", s("x"))])]))]),
            actual: obj([("s", set([obj([("pw", s(SECRET))])]))]),
            want: &[
                "s: planned set element (sensitive value) does not correlate with any element in actual",
            ],
        },
    ]
}

#[test]
fn apply_compatibility() {
    let cases = compat_cases();
    assert!(cases.len() >= 20);
    let mut failures = Vec::new();
    for case in &cases {
        let got = assert_object_compatible(&case.schema, &case.planned, &case.actual);
        check(case.name, &got, case.want, &mut failures);
    }
    finish(&failures);
}

// ---------------------------------------------------------------------------------------------
// assert_final_plan_consistent

#[allow(clippy::too_many_lines)]
fn final_plan_cases() -> Vec<CompatCase> {
    let count = |r: Refinements| obj([("count", refined(r))]);
    let count_schema = || block(vec![Attribute::computed("count", Type::Number)], vec![]);
    vec![
        CompatCase {
            name: "unknown may stay unknown",
            schema: id_and(req("name")),
            planned: obj([("id", unk()), ("name", unk())]),
            actual: obj([("id", unk()), ("name", s("x"))]),
            want: &[],
        },
        CompatCase {
            name: "known may not become unknown",
            schema: id_and(req("name")),
            planned: obj([("id", unk()), ("name", s("x"))]),
            actual: obj([("id", unk()), ("name", unk())]),
            want: &["name: was known, but now unknown"],
        },
        CompatCase {
            name: "known value changed",
            schema: id_and(req("name")),
            planned: obj([("id", unk()), ("name", s("a"))]),
            actual: obj([("id", unk()), ("name", s("b"))]),
            want: &[r#"name: was "a", but now "b""#],
        },
        CompatCase {
            name: "unknown may gain refinements",
            schema: count_schema(),
            planned: obj([("count", unk())]),
            actual: count(Refinements {
                not_null: true,
                number_lower: bound(0, true),
                ..Refinements::default()
            }),
            want: &[],
        },
        CompatCase {
            name: "overlapping refined unknowns",
            schema: count_schema(),
            planned: count(Refinements {
                number_lower: bound(0, true),
                number_upper: bound(10, true),
                ..Refinements::default()
            }),
            actual: count(Refinements {
                number_lower: bound(10, true),
                ..Refinements::default()
            }),
            want: &[],
        },
        CompatCase {
            name: "disjoint refined unknowns",
            schema: count_schema(),
            planned: count(Refinements {
                number_lower: bound(10, true),
                ..Refinements::default()
            }),
            actual: count(Refinements {
                number_upper: bound(5, true),
                ..Refinements::default()
            }),
            want: &[
                "count: final value unknown (<= 5) does not conform to planning placeholder unknown (>= 10)",
            ],
        },
        CompatCase {
            name: "bounds touching at an exclusive end are disjoint",
            schema: count_schema(),
            planned: count(Refinements {
                number_lower: bound(10, false),
                ..Refinements::default()
            }),
            actual: count(Refinements {
                number_upper: bound(10, true),
                ..Refinements::default()
            }),
            want: &["does not conform to planning placeholder unknown (> 10)"],
        },
        CompatCase {
            name: "disjoint length refinements",
            schema: block(
                vec![Attribute::computed("names", Type::list(Type::String))],
                vec![],
            ),
            planned: obj([(
                "names",
                refined(Refinements {
                    length_lower: Some(3),
                    ..Refinements::default()
                }),
            )]),
            actual: obj([(
                "names",
                refined(Refinements {
                    length_upper: Some(1),
                    ..Refinements::default()
                }),
            )]),
            want: &[
                "names: final value unknown (length <= 1) does not conform to planning placeholder unknown (length >= 3)",
            ],
        },
        CompatCase {
            name: "known value breaks a refinement",
            schema: count_schema(),
            planned: count(Refinements {
                number_upper: bound(3, true),
                ..Refinements::default()
            }),
            actual: obj([("count", n(4))]),
            want: &["count: final value 4 does not conform to planning placeholder unknown (<= 3)"],
        },
        CompatCase {
            name: "unknown list block may stay unknown",
            schema: foo_blocks("key", Nesting::List),
            planned: obj([("key", unk())]),
            actual: obj([("key", unk())]),
            want: &[],
        },
        CompatCase {
            name: "wrong type at apply time",
            schema: id_and(req("name")),
            planned: obj([("id", unk()), ("name", unk())]),
            actual: obj([("id", unk()), ("name", Value::Bool(true))]),
            want: &["name: wrong final value type: string required, but have bool"],
        },
        CompatCase {
            name: "sensitive value changed at apply time is redacted",
            schema: id_and(req("name").sensitive()),
            planned: obj([("id", unk()), ("name", s("a"))]),
            actual: obj([("id", unk()), ("name", s(SECRET))]),
            want: &["name: inconsistent values for sensitive attribute"],
        },
    ]
}

#[test]
fn final_plan_consistency() {
    let mut failures = Vec::new();
    for case in &final_plan_cases() {
        let got = assert_final_plan_consistent(&case.schema, &case.planned, &case.actual);
        check(case.name, &got, case.want, &mut failures);
    }
    finish(&failures);
}

// ---------------------------------------------------------------------------------------------
// The smaller checks.

#[test]
fn wholly_known_and_conformant() {
    let schema = block(
        vec![
            comp("id"),
            Attribute::optional("tags", Type::map(Type::String)),
        ],
        vec![nested_block(
            "b",
            Nesting::List,
            block(vec![opt("c")], vec![]),
        )],
    );
    let ty = schema.value_type();
    let good = || {
        obj([
            ("id", s("i-1")),
            ("tags", map([("k", s("v"))])),
            ("b", list([c_obj("x")])),
        ])
    };
    let cases: Vec<(&str, Value, &[&str])> = vec![
        ("wholly known", good(), &[]),
        ("null (object gone on refresh)", null(), &[]),
        (
            "unknown values",
            obj([
                ("id", unk()),
                ("tags", map([("k", unk())])),
                ("b", list([c_obj("x")])),
            ]),
            &[
                "id: refreshed state contains an unknown value",
                r#"tags["k"]: refreshed state contains an unknown value"#,
            ],
        ),
        (
            "wrong element type",
            obj([
                ("id", s("i-1")),
                ("tags", map([("k", n(1))])),
                ("b", list([c_obj("x")])),
            ]),
            &[
                r#"tags["k"]: refreshed state does not fit the schema: string required, but have number"#,
            ],
        ),
        (
            "missing attribute",
            obj([("id", s("i-1")), ("b", list([c_obj("x")]))]),
            &[r#"(root): refreshed state does not fit the schema: attribute "tags" is required"#],
        ),
        (
            "unsupported attribute in a block",
            obj([
                ("id", s("i-1")),
                ("tags", null()),
                ("b", list([obj([("c", s("x")), ("d", s("y"))])])),
            ]),
            &[r#"b[0]: refreshed state does not fit the schema: unsupported attribute "d""#],
        ),
    ];
    let mut failures = Vec::new();
    for (name, v, want) in &cases {
        check(
            name,
            &assert_wholly_known_conformant(&ty, v, "refreshed state"),
            want,
            &mut failures,
        );
    }

    let data_cases: Vec<(&str, Value, &[&str])> = vec![
        ("data source: known object", good(), &[]),
        (
            "data source: null",
            null(),
            &["(root): data source result is null"],
        ),
        (
            "data source: unknown",
            obj([("id", unk()), ("tags", null()), ("b", list([]))]),
            &["id: data source result contains an unknown value"],
        ),
    ];
    for (name, v, want) in &data_cases {
        check(
            name,
            &assert_data_source_result(&ty, v),
            want,
            &mut failures,
        );
    }
    finish(&failures);
}

#[test]
fn write_only_null() {
    let schema = block(
        vec![
            opt("pw").write_only(),
            nested(
                "n",
                Nesting::Map,
                AttrMode::Optional,
                vec![opt("token").write_only(), opt("name")],
            ),
        ],
        vec![nested_block(
            "b",
            Nesting::List,
            block(vec![opt("key").write_only()], vec![]),
        )],
    );
    let cases: Vec<(&str, Value, &[&str])> = vec![
        (
            "all null",
            obj([
                ("pw", null()),
                (
                    "n",
                    map([("x", obj([("token", null()), ("name", s("x"))]))]),
                ),
                ("b", list([obj([("key", null())])])),
            ]),
            &[],
        ),
        (
            "set everywhere",
            obj([
                ("pw", s(SECRET)),
                (
                    "n",
                    map([("x", obj([("token", s(SECRET)), ("name", s("x"))]))]),
                ),
                ("b", list([obj([("key", s(SECRET))])])),
            ]),
            &[
                "pw: write-only attribute value must be null",
                r#"n["x"].token: write-only attribute value must be null"#,
                "b[0].key: write-only attribute value must be null",
            ],
        ),
        (
            "unknown containers are skipped",
            obj([("pw", null()), ("n", unk()), ("b", unk())]),
            &[],
        ),
    ];
    let mut failures = Vec::new();
    for (name, v, want) in &cases {
        check(
            name,
            &assert_write_only_null(&schema, v),
            want,
            &mut failures,
        );
    }
    finish(&failures);
}

#[test]
fn path_error_display() {
    let root = PathError::new(&crate::path::AttrPath::root(), "planned for absence");
    assert_eq!(root.to_string(), "(root): planned for absence");
    let deep = PathError::new(
        &crate::path::AttrPath::attr("b")
            .push_index(0)
            .push_attr("c"),
        "bad",
    );
    assert_eq!(deep.to_string(), "b[0].c: bad");
    let diag = deep.to_diagnostic("Provider produced invalid plan");
    assert_eq!(diag.path, Some(deep.path.clone()));
    assert!(diag.detail.starts_with("b[0].c: bad"));
}

#[test]
fn renders_values_tersely() {
    let v = obj([
        ("n", Value::Number("100".parse().expect("number"))),
        ("f", Value::Number("1.50".parse().expect("number"))),
        ("l", list([s("a"), Value::Bool(true), null()])),
        ("m", map([("k", unk())])),
    ]);
    assert_eq!(
        render(&v),
        r#"{f = 1.5, l = ["a", true, null], m = {"k" = unknown}, n = 100}"#
    );
}
