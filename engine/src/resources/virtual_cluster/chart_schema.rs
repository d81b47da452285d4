//! What the pinned chart accepts and what of it gpufleet renders: `values_override` checked
//! against the chart's own `values.schema.json` at plan, and the chart settings whose host
//! objects gpufleet does not render ([`UNRENDERED`]), refused rather than dropped.
//!
//! `values.schema.json` is the file of that name in the `chart/` directory of the Go module
//! `github.com/loft-sh/vcluster` at the release [`super::versions::VCLUSTER_VERSION`] pins
//! (what `scripts/install-helm` downloads, checked against the Go checksum database). The
//! vCluster conformance test fails when the two differ.

use std::sync::OnceLock;

use serde_json::Value as Json;

pub use super::unrendered::{UNRENDERED, Unrendered, override_description};
use super::values;

/// The chart's `values.schema.json` of the pinned release (a fact file, like
/// `chart_values.json`).
const CHART_SCHEMA: &str = include_str!("values.schema.json");

/// One place where the values break the chart's schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    /// The dotted key the error is at (empty for the top level).
    pub key: String,
    /// What the schema says is wrong there.
    pub message: String,
}

fn validator() -> &'static jsonschema::Validator {
    static VALIDATOR: OnceLock<jsonschema::Validator> = OnceLock::new();
    VALIDATOR.get_or_init(|| {
        // The file is part of the source and compiled by the tests; it cannot be invalid.
        let schema: Json = serde_json::from_str(CHART_SCHEMA).expect("values.schema.json is JSON");
        jsonschema::validator_for(&schema).expect("values.schema.json is a valid JSON Schema")
    })
}

/// A JSON pointer (`/controlPlane/ingress`) as a dotted key (`controlPlane.ingress`).
fn dotted(pointer: &str) -> String {
    pointer
        .split('/')
        .skip(1)
        .map(|p| p.replace("~1", "/").replace("~0", "~"))
        .collect::<Vec<_>>()
        .join(".")
}

/// Where `over`, laid over the chart's values as Helm lays a value file over them, breaks
/// the chart's `values.schema.json` (which Helm checks the merged values against).
pub fn schema_errors(over: &Json) -> Vec<SchemaError> {
    let merged = values::coalesce(over, values::chart_defaults());
    validator()
        .iter_errors(&merged)
        .map(|e| SchemaError {
            key: dotted(e.instance_path().as_str()),
            message: e.to_string(),
        })
        .collect()
}

/// Helm's truth of a template value: `false`, `0`, `""`, empty collections and null are off.
fn is_set(v: &Json) -> bool {
    match v {
        Json::Null => false,
        Json::Bool(b) => *b,
        Json::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Json::String(s) => !s.is_empty(),
        Json::Array(a) => !a.is_empty(),
        Json::Object(m) => !m.is_empty(),
    }
}

/// The settings of [`UNRENDERED`] that `over`, laid over the chart's values, turns on.
pub fn unrendered_settings(over: &Json) -> Vec<&'static Unrendered> {
    let merged = values::coalesce(over, values::chart_defaults());
    UNRENDERED
        .iter()
        .filter(|u| values::at(&merged, u.key).is_some_and(is_set))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_charts_own_values_pass_its_schema() {
        assert_eq!(schema_errors(&json!({})), []);
    }

    #[test]
    fn a_misspelt_key_is_named() {
        let errors = schema_errors(&json!({ "controlPlane": { "ingres": { "enabled": true } } }));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].key, "controlPlane");
        assert!(errors[0].message.contains("ingres"), "{errors:?}");
    }

    #[test]
    fn a_value_of_the_wrong_type_is_named() {
        let errors = schema_errors(&json!({ "sync": { "toHost": { "ingresses": {
            "enabled": "yes" } } } }));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].key, "sync.toHost.ingresses.enabled");
    }

    #[test]
    fn the_chart_defaults_turn_on_nothing_gpufleet_does_not_render() {
        assert!(unrendered_settings(&json!({})).is_empty());
        let on = unrendered_settings(&json!({
            "controlPlane": { "serviceMonitor": { "enabled": true } },
            "experimental": { "deploy": { "host": { "manifests": "kind: ConfigMap" } } },
        }));
        let keys: Vec<&str> = on.iter().map(|u| u.key).collect();
        assert_eq!(
            keys,
            [
                "controlPlane.serviceMonitor.enabled",
                "experimental.deploy.host.manifests"
            ]
        );
    }

    #[test]
    fn every_refused_key_is_a_key_of_the_chart() {
        for u in UNRENDERED {
            let mut over = json!(true);
            for part in u.key.rsplit('.') {
                over = json!({ part: over });
            }
            // The schema accepts the key (a string where it wants one is fine too).
            let wrong_key = schema_errors(&over)
                .into_iter()
                .any(|e| e.message.contains("Additional properties"));
            assert!(!wrong_key, "{} is no key of the chart", u.key);
        }
    }
}
