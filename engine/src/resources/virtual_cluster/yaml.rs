//! YAML text of a JSON value with its keys sorted, as Helm's `toYaml` writes it: how
//! gpufleet writes vcluster.yaml and the kubeconfigs it hands out.

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Value as Json;

/// `values` as YAML text: keys sorted.
pub fn to_yaml(values: &Json) -> String {
    // Serialising a JSON value cannot fail; fall back to JSON (which is YAML) regardless.
    serde_saphyr::to_string(&Sorted(values)).unwrap_or_else(|_| values.to_string())
}

/// A JSON value serialised with sorted keys and plain numbers, whatever features
/// `serde_json` was built with.
struct Sorted<'a>(&'a Json);

impl Serialize for Sorted<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Json::Null => s.serialize_unit(),
            Json::Bool(b) => s.serialize_bool(*b),
            Json::Number(n) => {
                if let Some(i) = n.as_i64() {
                    s.serialize_i64(i)
                } else if let Some(u) = n.as_u64() {
                    s.serialize_u64(u)
                } else {
                    s.serialize_f64(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Json::String(x) => s.serialize_str(x),
            Json::Array(xs) => {
                let mut seq = s.serialize_seq(Some(xs.len()))?;
                for x in xs {
                    seq.serialize_element(&Sorted(x))?;
                }
                seq.end()
            }
            Json::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                let mut map = s.serialize_map(Some(keys.len()))?;
                for k in keys {
                    map.serialize_entry(k, &Sorted(&m[k]))?;
                }
                map.end()
            }
        }
    }
}
