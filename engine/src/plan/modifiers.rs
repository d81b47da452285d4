//! Schema-driven plan modifiers: defaults and unknown computed values, applied at every level
//! of nested attributes and blocks.

use std::collections::BTreeMap;

use crate::{
    schema::{AttrType, Attribute, Block, Nesting},
    value::Value,
};

/// Fills attributes left null in `config` with their schema default.
pub fn apply_defaults(block: &Block, proposed: &Value, config: &Value) -> Value {
    modify_block(
        block,
        proposed,
        config,
        &Value::Null,
        &|attr, proposed, config, _| match (&attr.default, config.is_null()) {
            (Some(d), true) => d.clone(),
            _ => proposed.clone(),
        },
    )
}

/// Marks computed attributes that the configuration leaves null as unknown, because apply
/// will decide them; attributes marked `use_state_for_unknown` keep a known prior value.
pub fn mark_computed_unknown(
    block: &Block,
    proposed: &Value,
    config: &Value,
    prior: &Value,
) -> Value {
    modify_block(
        block,
        proposed,
        config,
        prior,
        &|attr, proposed, config, prior| {
            // Only the provider's own choices become unknown; user-set values and defaults stay.
            if !attr.mode.is_computed() || !config.is_null() || attr.default.is_some() {
                return proposed.clone();
            }
            if attr.use_state_for_unknown && !prior.is_null() && prior.is_wholly_known() {
                return prior.clone();
            }
            Value::unknown()
        },
    )
}

/// What a modifier does to one leaf attribute: `(attribute, proposed, config, prior) -> planned`.
type Leaf = dyn Fn(&Attribute, &Value, &Value, &Value) -> Value;

/// Applies `leaf` to every non-nested attribute of `block`, descending into nested attributes
/// and blocks with the matching config and prior objects.
fn modify_block(
    block: &Block,
    proposed: &Value,
    config: &Value,
    prior: &Value,
    leaf: &Leaf,
) -> Value {
    let Some(obj) = proposed.as_object() else {
        return proposed.clone();
    };
    let mut out: BTreeMap<String, Value> = obj.clone();
    for attr in &block.attributes {
        let (cfg, pri) = (config.get(attr.name), prior.get(attr.name));
        let Some(slot) = out.get_mut(attr.name) else {
            continue;
        };
        *slot = match &attr.ty {
            AttrType::Plain(_) => leaf(attr, slot, cfg, pri),
            // A nested attribute the user left null is itself a leaf (it may be computed).
            AttrType::Nested { .. } if cfg.is_null() => leaf(attr, slot, cfg, pri),
            AttrType::Nested {
                nesting,
                attributes,
            } => {
                let inner = Block {
                    attributes: attributes.clone(),
                    ..Block::default()
                };
                modify_nested(*nesting, slot, cfg, pri, &|p, c, r| {
                    modify_block(&inner, p, c, r, leaf)
                })
            }
        };
    }
    for nb in &block.blocks {
        let (cfg, pri) = (config.get(nb.type_name), prior.get(nb.type_name));
        if let Some(slot) = out.get_mut(nb.type_name) {
            *slot = modify_nested(nb.nesting, slot, cfg, pri, &|p, c, r| {
                modify_block(&nb.block, p, c, r, leaf)
            });
        }
    }
    Value::Object(out)
}

/// Applies `f` to each nested object, paired with its config and prior counterparts: by
/// position in lists, by key in maps. Set elements have no stable counterpart, so each is
/// its own config and has no prior.
fn modify_nested(
    nesting: Nesting,
    proposed: &Value,
    config: &Value,
    prior: &Value,
    f: &dyn Fn(&Value, &Value, &Value) -> Value,
) -> Value {
    const NULL: Value = Value::Null;
    match (nesting, proposed) {
        (Nesting::Single | Nesting::Group, Value::Object(_)) => f(proposed, config, prior),
        (Nesting::List, Value::List(elems)) => {
            let (cfg, pri) = (
                config.as_seq().unwrap_or_default(),
                prior.as_seq().unwrap_or_default(),
            );
            Value::List(
                elems
                    .iter()
                    .enumerate()
                    .map(|(i, e)| f(e, cfg.get(i).unwrap_or(&NULL), pri.get(i).unwrap_or(&NULL)))
                    .collect(),
            )
        }
        (Nesting::Map, Value::Map(elems)) => Value::Map(
            elems
                .iter()
                .map(|(k, e)| {
                    let c = config.as_map().and_then(|m| m.get(k)).unwrap_or(&NULL);
                    let r = prior.as_map().and_then(|m| m.get(k)).unwrap_or(&NULL);
                    (k.clone(), f(e, c, r))
                })
                .collect(),
        ),
        (Nesting::Set, Value::Set(elems)) => {
            Value::set(elems.iter().map(|e| f(e, e, &NULL)).collect())
        }
        // Null or unknown collections have nothing inside to modify.
        _ => proposed.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{schema::NestedBlock, value::Type};

    fn block() -> Block {
        Block::new("")
            .attr(Attribute::required("name", Type::String))
            .attr(Attribute::optional("mtu", Type::Number).default(9000))
            .attr(Attribute::computed("id", Type::String).use_state_for_unknown())
            .attr(Attribute::computed("status", Type::String))
            .attr(Attribute::optional_computed("vlan_id", Type::Number))
            .block(NestedBlock::list(
                "port",
                Block::new("")
                    .attr(Attribute::required("number", Type::Number))
                    .attr(Attribute::optional("protocol", Type::String).default("tcp"))
                    .attr(Attribute::computed("uid", Type::String).use_state_for_unknown()),
            ))
    }

    fn port(number: i64, protocol: Value, uid: Value) -> Value {
        Value::object([
            ("number", Value::int(number)),
            ("protocol", protocol),
            ("uid", uid),
        ])
    }

    #[test]
    fn create_fills_defaults_and_unknowns_at_every_level() {
        let config = Value::object([
            ("name", Value::string("a")),
            ("mtu", Value::Null),
            ("id", Value::Null),
            ("status", Value::Null),
            ("vlan_id", Value::Null),
            (
                "port",
                Value::List(vec![
                    port(80, Value::Null, Value::Null),
                    port(53, "udp".into(), Value::Null),
                ]),
            ),
        ]);
        let p = apply_defaults(&block(), &config, &config);
        let p = mark_computed_unknown(&block(), &p, &config, &Value::Null);
        assert_eq!(p.get("mtu"), &Value::int(9000));
        assert!(p.get("id").is_unknown());
        assert!(p.get("status").is_unknown());
        assert!(p.get("vlan_id").is_unknown());
        let ports = p.get("port").as_seq().unwrap_or_default();
        assert_eq!(ports[0].get("protocol"), &Value::string("tcp"));
        assert_eq!(ports[1].get("protocol"), &Value::string("udp"));
        assert!(ports[0].get("uid").is_unknown());
    }

    #[test]
    fn update_keeps_stable_computed_values() {
        let prior = Value::object([
            ("name", Value::string("a")),
            ("mtu", Value::int(9000)),
            ("id", Value::string("x-1")),
            ("status", Value::string("ready")),
            ("vlan_id", Value::int(100)),
            (
                "port",
                Value::List(vec![port(80, "tcp".into(), "u-1".into())]),
            ),
        ]);
        let config = Value::object([
            ("name", Value::string("b")),
            ("mtu", Value::Null),
            ("id", Value::Null),
            ("status", Value::Null),
            ("vlan_id", Value::int(100)),
            (
                "port",
                Value::List(vec![port(80, Value::Null, Value::Null)]),
            ),
        ]);
        let proposed = Value::object([
            ("name", Value::string("b")),
            ("mtu", Value::int(9000)),
            ("id", Value::string("x-1")),
            ("status", Value::string("ready")),
            ("vlan_id", Value::int(100)),
            (
                "port",
                Value::List(vec![port(80, "tcp".into(), "u-1".into())]),
            ),
        ]);
        let p = mark_computed_unknown(&block(), &proposed, &config, &prior);
        assert_eq!(p.get("id"), &Value::string("x-1"));
        assert!(p.get("status").is_unknown());
        assert_eq!(p.get("vlan_id"), &Value::int(100));
        let ports = p.get("port").as_seq().unwrap_or_default();
        assert_eq!(ports[0].get("uid"), &Value::string("u-1"));
    }
}
