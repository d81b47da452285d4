//! The host objects of a virtual cluster for each tier, pinned by snapshots: what the vCluster
//! chart of the pinned release would create, plus the tenant's policy objects. Rendering is
//! pure, so these need no cluster.

use gpufleet_engine::{
    resources::virtual_cluster::{
        render::{Rendered, render},
        spec::Spec,
    },
    value::Value,
};
use serde_json::json;

fn spec(extra: &[(&str, Value)]) -> Spec {
    let mut attrs = vec![
        ("name", Value::string("team-a")),
        ("kubernetes_version", Value::string("1.36")),
        ("network_isolation", Value::Bool(true)),
        ("pod_security", Value::string("baseline")),
        ("paused", Value::Bool(false)),
    ];
    attrs.extend(extra.iter().cloned());
    Spec::from_value(&Value::object(attrs)).expect("spec")
}

fn quota() -> Value {
    Value::object([
        ("gpus", Value::int(8)),
        ("cpu", Value::string("64")),
        ("memory", Value::string("256Gi")),
        ("pods", Value::int(200)),
    ])
}

fn snapshot_value(r: &Rendered) -> serde_json::Value {
    json!({
        "namespace": r.namespace,
        "objects": r.objects.iter().map(|(_, o)| o.clone()).collect::<Vec<_>>(),
        "absent": r.absent.iter().map(ToString::to_string).collect::<Vec<_>>(),
    })
}

#[test]
fn shared_tier() {
    let r = render(&spec(&[("isolation", Value::string("shared"))]));
    insta::assert_snapshot!("shared_vcluster_yaml", r.vcluster_yaml);
    insta::assert_json_snapshot!("shared_objects", snapshot_value(&r));
}

#[test]
fn dedicated_tier_with_policy() {
    let r = render(&spec(&[
        ("isolation", Value::string("dedicated")),
        ("quota", quota()),
        (
            "limit_range",
            Value::object([
                ("default_cpu", Value::string("2")),
                ("default_memory", Value::string("8Gi")),
                ("default_request_cpu", Value::string("500m")),
                ("default_request_memory", Value::string("1Gi")),
            ]),
        ),
        ("pod_security", Value::string("restricted")),
        (
            "labels",
            Value::Map([("example.com/team".to_owned(), Value::string("ml"))].into()),
        ),
    ]));
    insta::assert_snapshot!("dedicated_vcluster_yaml", r.vcluster_yaml);
    insta::assert_json_snapshot!("dedicated_objects", snapshot_value(&r));
}

#[test]
fn private_tier_paused_and_sleeping_with_override() {
    let r = render(&spec(&[
        ("isolation", Value::string("private")),
        ("network_isolation", Value::Bool(false)),
        ("paused", Value::Bool(true)),
        (
            "sleep",
            Value::object([("after_inactivity", Value::string("2h"))]),
        ),
        (
            "values_override",
            Value::string("sync:\n  toHost:\n    ingresses:\n      enabled: true\n"),
        ),
    ]));
    insta::assert_snapshot!("private_vcluster_yaml", r.vcluster_yaml);
    insta::assert_json_snapshot!("private_objects", snapshot_value(&r));
}

#[test]
fn tiers_differ_where_the_contract_says() {
    let shared = render(&spec(&[("isolation", Value::string("shared"))]));
    let dedicated = render(&spec(&[("isolation", Value::string("dedicated"))]));
    assert!(
        shared
            .vcluster_yaml
            .contains("gpufleet.dev/isolation: shared"),
        "{}",
        shared.vcluster_yaml
    );
    assert!(!shared.vcluster_yaml.contains("enforceTolerations"));
    assert!(
        dedicated
            .vcluster_yaml
            .contains("gpufleet.dev/tenant: team-a"),
        "{}",
        dedicated.vcluster_yaml
    );
    assert!(
        dedicated
            .vcluster_yaml
            .contains("gpufleet.dev/tenant=team-a:NoSchedule"),
        "{}",
        dedicated.vcluster_yaml
    );
    // The namespace carries the tier for node pools.
    assert_eq!(
        dedicated.namespace["metadata"]["labels"]["gpufleet.dev/isolation"],
        "dedicated"
    );
    assert_eq!(shared.namespace["metadata"]["name"], "vc-team-a");
    // A changed configuration restarts the control plane through the pod template.
    let digest = |r: &Rendered| {
        r.objects.last().expect("statefulset").1["spec"]["template"]["metadata"]["annotations"]
            .clone()
    };
    assert_ne!(digest(&shared), digest(&dedicated));
}
