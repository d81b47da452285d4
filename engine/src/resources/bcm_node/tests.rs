//! Tests of the BCM node kind.

use super::*;
use crate::validate::validate_block;

fn config(overrides: &[(&str, Value)]) -> Value {
    let mut v = node_schema().block.complete(&Value::object([
        ("hostname", Value::string("gpu-001")),
        ("category", Value::string("gpu-compute")),
        ("tenant", Value::string("tenant-a")),
    ]));
    for (k, x) in overrides {
        v.set_attr(k, x.clone());
    }
    v
}

fn error_paths(config: &Value) -> Vec<String> {
    let mut d = validate_block(&node_schema().block, config);
    d.extend(validate_node(config));
    d.iter()
        .map(|d| d.path.as_ref().map(ToString::to_string).unwrap_or_default())
        .collect()
}

#[test]
fn bad_input_is_diagnosed_on_its_attribute() {
    let cases: &[(&str, Value, &str)] = &[
        ("install_mode", Value::string("MAIN"), "install_mode"),
        ("install_mode", Value::string("auto"), "install_mode"),
        ("power", Value::string("reboot"), "power"),
        ("hostname", Value::string("gpu 001"), "hostname"),
        ("tenant", Value::string(""), "tenant"),
        ("software_image", Value::string(" "), "software_image"),
    ];
    for (attr, v, want) in cases {
        assert_eq!(
            error_paths(&config(&[(attr, v.clone())])),
            [*want],
            "{attr}"
        );
    }
    assert!(error_paths(&config(&[])).is_empty());
    assert!(error_paths(&config(&[("install_mode", Value::unknown())])).is_empty());
}

#[test]
fn import_skeleton_names_every_attribute() {
    let s = import_skeleton(" gpu-001 ").expect("skeleton");
    assert!(s.conforms_to(&node_schema().value_type()));
    assert_eq!(s.get("hostname"), &Value::string("gpu-001"));
    assert!(import_skeleton("").is_err());
}
