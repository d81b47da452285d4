//! Checks what the hand-written guides say about the schemas.
//!
//! Guides are prose, so they are not generated; instead [`GuideChecker`] reads the claims
//! they make in a few fixed shapes and checks each against the schemas, so a renamed
//! attribute, a changed default or a moved limit fails a test instead of misleading a reader:
//!
//! | Shape in the guide                                   | Checked                          |
//! |------------------------------------------------------|----------------------------------|
//! | `` `gpufleet_<type>` ``, `` `gpufleet_<type>.<path>` `` | the type (and path) exists      |
//! | `` `name` (default `v`) ``, `` `name` defaults to `v` ``, `` `name` (`v`, the default `` | some attribute `name` defaults to `v` |
//! | `` `name = literal` ``                               | some attribute `name` accepts it |
//! | `` `gpufleet_<type>.<path>`: at most N characters `` | N passes its rules, N + 1 fails  |
//! | `` `gpufleet_<type>.<path>`: A to B ``               | A and B pass, A − 1 and B + 1 fail |
//!
//! Names that are not attributes but that guides rightly show with defaults or values (module
//! inputs, benchmark suite parameters, BCM notes) come from [`GuideContext`]. Fenced code
//! blocks are left to the snippet check, which validates them as whole configurations.

use std::collections::{BTreeMap, BTreeSet};

use bigdecimal::BigDecimal;

use super::{
    code_span::{CodeSpan, code_spans},
    schema_md::hcl_literal,
};
use crate::{
    backends::bcm::{POOL_KEY, RELEASING_KEY, TENANT_KEY},
    diag::Diagnostics,
    path::AttrPath,
    provider_config, registry,
    resources::benchmark::suite_params::SUITE_PARAMETERS,
    schema::{AttrMode, AttrType, Attribute, Block},
    value::{Type, Value},
};

/// Meta-arguments and settings of Terraform itself that guides show as `name = value`.
const TERRAFORM_NAMES: &[&str] = &[
    "required_version",
    "source",
    "version",
    "count",
    "for_each",
    "depends_on",
    "provider",
];

/// What the guides may name besides the schemas' attributes.
#[derive(Debug, Default, Clone)]
pub struct GuideContext {
    /// The inputs of the shipped modules, with each default as an HCL literal (`None`: required).
    pub module_inputs: BTreeMap<String, Vec<Option<String>>>,
}

/// Every schema the guides can name, and every attribute by its name.
#[derive(Debug)]
struct Vocabulary {
    types: BTreeMap<&'static str, Block>,
    attrs: BTreeMap<&'static str, Vec<Attribute>>,
    suite_parameters: BTreeSet<&'static str>,
}

impl Vocabulary {
    fn new() -> Vocabulary {
        let mut v = Vocabulary {
            types: BTreeMap::new(),
            attrs: BTreeMap::new(),
            suite_parameters: SUITE_PARAMETERS
                .iter()
                .flat_map(|(_, ps)| ps.iter().copied())
                .collect(),
        };
        v.collect(&provider_config::schema().block);
        for r in registry::RESOURCES {
            v.add(r.type_name(), r.schema().block);
        }
        for d in registry::DATA_SOURCES {
            v.add(d.type_name(), d.schema().block);
        }
        for e in registry::EPHEMERAL_RESOURCES {
            v.add(e.type_name(), e.schema().block);
        }
        for a in registry::ACTIONS {
            v.add(a.type_name(), a.schema().block);
        }
        // A list resource shares its resource's name; its filters are attributes too.
        for l in registry::LIST_RESOURCES {
            v.collect(&l.schema().block);
        }
        v
    }

    fn add(&mut self, type_name: &'static str, block: Block) {
        self.collect(&block);
        self.types.insert(type_name, block);
    }

    fn collect(&mut self, block: &Block) {
        for a in &block.attributes {
            self.collect_attr(a);
        }
        for nb in &block.blocks {
            self.collect(&nb.block);
        }
    }

    fn collect_attr(&mut self, a: &Attribute) {
        self.attrs.entry(a.name).or_default().push(a.clone());
        if let AttrType::Nested { attributes, .. } = &a.ty {
            for n in attributes {
                self.collect_attr(n);
            }
        }
    }

    /// The attribute at `path` (`<type>.<name>[.<name>…]`, indexes ignored), or why not.
    fn resolve(&self, path: &str) -> Result<Option<&Attribute>, String> {
        let mut segments = path.split('.').map(|s| s.split('[').next().unwrap_or(s));
        let type_name = segments.next().unwrap_or_default();
        let Some(mut block) = self.types.get(type_name) else {
            return Err(format!("`{type_name}` is not a type gpufleet provides"));
        };
        let mut nested: Option<&[Attribute]> = None;
        let mut found = None;
        for name in segments {
            let attrs = nested.unwrap_or(&block.attributes);
            if let Some(a) = attrs.iter().find(|a| a.name == name) {
                nested = match &a.ty {
                    AttrType::Nested { attributes, .. } => Some(attributes),
                    AttrType::Plain(_) => Some(&[]),
                };
                found = Some(a);
            } else if let Some(nb) = (nested.is_none())
                .then(|| block.blocks.iter().find(|b| b.type_name == name))
                .flatten()
            {
                block = &nb.block;
                found = None;
            } else {
                return Err(format!("`{path}`: `{type_name}` has no `{name}` there"));
            }
        }
        Ok(found)
    }
}

/// What checking one guide found.
#[derive(Debug, Default)]
pub struct GuideReport {
    /// How many claims were checked.
    pub checked: usize,
    /// The false ones, as `line N: …`.
    pub problems: Vec<String>,
}

/// Checks guides against the schemas, which it reads once for all of them.
#[derive(Debug)]
pub struct GuideChecker {
    vocabulary: Vocabulary,
    context: GuideContext,
}

impl GuideChecker {
    /// A checker that knows the schemas and `context`.
    pub fn new(context: GuideContext) -> GuideChecker {
        GuideChecker {
            vocabulary: Vocabulary::new(),
            context,
        }
    }

    /// Checks the claims of one guide.
    pub fn check(&self, text: &str) -> GuideReport {
        check_guide(&self.vocabulary, &self.context, text)
    }
}

fn check_guide(vocabulary: &Vocabulary, context: &GuideContext, text: &str) -> GuideReport {
    let mut report = GuideReport::default();
    let mut fenced = false;
    for (index, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let spans = code_spans(line);
        for (i, span) in spans.iter().enumerate() {
            let after = &line[span.end..];
            let next = spans.get(i + 1);
            let problem = if span.text.starts_with(registry::TYPE_PREFIX) {
                type_claim(vocabulary, span.text, after)
            } else if let Some((name, literal)) = span.text.split_once(" = ") {
                assignment_claim(vocabulary, context, name, literal)
            } else if let Some(value) = default_claimed(after, next) {
                default_claim(vocabulary, context, span.text, value)
            } else {
                continue;
            };
            report.checked += 1;
            if let Some(p) = problem {
                report.problems.push(format!("line {}: {p}", index + 1));
            }
        }
    }
    report
}

/// The value a default claim right after a name gives, if the text there makes one.
fn default_claimed<'a>(after: &str, next: Option<&CodeSpan<'a>>) -> Option<&'a str> {
    let next = next?;
    let after = after.strip_prefix("**").unwrap_or(after);
    let (lead, rest) = after.split_once('`')?;
    if lead == " (default " || lead == " defaults to " {
        return Some(next.text);
    }
    if lead == " (" && rest.split_once('`')?.1.starts_with(", the default") {
        return Some(next.text);
    }
    None
}

fn type_claim(v: &Vocabulary, span: &str, after: &str) -> Option<String> {
    if [TENANT_KEY, RELEASING_KEY, POOL_KEY].contains(&span) {
        return None;
    }
    let attr = match v.resolve(span) {
        Ok(attr) => attr,
        Err(e) => return Some(e),
    };
    let claim = after.strip_prefix(": ")?;
    let claim = claim
        .split(';')
        .next()
        .unwrap_or(claim)
        .trim_end_matches('.');
    let attr = attr?;
    limit_claim(attr, claim).map(|p| format!("`{span}`: {p}"))
}

/// Checks `at most N characters` and `A to B` against the attribute's rules.
fn limit_claim(attr: &Attribute, claim: &str) -> Option<String> {
    let numbers = numbers_in(claim);
    let passes = |value: Value| accepts(attr, &value);
    if let Some(rest) = claim.strip_prefix("at most ")
        && rest.contains("characters")
        && let [n] = numbers[..]
    {
        let n = usize::try_from(n).ok()?;
        let ok = passes(Value::string("a".repeat(n))) && !passes(Value::string("a".repeat(n + 1)));
        return (!ok).then(|| format!("its rules do not allow exactly {n} characters at most"));
    }
    if matches!(attr.ty, AttrType::Plain(Type::Number))
        && let [low, high] = numbers[..]
        && claim.contains(" to ")
    {
        let ok = passes(Value::int(low))
            && passes(Value::int(high))
            && !passes(Value::int(low - 1))
            && !passes(Value::int(high + 1));
        return (!ok).then(|| format!("its rules do not allow exactly {low} to {high}"));
    }
    // Any other limit: its figures must be those the attribute's own docs state.
    let docs = attribute_docs(attr);
    let docs_numbers = numbers_in(&docs);
    let missing: Vec<String> = numbers
        .iter()
        .filter(|n| !docs_numbers.contains(n))
        .map(i64::to_string)
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "the figures {} are not in its rules ({docs})",
            missing.join(", ")
        )
    })
}

fn attribute_docs(attr: &Attribute) -> String {
    let mut docs = attr.description.to_owned();
    for v in &attr.validators {
        docs.push(' ');
        docs.push_str(&v.description());
    }
    docs
}

/// The whole numbers in `text`, with thousands separators read as such.
fn numbers_in(text: &str) -> Vec<i64> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            current.push(c);
        } else if c == ',' && !current.is_empty() && chars.peek().is_some_and(char::is_ascii_digit)
        {
            // A thousands separator inside a number.
        } else if !current.is_empty() {
            out.extend(current.parse::<i64>().ok());
            current.clear();
        }
    }
    out.extend(current.parse::<i64>().ok());
    out
}

fn default_claim(
    v: &Vocabulary,
    context: &GuideContext,
    name: &str,
    value: &str,
) -> Option<String> {
    let claimed = value.trim_matches('"');
    let schema_defaults: Vec<String> = v
        .attrs
        .get(name)
        .into_iter()
        .flatten()
        .filter_map(|a| a.default.as_ref())
        .map(|d| hcl_literal(d).trim_matches('"').to_owned())
        .collect();
    let module_defaults: Vec<String> = context
        .module_inputs
        .get(name)
        .into_iter()
        .flatten()
        .flatten()
        .map(|d| d.trim_matches('"').to_owned())
        .collect();
    if schema_defaults
        .iter()
        .chain(&module_defaults)
        .any(|d| d == claimed)
    {
        return None;
    }
    if schema_defaults.is_empty() && module_defaults.is_empty() {
        // A suite parameter's default is the tool's own, applied by its command line.
        if v.suite_parameters.contains(name) {
            return None;
        }
        // Without a default of its own, an attribute may still say what leaving it unset does.
        if v.attrs.contains_key(name) {
            return None;
        }
        return Some(format!(
            "`{name}` is said to default to `{value}`, but no attribute, module input or \
             suite parameter has that name"
        ));
    }
    let known: Vec<String> = schema_defaults
        .into_iter()
        .chain(module_defaults)
        .map(|d| format!("`{d}`"))
        .collect();
    Some(format!(
        "`{name}` is said to default to `{value}`, but its default is {}",
        known.join(" or ")
    ))
}

fn assignment_claim(
    v: &Vocabulary,
    context: &GuideContext,
    name: &str,
    literal: &str,
) -> Option<String> {
    if !name.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
        return None;
    }
    let Some(attrs) = v.attrs.get(name) else {
        let known = TERRAFORM_NAMES.contains(&name)
            || context.module_inputs.contains_key(name)
            || v.suite_parameters.contains(name);
        return (!known).then(|| {
            format!("`{name} = {literal}` names no attribute, module input or suite parameter")
        });
    };
    let value = parse_literal(literal)?;
    // An assignment is what a configuration writes, so attributes it can set decide; a value
    // shown for an attribute only the provider sets (a status) is checked against its type.
    let settable: Vec<&Attribute> = attrs
        .iter()
        .filter(|a| a.mode != AttrMode::Computed)
        .collect();
    let candidates = if settable.is_empty() {
        attrs.iter().collect()
    } else {
        settable
    };
    if candidates.into_iter().any(|a| accepts(a, &value)) {
        return None;
    }
    Some(format!(
        "`{name} = {literal}`: no attribute `{name}` accepts that value"
    ))
}

/// A literal HCL value: a string, number, bool or null (`None` for an expression).
fn parse_literal(literal: &str) -> Option<Value> {
    let literal = literal.trim();
    match literal {
        "true" => return Some(Value::Bool(true)),
        "false" => return Some(Value::Bool(false)),
        "null" => return Some(Value::Null),
        _ => {}
    }
    if literal.starts_with('"') {
        return serde_json::from_str::<String>(literal)
            .ok()
            .map(Value::String);
    }
    literal.parse::<BigDecimal>().ok().map(Value::Number)
}

/// Whether a configuration may set `attr` to `value`: its type and every rule.
fn accepts(attr: &Attribute, value: &Value) -> bool {
    if value.is_null() {
        return !attr.mode.is_required();
    }
    let typed = match (&attr.ty, value) {
        (AttrType::Plain(Type::String), Value::String(_))
        | (AttrType::Plain(Type::Number), Value::Number(_))
        | (AttrType::Plain(Type::Bool), Value::Bool(_))
        | (AttrType::Plain(Type::Dynamic), _) => true,
        // A collection or object is never written as one literal here.
        _ => false,
    };
    if !typed {
        return false;
    }
    let mut d = Diagnostics::new();
    for rule in &attr.validators {
        rule.validate(&AttrPath::attr(attr.name), value, &mut d);
    }
    !d.has_error()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(text: &str) -> Vec<String> {
        let mut context = GuideContext::default();
        context
            .module_inputs
            .insert("vpc".to_owned(), vec![Some("\"Default\"".to_owned())]);
        GuideChecker::new(context).check(text).problems
    }

    #[test]
    fn true_claims_pass() {
        let text = "\
Use `gpufleet_virtual_cluster` and `gpufleet_gpu_node_pool.name`.
`mtu` (default `9000`) and `pod_security` defaults to `baseline`; `vpc` (default `Default`).
Set `isolation = \"shared\"` or `node_count = 4`, `streaming = true` for aiperf.
- `gpufleet_virtual_cluster.name`: at most 52 characters
- `gpufleet_gpu_node_pool.node_count`: 1 to 10,000
```hcl
  mtu = \"anything\"   # `mtu` (default `1`)
```
";
        assert_eq!(problems(text), Vec::<String>::new());
    }

    #[test]
    fn false_claims_are_found() {
        let text = "\
`gpufleet_gpu_pool` and `gpufleet_virtual_cluster.size`.
`mtu` (default `1500`) and `colour` defaults to `red`.
Set `isolation = \"premium\"`, `node_count = \"many\"` and `flavour = 1`.
- `gpufleet_virtual_cluster.name`: at most 63 characters
- `gpufleet_gpu_node_pool.node_count`: 1 to 1,000
- `gpufleet_network_segment.cidr`: prefix length 8 to 32
";
        let found = problems(text);
        let expect = [
            "line 1: `gpufleet_gpu_pool` is not a type",
            "line 1: `gpufleet_virtual_cluster.size`",
            "line 2: `mtu` is said to default to `1500`, but its default is `9000`",
            "line 2: `colour` is said to default",
            "line 3: `isolation = \"premium\"`",
            "line 3: `node_count = \"many\"`",
            "line 3: `flavour = 1` names no attribute",
            "line 4: `gpufleet_virtual_cluster.name`",
            "line 5: `gpufleet_gpu_node_pool.node_count`",
            "line 6: `gpufleet_network_segment.cidr`: the figures 32",
        ];
        for e in expect {
            assert!(
                found.iter().any(|f| f.starts_with(e)),
                "{e:?} not in {found:#?}"
            );
        }
        assert_eq!(found.len(), expect.len(), "{found:#?}");
    }

    #[test]
    fn numbers_read_thousands_separators() {
        assert_eq!(
            numbers_in("1 to 16,777,215, then 8"),
            vec![1, 16_777_215, 8]
        );
    }
}
