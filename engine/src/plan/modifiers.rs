//! Schema-driven plan modifiers: defaults and unknown computed values.

use std::collections::BTreeMap;

use crate::{
    schema::{AttrType, Attribute, Block, Nesting},
    value::Value,
};

/// Fills attributes left null in `config` with their schema default, recursively through
/// single nested attributes and blocks.
pub fn apply_defaults(block: &Block, proposed: &Value, config: &Value) -> Value {
    let Some(obj) = proposed.as_object() else {
        return proposed.clone();
    };
    let mut out: BTreeMap<String, Value> = obj.clone();
    for attr in &block.attributes {
        let cfg = config.get(attr.name);
        let slot = out.entry(attr.name.to_owned()).or_insert(Value::Null);
        if cfg.is_null() {
            if let Some(d) = &attr.default {
                *slot = d.clone();
            }
        } else if let AttrType::Nested {
            nesting: Nesting::Single,
            attributes,
        } = &attr.ty
        {
            *slot = apply_defaults(&nested_block(attributes), slot, cfg);
        }
    }
    for nb in &block.blocks {
        if matches!(nb.nesting, Nesting::Single | Nesting::Group) {
            let cfg = config.get(nb.type_name);
            if let Some(slot) = out.get_mut(nb.type_name) {
                *slot = apply_defaults(&nb.block, slot, cfg);
            }
        }
    }
    Value::Object(out)
}

/// Marks computed attributes that the configuration leaves null as unknown, because apply
/// will decide them; attributes marked `use_state_for_unknown` keep a known prior value.
pub fn mark_computed_unknown(
    block: &Block,
    proposed: &Value,
    config: &Value,
    prior: &Value,
) -> Value {
    let Some(obj) = proposed.as_object() else {
        return proposed.clone();
    };
    let mut out = obj.clone();
    for attr in &block.attributes {
        if let Some(slot) = out.get_mut(attr.name) {
            *slot = mark_attr(attr, slot, config.get(attr.name), prior.get(attr.name));
        }
    }
    Value::Object(out)
}

fn mark_attr(attr: &Attribute, proposed: &Value, config: &Value, prior: &Value) -> Value {
    // Only the provider's own choices become unknown; user-set values and defaults stay.
    if !attr.mode.is_computed() || !config.is_null() || attr.default.is_some() {
        return match (&attr.ty, config) {
            (
                AttrType::Nested {
                    nesting: Nesting::Single,
                    attributes,
                },
                cfg,
            ) if !cfg.is_null() => {
                mark_computed_unknown(&nested_block(attributes), proposed, cfg, prior)
            }
            _ => proposed.clone(),
        };
    }
    if attr.use_state_for_unknown && !prior.is_null() && prior.is_wholly_known() {
        return prior.clone();
    }
    Value::unknown()
}

fn nested_block(attributes: &[Attribute]) -> Block {
    Block {
        attributes: attributes.to_vec(),
        ..Block::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Type;

    fn block() -> Block {
        Block::new("")
            .attr(Attribute::required("name", Type::String))
            .attr(Attribute::optional("mtu", Type::Number).default(9000))
            .attr(Attribute::computed("id", Type::String).use_state_for_unknown())
            .attr(Attribute::computed("status", Type::String))
            .attr(Attribute::optional_computed("vlan_id", Type::Number))
    }

    #[test]
    fn create_fills_defaults_and_unknowns() {
        let config = Value::object([
            ("name", Value::string("a")),
            ("mtu", Value::Null),
            ("id", Value::Null),
            ("status", Value::Null),
            ("vlan_id", Value::Null),
        ]);
        let p = apply_defaults(&block(), &config, &config);
        let p = mark_computed_unknown(&block(), &p, &config, &Value::Null);
        assert_eq!(p.get("mtu"), &Value::int(9000));
        assert!(p.get("id").is_unknown());
        assert!(p.get("status").is_unknown());
        assert!(p.get("vlan_id").is_unknown());
    }

    #[test]
    fn update_keeps_stable_computed_values() {
        let prior = Value::object([
            ("name", Value::string("a")),
            ("mtu", Value::int(9000)),
            ("id", Value::string("x-1")),
            ("status", Value::string("ready")),
            ("vlan_id", Value::int(100)),
        ]);
        let config = Value::object([
            ("name", Value::string("b")),
            ("mtu", Value::Null),
            ("id", Value::Null),
            ("status", Value::Null),
            ("vlan_id", Value::int(100)),
        ]);
        let proposed = Value::object([
            ("name", Value::string("b")),
            ("mtu", Value::int(9000)),
            ("id", Value::string("x-1")),
            ("status", Value::string("ready")),
            ("vlan_id", Value::int(100)),
        ]);
        let p = mark_computed_unknown(&block(), &proposed, &config, &prior);
        assert_eq!(p.get("id"), &Value::string("x-1"));
        assert!(p.get("status").is_unknown());
        assert_eq!(p.get("vlan_id"), &Value::int(100));
    }
}
