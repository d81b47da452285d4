//! Checks that the generated attribute descriptions say each thing once.
//!
//! The docs append an attribute's rules to its own description: its validators' sentences,
//! `Defaults to ...` and, on resource pages, [`schema_md::REPLACES`]. A description that also
//! says them in its own words makes the page repeat itself, so [`restatements`] lists every
//! attribute whose rendered text has a sentence twice or whose own description restates an
//! appended rule.

use super::{
    code_span::code_spans,
    schema_md::{self, REPLACES},
};
use crate::{
    provider_config, registry,
    schema::{AttrType, Attribute, Block},
};

/// Words that, in an attribute's own description, restate a sentence the docs append.
struct Restated {
    /// The appended sentence.
    sentence: String,
    /// Lowercase fragments that say the same thing.
    telltales: Vec<String>,
}

impl Restated {
    fn of(sentence: String) -> Restated {
        let mut telltales = Vec::new();
        if sentence.starts_with("Defaults to ") {
            telltales.push("default".to_owned());
        } else if sentence == REPLACES {
            for t in ["replaces", "forces a new", "new resource", "recreate"] {
                telltales.push(t.to_owned());
            }
        } else if sentence.starts_with("Must be one of ") {
            // The values themselves may be explained one by one; only a list of them is a
            // restatement, and the generator leaves its own list out when every value is named.
            telltales.push("one of".to_owned());
        } else {
            // Other rules: their examples and bounds.
            telltales.extend(code_spans(&sentence).iter().map(|s| s.outer.to_lowercase()));
            if let Some(bound) = sentence.strip_prefix("Must be a whole number ") {
                let bound = bound.trim_end_matches('.');
                telltales.push(bound.strip_prefix("of ").unwrap_or(bound).to_lowercase());
                // A range written as `min–max` or `min-max` says the same.
                if let Some((min, max)) = bound
                    .strip_prefix("from ")
                    .and_then(|r| r.split_once(" to "))
                {
                    telltales.push(format!("{min}–{max}"));
                    telltales.push(format!("{min}-{max}"));
                }
            }
        }
        Restated {
            sentence,
            telltales,
        }
    }
}

/// The sentences of `text`: split after `.`, `!` or `?` followed by a blank or the end, but not
/// inside code spans or after `e.g.` and `i.e.`.
fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut in_code = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        current.push(c);
        if c == '`' {
            in_code = !in_code;
        }
        let ends = matches!(c, '.' | '!' | '?')
            && !in_code
            && chars.peek().is_none_or(|n| n.is_whitespace())
            && !["e.g.", "i.e."]
                .iter()
                .any(|a| current.to_lowercase().ends_with(a));
        if ends {
            out.push(current.trim().to_owned());
            current.clear();
        }
    }
    if !current.trim().is_empty() {
        out.push(current.trim().to_owned());
    }
    out
}

/// Every attribute whose generated description repeats itself, as
/// `<where>: <path>: <what is repeated>`, over the provider, every resource (whose pages add
/// `REPLACES`), data source and ephemeral resource.
pub fn restatements() -> Vec<String> {
    let mut found = Vec::new();
    block(
        "provider",
        "",
        &provider_config::schema().block,
        false,
        &mut found,
    );
    for r in registry::RESOURCES {
        let at = format!("resource {}", r.type_name());
        block(&at, "", &r.schema().block, true, &mut found);
    }
    for d in registry::DATA_SOURCES {
        let at = format!("data source {}", d.type_name());
        block(&at, "", &d.schema().block, false, &mut found);
    }
    for e in registry::EPHEMERAL_RESOURCES {
        let at = format!("ephemeral resource {}", e.type_name());
        block(&at, "", &e.schema().block, false, &mut found);
    }
    found
}

fn block(at: &str, prefix: &str, b: &Block, resource: bool, found: &mut Vec<String>) {
    attributes(at, prefix, &b.attributes, resource, found);
    for nb in &b.blocks {
        block(at, &join(prefix, nb.type_name), &nb.block, resource, found);
    }
}

fn attributes(
    at: &str,
    prefix: &str,
    attrs: &[Attribute],
    resource: bool,
    found: &mut Vec<String>,
) {
    for a in attrs {
        let path = join(prefix, a.name);
        for problem in attribute_problems(a, resource) {
            found.push(format!("{at}: {path}: {problem}"));
        }
        if let AttrType::Nested {
            attributes: inner, ..
        } = &a.ty
        {
            attributes(at, &path, inner, resource, found);
        }
    }
}

/// What is said twice in the description the docs render for `a`.
fn attribute_problems(a: &Attribute, resource: bool) -> Vec<String> {
    let mut problems = Vec::new();
    let appended = schema_md::appended(a, resource);

    let mut seen: Vec<String> = Vec::new();
    let all = a
        .deprecated
        .into_iter()
        .map(str::to_owned)
        .chain(sentences(a.description))
        .chain(appended.iter().cloned());
    for s in all {
        let key = s.to_lowercase();
        if seen.contains(&key) {
            problems.push(format!("says '{s}' twice"));
        } else {
            seen.push(key);
        }
    }

    let prose = a.description.to_lowercase();
    for r in appended.into_iter().map(Restated::of) {
        if let Some(t) = r.telltales.iter().find(|t| prose.contains(t.as_str())) {
            problems.push(format!(
                "its description says '{t}', restating the appended '{}'",
                r.sentence
            ));
        }
    }
    problems
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
    use crate::{
        validate::{IntBetween, OneOf, PositiveDuration},
        value::Type,
    };

    fn problems(a: &Attribute) -> Vec<String> {
        attribute_problems(a, true)
    }

    #[test]
    fn sentences_split_outside_code_and_abbreviations() {
        assert_eq!(
            sentences("A `1g.10gb. x` profile, e.g. `\"10m\"`. Then more! Last"),
            [
                "A `1g.10gb. x` profile, e.g. `\"10m\"`.",
                "Then more!",
                "Last"
            ]
        );
    }

    #[test]
    fn a_clean_description_passes() {
        let a = Attribute::optional("power", Type::String)
            .describe("`on` powers the node and waits for `UP`.")
            .validate(OneOf::new(&["on", "off"]))
            .default("on")
            .requires_replace();
        assert_eq!(problems(&a), Vec::<String>::new());
    }

    #[test]
    fn restated_rules_are_found() {
        let cases = [
            (
                Attribute::optional("d", Type::String)
                    .describe("How long, e.g. `\"10m\"`.")
                    .validate(PositiveDuration::new()),
                "`\"10m\"`",
            ),
            (
                Attribute::optional("n", Type::Number)
                    .describe("Replicas; defaults to 2.")
                    .default(2),
                "default",
            ),
            (
                Attribute::optional("n", Type::Number)
                    .describe("Replicas, from 1 to 8.")
                    .validate(IntBetween::new(1, 8)),
                "from 1 to 8",
            ),
            (
                Attribute::optional("mtu", Type::Number)
                    .describe("MTU, 1280–9216.")
                    .validate(IntBetween::new(1280, 9216)),
                "1280–9216",
            ),
            (
                Attribute::required("t", Type::String)
                    .describe("The tenant. Changing it replaces the node.")
                    .requires_replace(),
                "replaces",
            ),
            (
                Attribute::required("e", Type::String)
                    .describe("One of `a` or `b`.")
                    .validate(OneOf::new(&["a", "b", "c"])),
                "one of",
            ),
        ];
        for (a, telltale) in cases {
            let p = problems(&a);
            assert!(p.iter().any(|p| p.contains(telltale)), "{telltale}: {p:?}");
        }
    }

    #[test]
    fn repeated_sentences_are_found() {
        let a = Attribute::optional("n", Type::Number)
            .describe("Must be a whole number from 1 to 8.")
            .validate(IntBetween::new(1, 8));
        assert!(problems(&a).iter().any(|p| p.contains("twice")));
    }

    #[test]
    fn enum_lists_are_left_out_when_every_value_is_explained() {
        let a = Attribute::optional("power", Type::String)
            .describe("`on`: powered. `off`: held, powered off.")
            .validate(OneOf::new(&["on", "off"]));
        assert_eq!(schema_md::appended(&a, false), Vec::<String>::new());
    }
}
