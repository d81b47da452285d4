//! Offline validation: runs every attribute's validators over a configuration.
//!
//! Terraform core has already checked types and required attributes; what is left are the
//! rules only the provider knows. Unknown values are skipped (they cannot be judged yet) and
//! every problem is collected, so the user sees them all at once.

mod dns_label;
mod dns_subdomain;
mod duration;
mod host_address;
mod int_between;
mod ipv4_address;
mod ipv4_cidr;
pub mod k8s_label;
mod one_of;

pub use dns_label::DnsLabel;
pub use dns_subdomain::DnsSubdomain;
pub use duration::PositiveDuration;
pub use host_address::HostAddress;
pub use int_between::IntBetween;
pub use ipv4_address::Ipv4Address;
pub use ipv4_cidr::{CidrProblem, Ipv4Cidr, Ipv4Net};
pub use one_of::OneOf;

use crate::{
    diag::Diagnostics,
    path::AttrPath,
    schema::{AttrType, Attribute, Block, Nesting},
    value::Value,
};

/// Runs the validators of `block` over `value`, pointing each diagnostic at its attribute.
pub fn validate_block(block: &Block, value: &Value) -> Diagnostics {
    let mut diags = Diagnostics::new();
    walk_block(block, value, &AttrPath::root(), &mut diags);
    diags
}

fn walk_block(block: &Block, value: &Value, path: &AttrPath, diags: &mut Diagnostics) {
    if value.as_object().is_none() {
        return;
    }
    for attr in &block.attributes {
        walk_attr(
            attr,
            value.get(attr.name),
            &path.push_attr(attr.name),
            diags,
        );
    }
    for nb in &block.blocks {
        let v = value.get(nb.type_name);
        let p = path.push_attr(nb.type_name);
        for_each_nested(nb.nesting, v, &p, |ev, ep| {
            walk_block(&nb.block, ev, ep, diags);
        });
    }
}

fn walk_attr(attr: &Attribute, value: &Value, path: &AttrPath, diags: &mut Diagnostics) {
    if value.is_null() || value.is_unknown() {
        return;
    }
    for v in &attr.validators {
        v.validate(path, value, diags);
    }
    if let AttrType::Nested {
        nesting,
        attributes,
    } = &attr.ty
    {
        for_each_nested(*nesting, value, path, |ev, ep| {
            if ev.as_object().is_some() {
                for a in attributes {
                    walk_attr(a, ev.get(a.name), &ep.push_attr(a.name), diags);
                }
            }
        });
    }
}

/// Calls `f` on each object of a nested value, with its path.
pub(crate) fn for_each_nested(
    nesting: Nesting,
    value: &Value,
    path: &AttrPath,
    mut f: impl FnMut(&Value, &AttrPath),
) {
    match nesting {
        Nesting::Single | Nesting::Group => f(value, path),
        Nesting::List | Nesting::Set => {
            for (i, e) in value.as_seq().unwrap_or_default().iter().enumerate() {
                f(e, &path.push_index(i));
            }
        }
        Nesting::Map => {
            for (k, e) in value.as_map().into_iter().flatten() {
                f(e, &path.push_key(k.clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        schema::{AttrMode, NestedBlock},
        value::Type,
    };

    fn schema() -> Block {
        Block::new("")
            .attr(Attribute::optional("vlan_id", Type::Number).validate(IntBetween::new(1, 4094)))
            .attr(Attribute::nested(
                "dhcp",
                Nesting::Single,
                AttrMode::Optional,
                vec![Attribute::optional("mode", Type::String).validate(OneOf::new(&["a", "b"]))],
            ))
            .block(NestedBlock::list(
                "rule",
                Block::new("")
                    .attr(Attribute::optional("name", Type::String).validate(DnsLabel::new(10))),
            ))
    }

    #[test]
    fn reports_every_problem_with_its_path() {
        let v = Value::object([
            ("vlan_id", Value::int(5000)),
            ("dhcp", Value::object([("mode", Value::string("c"))])),
            (
                "rule",
                Value::List(vec![
                    Value::object([("name", Value::string("ok"))]),
                    Value::object([("name", Value::string("Not_OK"))]),
                ]),
            ),
        ]);
        let d = validate_block(&schema(), &v);
        let paths: Vec<String> = d
            .iter()
            .map(|d| d.path.as_ref().map(ToString::to_string).unwrap_or_default())
            .collect();
        assert_eq!(paths, ["vlan_id", "dhcp.mode", "rule[1].name"]);
    }

    #[test]
    fn skips_unknown_and_null() {
        let v = Value::object([
            ("vlan_id", Value::unknown()),
            ("dhcp", Value::Null),
            ("rule", Value::unknown()),
        ]);
        assert!(validate_block(&schema(), &v).is_empty());
    }
}
