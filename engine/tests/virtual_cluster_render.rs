//! The host objects of a virtual cluster for each tier, pinned by snapshots: what the vCluster
//! chart of the pinned release would create, plus the tenant's policy objects. Rendering is
//! pure, so these need no cluster. The snapshots hold gpufleet's settings for each tier (the
//! value file laid over the chart's values) and, once, the complete vcluster.yaml; the
//! conformance test (`vcluster_conformance.rs`) compares all of it with the chart itself.

use gpufleet_engine::{
    backends::kube::host::ObjectKind,
    resources::virtual_cluster::{
        model::Spec,
        objects::{HOST_OBJECTS, Names},
        render::{Rendered, render},
        values,
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

fn persistence(size: &str, class: Option<&str>) -> Value {
    Value::object([
        ("size", Value::string(size)),
        ("storage_class", class.map(Value::string).into()),
    ])
}

fn statefulset(r: &Rendered) -> serde_json::Value {
    r.objects
        .iter()
        .find(|(_, o)| o["kind"] == "StatefulSet")
        .map(|(_, o)| o.clone())
        .expect("StatefulSet")
}

/// The objects, with the config Secret's data shortened (its vcluster.yaml is snapshotted on
/// its own).
fn snapshot_value(r: &Rendered) -> serde_json::Value {
    let objects: Vec<serde_json::Value> = r
        .objects
        .iter()
        .map(|(_, o)| {
            let mut o = o.clone();
            if o.pointer("/data/config.yaml").is_some() {
                o["data"]["config.yaml"] = json!("<base64 of the vcluster.yaml>");
            }
            o
        })
        .collect();
    json!({
        "namespace": r.namespace,
        "objects": objects,
        "absent": r.absent.iter().map(ToString::to_string).collect::<Vec<_>>(),
    })
}

/// gpufleet's value file for `spec` (settings, then `values_override`), as YAML.
fn settings_yaml(spec: &Spec) -> String {
    values::to_yaml(&values::user_values(spec))
}

#[test]
fn shared_tier() {
    let s = spec(&[("isolation", Value::string("shared"))]);
    let r = render(&s);
    insta::assert_snapshot!("shared_vcluster_settings", settings_yaml(&s));
    insta::assert_snapshot!("shared_vcluster_yaml", r.vcluster_yaml);
    insta::assert_json_snapshot!("shared_objects", snapshot_value(&r));
}

#[test]
fn dedicated_tier_with_policy() {
    let s = spec(&[
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
        ("persistence", persistence("20Gi", Some("fast-ssd"))),
    ]);
    let r = render(&s);
    insta::assert_snapshot!("dedicated_vcluster_settings", settings_yaml(&s));
    insta::assert_json_snapshot!("dedicated_objects", snapshot_value(&r));
}

#[test]
fn private_tier_paused_and_sleeping_with_override() {
    let s = spec(&[
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
    ]);
    let r = render(&s);
    insta::assert_snapshot!("private_vcluster_settings", settings_yaml(&s));
    insta::assert_json_snapshot!("private_objects", snapshot_value(&r));
}

#[test]
fn the_data_is_on_the_charts_volume_claim() {
    // By default: the chart's claim (5Gi, ReadWriteOnce, the cluster's default class),
    // retained when the StatefulSet goes, and no emptyDir for the data.
    let r = render(&spec(&[]));
    let sts = statefulset(&r);
    assert_eq!(
        sts["spec"]["volumeClaimTemplates"],
        json!([{
            "metadata": { "name": "data" },
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": { "requests": { "storage": "5Gi" } },
            },
        }])
    );
    assert_eq!(
        sts["spec"]["persistentVolumeClaimRetentionPolicy"],
        json!({ "whenDeleted": "Retain" })
    );
    let volumes = sts["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .expect("volumes");
    assert!(volumes.iter().all(|v| v["name"] != "data"), "{volumes:?}");
    let mounts = &sts["spec"]["template"]["spec"]["containers"][0]["volumeMounts"];
    assert_eq!(mounts[0], json!({ "name": "data", "mountPath": "/data" }));
    let claim = &r.values["controlPlane"]["statefulSet"]["persistence"]["volumeClaim"];
    assert_eq!(claim["enabled"], "auto");
    assert_eq!(claim["size"], "5Gi");
    assert_eq!(claim["storageClass"], "");

    // A size and a class of the user's.
    let r = render(&spec(&[(
        "persistence",
        persistence("100Gi", Some("fast-ssd")),
    )]));
    let sts = statefulset(&r);
    assert_eq!(
        sts["spec"]["volumeClaimTemplates"][0]["spec"],
        json!({
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "fast-ssd",
            "resources": { "requests": { "storage": "100Gi" } },
        })
    );
    let claim = &r.values["controlPlane"]["statefulSet"]["persistence"]["volumeClaim"];
    assert_eq!(claim["size"], "100Gi");
    assert_eq!(claim["storageClass"], "fast-ssd");

    // A null attribute is the default; pausing keeps the claim.
    let paused = render(&spec(&[
        ("persistence", Value::Null),
        ("paused", Value::Bool(true)),
    ]));
    assert_eq!(
        statefulset(&paused)["spec"]["volumeClaimTemplates"],
        statefulset(&render(&spec(&[])))["spec"]["volumeClaimTemplates"]
    );
}

#[test]
fn a_paused_statefulset_records_its_replicas_and_takes_a_date() {
    let ha = "controlPlane:\n  statefulSet:\n    highAvailability:\n      replicas: 3\n";
    let mut paused = render(&spec(&[
        ("paused", Value::Bool(true)),
        ("values_override", Value::string(ha)),
    ]));
    paused.set_paused_date("2026-01-01T00:00:00Z");
    let sts = statefulset(&paused);
    assert_eq!(sts["spec"]["replicas"], 0);
    assert_eq!(
        sts["metadata"]["annotations"],
        json!({
            "loft.sh/paused": "true",
            "loft.sh/paused-replicas": "3",
            "loft.sh/paused-date": "2026-01-01T00:00:00Z",
        })
    );
    // Running: no pause annotations, and no date to stamp.
    let mut running = render(&spec(&[("values_override", Value::string(ha))]));
    running.set_paused_date("2026-01-01T00:00:00Z");
    let sts = statefulset(&running);
    assert_eq!(sts["spec"]["replicas"], 3);
    assert!(sts["metadata"].get("annotations").is_none(), "{sts}");
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
    assert_eq!(
        shared
            .values
            .pointer("/sync/toHost/pods/enforceTolerations"),
        Some(&json!([]))
    );
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

/// vcluster.yaml is complete: the chart's defaults are in, so the control plane's API server,
/// controller manager and syncers start, and what open-source vCluster lacks is left out.
#[test]
fn the_config_is_complete_and_open_source() {
    let r = render(&spec(&[
        ("isolation", Value::string("private")),
        (
            "sleep",
            Value::object([("after_inactivity", Value::string("1h"))]),
        ),
    ]));
    let v = &r.values;
    for (ptr, want) in [
        ("/controlPlane/distro/k8s/enabled", json!(true)),
        ("/controlPlane/distro/k8s/apiServer/enabled", json!(true)),
        (
            "/controlPlane/distro/k8s/controllerManager/enabled",
            json!(true),
        ),
        ("/controlPlane/coredns/enabled", json!(true)),
        ("/sync/toHost/services/enabled", json!(true)),
        ("/sync/toHost/configMaps/enabled", json!(true)),
        ("/sync/toHost/secrets/enabled", json!(true)),
        ("/sync/toHost/endpoints/enabled", json!(true)),
        ("/privateNodes/enabled", json!(false)),
        (
            "/controlPlane/statefulSet/image/repository",
            json!("loft-sh/vcluster-oss"),
        ),
    ] {
        assert_eq!(v.pointer(ptr), Some(&want), "{ptr}");
    }
    assert!(v.get("sleep").is_none(), "sleep is a Platform feature");
    assert!(values::pro_features(v).is_empty());
    // The private tier is the dedicated tier's vcluster.yaml: the tenant's own nodes.
    let dedicated = render(&spec(&[("isolation", Value::string("dedicated"))]));
    assert_eq!(r.values, dedicated.values);
    // Node sync comes with the ClusterRole that lets the control plane read host nodes.
    let role = r
        .objects
        .iter()
        .find(|(o, _)| o.kind.kind() == "ClusterRole")
        .map(|(_, o)| o.clone())
        .expect("ClusterRole");
    assert_eq!(role["metadata"]["name"], "vc-team-a-v-vc-team-a");
    assert_eq!(
        role["rules"][0]["resources"],
        json!(["pods", "nodes", "nodes/status"])
    );
}

fn exposed(service_type: &str, host: Option<&str>) -> Value {
    Value::object([
        ("type", Value::string(service_type)),
        ("host", host.map(Value::string).into()),
    ])
}

fn service(r: &Rendered, name: &str) -> serde_json::Value {
    r.objects
        .iter()
        .find(|(_, o)| o["kind"] == "Service" && o["metadata"]["name"] == name)
        .map(|(_, o)| o.clone())
        .expect("Service")
}

/// `expose` reaches the chart as `controlPlane.service.spec.type` and
/// `controlPlane.proxy.extraSANs`, and the Service follows as the chart renders it: a
/// LoadBalancer has no kubelet port (`proxyKubelets.byHostname` is for node-local access), and
/// no type gets a node port gpufleet picked.
#[test]
fn expose_sets_the_service_type_and_the_certificates_extra_name() {
    let lb = render(&spec(&[(
        "expose",
        exposed("LoadBalancer", Some("team-a.vc.example.com")),
    )]));
    assert_eq!(
        values::at(&lb.values, "controlPlane.service.spec.type"),
        Some(&json!("LoadBalancer"))
    );
    assert_eq!(
        values::at(&lb.values, "controlPlane.proxy.extraSANs"),
        Some(&json!(["team-a.vc.example.com"]))
    );
    assert!(
        lb.vcluster_yaml.contains("team-a.vc.example.com"),
        "the stored vcluster.yaml names the host"
    );
    let svc = service(&lb, "team-a");
    assert_eq!(svc["spec"]["type"], "LoadBalancer");
    assert_eq!(
        svc["spec"]["ports"],
        json!([{ "name": "https", "port": 443, "targetPort": 8443, "protocol": "TCP" }])
    );
    // The headless Service stays as it is.
    assert_eq!(service(&lb, "team-a-headless")["spec"]["clusterIP"], "None");

    let node_port = render(&spec(&[("expose", exposed("NodePort", None))]));
    let svc = service(&node_port, "team-a");
    assert_eq!(svc["spec"]["type"], "NodePort");
    let ports: Vec<&str> = svc["spec"]["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(ports, ["https", "kubelet"]);
    assert!(
        svc["spec"]["ports"]
            .as_array()
            .expect("ports")
            .iter()
            .all(|p| p.get("nodePort").is_none()),
        "Kubernetes allocates the node ports: {svc}"
    );
    assert_eq!(
        values::at(&node_port.values, "controlPlane.proxy.extraSANs"),
        Some(&json!([])),
        "the chart's default without a host"
    );

    // The default is the chart's: a ClusterIP Service and the same vcluster.yaml as before
    // `expose` existed.
    let plain = render(&spec(&[]));
    assert_eq!(service(&plain, "team-a")["spec"]["type"], "ClusterIP");
    assert_eq!(
        plain.vcluster_yaml,
        render(&spec(&[("expose", exposed("ClusterIP", None))])).vcluster_yaml
    );
}

/// The table refresh compares and the docs list is what rendering makes: every object is
/// either rendered or to be deleted, whatever the configuration, and nothing else is.
#[test]
fn the_host_objects_table_is_what_rendering_makes() {
    for extra in [
        vec![],
        vec![
            ("quota", quota()),
            ("network_isolation", Value::Bool(false)),
        ],
        vec![("isolation", Value::string("private"))],
    ] {
        let spec = spec(&extra);
        let names = Names::new(&spec.name, &spec.namespace);
        let r = render(&spec);
        let retired = names.retired();
        let mut made: Vec<_> = r
            .objects
            .iter()
            .map(|(o, _)| o.clone())
            .chain(r.absent.iter().filter(|o| !retired.contains(o)).cloned())
            .collect();
        made.sort();
        let mut table = names.all();
        table.sort();
        assert_eq!(made, table, "{extra:?}");
        assert_eq!(HOST_OBJECTS[0].kind, ObjectKind::Namespace);
        assert_eq!(HOST_OBJECTS[0].of(&names).name, spec.namespace);
        assert_eq!(r.namespace["metadata"]["name"], spec.namespace.as_str());
    }
}

#[test]
fn a_chart_setting_cannot_replace_gpufleets_ownership_labels() {
    // Refresh finds a virtual cluster's objects by these labels: an override that replaced
    // them would make the StatefulSet read as missing on every plan.
    let labels = "controlPlane:\n  statefulSet:\n    labels:\n      app.kubernetes.io/managed-by: helm\n      gpufleet.dev/virtual-cluster: other\n      team: ml\n";
    let r = render(&spec(&[("values_override", Value::string(labels))]));
    let sts = statefulset(&r);
    assert_eq!(
        sts["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "gpufleet"
    );
    assert_eq!(
        sts["metadata"]["labels"]["gpufleet.dev/virtual-cluster"],
        "team-a"
    );
    assert_eq!(sts["metadata"]["labels"]["team"], "ml", "{sts}");
}
