//! Conformance with the vCluster chart of the pinned release: for virtual clusters of every
//! tier and for each type of the API server's Service (`expose`), `helm template` of the real
//! chart, given the user values gpufleet writes (its settings, `values_override`, then the
//! controller manager's arguments, which depend on both), must make the objects gpufleet renders: the same kinds
//! and names, RBAC rules, containers (image, args, env, volumes, probes), the control plane's
//! volume claim template and retention policy, and the same
//! vcluster.yaml in `vc-config-<name>` once the chart's defaults are in. Every difference has
//! to be listed, with its reason, in `vcluster_conformance/allowed.json`; an entry that no
//! longer matches anything fails the test too, so the list stays honest.
//!
//! Also checked against the release: `chart_values.json` is the chart's `values.yaml` (run
//! with `GPUFLEET_UPDATE_CHART_VALUES=1` to regenerate it after a version bump), every
//! rendered vcluster.yaml passes the chart's `values.schema.json`, and the Kubernetes versions
//! gpufleet offers are those of vCluster's version map.
//!
//! Needs Helm and the chart from the Go module proxy: `scripts/install-helm` puts them where
//! this test looks (or set `GPUFLEET_HELM` and `GPUFLEET_VCLUSTER_CHART`). Without them the
//! test fails, saying so; it never skips.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::Command,
};

use base64::Engine as _;
use gpufleet_engine::{
    resources::virtual_cluster::{
        model::Spec,
        render::{Rendered, render},
        values, versions,
    },
    value::Value,
};
use serde_json::{Map, Value as Json, json};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("engine/ has a parent")
        .to_path_buf()
}

const INSTALL: &str = "run scripts/install-helm (it builds Helm and downloads the pinned \
                       vCluster chart from the Go module proxy), or set GPUFLEET_HELM and \
                       GPUFLEET_VCLUSTER_CHART";

/// Where Helm and the chart are.
struct Chart {
    helm: PathBuf,
    dir: PathBuf,
}

/// `HELM_VERSION` as scripts/install-helm pins it.
fn helm_version() -> String {
    let script = std::fs::read_to_string(root().join("scripts/install-helm"))
        .expect("scripts/install-helm exists");
    script
        .lines()
        .find_map(|l| l.strip_prefix("HELM_VERSION=\"")?.strip_suffix('"'))
        .expect("scripts/install-helm pins HELM_VERSION")
        .to_owned()
}

fn module_cache() -> PathBuf {
    if let Some(d) = std::env::var_os("GOMODCACHE") {
        return PathBuf::from(d);
    }
    let from_go = Command::new("go")
        .args(["env", "GOMODCACHE"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|s| !s.is_empty());
    match from_go {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var("HOME").unwrap_or_default()).join("go/pkg/mod"),
    }
}

fn chart() -> Chart {
    let helm = std::env::var_os("GPUFLEET_HELM").map_or_else(
        || {
            root()
                .join(".tools")
                .join(format!("helm-{}", helm_version()))
                .join("helm")
        },
        PathBuf::from,
    );
    assert!(helm.is_file(), "no Helm at {}: {INSTALL}.", helm.display());
    Chart {
        helm,
        dir: chart_dir(),
    }
}

/// The pinned release's chart directory in the Go module cache (no Helm needed).
fn chart_dir() -> PathBuf {
    let module = format!("vcluster@v{}", versions::VCLUSTER_VERSION);
    let dir = std::env::var_os("GPUFLEET_VCLUSTER_CHART").map_or_else(
        || {
            module_cache()
                .join("github.com/loft-sh")
                .join(&module)
                .join("chart")
        },
        PathBuf::from,
    );
    assert!(
        dir.join("values.yaml").is_file(),
        "no vCluster {} chart at {}: {INSTALL}.",
        versions::VCLUSTER_VERSION,
        dir.display()
    );
    let parent = dir.parent().and_then(Path::file_name);
    assert!(
        parent.is_some_and(|p| p.to_string_lossy() == module),
        "{} is not the chart of vCluster {} (module directory {module}): {INSTALL}.",
        dir.display(),
        versions::VCLUSTER_VERSION
    );
    dir
}

/// The objects of a multi-document YAML stream. A key given twice keeps its last value, as
/// Kubernetes' own YAML decoding does: the chart writes `priorityClassName` twice when it is
/// set.
fn yaml_docs(text: &str) -> Vec<Json> {
    let options = serde_saphyr::options! {
        duplicate_keys: serde_saphyr::options::DuplicateKeyPolicy::LastWins,
    };
    let docs: Vec<Json> = serde_saphyr::from_str_multiple_with_options(text, options)
        .unwrap_or_else(|e| panic!("helm's output is not YAML: {e}\n{text}"));
    docs.into_iter().filter(Json::is_object).collect()
}

/// `helm template <name> <chart> -n <namespace> -f <file>…` for Kubernetes 1.36 (the lab's
/// host), as parsed objects.
fn helm_template(chart: &Chart, name: &str, namespace: &str, files: &[&Json]) -> Vec<Json> {
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut cmd = Command::new(&chart.helm);
    cmd.args(["template", name])
        .arg(&chart.dir)
        .args(["--namespace", namespace, "--kube-version", "1.36.0"])
        .env("HELM_CACHE_HOME", dir.path().join("cache"))
        .env("HELM_CONFIG_HOME", dir.path().join("config"))
        .env("HELM_DATA_HOME", dir.path().join("data"));
    for (i, f) in files.iter().enumerate() {
        let path = dir.path().join(format!("values-{i}.yaml"));
        std::fs::write(&path, values::to_yaml(f)).expect("write values");
        cmd.arg("-f").arg(path);
    }
    let out = cmd.output().expect("run helm");
    assert!(
        out.status.success(),
        "helm template failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    yaml_docs(&String::from_utf8_lossy(&out.stdout))
}

fn chart_values_path() -> PathBuf {
    root().join("engine/src/resources/virtual_cluster/chart_values.json")
}

// ------------------------------------------------------------------------------------------
// Comparison

/// Drops what Kubernetes treats as unset: nulls and empty mappings.
fn normalise(v: &Json) -> Option<Json> {
    match v {
        Json::Null => None,
        Json::Object(m) => {
            let out: Map<String, Json> = m
                .iter()
                .filter_map(|(k, x)| Some((k.clone(), normalise(x)?)))
                .collect();
            (!out.is_empty()).then_some(Json::Object(out))
        }
        Json::Array(xs) => Some(Json::Array(
            xs.iter()
                .map(|x| normalise(x).unwrap_or(Json::Null))
                .collect(),
        )),
        other => Some(other.clone()),
    }
}

fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// One difference between the chart's object and gpufleet's.
#[derive(Debug, Clone)]
struct Difference {
    object: String,
    path: String,
    chart: Option<Json>,
    gpufleet: Option<Json>,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |v: &Option<Json>| v.as_ref().map_or("(absent)".to_owned(), Json::to_string);
        write!(
            f,
            "{} {}: chart {}, gpufleet {}",
            self.object,
            if self.path.is_empty() {
                "(whole object)"
            } else {
                &self.path
            },
            show(&self.chart),
            show(&self.gpufleet)
        )
    }
}

fn diff(object: &str, path: &str, a: Option<&Json>, b: Option<&Json>, out: &mut Vec<Difference>) {
    match (a, b) {
        (Some(Json::Object(x)), Some(Json::Object(y))) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                diff(
                    object,
                    &format!("{path}/{}", escape(k)),
                    x.get(k),
                    y.get(k),
                    out,
                );
            }
        }
        (Some(Json::Array(x)), Some(Json::Array(y))) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                diff(object, &format!("{path}/{i}"), Some(p), Some(q), out);
            }
        }
        (x, y) if x == y => {}
        (x, y) => out.push(Difference {
            object: object.to_owned(),
            path: path.to_owned(),
            chart: x.cloned(),
            gpufleet: y.cloned(),
        }),
    }
}

/// The object's identity, `Kind/name`.
fn ident(o: &Json) -> String {
    format!(
        "{}/{}",
        o["kind"].as_str().unwrap_or_default(),
        o["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// Replaces a config Secret's `config.yaml` by the parsed vcluster.yaml, so that it is
/// compared key by key rather than as text.
fn decode_config(mut o: Json) -> Json {
    let data = o.pointer("/data/config.yaml").and_then(Json::as_str);
    if let Some(text) = data {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .expect("base64 config.yaml");
        let parsed: Json =
            serde_saphyr::from_str(&String::from_utf8(bytes).expect("UTF-8")).expect("YAML");
        o["data"]["config.yaml"] = parsed;
    }
    o
}

/// The allow-list: objects compared against each other under different identities, and the
/// differences that are deliberate.
#[derive(Debug)]
struct Allowed {
    pairs: Vec<(String, String)>,
    entries: Vec<(String, String, String)>,
}

fn allowed() -> Allowed {
    let path = root().join("engine/tests/vcluster_conformance/allowed.json");
    let text = std::fs::read_to_string(&path).expect("allowed.json");
    let v: Json = serde_json::from_str(&text).expect("allowed.json is JSON");
    let field = |e: &Json, k: &str| e[k].as_str().unwrap_or_default().to_owned();
    let pairs = v["pairs"]
        .as_array()
        .expect("pairs")
        .iter()
        .map(|e| {
            assert!(!field(e, "reason").is_empty(), "pair without a reason: {e}");
            (field(e, "chart"), field(e, "gpufleet"))
        })
        .collect();
    let entries = v["differences"]
        .as_array()
        .expect("differences")
        .iter()
        .map(|e| {
            assert!(
                !field(e, "reason").is_empty(),
                "entry without a reason: {e}"
            );
            (field(e, "object"), field(e, "path"), field(e, "reason"))
        })
        .collect();
    Allowed { pairs, entries }
}

/// Fills `{name}` and `{namespace}`.
fn fill(pattern: &str, name: &str, namespace: &str) -> String {
    pattern
        .replace("{name}", name)
        .replace("{namespace}", namespace)
}

fn object_matches(pattern: &str, object: &str) -> bool {
    pattern == "*"
        || pattern == object
        || pattern
            .strip_suffix("/*")
            .is_some_and(|kind| object.split('/').next() == Some(kind))
}

/// JSON pointer patterns: `*` matches one segment, a final `**` any rest (or nothing).
fn path_matches(pattern: &str, path: &str) -> bool {
    let p: Vec<&str> = pattern.split('/').collect();
    let q: Vec<&str> = path.split('/').collect();
    if p.last() == Some(&"**") {
        let fixed = &p[..p.len() - 1];
        return q.len() >= fixed.len() && fixed.iter().zip(&q).all(|(a, b)| *a == "*" || a == b);
    }
    p.len() == q.len() && p.iter().zip(&q).all(|(a, b)| *a == "*" || a == b)
}

/// Compares the chart's objects with gpufleet's; returns the differences the allow-list does
/// not explain, and marks the entries used.
fn compare(
    chart_objects: &[Json],
    rendered: &Rendered,
    spec: &Spec,
    allowed: &Allowed,
    used: &mut BTreeSet<usize>,
) -> Vec<Difference> {
    let (name, ns) = (spec.name.as_str(), spec.namespace.as_str());
    let mut ours: Vec<Json> = vec![rendered.namespace.clone()];
    ours.extend(rendered.objects.iter().map(|(_, o)| o.clone()));
    let ours: Vec<Json> = ours.into_iter().map(decode_config).collect();
    let theirs: Vec<Json> = chart_objects.iter().cloned().map(decode_config).collect();
    let paired = |chart_id: &str| -> String {
        allowed
            .pairs
            .iter()
            .find(|(c, _)| fill(c, name, ns) == chart_id)
            .map_or_else(|| chart_id.to_owned(), |(_, g)| fill(g, name, ns))
    };
    let mut found = Vec::new();
    let mut seen = BTreeSet::new();
    for t in &theirs {
        let id = paired(&ident(t));
        let mine = ours.iter().find(|o| ident(o) == id);
        seen.insert(id.clone());
        diff(
            &id,
            "",
            normalise(t).as_ref(),
            mine.and_then(normalise).as_ref(),
            &mut found,
        );
    }
    for o in &ours {
        let id = ident(o);
        if !seen.contains(&id) {
            diff(&id, "", None, normalise(o).as_ref(), &mut found);
        }
    }
    found
        .into_iter()
        .filter(|d| {
            let hit = allowed.entries.iter().position(|(object, path, _)| {
                object_matches(&fill(object, name, ns), &d.object)
                    && path_matches(&fill(path, name, ns), &d.path)
            });
            if let Some(i) = hit {
                used.insert(i);
            }
            hit.is_none()
        })
        .collect()
}

// ------------------------------------------------------------------------------------------
// The virtual clusters compared

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

fn expose(service_type: &str, host: Option<&str>) -> Value {
    Value::object([
        ("type", Value::string(service_type)),
        ("host", host.map(Value::string).into()),
    ])
}

/// One virtual cluster of each tier, with the policies and overrides that change what the
/// chart renders, and one reached through each kind of Service that is not the default.
fn cases() -> Vec<(&'static str, Spec)> {
    vec![
        ("shared", spec(&[("isolation", Value::string("shared"))])),
        (
            "load balancer",
            spec(&[
                ("name", Value::string("edge")),
                (
                    "expose",
                    expose("LoadBalancer", Some("edge.vc.example.com")),
                ),
            ]),
        ),
        (
            "node port",
            spec(&[
                ("name", Value::string("lab")),
                ("expose", expose("NodePort", Some("203.0.113.10"))),
            ]),
        ),
        (
            "dedicated",
            spec(&[
                ("isolation", Value::string("dedicated")),
                ("kubernetes_version", Value::string("1.33")),
                (
                    "quota",
                    Value::object([
                        ("gpus", Value::int(8)),
                        ("cpu", Value::string("64")),
                        ("memory", Value::string("256Gi")),
                        ("pods", Value::int(200)),
                    ]),
                ),
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
                (
                    "persistence",
                    Value::object([
                        ("size", Value::string("20Gi")),
                        ("storage_class", Value::string("fast-ssd")),
                    ]),
                ),
            ]),
        ),
        (
            "private",
            spec(&[
                ("name", Value::string("bank")),
                ("namespace", Value::string("tenants-bank")),
                ("isolation", Value::string("private")),
                ("network_isolation", Value::Bool(false)),
                ("quota", Value::object([("gpus", Value::int(16))])),
                (
                    "limit_range",
                    Value::object([("default_cpu", Value::string("1"))]),
                ),
                (
                    "values_override",
                    Value::string(
                        "sync:\n  toHost:\n    ingresses:\n      enabled: true\n    \
                         networkPolicies:\n      enabled: true\n  fromHost:\n    \
                         ingressClasses:\n      enabled: true\ncontrolPlane:\n  statefulSet:\n    \
                         scheduling:\n      priorityClassName: tenant-control-planes\n    \
                         env:\n    - name: EXTRA\n      value: \"1\"\n",
                    ),
                ),
            ]),
        ),
        (
            "mirror",
            spec(&[("values_override", Value::string(MIRROR_OVERRIDE))]),
        ),
    ]
}

/// The registry mirror of the production guide: every image the control plane runs comes
/// from it, pulled with the team's secret.
const MIRROR: &str = "registry.internal.example.com";
const MIRROR_OVERRIDE: &str = "controlPlane:\n  advanced:\n    defaultImageRegistry: \
                               registry.internal.example.com\n    serviceAccount:\n      \
                               imagePullSecrets:\n      - name: internal-registry\n";

/// The images of the control plane's StatefulSet among `objects`: its containers and init
/// containers, by container name.
fn control_plane_images(objects: &[Json]) -> Vec<(String, String)> {
    let sts = objects
        .iter()
        .find(|o| o["kind"] == "StatefulSet")
        .expect("the control plane's StatefulSet");
    ["containers", "initContainers"]
        .iter()
        .flat_map(|k| {
            sts["spec"]["template"]["spec"][k]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|c| {
            (
                c["name"].as_str().unwrap_or_default().to_owned(),
                c["image"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

// ------------------------------------------------------------------------------------------
// Tests

#[test]
fn values_schema_json_is_the_charts() {
    let dir = chart_dir();
    let from_chart: Json = serde_json::from_str(
        &std::fs::read_to_string(dir.join("values.schema.json")).expect("the chart's schema"),
    )
    .expect("the chart's schema is JSON");
    let path = root().join("engine/src/resources/virtual_cluster/values.schema.json");
    let stored: Json = serde_json::from_str(&std::fs::read_to_string(&path).expect("read"))
        .expect("the stored schema is JSON");
    assert!(
        stored == from_chart,
        "{} is not the values.schema.json of vCluster {} ({}): copy the chart's file over it \
         and review the difference",
        path.display(),
        versions::VCLUSTER_VERSION,
        dir.display()
    );
}

#[test]
fn chart_values_json_is_the_charts_values_yaml() {
    let chart = chart();
    let text = std::fs::read_to_string(chart.dir.join("values.yaml")).expect("values.yaml");
    let from_chart: Json = serde_saphyr::from_str(&text).expect("values.yaml is YAML");
    // What Helm itself makes of it: the config Secret of a release with no values at all.
    let helm_default = helm_template(&chart, "probe", "probe", &[])
        .into_iter()
        .find(|o| ident(o) == "Secret/vc-config-probe")
        .map(decode_config)
        .expect("config Secret");
    assert_eq!(
        helm_default["data"]["config.yaml"], from_chart,
        "this YAML parser and Helm read the chart's values.yaml differently"
    );
    let path = chart_values_path();
    let stored: Json = serde_json::from_str(&std::fs::read_to_string(&path).expect("read"))
        .expect("chart_values.json is JSON");
    if stored != from_chart {
        if std::env::var_os("GPUFLEET_UPDATE_CHART_VALUES").is_some() {
            let mut text = serde_json::to_string_pretty(&from_chart).expect("JSON");
            text.push('\n');
            std::fs::write(&path, text).expect("write chart_values.json");
            eprintln!("rewrote {}", path.display());
        } else {
            panic!(
                "{} is not the values.yaml of vCluster {} ({}); run this test with \
                 GPUFLEET_UPDATE_CHART_VALUES=1 to regenerate it, and review the difference",
                path.display(),
                versions::VCLUSTER_VERSION,
                chart.dir.display()
            );
        }
    }
}

#[test]
fn kubernetes_versions_are_the_releases() {
    let chart = chart();
    let go = chart
        .dir
        .parent()
        .expect("module directory")
        .join("config/default_extra_values.go");
    let text = std::fs::read_to_string(&go).expect("config/default_extra_values.go");
    let map = text
        .split("var K8SVersionMap = map[string]string{")
        .nth(1)
        .and_then(|rest| rest.split('}').next())
        .expect("K8SVersionMap");
    let mut upstream: Vec<(String, String)> = map
        .lines()
        .filter_map(|l| {
            let (minor, image) = l.trim().trim_end_matches(',').split_once(':')?;
            let minor = minor.trim().trim_matches('"').to_owned();
            let tag = image
                .trim()
                .trim_matches('"')
                .rsplit(':')
                .next()?
                .to_owned();
            Some((minor, tag))
        })
        .collect();
    let minor = |v: &str| -> (u32, u32) {
        let (a, b) = v.split_once('.').unwrap_or((v, "0"));
        (a.parse().unwrap_or(0), b.parse().unwrap_or(0))
    };
    upstream.sort_by_key(|(m, _)| minor(m));
    let ours: Vec<(String, String)> = versions::KUBERNETES
        .iter()
        .map(|(m, t)| ((*m).to_owned(), (*t).to_owned()))
        .collect();
    assert_eq!(
        ours, upstream,
        "versions.rs and vCluster's K8SVersionMap differ"
    );
    // The chart's default image is the newest.
    assert_eq!(
        values::chart_defaults()
            .pointer("/controlPlane/distro/k8s/image/tag")
            .and_then(Json::as_str),
        Some(versions::distro_tag(versions::default_kubernetes_version()).as_str())
    );
}

#[test]
fn every_tier_renders_like_the_chart() {
    let chart = chart();
    let allowed = allowed();
    let schema: Json = serde_json::from_str(
        &std::fs::read_to_string(chart.dir.join("values.schema.json")).expect("schema"),
    )
    .expect("schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("a valid JSON schema");
    let mut used = BTreeSet::new();
    let mut report = Vec::new();
    for (tier, spec) in cases() {
        let rendered = render(&spec);
        for e in validator.iter_errors(&rendered.values) {
            report.push(format!(
                "{tier}: vcluster.yaml fails values.schema.json at {}: {e}",
                e.instance_path()
            ));
        }
        // The value file gpufleet writes: its settings, the override and what depends on both.
        let objects = helm_template(
            &chart,
            &spec.name,
            &spec.namespace,
            &[&values::user_values(&spec)],
        );
        for d in compare(&objects, &rendered, &spec, &allowed, &mut used) {
            report.push(format!("{tier}: {d}"));
        }
    }
    for (i, (object, path, reason)) in allowed.entries.iter().enumerate() {
        if !used.contains(&i) {
            report.push(format!(
                "allowed.json entry {object} {path} ({reason}) matches no difference any more; \
                 remove it"
            ));
        }
    }
    assert!(
        report.is_empty(),
        "gpufleet and the vCluster {} chart differ where allowed.json says nothing:\n{}",
        versions::VCLUSTER_VERSION,
        report.join("\n")
    );
}

/// A registry mirror set with the chart's own `controlPlane.advanced.defaultImageRegistry`
/// takes both images (the syncer and the Kubernetes distro's init container) to the mirror,
/// in gpufleet's rendering as in the chart's, and the pull secret reaches the service account.
#[test]
fn a_default_image_registry_takes_both_images_to_the_mirror() {
    let (_, spec) = cases()
        .into_iter()
        .find(|(name, _)| *name == "mirror")
        .expect("the mirror case");
    let rendered = render(&spec);
    let ours: Vec<Json> = rendered.objects.iter().map(|(_, o)| o.clone()).collect();
    let theirs = helm_template(
        &chart(),
        &spec.name,
        &spec.namespace,
        &[&values::user_values(&spec)],
    );
    for (who, objects) in [("gpufleet", &ours), ("the chart", &theirs)] {
        let images = control_plane_images(objects);
        let names: BTreeSet<&str> = images.iter().map(|(c, _)| c.as_str()).collect();
        assert!(
            names.contains("syncer") && names.contains("kubernetes"),
            "{who}: the syncer and the distro's init container: {images:?}"
        );
        for (container, image) in &images {
            assert!(
                image.starts_with(&format!("{MIRROR}/loft-sh/")),
                "{who}: container {container} runs {image}, not from {MIRROR}"
            );
        }
        let account = objects
            .iter()
            .find(|o| {
                o["kind"] == "ServiceAccount"
                    && o["metadata"]["name"] == format!("vc-{}", spec.name)
            })
            .unwrap_or_else(|| panic!("{who}: the control plane's ServiceAccount"));
        assert_eq!(
            account["imagePullSecrets"],
            json!([{ "name": "internal-registry" }]),
            "{who}"
        );
    }
}

/// The comparison catches what matters: a chart default missing from vcluster.yaml (the
/// API server switched off, as before gpufleet rendered the chart's values), a rule missing
/// from the ClusterRole, a probe changed, the data back on an `emptyDir` instead of the
/// volume claim.
#[test]
fn the_comparison_sees_a_dropped_default_a_rule_a_probe_and_a_dropped_claim() {
    let chart = chart();
    let allowed = allowed();
    let (_, spec) = cases().remove(0);
    let objects = helm_template(
        &chart,
        &spec.name,
        &spec.namespace,
        &[&values::user_values(&spec)],
    );
    let clean = render(&spec);
    assert!(compare(&objects, &clean, &spec, &allowed, &mut BTreeSet::new()).is_empty());

    let mut broken = clean.clone();
    for (r, o) in &mut broken.objects {
        let kind = r.kind.kind();
        if kind == "Secret" {
            let mut v = clean.values.clone();
            v["controlPlane"]["distro"]["k8s"]["apiServer"]
                .as_object_mut()
                .expect("apiServer")
                .remove("enabled");
            o["data"]["config.yaml"] =
                json!(base64::engine::general_purpose::STANDARD.encode(values::to_yaml(&v)));
        } else if kind == "ClusterRole" {
            o["rules"].as_array_mut().expect("rules").pop();
        } else if kind == "StatefulSet" {
            o["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["periodSeconds"] =
                json!(20);
            let spec = o["spec"].as_object_mut().expect("spec");
            spec.remove("volumeClaimTemplates");
            spec.remove("persistentVolumeClaimRetentionPolicy");
            o["spec"]["template"]["spec"]["volumes"]
                .as_array_mut()
                .expect("volumes")
                .push(json!({ "name": "data", "emptyDir": {} }));
        }
    }
    let mut found: Vec<String> = compare(&objects, &broken, &spec, &allowed, &mut BTreeSet::new())
        .iter()
        .map(|d| format!("{} {}", d.object, d.path))
        .collect();
    found.sort();
    assert_eq!(
        found,
        [
            "ClusterRole/vc-team-a-v-vc-team-a /rules".to_owned(),
            "Secret/vc-config-team-a /data/config.yaml/controlPlane/distro/k8s/apiServer/enabled"
                .to_owned(),
            "StatefulSet/team-a /spec/persistentVolumeClaimRetentionPolicy".to_owned(),
            "StatefulSet/team-a /spec/template/spec/containers/0/readinessProbe/periodSeconds"
                .to_owned(),
            "StatefulSet/team-a /spec/template/spec/volumes".to_owned(),
            "StatefulSet/team-a /spec/volumeClaimTemplates".to_owned(),
        ],
    );
}
