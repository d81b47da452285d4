//! Reading Kubernetes objects held as JSON (what [`super::DynamicClient`] returns): a string
//! at a JSON pointer, an object's labels and annotations.

use std::collections::BTreeMap;

use serde_json::Value as Json;

/// The string at JSON pointer `ptr` of `o`, if there is one.
pub fn str_at<'a>(o: &'a Json, ptr: &str) -> Option<&'a str> {
    o.pointer(ptr).and_then(Json::as_str)
}

/// The object's labels (those with string values).
pub fn labels_of(o: &Json) -> BTreeMap<String, String> {
    o.pointer("/metadata/labels")
        .and_then(Json::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// Each object's labels by its name.
pub fn labels_by_name(objects: &[Json]) -> BTreeMap<String, BTreeMap<String, String>> {
    objects
        .iter()
        .map(|o| {
            let name = str_at(o, "/metadata/name").unwrap_or_default();
            (name.to_owned(), labels_of(o))
        })
        .collect()
}

/// One label of the object; `key` may hold `/`, which a JSON pointer must escape.
pub fn label<'a>(o: &'a Json, key: &str) -> Option<&'a str> {
    str_at(o, &format!("/metadata/labels/{}", key.replace('/', "~1")))
}

/// One annotation of the object, as [`label`].
pub fn annotation<'a>(o: &'a Json, key: &str) -> Option<&'a str> {
    str_at(
        o,
        &format!("/metadata/annotations/{}", key.replace('/', "~1")),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn keys_with_slashes_are_escaped() {
        let o = json!({ "metadata": {
            "labels": { "nvidia.com/gpu.count": "8", "n": 1 },
            "annotations": { "a/b": "c" },
        } });
        assert_eq!(label(&o, "nvidia.com/gpu.count"), Some("8"));
        assert_eq!(annotation(&o, "a/b"), Some("c"));
        assert_eq!(labels_of(&o).len(), 1, "only string values");
        assert_eq!(str_at(&o, "/metadata/missing"), None);
    }
}
