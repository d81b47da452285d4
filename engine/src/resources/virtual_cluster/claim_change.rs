//! Which changes of `persistence` a plan makes by replacing the virtual cluster: a
//! StatefulSet's `volumeClaimTemplates` cannot change, and a claim that exists keeps its size
//! and class whatever the template says (see [`super::persistence`]).

use super::{
    config::PersistenceConfig,
    quantity,
    schema::{PERSISTENCE, SIZE, STORAGE_CLASS},
};
use crate::{
    diag::{Diagnostic, Diagnostics},
    path::AttrPath,
    value::Known,
};

/// The `persistence` paths whose change `planned` makes to the claim in `prior`, with a
/// warning for each: a StatefulSet's claim cannot change, so these force a replacement. A
/// size written differently but of the same amount changes nothing. A prior without a claim
/// (null) is replaced as a whole, so that the data moves onto one. An unknown value may
/// differ, so it counts as a change, as Terraform counts it.
pub(super) fn replacements(
    prior: &Known<PersistenceConfig>,
    planned: &Known<PersistenceConfig>,
) -> (Vec<AttrPath>, Diagnostics) {
    let root = AttrPath::attr(PERSISTENCE);
    let mut paths = Vec::new();
    let mut diagnostics = Diagnostics::new();
    // A left-out `persistence` is the default claim.
    let planned = match planned {
        Known::Unknown => {
            paths.push(root);
            return (paths, diagnostics);
        }
        Known::Null => PersistenceConfig::default(),
        Known::Value(p) => p.clone(),
    };
    if prior.is_null() {
        paths.push(root.clone());
        if !planned.is_known() {
            return (paths, diagnostics);
        }
        diagnostics.push(
            Diagnostic::warning(
                "Virtual Cluster Moves Its Data To A Volume Claim",
                format!(
                    "The virtual cluster's StatefulSet has no volume claim: an earlier gpufleet \
                     release kept the control plane's data in the pod, where it was lost on \
                     every restart. The claim a StatefulSet has cannot change, so the virtual \
                     cluster is replaced (its namespace and everything in it are deleted, and it \
                     is created anew with empty data and a new kubeconfig) with its data on a \
                     claim of {}.",
                    planned.claim().describe()
                ),
            )
            .with_path(root),
        );
        return (paths, diagnostics);
    }
    let was = prior
        .value()
        .map(PersistenceConfig::claim)
        .unwrap_or_default();
    let now = planned.claim();
    if planned.size.is_unknown() || !quantity::same(&was.size, &now.size) {
        paths.push(root.push_attr(SIZE));
    }
    if planned.storage_class.is_unknown() || was.storage_class != now.storage_class {
        paths.push(root.push_attr(STORAGE_CLASS));
    }
    if !paths.is_empty() && planned.is_known() {
        diagnostics.push(
            Diagnostic::warning(
                "Volume Claim Change Replaces The Virtual Cluster",
                format!(
                    "persistence would go from {} to {}. The volume claim of a StatefulSet \
                     cannot change, so the virtual cluster is destroyed (its namespace, the \
                     claim with the tenant's objects, its API server and kubeconfig) and created \
                     anew with empty data.",
                    was.describe(),
                    now.describe()
                ),
            )
            .with_path(root),
        );
    }
    (paths, diagnostics)
}

#[cfg(test)]
mod tests {
    use super::{super::config::ClusterConfig, *};
    use crate::value::Value;

    fn claim(size: &str, class: Option<&str>) -> Value {
        Value::object([
            ("size", Value::string(size)),
            ("storage_class", class.map(str::to_owned).into()),
        ])
    }

    fn decode(persistence: Value) -> Known<PersistenceConfig> {
        ClusterConfig::decode(&Value::object([("persistence", persistence)])).persistence
    }

    #[test]
    fn only_a_different_amount_or_class_replaces() {
        let default = claim("5Gi", None);
        // (case, prior, planned, paths forcing replacement)
        let cases: Vec<(&str, Value, Value, Vec<&str>)> = vec![
            ("unchanged", default.clone(), default.clone(), vec![]),
            (
                "same amount",
                default.clone(),
                claim("5120Mi", None),
                vec![],
            ),
            (
                "bigger",
                default.clone(),
                claim("20Gi", None),
                vec!["persistence.size"],
            ),
            (
                "class named",
                default.clone(),
                claim("5Gi", Some("fast")),
                vec!["persistence.storage_class"],
            ),
            (
                "both",
                claim("5Gi", Some("fast")),
                claim("1Ti", Some("slow")),
                vec!["persistence.size", "persistence.storage_class"],
            ),
            (
                "unknown size",
                default.clone(),
                Value::object([("size", Value::unknown()), ("storage_class", Value::Null)]),
                vec!["persistence.size"],
            ),
            (
                "unknown",
                default.clone(),
                Value::unknown(),
                vec!["persistence"],
            ),
            (
                "no claim yet",
                Value::Null,
                default.clone(),
                vec!["persistence"],
            ),
        ];
        for (case, prior, planned, want) in cases {
            let (paths, d) = replacements(&decode(prior), &decode(planned.clone()));
            let got: Vec<String> = paths.iter().map(ToString::to_string).collect();
            assert_eq!(got, want, "{case}");
            let warned = d.iter().count();
            let known = planned.is_wholly_known();
            assert_eq!(warned, usize::from(!want.is_empty() && known), "{case}");
        }
    }
}
