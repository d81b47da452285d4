//! Changing a virtual cluster's tier while GPU node pools serve it, with the real Terraform
//! CLI against the shared lab ([`Lab::shared`]): every ordered pair of tiers with every pool
//! source the old tier allows, with pools that declare the tier and pools that leave it to
//! be found. Each change is either refused at plan, naming the rule and
//! the tier, with nothing changed, or converges to a fleet where the tier's rules hold, with
//! an empty plan after. And a pool whose virtual cluster was replaced behind its back (same
//! id, another tier) is caught at the next plan.
//!
//! Pools are small and each row's pools share one virtual cluster: `host` pools take one
//! L40S node, `bcm` pools one B200 server, `auto` pools emit a Karpenter `NodePool` (for the
//! default node class, `EC2NodeClass/default`, which the lab's Karpenter does not serve, so it
//! launches nothing).

use std::collections::BTreeMap;

use gpufleet_acceptance::Session;
use gpufleet_lab::Lab;
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::{
    Api,
    api::{DynamicObject, ListParams, Patch, PatchParams},
};

const PROVIDER: &str = r#"
terraform {
  required_providers {
    gpufleet = { source = "gpufleet/gpufleet" }
  }
}

provider "gpufleet" {}
"#;

const HOST_PRODUCT: &str = "NVIDIA-L40S";
const BCM_PRODUCT: &str = "NVIDIA-B200";
const TIERS: [&str; 3] = ["shared", "dedicated", "private"];
const REFUSED: &str = "Host Nodes Not Allowed For Private Tier";

fn session(body: &str) -> Session {
    Session::new(&format!("{PROVIDER}\n{body}"), Lab::shared().settings_env())
}

/// Replaces the session's configuration, keeping the provider block.
fn rewrite(tf: &Session, body: &str) {
    tf.write(&format!("{PROVIDER}\n{body}"));
}

/// The sources a tier allows.
fn sources(tier: &str) -> &'static [&'static str] {
    if tier == "private" {
        &["bcm", "auto"]
    } else {
        &["host", "bcm", "auto"]
    }
}

/// One row: a virtual cluster that goes from one tier to another, with one pool per source.
/// The pools either declare the tier (`isolation` from the virtual cluster) or leave it to
/// be found (`declared` false): the plan must see the coming tier either way.
#[derive(Debug, Clone)]
struct Row {
    from: &'static str,
    to: &'static str,
    sources: Vec<&'static str>,
    declared: bool,
}

impl Row {
    /// Short, so every derived name (namespace, pool label, NodePool) stays a label.
    fn name(&self) -> String {
        let undeclared = if self.declared { "" } else { "u" };
        format!("tc-{}{}{undeclared}", &self.from[..1], &self.to[..1])
    }

    /// The virtual cluster and its pools, with the virtual cluster at `tier`; its `bcm` pool
    /// waits for `bcm_after`'s.
    fn hcl(&self, tier: &str, bcm_after: Option<&Row>) -> String {
        let name = self.name();
        let mut out = format!(
            r#"
resource "gpufleet_virtual_cluster" "{name}" {{
  name      = "{name}"
  isolation = "{tier}"
  quota     = {{ gpus = 8, cpu = "16", memory = "64Gi", pods = 50 }}
}}
"#
        );
        for source in &self.sources {
            let sizing = match *source {
                "host" => format!("gpu_product = \"{HOST_PRODUCT}\"\n  node_count = 1"),
                "bcm" => format!("gpu_product = \"{BCM_PRODUCT}\"\n  node_count = 1"),
                _ => format!(
                    "gpu_product = \"{HOST_PRODUCT}\"\n  autoscaling = {{ min_nodes = 0, max_nodes = 1 }}"
                ),
            };
            let after = match bcm_after {
                Some(r) if *source == "bcm" => {
                    format!("depends_on = [gpufleet_gpu_node_pool.{}_bcm]", r.name())
                }
                _ => String::new(),
            };
            let isolation = if self.declared {
                format!("isolation          = gpufleet_virtual_cluster.{name}.isolation")
            } else {
                String::new()
            };
            out.push_str(&format!(
                r#"
resource "gpufleet_gpu_node_pool" "{name}_{source}" {{
  name               = "{source}"
  virtual_cluster_id = gpufleet_virtual_cluster.{name}.id
  {isolation}
  source             = "{source}"
  {sizing}
  {after}
}}
"#
            ));
        }
        out
    }
}

/// Every ordered pair of tiers with the sources valid before the change, split into the
/// rows a plan must refuse (a `host` pool for a tenant becoming private) and the rest; each
/// once with pools that declare the tier and once with pools that do not (without `bcm`
/// pools the second time, which the lab has too few servers for).
fn rows() -> (Vec<Row>, Vec<Row>) {
    let (mut refused, mut converging) = (Vec::new(), Vec::new());
    for declared in [true, false] {
        for from in TIERS {
            for to in TIERS.into_iter().filter(|t| *t != from) {
                let (bad, good): (Vec<&str>, Vec<&str>) = sources(from)
                    .iter()
                    .filter(|s| declared || **s != "bcm")
                    .partition(|s| **s == "host" && to == "private");
                if !bad.is_empty() {
                    refused.push(Row {
                        from,
                        to,
                        sources: bad,
                        declared,
                    });
                }
                converging.push(Row {
                    from,
                    to,
                    sources: good,
                    declared,
                });
            }
        }
    }
    (refused, converging)
}

/// The rows' configuration. `bcm` pools are created one after another: pools of the same
/// product that claim BCM servers at the same moment have failed an apply on a host node's
/// revision ("changed by someone else"), which is not what this test is about.
fn config(rows: &[Row], at: impl Fn(&Row) -> &'static str) -> String {
    let mut last_bcm: Option<&Row> = None;
    let mut out = String::new();
    for r in rows {
        out.push_str(&r.hcl(at(r), last_bcm));
        if r.sources.contains(&"bcm") {
            last_bcm = Some(r);
        }
    }
    out
}

fn labels_of(n: &Node) -> BTreeMap<String, String> {
    n.metadata.labels.clone().unwrap_or_default()
}

fn tenant_taint(n: &Node) -> Option<String> {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .find(|t| t.key == "gpufleet.dev/tenant")
        .map(|t| format!("{}:{}", t.value.clone().unwrap_or_default(), t.effect))
}

/// What the tier's rules ask of a pool of `source` serving `vc` at `tier`, checked on the
/// host: its nodes (or its Karpenter NodePool's template) carry the tier, the tenant label and
/// taint exactly when the tier is not shared, and a private tenant holds no `host` pool.
fn assert_rules_hold(rt: &tokio::runtime::Runtime, client: &kube::Client, tf: &Session, row: &Row) {
    let vc = row.name();
    let tier = row.to;
    let nodes: Api<Node> = Api::all(client.clone());
    for source in &row.sources {
        let address = format!("gpufleet_gpu_node_pool.{vc}_{source}");
        let state = tf.resource(&address);
        assert_eq!(state["isolation"], tier, "{address}: {state}");
        assert!(
            !(tier == "private" && *source == "host"),
            "a private tenant holds a host pool"
        );
        let label = format!("gpufleet.dev/pool={vc}.{source}");
        if *source == "auto" {
            let pools: Api<DynamicObject> = Api::all_with(
                client.clone(),
                &kube::api::ApiResource {
                    group: "karpenter.sh".into(),
                    version: "v1".into(),
                    api_version: "karpenter.sh/v1".into(),
                    kind: "NodePool".into(),
                    plural: "nodepools".into(),
                },
            );
            let np = rt
                .block_on(pools.get(&format!("gpufleet-{vc}-auto")))
                .unwrap_or_else(|e| panic!("{address}: NodePool: {e}"));
            let template = &np.data["spec"]["template"];
            assert_eq!(
                template["metadata"]["labels"]["gpufleet.dev/isolation"], tier,
                "{address}: {template}"
            );
            let tainted = template["spec"]["taints"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|t| t["key"] == "gpufleet.dev/tenant");
            assert_eq!(tainted, tier != "shared", "{address}: {template}");
            continue;
        }
        let held = rt
            .block_on(nodes.list(&ListParams::default().labels(&label)))
            .expect("list nodes")
            .items;
        assert_eq!(held.len(), 1, "{address} holds its node");
        for n in &held {
            let l = labels_of(n);
            assert_eq!(
                l.get("gpufleet.dev/isolation").map(String::as_str),
                Some(tier)
            );
            let tenant = (tier != "shared").then(|| vc.clone());
            assert_eq!(l.get("gpufleet.dev/tenant"), tenant.as_ref(), "{address}");
            assert_eq!(
                tenant_taint(n),
                tenant.map(|t| format!("{t}:NoSchedule")),
                "{address}"
            );
        }
    }
}

/// The pools' node labels and taints, and the namespaces' tiers, for "nothing changed".
fn fleet_of(rt: &tokio::runtime::Runtime, client: &kube::Client, rows: &[Row]) -> String {
    let nodes: Api<Node> = Api::all(client.clone());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut out = Vec::new();
    for row in rows {
        let vc = row.name();
        let ns = rt
            .block_on(namespaces.get(&format!("vc-{vc}")))
            .expect("namespace");
        out.push(format!(
            "{vc}: {:?} uid {:?}",
            ns.metadata
                .labels
                .unwrap_or_default()
                .get("gpufleet.dev/isolation"),
            ns.metadata.uid
        ));
        for source in &row.sources {
            let held = rt
                .block_on(nodes.list(
                    &ListParams::default().labels(&format!("gpufleet.dev/pool={vc}.{source}")),
                ))
                .expect("list nodes")
                .items;
            for n in held {
                out.push(format!(
                    "{:?} {:?} {:?}",
                    n.metadata.name,
                    labels_of(&n),
                    tenant_taint(&n)
                ));
            }
        }
    }
    out.join("\n")
}

#[test]
fn every_tier_change_is_refused_at_plan_or_converges_with_the_rules_holding() {
    let lab = Lab::shared();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let client = rt.block_on(async { lab.client() });
    let (refused, converging) = rows();

    // A host pool of a tenant becoming private: refused at plan, naming the rule and the
    // tier, and neither the plan nor an apply changes anything.
    let tf = session(&config(&refused, |r| r.from));
    let _cleanup = tf.destroy_on_panic();
    tf.apply();
    tf.assert_plan_empty();
    let before = fleet_of(&rt, &client, &refused);
    rewrite(&tf, &config(&refused, |r| r.to));
    let plan = tf.plan();
    assert_eq!(plan.status_code, 1, "the plan is refused:\n{plan}");
    for row in &refused {
        assert!(
            plan.contains(&format!("gpufleet_gpu_node_pool.{}_host", row.name())),
            "{row:?} is named:\n{plan}"
        );
    }
    assert!(plan.contains(REFUSED), "{plan}");
    assert!(plan.contains("isolation = \"private\""), "{plan}");
    let applied = tf.run(&["apply", "-auto-approve", "-input=false", "-no-color"]);
    assert!(!applied.success(), "the apply is refused too:\n{applied}");
    assert!(applied.contains(REFUSED), "{applied}");
    assert_eq!(fleet_of(&rt, &client, &refused), before, "nothing changed");
    rewrite(&tf, &config(&refused, |r| r.from));
    tf.assert_plan_empty();
    tf.destroy();

    // Every other change: one apply, then the rules hold and the plan is empty.
    let tf = session(&config(&converging, |r| r.from));
    let _cleanup = tf.destroy_on_panic();
    tf.apply();
    tf.assert_plan_empty();
    rewrite(&tf, &config(&converging, |r| r.to));
    let plan = tf.plan();
    assert_eq!(plan.status_code, 2, "{plan}");
    tf.apply();
    tf.assert_plan_empty();
    for row in &converging {
        assert_rules_hold(&rt, &client, &tf, row);
    }
    tf.destroy();
}

/// A host namespace standing in for a virtual cluster of `tier` that was (re)created under
/// the same id.
async fn stand_in(client: &kube::Client, name: &str, tier: &str) {
    let ns: Api<Namespace> = Api::all(client.clone());
    let namespace = format!("vc-{name}");
    let body = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": namespace,
            "labels": {
                "app.kubernetes.io/managed-by": "gpufleet",
                "gpufleet.dev/virtual-cluster": name,
                "gpufleet.dev/isolation": tier,
            },
        },
    });
    ns.patch(
        &namespace,
        &PatchParams::apply("gpufleet-acceptance").force(),
        &Patch::Apply(&body),
    )
    .await
    .expect("namespace");
}

#[test]
fn a_virtual_cluster_replaced_behind_a_pools_back_is_caught_at_plan() {
    let lab = Lab::shared();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let client = rt.block_on(async { lab.client() });
    let name = "tc-behind";
    rt.block_on(stand_in(&client, name, "dedicated"));
    let row = Row {
        from: "dedicated",
        to: "private",
        sources: vec!["host"],
        declared: false,
    };
    let body = format!(
        r#"
resource "gpufleet_gpu_node_pool" "p" {{
  name               = "host"
  virtual_cluster_id = "vc-{name}/{name}"
  gpu_product        = "{HOST_PRODUCT}"
  node_count         = 1
}}
"#
    );
    let tf = session(&body);
    let _cleanup = tf.destroy_on_panic();
    tf.apply();
    tf.assert_plan_empty();
    let nodes: Api<Node> = Api::all(client.clone());
    let held = || {
        rt.block_on(
            nodes.list(&ListParams::default().labels(&format!("gpufleet.dev/pool={name}.host"))),
        )
        .expect("list nodes")
        .items
    };
    let before: Vec<_> = held().iter().map(labels_of).collect();

    // The same id is now a private tenant: the host pool is refused at plan.
    rt.block_on(stand_in(&client, name, "private"));
    let plan = tf.plan();
    assert_eq!(plan.status_code, 1, "{plan}");
    assert!(plan.contains(REFUSED), "{plan}");
    assert!(plan.contains("private"), "{plan}");
    assert_eq!(
        held().iter().map(labels_of).collect::<Vec<_>>(),
        before,
        "{row:?}: nothing changed"
    );

    // Now shared: the pool is replaced and its node carries the shared tier.
    rt.block_on(stand_in(&client, name, "shared"));
    let plan = tf.plan();
    assert_eq!(plan.status_code, 2, "{plan}");
    assert!(plan.contains("must be replaced"), "{plan}");
    tf.apply();
    tf.assert_plan_empty();
    let now = held();
    assert_eq!(now.len(), 1);
    assert_eq!(
        labels_of(&now[0])
            .get("gpufleet.dev/isolation")
            .map(String::as_str),
        Some("shared")
    );
    assert_eq!(tenant_taint(&now[0]), None);
    tf.destroy();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let _ = rt.block_on(namespaces.delete(&format!("vc-{name}"), &Default::default()));
}
