//! The provider's least-privilege ClusterRole, generated from what the code uses: the
//! [`ObjectKind`] table with each kind's [`Access`], the node calls ([`host::nodes::RULES`]),
//! the turn Leases ([`lease::RULES`]) and the tenant tunnel ([`tunnel::RULES`]). A kind added
//! to the table must say what it is used for (the match in [`ObjectKind::access`] is
//! exhaustive), and the host test doubles refuse any use a kind does not list, so the role
//! cannot fall behind the code.
//!
//! One grant goes beyond the objects themselves: a virtual cluster's Role and ClusterRole
//! carry rules the configuration decides (plugins and `values_override` add their own), so
//! the provider cannot hold every right it writes into them. It gets `escalate` (write a
//! role with rights it does not hold) and `bind` (bind a role it does not hold) on Roles and
//! ClusterRoles instead, which the API server cannot narrow to the roles of virtual
//! clusters: whoever holds the provider's credentials can grant themselves any right.
//!
//! `deploy/rbac/clusterrole.yaml` is [`cluster_role_yaml`], written by `gpufleet-rbac`; a
//! test checks that it is current.
//!
//! [`host::nodes::RULES`]: super::host::nodes::RULES
//! [`lease::RULES`]: super::lease::RULES
//! [`tunnel::RULES`]: super::tunnel::RULES
//! [`Access`]: super::host::Access

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value as Json, json};

use super::host::ObjectKind;

/// The name of the ClusterRole (and of the lab's service account that is bound to it).
pub const PROVIDER_ROLE: &str = "gpufleet-provider";

/// The verbs that let the provider write roles whose rights it does not hold.
const GRANT_VERBS: &[&str] = &["bind", "escalate"];

/// Verbs in the order the manifest lists them.
const VERB_ORDER: &[&str] = &[
    "get", "list", "watch", "create", "update", "patch", "delete", "bind", "escalate",
];

/// Some verbs on one resource (`plural` or `plural/subresource`) of an API group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// API group; empty for the core group.
    pub group: &'static str,
    /// Resource, e.g. `pods/eviction`.
    pub resource: &'static str,
    /// Verbs.
    pub verbs: &'static [&'static str],
}

impl Rule {
    /// `verbs` on `resource` of `group`.
    pub const fn new(
        group: &'static str,
        resource: &'static str,
        verbs: &'static [&'static str],
    ) -> Rule {
        Rule {
            group,
            resource,
            verbs,
        }
    }
}

/// Every (group, resource) the provider touches, with its verbs.
fn grants() -> BTreeMap<(String, String), BTreeSet<&'static str>> {
    let mut out: BTreeMap<(String, String), BTreeSet<&'static str>> = BTreeMap::new();
    for &kind in ObjectKind::all() {
        let gvk = kind.gvk();
        for &access in kind.access() {
            let resource = match access.subresource() {
                Some(sub) => format!("{}/{sub}", gvk.plural),
                None => gvk.plural.to_owned(),
            };
            out.entry((gvk.group.to_owned(), resource))
                .or_default()
                .extend(access.verbs());
        }
        if matches!(kind, ObjectKind::Role | ObjectKind::ClusterRole) {
            out.entry((gvk.group.to_owned(), gvk.plural.to_owned()))
                .or_default()
                .extend(GRANT_VERBS);
        }
    }
    let extra = super::host::nodes::RULES
        .iter()
        .chain(super::lease::RULES)
        .chain(super::tunnel::RULES);
    for rule in extra {
        out.entry((rule.group.to_owned(), rule.resource.to_owned()))
            .or_default()
            .extend(rule.verbs);
    }
    out
}

fn ordered(verbs: &BTreeSet<&'static str>) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = verbs.iter().copied().collect();
    v.sort_by_key(|verb| {
        VERB_ORDER
            .iter()
            .position(|o| o == verb)
            .unwrap_or(usize::MAX)
    });
    v
}

/// The ClusterRole's rules: one per API group and set of verbs, resources sorted.
pub fn rules() -> Vec<Json> {
    let mut merged: BTreeMap<(String, Vec<&'static str>), Vec<String>> = BTreeMap::new();
    for ((group, resource), verbs) in grants() {
        merged
            .entry((group, ordered(&verbs)))
            .or_default()
            .push(resource);
    }
    merged
        .into_iter()
        .map(|((group, verbs), resources)| {
            json!({ "apiGroups": [group], "resources": resources, "verbs": verbs })
        })
        .collect()
}

/// The ClusterRole object.
pub fn cluster_role() -> Json {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {
            "name": PROVIDER_ROLE,
            "labels": { "app.kubernetes.io/name": "gpufleet", "app.kubernetes.io/component": "provider" },
        },
        "rules": rules(),
    })
}

fn yaml_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("\"{i}\"")).collect();
    format!("[{}]", quoted.join(", "))
}

fn strings(v: &Json) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(Json::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// `deploy/rbac/clusterrole.yaml`: the ClusterRole as a manifest to apply.
pub fn cluster_role_yaml() -> String {
    let mut out = String::from(
        "# The rights the gpufleet provider needs on the host cluster, and no more.\n\
         # Generated from the provider's code by `cargo run -p gpufleet-engine --bin gpufleet-rbac`;\n\
         # do not edit. Bind it to the identity the provider runs as: see\n\
         # docs/guides/host-cluster-access.md.\n",
    );
    out.push_str("apiVersion: rbac.authorization.k8s.io/v1\n");
    out.push_str("kind: ClusterRole\n");
    out.push_str("metadata:\n");
    out.push_str(&format!("  name: {PROVIDER_ROLE}\n"));
    out.push_str("  labels:\n");
    out.push_str("    app.kubernetes.io/name: gpufleet\n");
    out.push_str("    app.kubernetes.io/component: provider\n");
    out.push_str("rules:\n");
    for rule in rules() {
        out.push_str(&format!(
            "  - apiGroups: {}\n",
            yaml_list(&strings(&rule["apiGroups"]))
        ));
        out.push_str(&format!(
            "    resources: {}\n",
            yaml_list(&strings(&rule["resources"]))
        ));
        out.push_str(&format!(
            "    verbs: {}\n",
            yaml_list(&strings(&rule["verbs"]))
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn granted(group: &str, resource: &str) -> BTreeSet<String> {
        rules()
            .iter()
            .filter(|r| strings(&r["apiGroups"]).iter().any(|g| g == group))
            .filter(|r| strings(&r["resources"]).iter().any(|x| x == resource))
            .flat_map(|r| strings(&r["verbs"]))
            .collect()
    }

    #[test]
    fn every_kind_gets_the_verbs_of_what_it_is_used_for() {
        for &kind in ObjectKind::all() {
            let gvk = kind.gvk();
            assert!(!kind.access().is_empty(), "{kind:?} is used for nothing");
            for &access in kind.access() {
                let resource = match access.subresource() {
                    Some(sub) => format!("{}/{sub}", gvk.plural),
                    None => gvk.plural.to_owned(),
                };
                let verbs = granted(gvk.group, &resource);
                for verb in access.verbs() {
                    assert!(
                        verbs.contains(*verb),
                        "{kind:?} {access:?}: {verb} on {resource}"
                    );
                }
            }
        }
    }

    #[test]
    fn nothing_is_granted_by_wildcard_and_only_role_kinds_may_escalate() {
        for rule in rules() {
            for field in ["apiGroups", "resources", "verbs"] {
                assert!(
                    !strings(&rule[field]).iter().any(|v| v.contains('*')),
                    "{rule}"
                );
            }
            let verbs = strings(&rule["verbs"]);
            if verbs.iter().any(|v| v == "escalate" || v == "bind") {
                assert_eq!(
                    strings(&rule["resources"]),
                    ["clusterroles", "roles"],
                    "{rule}"
                );
            }
        }
        // Secrets are read and listed (a virtual cluster's kubeconfig), never watched.
        assert_eq!(
            granted("", "secrets"),
            ["create", "delete", "get", "list", "patch"]
                .map(String::from)
                .into()
        );
    }

    #[test]
    fn the_node_calls_and_turns_are_granted() {
        assert!(granted("", "pods/eviction").contains("create"));
        assert!(granted("", "nodes").contains("patch"));
        assert!(granted("karpenter.sh", "nodepools").contains("delete"));
        assert!(granted("coordination.k8s.io", "leases").contains("update"));
    }

    #[test]
    fn the_shipped_manifest_is_current() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../deploy/rbac/clusterrole.yaml"
        );
        let shipped = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            shipped == cluster_role_yaml(),
            "deploy/rbac/clusterrole.yaml is not what the code needs: run \
             `cargo run -p gpufleet-engine --bin gpufleet-rbac`"
        );
    }
}
