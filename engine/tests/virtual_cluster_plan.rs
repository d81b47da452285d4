//! Plans of `gpufleet_virtual_cluster` without a cluster: defaults, computed values known at
//! plan time, in-place changes, replacement, and bad input diagnosed on the right attribute.
//! Every plan is checked against Terraform's plan-validity rules.

#[path = "support/network_segment.rs"]
mod support;

use gpufleet_engine::{
    backends::kube::host::FromSettings,
    consistency::assert_object_compatible,
    context::Context,
    diag::Severity,
    kinds::ResourceKind,
    path::{AttrPath, PathStep},
    resources::virtual_cluster::VirtualCluster,
    value::Value,
};
use support::{Action, config, plan, show};

fn kind() -> VirtualCluster {
    VirtualCluster(FromSettings)
}

fn vc(extra: &[(&str, Value)]) -> Value {
    let mut attrs = vec![("name", Value::string("team-a"))];
    attrs.extend(extra.iter().cloned());
    config(&kind(), &attrs)
}

/// What apply returns for `planned`: the unknowns filled as a running cluster fills them.
fn applied(planned: &Value) -> Value {
    let mut s = planned.clone();
    if let Some(m) = s.as_object_mut() {
        for (k, v) in [
            (
                "kubeconfig",
                Value::string("apiVersion: v1\nkind: Config\n"),
            ),
            ("endpoint", Value::string("https://127.0.0.1:40001")),
            ("host", Value::string("https://127.0.0.1:40001")),
            (
                "cluster_ca_certificate",
                Value::string("-----BEGIN CERTIFICATE-----\n"),
            ),
            (
                "client_certificate",
                Value::string("-----BEGIN CERTIFICATE-----\n"),
            ),
            (
                "client_key",
                Value::string("-----BEGIN EC PRIVATE KEY-----\n"),
            ),
        ] {
            if m.get(k).is_some_and(Value::is_unknown) {
                m.insert(k.to_owned(), v);
            }
        }
    }
    let errs = assert_object_compatible(&kind().schema().block, planned, &s);
    assert!(errs.is_empty(), "{errs:?}");
    s
}

async fn created(extra: &[(&str, Value)]) -> Value {
    let p = plan(&kind(), &Context::default(), &Value::Null, &vc(extra)).await;
    assert!(!p.diagnostics.has_error(), "{}", show(&p.diagnostics));
    applied(&p.planned)
}

fn persistence(size: &str, class: Option<&str>) -> Value {
    Value::object([
        ("size", Value::string(size)),
        ("storage_class", class.map(Value::string).into()),
    ])
}

/// The credentials, which change only with the control plane or its address.
const ACCESS: [&str; 6] = [
    "kubeconfig",
    "endpoint",
    "host",
    "cluster_ca_certificate",
    "client_certificate",
    "client_key",
];

fn expose(service_type: &str, host: Option<&str>) -> Value {
    Value::object([
        ("type", Value::string(service_type)),
        ("host", host.map(Value::string).into()),
    ])
}

fn error_paths(d: &gpufleet_engine::diag::Diagnostics) -> Vec<String> {
    d.iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| d.path.as_ref().map(ToString::to_string).unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn create_knows_namespace_id_status_and_versions() {
    let p = plan(&kind(), &Context::default(), &Value::Null, &vc(&[])).await;
    assert_eq!(p.action, Action::Create);
    let s = &p.planned;
    assert_eq!(s.get("namespace"), &Value::string("vc-team-a"));
    assert_eq!(s.get("id"), &Value::string("vc-team-a/team-a"));
    assert_eq!(s.get("kubernetes_version"), &Value::string("1.36"));
    assert_eq!(s.get("isolation"), &Value::string("shared"));
    assert_eq!(s.get("status"), &Value::string("Running"));
    assert_eq!(s.get("drift"), &Value::List(Vec::new()));
    assert!(s.get("vcluster_version").as_str().is_some());
    assert_eq!(s.get("expose"), &expose("ClusterIP", None));
    for a in ACCESS {
        assert!(s.get(a).is_unknown(), "{a}");
    }
}

#[tokio::test]
async fn unknown_name_plans_without_error() {
    let p = plan(
        &kind(),
        &Context::default(),
        &Value::Null,
        &vc(&[("name", Value::unknown())]),
    )
    .await;
    assert!(!p.diagnostics.has_error(), "{}", show(&p.diagnostics));
    assert!(p.planned.get("namespace").is_unknown());
    assert!(p.planned.get("id").is_unknown());
}

#[tokio::test]
async fn unchanged_configuration_is_a_no_op() {
    let prior = created(&[("quota", quota("64", 8))]).await;
    let p = plan(
        &kind(),
        &Context::default(),
        &prior,
        &vc(&[("quota", quota("64", 8))]),
    )
    .await;
    assert_eq!(p.action, Action::NoOp, "{:?}", p.planned);
}

fn quota(cpu: &str, gpus: i64) -> Value {
    Value::object([
        ("gpus", Value::int(gpus)),
        ("cpu", Value::string(cpu)),
        ("memory", Value::Null),
        ("pods", Value::Null),
    ])
}

#[tokio::test]
async fn policy_changes_in_place_and_keeps_the_kubeconfig() {
    let prior = created(&[("quota", quota("64", 8))]).await;
    let c = vc(&[
        ("quota", quota("32", 4)),
        ("pod_security", Value::string("restricted")),
    ]);
    let p = plan(&kind(), &Context::default(), &prior, &c).await;
    assert_eq!(p.action, Action::Update);
    assert!(p.requires_replace.is_empty());
    for a in ACCESS.iter().chain(&["id", "namespace"]) {
        assert_eq!(p.planned.get(a), prior.get(a), "{a}");
    }
    applied(&p.planned);
}

#[tokio::test]
async fn expose_changes_in_place_and_expects_new_credentials() {
    let prior = created(&[]).await;
    for (case, new) in [
        ("type", expose("LoadBalancer", None)),
        ("host", expose("ClusterIP", Some("vc.example.com"))),
        ("unknown host", expose("NodePort", None)),
    ] {
        let mut new = new;
        if case == "unknown host"
            && let Some(m) = new.as_object_mut()
        {
            m.insert("host".to_owned(), Value::unknown());
        }
        let p = plan(
            &kind(),
            &Context::default(),
            &prior,
            &vc(&[("expose", new)]),
        )
        .await;
        assert!(
            !p.diagnostics.has_error(),
            "{case}: {}",
            show(&p.diagnostics)
        );
        assert_eq!(p.action, Action::Update, "{case}");
        assert!(p.requires_replace.is_empty(), "{case}");
        for a in ACCESS {
            assert!(p.planned.get(a).is_unknown(), "{case}: {a}");
        }
        if case != "unknown host" {
            applied(&p.planned);
        }
    }
    // The default written out is no change; nor is a state from before `expose` existed.
    let p = plan(
        &kind(),
        &Context::default(),
        &prior,
        &vc(&[("expose", expose("ClusterIP", None))]),
    )
    .await;
    assert_eq!(p.action, Action::NoOp, "{:?}", p.planned);
    let mut old = prior.clone();
    if let Some(m) = old.as_object_mut() {
        m.insert("expose".to_owned(), Value::Null);
    }
    let p = plan(&kind(), &Context::default(), &old, &vc(&[])).await;
    assert_eq!(p.action, Action::Update, "null becomes the default");
    for a in ACCESS {
        assert_eq!(p.planned.get(a), prior.get(a), "{a}");
    }
}

#[tokio::test]
async fn pausing_shows_the_status_and_expects_a_new_kubeconfig() {
    let prior = created(&[]).await;
    let p = plan(
        &kind(),
        &Context::default(),
        &prior,
        &vc(&[("paused", Value::Bool(true))]),
    )
    .await;
    assert_eq!(p.action, Action::Update);
    assert_eq!(p.planned.get("status"), &Value::string("Paused"));
    assert!(p.planned.get("kubeconfig").is_unknown());
}

#[tokio::test]
async fn isolation_change_replaces_and_says_so() {
    let prior = created(&[]).await;
    let c = vc(&[("isolation", Value::string("dedicated"))]);
    // The update half of the plan carries the warning; the harness re-plans the create half.
    let p = gpufleet_engine::plan::plan_resource(
        &kind(),
        &Context::default(),
        prior.clone(),
        gpufleet_engine::consistency::proposed_new(&kind().schema().block, &prior, &c),
        c.clone(),
    )
    .await;
    assert_eq!(p.requires_replace, [AttrPath::attr("isolation")]);
    let warning = p
        .diagnostics
        .iter()
        .find(|d| d.severity == Severity::Warning)
        .expect("a warning");
    assert_eq!(warning.path, Some(AttrPath::attr("isolation")));
    assert!(warning.detail.contains("destroys"), "{}", warning.detail);
    let full = plan(&kind(), &Context::default(), &prior, &c).await;
    assert_eq!(full.action, Action::Replace);
}

#[tokio::test]
async fn persistence_defaults_to_the_charts_claim() {
    let p = plan(&kind(), &Context::default(), &Value::Null, &vc(&[])).await;
    assert_eq!(p.planned.get("persistence"), &persistence("5Gi", None));
    // Only a class: the size is still the default.
    let p = plan(
        &kind(),
        &Context::default(),
        &Value::Null,
        &vc(&[(
            "persistence",
            Value::object([("size", Value::Null), ("storage_class", "fast".into())]),
        )]),
    )
    .await;
    assert_eq!(
        p.planned.get("persistence"),
        &persistence("5Gi", Some("fast"))
    );
    // The default written out is no change.
    let prior = created(&[]).await;
    let p = plan(
        &kind(),
        &Context::default(),
        &prior,
        &vc(&[("persistence", persistence("5Gi", None))]),
    )
    .await;
    assert_eq!(p.action, Action::NoOp, "{:?}", p.planned);
}

/// The update half of a plan, as Terraform gets it (with the kind's warnings), and the whole.
async fn plan_change(prior: &Value, c: &Value) -> (gpufleet_engine::plan::Planned, Action) {
    let half = gpufleet_engine::plan::plan_resource(
        &kind(),
        &Context::default(),
        prior.clone(),
        gpufleet_engine::consistency::proposed_new(&kind().schema().block, prior, c),
        c.clone(),
    )
    .await;
    let full = plan(&kind(), &Context::default(), prior, c).await;
    (half, full.action)
}

#[tokio::test]
async fn a_different_claim_replaces_and_says_so() {
    let prior = created(&[]).await;
    let warned_on = |p: &gpufleet_engine::plan::Planned| -> Vec<String> {
        p.diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Warning)
            .map(|d| {
                let path = d.path.as_ref().map(ToString::to_string).unwrap_or_default();
                format!("{path}: {}", d.summary)
            })
            .collect()
    };
    for (case, new, want) in [
        (
            "bigger",
            persistence("20Gi", None),
            vec![AttrPath::attr("persistence").push_attr("size")],
        ),
        (
            "a class",
            persistence("5Gi", Some("fast-ssd")),
            vec![AttrPath::attr("persistence").push_attr("storage_class")],
        ),
        (
            "both",
            persistence("1Ti", Some("fast-ssd")),
            vec![
                AttrPath::attr("persistence").push_attr("size"),
                AttrPath::attr("persistence").push_attr("storage_class"),
            ],
        ),
    ] {
        let c = vc(&[("persistence", new)]);
        let (half, action) = plan_change(&prior, &c).await;
        assert_eq!(half.requires_replace, want, "{case}");
        assert_eq!(action, Action::Replace, "{case}");
        assert_eq!(
            warned_on(&half),
            ["persistence: Volume Claim Change Replaces The Virtual Cluster"],
            "{case}"
        );
    }
    // The same amount written otherwise changes the StatefulSet in place (the API server
    // compares quantities by amount); it restarts the control plane, whose config changed.
    let (half, action) =
        plan_change(&prior, &vc(&[("persistence", persistence("5120Mi", None))])).await;
    assert!(half.requires_replace.is_empty());
    assert_eq!(action, Action::Update);
    assert!(half.planned.get("kubeconfig").is_unknown());

    // A state from before the claim (or a StatefulSet without one): replaced, with a warning.
    let mut old = prior.clone();
    if let Some(m) = old.as_object_mut() {
        m.insert("persistence".to_owned(), Value::Null);
    }
    let (half, action) = plan_change(&old, &vc(&[])).await;
    assert_eq!(half.requires_replace, [AttrPath::attr("persistence")]);
    assert_eq!(action, Action::Replace);
    assert_eq!(
        warned_on(&half),
        ["persistence: Virtual Cluster Moves Its Data To A Volume Claim"]
    );

    // An unknown class may differ: Terraform replaces, and so does the plan.
    let (half, _) = plan_change(
        &prior,
        &vc(&[(
            "persistence",
            Value::object([("size", Value::Null), ("storage_class", Value::unknown())]),
        )]),
    )
    .await;
    assert_eq!(
        half.requires_replace,
        [AttrPath::attr("persistence").push_attr("storage_class")]
    );
}

#[tokio::test]
async fn upgrades_are_in_place_and_downgrades_refused() {
    let prior = created(&[("kubernetes_version", Value::string("1.35"))]).await;
    let up = plan(
        &kind(),
        &Context::default(),
        &prior,
        &vc(&[("kubernetes_version", Value::string("1.36"))]),
    )
    .await;
    assert_eq!(up.action, Action::Update);
    assert!(up.planned.get("kubeconfig").is_unknown());
    let down = plan(
        &kind(),
        &Context::default(),
        &prior,
        &vc(&[("kubernetes_version", Value::string("1.34"))]),
    )
    .await;
    assert_eq!(error_paths(&down.diagnostics), ["kubernetes_version"]);
}

#[tokio::test]
async fn bad_input_is_diagnosed_on_its_attribute() {
    let labels = |k: &str| Value::Map([(k.to_owned(), Value::string("x"))].into());
    /// (case, attributes set, paths of the expected errors)
    type Case<'a> = (&'a str, Vec<(&'a str, Value)>, Vec<&'a str>);
    let cases: Vec<Case<'_>> = vec![
        (
            "name too long",
            vec![("name", Value::string("a".repeat(53)))],
            vec!["name"],
        ),
        (
            "name not a DNS label",
            vec![("name", Value::string("Team_A"))],
            vec!["name"],
        ),
        (
            "isolation",
            vec![("isolation", Value::string("isolated"))],
            vec!["isolation"],
        ),
        (
            "version",
            vec![("kubernetes_version", Value::string("1.20"))],
            vec!["kubernetes_version"],
        ),
        (
            "quota quantities",
            vec![(
                "quota",
                Value::object([
                    ("gpus", Value::int(-1)),
                    ("cpu", Value::string("lots")),
                    ("memory", Value::string("64GB")),
                    ("pods", Value::Null),
                ]),
            )],
            vec!["quota.gpus", "quota.cpu", "quota.memory"],
        ),
        (
            "pod security",
            vec![("pod_security", Value::string("strict"))],
            vec!["pod_security"],
        ),
        (
            "sleep",
            vec![(
                "sleep",
                Value::object([("after_inactivity", Value::string("soon"))]),
            )],
            vec!["sleep.after_inactivity"],
        ),
        (
            "reserved label",
            vec![("labels", labels("gpufleet.dev/tenant"))],
            vec!["labels[\"gpufleet.dev/tenant\"]"],
        ),
        (
            "persistence size",
            vec![("persistence", persistence("5GB", None))],
            vec!["persistence.size"],
        ),
        (
            "persistence size zero, class not a name",
            vec![("persistence", persistence("0", Some("Fast_SSD")))],
            vec!["persistence.size", "persistence.storage_class"],
        ),
        (
            "expose type",
            vec![("expose", expose("nodeport", None))],
            vec!["expose.type"],
        ),
        (
            "expose host with a scheme and a port",
            vec![(
                "expose",
                expose("LoadBalancer", Some("https://vc.example.com:6443")),
            )],
            vec!["expose.host"],
        ),
        (
            "expose host a wildcard",
            vec![("expose", expose("ClusterIP", Some("*.example.com")))],
            vec!["expose.host"],
        ),
        (
            "a fixed node port on a ClusterIP Service",
            vec![(
                "values_override",
                Value::string("controlPlane:\n  service:\n    httpsNodePort: 30443\n"),
            )],
            vec!["values_override"],
        ),
        (
            "override not YAML",
            vec![("values_override", Value::string("a: [1"))],
            vec!["values_override"],
        ),
        (
            "override not a mapping",
            vec![("values_override", Value::string("[1, 2]"))],
            vec!["values_override"],
        ),
    ];
    for (case, extra, want) in cases {
        let p = plan(&kind(), &Context::default(), &Value::Null, &vc(&extra)).await;
        assert_eq!(
            error_paths(&p.diagnostics),
            want,
            "{case}: {}",
            show(&p.diagnostics)
        );
    }
}

#[tokio::test]
async fn overrides_of_managed_keys_are_refused_naming_the_key() {
    for (yaml, key, attr) in [
        (
            "sync:\n  fromHost:\n    nodes:\n      selector:\n        labels:\n          pool: any\n",
            "sync.fromHost.nodes.selector.labels.pool",
            "isolation",
        ),
        (
            "{\"controlPlane\": {\"distro\": {\"k8s\": {\"version\": \"v1.30.0\"}}}}",
            "controlPlane.distro.k8s.version",
            "kubernetes_version",
        ),
        (
            "policies:\n  resourceQuota: {enabled: false}\n",
            "policies.resourceQuota.enabled",
            "quota",
        ),
        (
            "controlPlane:\n  statefulSet:\n    persistence:\n      volumeClaim:\n        size: 50Gi\n",
            "controlPlane.statefulSet.persistence.volumeClaim.size",
            "`persistence`",
        ),
        (
            "controlPlane:\n  statefulSet:\n    persistence:\n      volumeClaim:\n        storageClass: x\n",
            "controlPlane.statefulSet.persistence.volumeClaim.storageClass",
            "`persistence`",
        ),
        // The rest of the claim is gpufleet's; the refusal points at the attribute too.
        (
            "controlPlane:\n  statefulSet:\n    persistence:\n      volumeClaim:\n        enabled: false\n",
            "controlPlane.statefulSet.persistence.volumeClaim.enabled",
            "`persistence`",
        ),
        (
            "controlPlane:\n  statefulSet:\n    persistence:\n      volumeClaimTemplates: [{metadata: {name: x}}]\n",
            "controlPlane.statefulSet.persistence.volumeClaimTemplates",
            "`persistence`",
        ),
        (
            "controlPlane:\n  statefulSet:\n    persistence:\n      dataVolume: [{name: data, emptyDir: {}}]\n",
            "controlPlane.statefulSet.persistence.dataVolume",
            "`persistence`",
        ),
        (
            "controlPlane:\n  service:\n    spec:\n      type: LoadBalancer\n",
            "controlPlane.service.spec.type",
            "`expose`",
        ),
        (
            "controlPlane:\n  proxy:\n    extraSANs: [vc.example.com]\n",
            "controlPlane.proxy.extraSANs",
            "`expose`",
        ),
    ] {
        let p = plan(
            &kind(),
            &Context::default(),
            &Value::Null,
            &vc(&[("values_override", Value::string(yaml))]),
        )
        .await;
        let errs: Vec<_> = p
            .diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .collect();
        assert_eq!(errs.len(), 1, "{yaml}: {}", show(&p.diagnostics));
        assert_eq!(
            errs[0].path,
            Some(AttrPath(vec![PathStep::Attr("values_override".into())]))
        );
        assert!(errs[0].detail.contains(key), "{}", errs[0].detail);
        assert!(errs[0].detail.contains(attr), "{}", errs[0].detail);
    }
    // Keys gpufleet leaves alone merge: the Service's other settings too, and a fixed node
    // port for a Service that has node ports.
    for (yaml, exposed) in [
        (
            "sync:\n  toHost:\n    ingresses:\n      enabled: true\n",
            None,
        ),
        (
            "controlPlane:\n  service:\n    spec:\n      externalTrafficPolicy: Local\n    \
             annotations:\n      lb.example.com/internal: \"true\"\n",
            Some(expose("LoadBalancer", None)),
        ),
        (
            "controlPlane:\n  service:\n    httpsNodePort: 30443\n",
            Some(expose("NodePort", None)),
        ),
    ] {
        let mut attrs = vec![("values_override", Value::string(yaml))];
        attrs.extend(exposed.map(|e| ("expose", e)));
        let p = plan(&kind(), &Context::default(), &Value::Null, &vc(&attrs)).await;
        assert!(
            !p.diagnostics.has_error(),
            "{yaml}: {}",
            show(&p.diagnostics)
        );
    }
}

/// The one error of planning `values_override = yaml`, which must be on `values_override`.
async fn the_override_error(yaml: &str) -> gpufleet_engine::diag::Diagnostic {
    let p = plan(
        &kind(),
        &Context::default(),
        &Value::Null,
        &vc(&[("values_override", Value::string(yaml))]),
    )
    .await;
    let errs: Vec<_> = p
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .cloned()
        .collect();
    assert_eq!(errs.len(), 1, "{yaml}: {}", show(&p.diagnostics));
    assert_eq!(error_paths(&p.diagnostics), ["values_override"]);
    errs.into_iter().next().expect("one error")
}

#[tokio::test]
async fn values_override_is_checked_against_the_charts_schema() {
    // A misspelt key (the chart's schema allows no keys it does not know) and a value of the
    // wrong type: helm install refuses both; so does the plan, naming where.
    for (yaml, at, names) in [
        (
            "controlPlane:\n  statefulSet:\n    resoures:\n      limits: {}\n",
            "controlPlane.statefulSet",
            "resoures",
        ),
        (
            "sync:\n  toHost:\n    ingresses:\n      enabled: \"yes\"\n",
            "sync.toHost.ingresses.enabled",
            "boolean",
        ),
        (
            "telemetry: {enabled: false, extra: 1}\n",
            "telemetry",
            "extra",
        ),
    ] {
        let e = the_override_error(yaml).await;
        assert!(e.summary.contains("Schema"), "{}", e.summary);
        assert!(e.detail.contains(&format!("at {at}:")), "{}", e.detail);
        assert!(e.detail.contains(names), "{}", e.detail);
    }
}

#[tokio::test]
async fn chart_objects_gpufleet_does_not_render_are_refused() {
    for (yaml, key, objects) in [
        (
            "controlPlane:\n  ingress:\n    enabled: true\n    host: vc.example.com\n",
            "controlPlane.ingress.enabled",
            "Ingress",
        ),
        (
            "controlPlane:\n  advanced:\n    podDisruptionBudget:\n      enabled: true\n",
            "controlPlane.advanced.podDisruptionBudget.enabled",
            "PodDisruptionBudget",
        ),
        (
            "controlPlane:\n  serviceMonitor:\n    enabled: true\n",
            "controlPlane.serviceMonitor.enabled",
            "ServiceMonitor",
        ),
        (
            "experimental:\n  deploy:\n    host:\n      manifests: |\n        kind: ConfigMap\n",
            "experimental.deploy.host.manifests",
            "host cluster",
        ),
    ] {
        let e = the_override_error(yaml).await;
        assert!(e.detail.contains(key), "{}", e.detail);
        assert!(e.detail.contains(objects), "{}", e.detail);
        assert!(
            e.detail.contains("gpufleet does not render"),
            "{}",
            e.detail
        );
    }
    // Turned off, as the chart has them, they are fine.
    let p = plan(
        &kind(),
        &Context::default(),
        &Value::Null,
        &vc(&[(
            "values_override",
            Value::string("controlPlane:\n  ingress:\n    enabled: false\n"),
        )]),
    )
    .await;
    assert!(!p.diagnostics.has_error(), "{}", show(&p.diagnostics));
}

#[tokio::test]
async fn licensed_features_and_keys_gpufleet_decides_are_refused() {
    for (yaml, key, says) in [
        (
            "privateNodes:\n  enabled: true\n",
            "privateNodes.enabled",
            "vCluster Pro",
        ),
        (
            "sleep:\n  auto:\n    afterInactivity: 1h\n",
            "sleep",
            "vCluster Platform",
        ),
        (
            "sync:\n  toHost:\n    namespaces:\n      enabled: true\n",
            "sync.toHost.namespaces.enabled",
            "vCluster Pro",
        ),
        (
            "controlPlane:\n  backingStore:\n    etcd:\n      deploy:\n        enabled: true\n",
            "controlPlane.backingStore.etcd.deploy.enabled",
            "gpufleet does not render",
        ),
        (
            "controlPlane:\n  statefulSet:\n    image:\n      repository: loft-sh/vcluster-pro\n",
            "controlPlane.statefulSet.image.repository",
            "OSS image",
        ),
    ] {
        let p = plan(
            &kind(),
            &Context::default(),
            &Value::Null,
            &vc(&[("values_override", Value::string(yaml))]),
        )
        .await;
        let errs: Vec<_> = p
            .diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .collect();
        assert_eq!(errs.len(), 1, "{yaml}: {}", show(&p.diagnostics));
        assert_eq!(error_paths(&p.diagnostics), ["values_override"]);
        assert!(errs[0].detail.contains(key), "{}", errs[0].detail);
        assert!(errs[0].detail.contains(says), "{}", errs[0].detail);
    }
    // A registry mirror is the user's choice.
    let p = plan(
        &kind(),
        &Context::default(),
        &Value::Null,
        &vc(&[(
            "values_override",
            Value::string(
                "controlPlane:\n  statefulSet:\n    image:\n      registry: mirror.example\n",
            ),
        )]),
    )
    .await;
    assert!(!p.diagnostics.has_error(), "{}", show(&p.diagnostics));
}

#[tokio::test]
async fn sleep_plans_with_a_warning_and_private_without_one() {
    let p = plan(
        &kind(),
        &Context::default(),
        &Value::Null,
        &vc(&[(
            "sleep",
            Value::object([("after_inactivity", Value::string("30m"))]),
        )]),
    )
    .await;
    assert!(!p.diagnostics.has_error(), "{}", show(&p.diagnostics));
    let warnings: Vec<_> = p
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Warning && d.summary != IN_CLUSTER_ONLY)
        .collect();
    assert_eq!(warnings.len(), 1, "{}", show(&p.diagnostics));
    assert_eq!(warnings[0].summary, "Sleep Is Not Applied");
    assert_eq!(
        warnings[0].path,
        Some(AttrPath(vec![PathStep::Attr("sleep".into())]))
    );
    // The private tier is realised with open-source features: nothing to warn about.
    let p = plan(
        &kind(),
        &Context::default(),
        &Value::Null,
        &vc(&[
            ("isolation", Value::string("private")),
            ("expose", expose("ClusterIP", Some("vc.example.com"))),
        ]),
    )
    .await;
    assert!(p.diagnostics.is_empty(), "{}", show(&p.diagnostics));
}

const IN_CLUSTER_ONLY: &str = "API Server Reachable Inside The Host Cluster Only";

fn in_cluster_warnings(d: &gpufleet_engine::diag::Diagnostics) -> Vec<String> {
    d.iter()
        .filter(|d| d.severity == Severity::Warning && d.summary == IN_CLUSTER_ONLY)
        .map(|d| {
            assert_eq!(
                d.path,
                Some(AttrPath(vec![PathStep::Attr("expose".into())]))
            );
            d.detail.clone()
        })
        .collect()
}

#[tokio::test]
async fn an_address_only_the_host_cluster_reaches_is_planned_with_a_warning() {
    // Created with the default expose: the outputs will name the Service's DNS name.
    let p = plan(&kind(), &Context::default(), &Value::Null, &vc(&[])).await;
    let warned = in_cluster_warnings(&p.diagnostics);
    assert_eq!(warned.len(), 1, "{}", show(&p.diagnostics));
    assert!(
        warned[0].contains("https://team-a.vc-team-a.svc:443")
            && warned[0].contains("gpufleet_virtual_cluster_connection"),
        "{}",
        warned[0]
    );
    // Reachable from outside: no warning.
    for reachable in [
        expose("ClusterIP", Some("vc.example.com")),
        expose("NodePort", None),
        expose("LoadBalancer", None),
    ] {
        let p = plan(
            &kind(),
            &Context::default(),
            &Value::Null,
            &vc(&[("expose", reachable.clone())]),
        )
        .await;
        assert!(
            in_cluster_warnings(&p.diagnostics).is_empty(),
            "{reachable:?}: {}",
            show(&p.diagnostics)
        );
    }
    // Said once, not on every later plan that leaves expose alone...
    let prior = created(&[]).await;
    let p = plan(&kind(), &Context::default(), &prior, &vc(&[])).await;
    assert!(
        in_cluster_warnings(&p.diagnostics).is_empty(),
        "{}",
        show(&p.diagnostics)
    );
    // ...but again when expose goes back to the Service alone.
    let outside = created(&[("expose", expose("NodePort", None))]).await;
    let p = plan(&kind(), &Context::default(), &outside, &vc(&[])).await;
    assert_eq!(
        in_cluster_warnings(&p.diagnostics).len(),
        1,
        "{}",
        show(&p.diagnostics)
    );
}

#[tokio::test]
async fn credentials_kept_out_of_state_are_known_null_at_plan() {
    let off = [("admin_credentials_in_state", Value::Bool(false))];
    let p = plan(&kind(), &Context::default(), &Value::Null, &vc(&off)).await;
    for a in ACCESS {
        let secret = ["kubeconfig", "client_certificate", "client_key"].contains(&a);
        assert_eq!(p.planned.get(a).is_null(), secret, "{a}");
        assert_eq!(p.planned.get(a).is_unknown(), !secret, "{a}");
    }
    // Turning them on is an in-place change that leaves only them to apply.
    let prior = applied(&p.planned);
    let on = [("admin_credentials_in_state", Value::Bool(true))];
    let p = plan(&kind(), &Context::default(), &prior, &vc(&on)).await;
    assert_eq!(p.action, Action::Update);
    for a in ["kubeconfig", "client_certificate", "client_key"] {
        assert!(p.planned.get(a).is_unknown(), "{a}");
    }
    assert_eq!(p.planned.get("endpoint"), prior.get("endpoint"));
    // Unknown until apply: so are they.
    let p = plan(
        &kind(),
        &Context::default(),
        &prior,
        &vc(&[("admin_credentials_in_state", Value::unknown())]),
    )
    .await;
    assert!(p.planned.get("client_key").is_unknown());
}
