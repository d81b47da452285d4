//! Where the control plane keeps its data: the volume claim `data` of its StatefulSet, as the
//! vCluster chart makes it by default (`controlPlane.statefulSet.persistence.volumeClaim`,
//! `enabled: auto` with the embedded database), sized and classed by the `persistence`
//! attribute. The StatefulSet controller gives each control-plane pod the claim
//! `data-<name>-<ordinal>`, so the tenant's objects (kine's SQLite database) and the control
//! plane's certificates survive restarts, pauses, upgrades and rescheduling.
//!
//! A StatefulSet's `volumeClaimTemplates` cannot change, and a claim that exists keeps its
//! size and class whatever the template says. So the plan replaces the virtual cluster when
//! the claim would change (`claim_change`), read reflects the claim the StatefulSet has
//! ([`observed`]), and apply refuses to write a StatefulSet whose claim differs from the
//! one it has ([`Persistence::of_statefulset`]) rather than meet the API server's
//! immutability error.

use serde_json::Value as Json;

use super::quantity;

/// The chart's `persistence.volumeClaim.size`.
pub const DEFAULT_SIZE: &str = "5Gi";

/// The name of the claim template, and the first part of each claim's name.
pub const CLAIM: &str = "data";

/// `persistence`: the control plane's volume claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Persistence {
    /// `resources.requests.storage`, a quantity.
    pub size: String,
    /// `storageClassName`; `None` leaves it out, so the cluster's default StorageClass
    /// provisions the volume.
    pub storage_class: Option<String>,
}

impl Default for Persistence {
    fn default() -> Persistence {
        Persistence {
            size: DEFAULT_SIZE.to_owned(),
            storage_class: None,
        }
    }
}

impl Persistence {
    /// The claim template `data` of StatefulSet `sts`, if it has one.
    pub fn of_statefulset(sts: &Json) -> Option<Persistence> {
        let template = sts
            .pointer("/spec/volumeClaimTemplates")?
            .as_array()?
            .iter()
            .find(|t| t.pointer("/metadata/name").and_then(Json::as_str) == Some(CLAIM))?;
        let size = match template.pointer("/spec/resources/requests/storage") {
            Some(Json::String(s)) => s.clone(),
            Some(Json::Number(n)) => n.to_string(),
            _ => String::new(),
        };
        let storage_class = template
            .pointer("/spec/storageClassName")
            .and_then(Json::as_str)
            .map(str::to_owned);
        Some(Persistence {
            size,
            storage_class,
        })
    }

    /// Whether `other` is the same claim: the same amount of storage (`5Gi` is `5120Mi`) of
    /// the same class.
    pub fn same(&self, other: &Persistence) -> bool {
        quantity::same(&self.size, &other.size) && self.storage_class == other.storage_class
    }

    /// "5Gi of the default StorageClass", for messages.
    pub fn describe(&self) -> String {
        match &self.storage_class {
            Some(c) => format!("{} of StorageClass {c:?}", self.size),
            None => format!("{} of the default StorageClass", self.size),
        }
    }
}

/// The prefix of the names of the claims the StatefulSet of virtual cluster `name` makes
/// (`data-<name>-<ordinal>`).
pub fn claim_prefix(name: &str) -> String {
    format!("{CLAIM}-{name}-")
}

/// The claim of StatefulSet `sts`, with the size in the prior state's spelling
/// (`prior_size`) when that is the same amount (the API server may store `5120Mi` as `5Gi`);
/// `None` when the StatefulSet has no claim `data` (one an earlier gpufleet release made
/// keeps its data in the pod).
pub fn observed(sts: &Json, prior_size: Option<&str>) -> Option<Persistence> {
    let mut have = Persistence::of_statefulset(sts)?;
    if let Some(p) = prior_size
        && quantity::same(p, &have.size)
    {
        have.size = p.to_owned();
    }
    Some(have)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn sts(template: &Json) -> Json {
        json!({ "spec": { "volumeClaimTemplates": [template] } })
    }

    fn claim(size: &str, class: Option<&str>) -> Persistence {
        Persistence {
            size: size.to_owned(),
            storage_class: class.map(str::to_owned),
        }
    }

    #[test]
    fn the_claim_is_read_from_the_template_named_data() {
        let o = sts(&json!({
            "metadata": { "name": "data" },
            "spec": { "storageClassName": "fast", "resources": { "requests": { "storage": "5Gi" } } },
        }));
        assert_eq!(
            Persistence::of_statefulset(&o),
            Some(Persistence {
                size: "5Gi".to_owned(),
                storage_class: Some("fast".to_owned()),
            })
        );
        // Kept in the prior spelling when it is the same amount.
        assert_eq!(
            observed(&o, Some("5120Mi")),
            Some(claim("5120Mi", Some("fast")))
        );
        assert_eq!(observed(&o, None), Some(claim("5Gi", Some("fast"))));
        let other = sts(&json!({ "metadata": { "name": "cache" }, "spec": {} }));
        assert_eq!(Persistence::of_statefulset(&other), None);
        assert_eq!(observed(&other, None), None);
        assert_eq!(observed(&json!({ "spec": {} }), None), None);
    }
}
