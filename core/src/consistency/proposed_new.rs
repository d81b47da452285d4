//! Terraform's proposed new state (`objchange.ProposedNew`): what core sends a provider as
//! `proposed_new_state` before planning. Ported so that test harnesses can drive resource
//! kinds exactly as Terraform does, next to the rules those plans are then checked against.

use std::collections::BTreeMap;

use crate::{
    schema::{AttrType, Attribute, Block, NestedBlock, Nesting},
    value::Value,
};

/// The value of a block with every attribute null and every collection of blocks empty
/// (`configschema.Block.EmptyValue`).
pub fn empty_value(block: &Block) -> Value {
    let attrs = block.attributes.iter().map(|a| (a.name, Value::Null));
    let blocks = block.blocks.iter().map(|nb| {
        let v = match nb.nesting {
            Nesting::Single => Value::Null,
            Nesting::Group => empty_value(&nb.block),
            Nesting::List => Value::List(Vec::new()),
            Nesting::Set => Value::Set(Vec::new()),
            Nesting::Map => Value::Map(BTreeMap::new()),
        };
        (nb.type_name, v)
    });
    Value::object(attrs.chain(blocks))
}

/// Terraform's `objchange.ProposedNew`: configured values where the configuration sets them,
/// prior values for computed attributes it leaves null, recursively through nested blocks
/// (lists and maps correlated by position and key, sets by their non-computed values).
pub fn proposed_new(block: &Block, prior: &Value, config: &Value) -> Value {
    if config.is_null() && prior.is_null() {
        return Value::Null;
    }
    let prior = if prior.is_null() {
        empty_value(block)
    } else {
        prior.clone()
    };
    proposed_new_object(block, &prior, config)
}

fn proposed_new_object(block: &Block, prior: &Value, config: &Value) -> Value {
    if config.is_null() || config.is_unknown() {
        return prior.clone();
    }
    let mut attrs = proposed_new_attributes(&block.attributes, prior, config);
    for nb in &block.blocks {
        let v = proposed_new_nested_block(nb, prior.get(nb.type_name), config.get(nb.type_name));
        attrs.insert(nb.type_name.to_owned(), v);
    }
    Value::Object(attrs)
}

fn proposed_new_nested_block(nb: &NestedBlock, prior: &Value, config: &Value) -> Value {
    if config.is_unknown() {
        return config.clone();
    }
    let element = |p: &Value, c: &Value| proposed_new(&nb.block, p, c);
    match nb.nesting {
        Nesting::Single if config.is_null() => Value::Null,
        Nesting::Single | Nesting::Group => proposed_new(&nb.block, prior, config),
        Nesting::List => correlate_list(prior, config, element),
        Nesting::Map => correlate_map(prior, config, element),
        Nesting::Set => correlate_set(
            prior,
            config,
            |v| computed_as_null(&nb.block, v),
            |p, c| match p {
                Some(p) => proposed_new(&nb.block, p, c),
                None => proposed_new(&nb.block, &Value::Null, c),
            },
        ),
    }
}

fn proposed_new_attributes(
    attrs: &[Attribute],
    prior: &Value,
    config: &Value,
) -> BTreeMap<String, Value> {
    attrs
        .iter()
        .map(|attr| {
            let (prior_v, config_v) = (prior.get(attr.name), config.get(attr.name));
            let v = if attr.mode.is_computed() && config_v.is_null() {
                prior_v.clone()
            } else if let AttrType::Nested {
                nesting,
                attributes,
            } = &attr.ty
            {
                if config_v.is_unknown() {
                    config_v.clone()
                } else {
                    proposed_new_nested_type(*nesting, attributes, prior_v, config_v)
                }
            } else {
                config_v.clone()
            };
            (attr.name.to_owned(), v)
        })
        .collect()
}

fn proposed_new_nested_type(
    nesting: Nesting,
    attrs: &[Attribute],
    prior: &Value,
    config: &Value,
) -> Value {
    if config.is_null() {
        return config.clone();
    }
    let element = |p: &Value, c: &Value| Value::Object(proposed_new_attributes(attrs, p, c));
    match nesting {
        Nesting::Single | Nesting::Group => element(prior, config),
        Nesting::List => correlate_list(prior, config, element),
        Nesting::Map => correlate_map(prior, config, element),
        Nesting::Set => {
            let block = Block {
                attributes: attrs.to_vec(),
                ..Block::default()
            };
            correlate_set(
                prior,
                config,
                |v| computed_as_null(&block, v),
                |p, c| match p {
                    Some(p) => element(p, c),
                    None => c.clone(),
                },
            )
        }
    }
}

/// Elements correlated by index; a configured element without a prior one is taken as is.
fn correlate_list(prior: &Value, config: &Value, merge: impl Fn(&Value, &Value) -> Value) -> Value {
    let Some(items) = config.as_seq() else {
        return Value::List(Vec::new());
    };
    let prior_items = prior.as_seq().unwrap_or_default();
    let merged = items
        .iter()
        .enumerate()
        .map(|(i, c)| match prior_items.get(i) {
            Some(p) => merge(p, c),
            None => c.clone(),
        })
        .collect();
    match config {
        Value::Tuple(_) => Value::Tuple(merged),
        _ => Value::List(merged),
    }
}

/// Elements correlated by key; a configured element without a prior one is taken as is.
fn correlate_map(prior: &Value, config: &Value, merge: impl Fn(&Value, &Value) -> Value) -> Value {
    let (Value::Map(items) | Value::Object(items)) = config else {
        return Value::Map(BTreeMap::new());
    };
    let prior_items = match prior {
        Value::Map(m) | Value::Object(m) => Some(m),
        _ => None,
    };
    let merged = items
        .iter()
        .map(|(k, c)| {
            let v = match prior_items.and_then(|m| m.get(k)) {
                Some(p) => merge(p, c),
                None => c.clone(),
            };
            (k.clone(), v)
        })
        .collect();
    match config {
        Value::Object(_) => Value::Object(merged),
        _ => Value::Map(merged),
    }
}

/// Each configured element correlated with an unused prior element that equals it once
/// computed attributes are nulled.
fn correlate_set(
    prior: &Value,
    config: &Value,
    compare_value: impl Fn(&Value) -> Value,
    merge: impl Fn(Option<&Value>, &Value) -> Value,
) -> Value {
    let Some(items) = config.as_seq() else {
        return Value::Set(Vec::new());
    };
    let prior_items: Vec<(&Value, Value)> = prior
        .as_seq()
        .unwrap_or_default()
        .iter()
        .map(|p| (p, compare_value(p)))
        .collect();
    let mut used = vec![false; prior_items.len()];
    let merged = items
        .iter()
        .map(|c| {
            let found = prior_items
                .iter()
                .enumerate()
                .find(|(i, (_, cmp))| !used[*i] && cmp == c)
                .map(|(i, (p, _))| (i, *p));
            match found {
                Some((i, p)) => {
                    used[i] = true;
                    merge(Some(p), c)
                }
                None => merge(None, c),
            }
        })
        .collect();
    Value::set(merged)
}

/// The value with every computed attribute, at any depth, set to null.
fn computed_as_null(block: &Block, v: &Value) -> Value {
    let Some(obj) = v.as_object() else {
        return v.clone();
    };
    let mut out = obj.clone();
    for attr in &block.attributes {
        if attr.mode.is_computed() {
            out.insert(attr.name.to_owned(), Value::Null);
        }
    }
    for nb in &block.blocks {
        if let Some(slot) = out.get_mut(nb.type_name) {
            *slot = match &*slot {
                Value::List(xs) => {
                    Value::List(xs.iter().map(|x| computed_as_null(&nb.block, x)).collect())
                }
                Value::Set(xs) => {
                    Value::set(xs.iter().map(|x| computed_as_null(&nb.block, x)).collect())
                }
                Value::Map(m) => Value::Map(
                    m.iter()
                        .map(|(k, x)| (k.clone(), computed_as_null(&nb.block, x)))
                        .collect(),
                ),
                other => computed_as_null(&nb.block, other),
            };
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use crate::{
        schema::{Attribute, Block, NestedBlock},
        value::{Type, Value},
    };

    use super::{empty_value, proposed_new};

    fn schema() -> Block {
        Block::new("")
            .attr(Attribute::required("name", Type::String))
            .attr(Attribute::optional_computed("zone", Type::String))
            .attr(Attribute::computed("id", Type::String))
            .block(NestedBlock::single(
                "opts",
                Block::new("").attr(Attribute::optional("x", Type::String)),
            ))
            .block(NestedBlock::list(
                "item",
                Block::new("")
                    .attr(Attribute::required("n", Type::Number))
                    .attr(Attribute::computed("state", Type::String)),
            ))
    }

    fn item(n: i64, state: Value) -> Value {
        Value::object([("n", Value::int(n)), ("state", state)])
    }

    #[test]
    fn proposed_new_takes_config_and_keeps_prior_computed_values() {
        let prior = Value::object([
            ("name", Value::string("a")),
            ("zone", Value::string("z1")),
            ("id", Value::string("i-1")),
            ("opts", Value::Null),
            ("item", Value::List(vec![item(1, Value::string("up"))])),
        ]);
        let config = Value::object([
            ("name", Value::string("b")),
            ("zone", Value::Null),
            ("id", Value::Null),
            ("opts", Value::object([("x", Value::string("y"))])),
            (
                "item",
                Value::List(vec![item(2, Value::Null), item(3, Value::Null)]),
            ),
        ]);
        let proposed = proposed_new(&schema(), &prior, &config);
        assert_eq!(
            proposed,
            Value::object([
                ("name", Value::string("b")),
                ("zone", Value::string("z1")),
                ("id", Value::string("i-1")),
                ("opts", Value::object([("x", Value::string("y"))])),
                (
                    "item",
                    Value::List(vec![item(2, Value::string("up")), item(3, Value::Null)]),
                ),
            ])
        );
    }

    #[test]
    fn proposed_new_from_null_prior_is_the_config_with_empty_collections() {
        let config = Value::object([
            ("name", Value::string("a")),
            ("zone", Value::unknown()),
            ("id", Value::Null),
            ("opts", Value::Null),
            ("item", Value::List(Vec::new())),
        ]);
        assert_eq!(proposed_new(&schema(), &Value::Null, &config), config);
        assert_eq!(
            proposed_new(&schema(), &Value::Null, &Value::Null),
            Value::Null
        );
        assert_eq!(empty_value(&schema()).get("item"), &Value::List(Vec::new()));
    }
}
