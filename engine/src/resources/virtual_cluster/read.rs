//! Refresh and import.
//!
//! Refresh observes the host objects of a virtual cluster, reflects what the user can see in
//! the attributes (quota, limit range, network isolation, paused, the volume claim), and lists
//! in `drift` every difference from the rendered objects: each object of
//! [`HOST_OBJECTS`](super::objects::HOST_OBJECTS) that is missing, or whose rendered fields
//! were changed ([`compare`]), the reflected ones included, so the next plan shows it and the
//! next apply repairs it. A missing (or terminating) namespace means the virtual cluster is
//! gone once its cluster-scoped objects are gone too; a terminating one, or one whose
//! cluster-scoped objects remain, reads as half deleted, so that destroy finishes the delete
//! and apply puts the virtual cluster back. Import starts from a skeleton holding only the
//! name and namespace, and takes every configurable attribute from the host objects.
//!
//! Each object is read once: the namespace, the sixteen objects gpufleet may write, the
//! control-plane pods and the kubeconfig Secret (twenty reads; one more, the Service again,
//! for the address of a NodePort or LoadBalancer). A refresh answers them from one list of
//! each kind for the whole fleet ([`Cached`](crate::backends::kube::host::Cached)).
//!
//! The credentials are computed as apply computes them ([`expose`](super::expose)), from the
//! Service type found and the `expose.host` in the stored vcluster.yaml, so a refresh after
//! an apply agrees with it, and a load balancer that got a new address shows up.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use super::{
    DEFAULT_TIMEOUTS, TYPE_NAME, adopt, compare,
    config::{ClusterConfig, ExposeConfig, LimitRangeConfig, QuotaConfig},
    expose::Expose,
    model::{ACCESS, Address, Spec, access_values, default_namespace},
    objects::{Names, ObjectRef},
    pause, persistence, quantity,
    readiness::{self, Readiness},
    render::{self, POD_SECURITY_ENFORCE},
    schema::{
        self as attrs, AFTER_INACTIVITY, DEFAULT_CPU, DEFAULT_MEMORY, DEFAULT_REQUEST_CPU,
        DEFAULT_REQUEST_MEMORY, DRIFT, EXPOSE, ID, ISOLATIONS, KUBERNETES_VERSION, LABELS,
        LIMIT_RANGE, NAME, NAMESPACE, NETWORK_ISOLATION, PAUSED, PERSISTENCE, POD_SECURITY,
        POD_SECURITY_LEVELS, QUOTA, QUOTA_CPU, QUOTA_GPUS, QUOTA_MEMORY, QUOTA_PODS, SLEEP, STATUS,
        VALUES_OVERRIDE, expose_value, persistence_value,
    },
    values,
    versions::{self, VCLUSTER_VERSION},
};
use crate::{
    backends::kube::host::{HostObjects, ObjectKind},
    backends::kube::json::{labels_of, str_at},
    backends::kube::{ISOLATION, ObjectError},
    context::Context,
    diag::{Diagnostic, Diagnostics},
    kinds::ReadResponse,
    path::AttrPath,
    schema::Validator,
    timeouts::{Operation, Timeouts},
    validate::DnsLabel,
    value::{Known, Value},
};

/// The host objects of one virtual cluster, as read.
#[derive(Debug, Default)]
pub struct Observed {
    /// The namespace, if it exists and is not terminating.
    pub namespace: Option<Json>,
    /// The objects gpufleet writes, by reference; absent ones are missing.
    pub objects: BTreeMap<ObjectRef, Json>,
    /// The namespace is ours and terminating.
    pub terminating: bool,
    /// The control plane's readiness.
    pub readiness: Option<Readiness>,
    /// How the control plane is reached, as found.
    pub expose: Expose,
    /// The vcluster.yaml in the config Secret, parsed once (it is the size of the chart's
    /// values, and a refresh of many tenants parses one per tenant).
    pub config: Option<Json>,
}

impl Observed {
    fn get(&self, kind: ObjectKind, name: &str) -> Option<&Json> {
        self.objects.get(&ObjectRef {
            kind,
            name: name.to_owned(),
        })
    }
}

use super::adopt::owned_by;

/// Whether `state` is an import's skeleton, which has no `isolation` yet: every
/// configurable attribute comes from the cluster.
pub(super) fn importing(state: &Value) -> bool {
    ClusterConfig::decode(state).isolation.is_null()
}

/// Reads everything; `namespace: None` when the namespace is gone or terminating (then only
/// the objects outside it are read: a delete interrupted after the namespace went leaves
/// them behind). `expected` is what the state renders, if known: a stored vcluster.yaml of
/// the same text is taken as its values rather than parsed.
pub async fn observe(
    host: &dyn HostObjects,
    namespace: &str,
    names: &Names,
    expected: Option<&render::Rendered>,
) -> Result<Observed, ObjectError> {
    let ns = host.get(ObjectKind::Namespace, None, namespace).await?;
    let deleting = |n: &Json| n.pointer("/metadata/deletionTimestamp").is_some();
    let terminating = ns
        .as_ref()
        .is_some_and(|n| deleting(n) && owned_by(n, &names.name));
    let Some(ns) = ns.filter(|n| !deleting(n)) else {
        let mut objects = BTreeMap::new();
        for r in names.all().into_iter().filter(|r| r.kind.cluster_scoped()) {
            if let Some(o) = host.get(r.kind, None, &r.name).await? {
                objects.insert(r, o);
            }
        }
        return Ok(Observed {
            objects,
            terminating,
            ..Observed::default()
        });
    };
    let mut objects = BTreeMap::new();
    for r in names.all() {
        if let Some(o) = host.get(r.kind, r.namespace(namespace), &r.name).await? {
            objects.insert(r, o);
        }
    }
    let config = objects
        .get(&ObjectRef {
            kind: ObjectKind::Secret,
            name: names.config(),
        })
        .and_then(|secret| stored_config(secret, expected));
    let mut observed = Observed {
        namespace: Some(ns),
        terminating: false,
        objects,
        readiness: None,
        expose: Expose::default(),
        config,
    };
    observed.expose = Expose::observed(
        observed.get(ObjectKind::Service, &names.name),
        observed.config.as_ref(),
    );
    observed.readiness = Some(readiness::observe(host, namespace, names, &observed.expose).await?);
    Ok(observed)
}

/// The vcluster.yaml in config Secret `secret`, as a value: `expected`'s values when the
/// text is what it renders (parsing a document the size of the chart's values costs a
/// refresh of many tenants more than all its other work), else parsed.
fn stored_config(secret: &Json, expected: Option<&render::Rendered>) -> Option<Json> {
    if let Some(expected) = expected
        && adopt::config_text(secret).as_deref() == Some(expected.vcluster_yaml.as_str())
    {
        return Some(expected.values.clone());
    }
    adopt::config_of(secret).map(|(_, c)| c)
}

/// A quantity as observed, kept in the prior spelling when it is the same amount.
fn quantity_value(observed: Option<&str>, prior: &Known<String>) -> Value {
    match (observed, prior.value().map(String::as_str)) {
        (Some(o), Some(p)) if quantity::same(o, p) => Value::string(p),
        (Some(o), _) => Value::string(o),
        (None, _) => Value::Null,
    }
}

fn count_value(observed: Option<&str>) -> Value {
    observed
        .and_then(|s| quantity::parse(s).ok())
        .and_then(|n| {
            use bigdecimal::ToPrimitive;
            n.is_integer().then(|| n.to_i64()).flatten()
        })
        .map_or(Value::Null, Value::int)
}

fn quota_value(rq: Option<&Json>, prior: Option<&QuotaConfig>) -> Value {
    let Some(rq) = rq else { return Value::Null };
    let none = QuotaConfig::default();
    let prior = prior.unwrap_or(&none);
    let hard = |k: &str| str_at(rq, &format!("/spec/hard/{}", k.replace('/', "~1")));
    Value::object([
        (QUOTA_GPUS, count_value(hard("requests.nvidia.com/gpu"))),
        (QUOTA_CPU, quantity_value(hard("requests.cpu"), &prior.cpu)),
        (
            QUOTA_MEMORY,
            quantity_value(hard("requests.memory"), &prior.memory),
        ),
        (QUOTA_PODS, count_value(hard("count/pods"))),
    ])
}

fn limit_range_value(lr: Option<&Json>, prior: Option<&LimitRangeConfig>) -> Value {
    let Some(lr) = lr else { return Value::Null };
    let none = LimitRangeConfig::default();
    let prior = prior.unwrap_or(&none);
    let container = lr
        .pointer("/spec/limits")
        .and_then(Json::as_array)
        .and_then(|ls| ls.iter().find(|l| l["type"] == "Container"));
    let at = |ptr: &str| container.and_then(|c| str_at(c, ptr));
    // The API server fills a missing default request with the default limit
    // (`SetDefaults_LimitRangeItem`), so a request equal to the limit is what an unset
    // attribute reads back as, unless the configuration named it.
    let request = |resource: &str, prior: &Known<String>| {
        let observed = at(&format!("/defaultRequest/{resource}"));
        let limit = at(&format!("/default/{resource}"));
        match (observed, limit) {
            (Some(o), Some(l)) if prior.is_null() && quantity::same(o, l) => Value::Null,
            _ => quantity_value(observed, prior),
        }
    };
    Value::object([
        (
            DEFAULT_CPU,
            quantity_value(at("/default/cpu"), &prior.default_cpu),
        ),
        (
            DEFAULT_MEMORY,
            quantity_value(at("/default/memory"), &prior.default_memory),
        ),
        (
            DEFAULT_REQUEST_CPU,
            request("cpu", &prior.default_request_cpu),
        ),
        (
            DEFAULT_REQUEST_MEMORY,
            request("memory", &prior.default_request_memory),
        ),
    ])
}

/// Differences between the observed objects and `rendered`, one sentence each: every object
/// of [`HOST_OBJECTS`](super::objects::HOST_OBJECTS) that is rendered, missing or compared
/// field by field ([`compare`]), and every one present that the configuration does not have.
fn drift(observed: &Observed, rendered: &render::Rendered, names: &Names) -> Vec<String> {
    let mut out = Vec::new();
    let compare = |out: &mut Vec<String>, what: String, have: &Json, want: &Json, kind| {
        out.extend(
            compare::differences(kind, have, want)
                .into_iter()
                .map(|d| format!("{what}: {d}")),
        );
    };
    if let Some(ns) = &observed.namespace {
        let name = str_at(ns, "/metadata/name").unwrap_or_default();
        compare(
            &mut out,
            format!("Namespace {name}"),
            ns,
            &rendered.namespace,
            ObjectKind::Namespace,
        );
    }
    for (r, want) in &rendered.objects {
        match observed.objects.get(r) {
            None => out.push(format!("{r}: missing")),
            Some(have) => compare(&mut out, r.to_string(), have, want, r.kind),
        }
    }
    for r in &rendered.absent {
        if observed.objects.contains_key(r) {
            out.push(format!(
                "{r}: present, but not in the configuration (apply deletes it)"
            ));
        }
    }
    let sts_ref = ObjectRef {
        kind: ObjectKind::StatefulSet,
        name: names.name.clone(),
    };
    if let (Some(have), Some(want)) = (observed.objects.get(&sts_ref), rendered.object(&sts_ref)) {
        // Pause marks the rendering lacks (the vCluster CLI's) are drift too: apply removes
        // them. Not the date: it records when the pause happened, which no rendering knows.
        let annotation = |o: &Json, k: &str| {
            o.pointer(&format!("/metadata/annotations/{}", k.replace('/', "~1")))
                .cloned()
        };
        if [pause::PAUSED, pause::PAUSED_REPLICAS]
            .iter()
            .any(|k| annotation(have, k).is_some() && annotation(want, k).is_none())
        {
            out.push(format!(
                "StatefulSet {}: pause annotations differ from the rendered ones",
                names.name
            ));
        }
    }
    out
}

/// `expose` as observed: the Service's type, reflected as users see it; the host from the
/// stored vcluster.yaml on import (a refresh keeps the configured one, and a stored
/// configuration edited out of band shows in `drift`). `None` keeps a prior value that
/// means the same as it is.
fn reflected_expose(prior: &Known<ExposeConfig>, seen: &Expose, importing: bool) -> Option<Value> {
    if importing {
        return Some(expose_value(seen));
    }
    let was = match prior {
        Known::Null => return Some(expose_value(seen)),
        Known::Unknown => Expose::default(),
        Known::Value(e) => e.or_defaults(),
    };
    let now = Expose {
        service_type: seen.service_type,
        host: was.host.clone(),
    };
    (now != was).then(|| expose_value(&now))
}

/// The state of a virtual cluster whose namespace is terminating, or gone while objects
/// outside it remain, as a delete interrupted half way leaves it: still there, so that
/// destroy removes the rest, `Pending`, and with what is missing in `drift`, so that an
/// apply puts the virtual cluster back.
pub fn half_deleted(prior: &Value, observed: &Observed, names: &Names) -> Value {
    let ns = if observed.terminating {
        "terminating"
    } else {
        "missing"
    };
    let mut found = vec![format!("Namespace {}: {ns}", names.namespace)];
    found.extend(
        observed
            .objects
            .keys()
            .map(|r| format!("{r}: left by an unfinished delete")),
    );
    let mut s = prior.clone();
    s.set_attr(STATUS, Value::string("Pending"));
    s.set_attr(
        DRIFT,
        Value::List(found.into_iter().map(Value::string).collect()),
    );
    s
}

/// The state of the virtual cluster as observed, normalised against `prior`; null when the
/// namespace is gone. An import (a `prior` without `isolation`) takes every configurable
/// attribute from the cluster; a refresh keeps the configured ones and reports differences
/// in `drift`, except those users can see directly (quota, limit range, network isolation,
/// paused, the volume claim), which are reflected in their attributes. `expected` is what
/// `prior` renders, when the caller has it.
pub fn observed_state(
    prior: &Value,
    observed: &Observed,
    names: &Names,
    expected: Option<render::Rendered>,
) -> Value {
    let Some(ns) = &observed.namespace else {
        return Value::Null;
    };
    let was = ClusterConfig::decode(prior);
    let importing = was.isolation.is_null();
    let mut s = prior.clone();
    let namespace = str_at(ns, "/metadata/name").unwrap_or_default().to_owned();
    s.set_attr(NAMESPACE, Value::string(namespace.clone()));
    s.set_attr(ID, Value::string(format!("{namespace}/{}", names.name)));
    let ns_labels = labels_of(ns);
    let config = observed.config.as_ref();
    if importing {
        // A release Helm installed has none of gpufleet's namespace labels: its tier and
        // pod security level are read from what its vcluster.yaml and namespace do.
        let isolation = ns_labels
            .get(ISOLATION)
            .filter(|i| ISOLATIONS.contains(&i.as_str()))
            .cloned()
            .unwrap_or_else(|| adopt::isolation_of(config).to_owned());
        s.set_attr(attrs::ISOLATION, Value::string(isolation));
        let pod_security = ns_labels
            .get(POD_SECURITY_ENFORCE)
            .filter(|p| POD_SECURITY_LEVELS.contains(&p.as_str()))
            .cloned()
            .unwrap_or_else(|| adopt::pod_security_of(config).to_owned());
        s.set_attr(POD_SECURITY, Value::string(pod_security));
        let version = config
            .and_then(adopt::distro_tag)
            .and_then(versions::minor_of_tag);
        if let Some(v) = version {
            s.set_attr(KUBERNETES_VERSION, Value::string(v));
        }
        let sleep = config.and_then(|c| {
            c.pointer("/sleep/auto/afterInactivity")?
                .as_str()
                .map(str::to_owned)
        });
        s.set_attr(
            SLEEP,
            sleep.map_or(Value::Null, |a| {
                Value::object([(AFTER_INACTIVITY, Value::string(a))])
            }),
        );
        let config_secret = observed.get(ObjectKind::Secret, &names.config());
        let user: BTreeMap<String, Value> = config_secret
            .map(adopt::user_labels)
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, Value::string(v)))
            .collect();
        s.set_attr(
            LABELS,
            if user.is_empty() {
                Value::Null
            } else {
                Value::Map(user)
            },
        );
    }
    s.set_attr(
        QUOTA,
        quota_value(
            observed.get(ObjectKind::ResourceQuota, &names.vc()),
            was.quota.value(),
        ),
    );
    s.set_attr(
        LIMIT_RANGE,
        limit_range_value(
            observed.get(ObjectKind::LimitRange, &names.vc()),
            was.limit_range.value(),
        ),
    );
    // Isolated when both the tenant's pods and the control plane are: with either policy
    // gone, the tenant is not, whatever else is left.
    let [workloads_policy, control_plane_policy, ..] = names.network_policies();
    s.set_attr(
        NETWORK_ISOLATION,
        Value::Bool(
            [workloads_policy, control_plane_policy]
                .iter()
                .all(|p| observed.get(ObjectKind::NetworkPolicy, p).is_some()),
        ),
    );
    let sts = observed.get(ObjectKind::StatefulSet, &names.name);
    if let Some(replicas) = sts.and_then(|o| o.pointer("/spec/replicas")?.as_i64()) {
        s.set_attr(PAUSED, Value::Bool(replicas == 0));
    }
    // The claim the StatefulSet has, which a plan can only keep or replace; a missing
    // StatefulSet keeps what the state says (apply creates it with that claim, and a claim
    // retained from before is used again).
    if let Some(o) = sts {
        let prior_size = was.persistence.value().and_then(|p| p.size.value());
        let claim = persistence::observed(o, prior_size.map(String::as_str));
        s.set_attr(
            PERSISTENCE,
            claim.map_or(Value::Null, |c| persistence_value(&c)),
        );
    }
    if let Some(v) = reflected_expose(&was.expose, &observed.expose, importing) {
        s.set_attr(EXPOSE, v);
    }
    let image_version = sts
        .and_then(|o| str_at(o, "/spec/template/spec/containers/0/image"))
        .and_then(|i| i.rsplit_once(':').map(|(_, tag)| tag.to_owned()));
    let version = image_version
        .or_else(|| was.vcluster_version.value().cloned())
        .unwrap_or_else(|| VCLUSTER_VERSION.to_owned());
    s.set_attr(attrs::VCLUSTER_VERSION, Value::string(version));
    let (status, access) = match &observed.readiness {
        Some(Readiness::Ready(a)) => ("Running", Some(a.clone())),
        Some(Readiness::Paused(a)) => ("Paused", a.clone()),
        _ => ("Pending", None),
    };
    s.set_attr(STATUS, Value::string(status));
    if access.is_some() {
        let credentials = was.credentials_in_state().unwrap_or(true);
        for (k, v) in access_values(access.as_ref(), credentials) {
            s.set_attr(k, v);
        }
    } else if status != "Running" {
        // Keep what was recorded: a restarting control plane keeps its kubeconfig, and a
        // load balancer between addresses its last one.
        for k in ACCESS {
            if s.get(k).is_unknown() {
                s.set_attr(k, Value::Null);
            }
        }
    }
    // What no attribute says comes back through `values_override`: a release's own
    // settings, or an override gpufleet wrote. What cannot come back is named in `drift`.
    let mut left_out = Vec::new();
    if importing && let (Some(stored), Ok(spec)) = (config, Spec::from_value(&s)) {
        let recovered = adopt::recover_override(&spec, stored, adopt::version_of(sts).as_deref());
        if let Some(over) = recovered.over {
            s.set_attr(VALUES_OVERRIDE, Value::string(values::to_yaml(&over)));
        }
        left_out = recovered
            .left_out
            .into_iter()
            .map(|(key, why)| {
                format!("vcluster.yaml: {key} is not carried over ({why}); apply writes gpufleet's")
            })
            .collect();
    }
    // Drift is measured against what gpufleet last wrote (the prior state); an import has no
    // prior, so against what the observed attributes would render.
    let basis = if importing { &s } else { prior };
    let rendered = match expected.filter(|_| !importing) {
        Some(rendered) => Ok(rendered),
        None => Spec::from_value(basis).map(|spec| render::render(&spec)),
    };
    let found: Vec<Value> = match rendered {
        Ok(mut rendered) => {
            adopt::keep_running_template(
                &mut rendered,
                sts,
                observed.get(ObjectKind::Secret, &names.config()),
            );
            left_out
                .into_iter()
                .chain(drift(observed, &rendered, names))
                .map(Value::string)
                .collect()
        }
        Err(_) => Vec::new(),
    };
    s.set_attr(DRIFT, Value::List(found));
    s.with_unknowns_nulled()
}

/// The state skeleton for `terraform import`: `<namespace>/<name>` or `<name>`.
pub fn import_skeleton(id: &str) -> Result<Value, Diagnostics> {
    let id = id.trim();
    let (namespace, name) = match id.split_once('/') {
        Some((ns, n)) => (ns.to_owned(), n.to_owned()),
        None => (default_namespace(id), id.to_owned()),
    };
    let mut d = Diagnostics::new();
    DnsLabel::new(attrs::NAME_MAX).validate(&AttrPath::attr(NAME), &Value::string(&*name), &mut d);
    DnsLabel::new(63).validate(
        &AttrPath::attr(NAMESPACE),
        &Value::string(&*namespace),
        &mut d,
    );
    if d.has_error() {
        return Err(Diagnostic::error(
            "Invalid Import ID",
            format!(
                "import a {TYPE_NAME} by `<namespace>/<name>` or by `<name>` (namespace \
                 vc-<name>), e.g. `terraform import {TYPE_NAME}.a vc-tenant-a/tenant-a`; {id:?} \
                 is neither: {}",
                d.iter()
                    .map(|x| x.detail.clone())
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        )
        .into());
    }
    Ok(attrs::resource_schema().block.complete(&Value::object([
        (NAME, Value::string(name)),
        (NAMESPACE, Value::string(namespace)),
    ])))
}

/// Why the vCluster Helm installed as `name` in `namespace` cannot be adopted, if it
/// cannot: gpufleet could not keep its data, another release shares the namespace (a
/// virtual cluster owns its namespace), or another namespace uses its name (node pools
/// tell tenants apart by name).
async fn adoptable(
    host: &dyn HostObjects,
    namespace: &str,
    name: &str,
    observed: &Observed,
) -> Result<Option<String>, ObjectError> {
    if let Some(why) = observed.config.as_ref().and_then(adopt::refusal) {
        return Ok(Some(why));
    }
    let others: Vec<String> = host
        .list(ObjectKind::StatefulSet, Some(namespace), "app=vcluster")
        .await?
        .iter()
        .filter_map(|o| str_at(o, "/metadata/name").map(str::to_owned))
        .filter(|n| n != name)
        .collect();
    if !others.is_empty() {
        return Ok(Some(format!(
            "the namespace also holds {}, and a virtual cluster owns its namespace. Move the \
             others out first",
            others.join(", ")
        )));
    }
    Ok(super::name_taken::other_namespace(host, name, namespace)
        .await?
        .map(|other| super::name_taken::taken(name, &other)))
}

/// Refreshes `state` against `host`.
pub async fn read_virtual_cluster(
    host: &dyn HostObjects,
    ctx: &Context,
    state: &Value,
) -> ReadResponse {
    let recorded = ClusterConfig::decode(state);
    let Address { name, namespace } = Address::of_config(&recorded);
    let names = Names::new(&name, &namespace);
    let t = Timeouts::of_resource(state, DEFAULT_TIMEOUTS);
    let calls_before = host.calls();
    // What the state renders, once: the stored vcluster.yaml and every object compare to it.
    let expected = (!recorded.isolation.is_null())
        .then(|| Spec::from_config(&recorded).ok())
        .flatten()
        .map(|spec| render::render(&spec));
    let look = ctx
        .cancel
        .run_until_cancelled(tokio::time::timeout(
            t.read,
            observe(host, &namespace, &names, expected.as_ref()),
        ))
        .await;
    tracing::info!(
        target: "gpufleet::virtual_cluster",
        "read {name}: {} host API calls",
        host.calls().saturating_sub(calls_before)
    );
    let problem = match look {
        Some(Ok(Ok(observed))) => {
            // A namespace that another owner took over is not this virtual cluster any more.
            // An import also takes the release Helm installed there.
            let mut diagnostics = Diagnostics::new();
            let owned = observed
                .namespace
                .as_ref()
                .is_some_and(|ns| owned_by(ns, &name));
            let release = !owned
                && recorded.isolation.is_null()
                && observed.namespace.as_ref().is_some_and(|ns| {
                    adopt::recognised(ns, observed.get(ObjectKind::StatefulSet, &name), &name)
                });
            if release {
                match adoptable(host, &namespace, &name, &observed).await {
                    Ok(None) => {}
                    Ok(Some(why)) => {
                        return ReadResponse {
                            new_state: Value::Null,
                            diagnostics: Diagnostic::error(
                                "Virtual Cluster Cannot Be Adopted",
                                format!(
                                    "{TYPE_NAME} {name:?}: the vCluster Helm installed in \
                                     namespace {namespace} cannot be adopted: {why}."
                                ),
                            )
                            .into(),
                        };
                    }
                    Err(e) => {
                        return ReadResponse {
                            new_state: state.clone(),
                            diagnostics: Diagnostic::error(
                                "Virtual Cluster Read Failed",
                                format!("{TYPE_NAME} {name:?}: {e}."),
                            )
                            .into(),
                        };
                    }
                }
            }
            let ours = owned || release;
            // Without its namespace, it is gone once nothing it made outside is left.
            let new_state = if ours {
                observed_state(state, &observed, &names, expected)
            } else if observed.namespace.is_none()
                && (observed.terminating || !observed.objects.is_empty())
            {
                half_deleted(state, &observed, &names)
            } else {
                Value::Null
            };
            if ours && let Some(why) = observed.readiness.as_ref().and_then(|r| r.not_ready()) {
                // A plan that shows `status` going back to Running says why it is not now.
                tracing::info!(target: "gpufleet::virtual_cluster", "read {name}: {why}");
                diagnostics.push(Diagnostic::warning(
                    "Control Plane Not Ready",
                    format!("{TYPE_NAME} {name:?} reads as Pending: {why}."),
                ));
            }
            return ReadResponse {
                new_state,
                diagnostics,
            };
        }
        Some(Ok(Err(e))) => e.to_string(),
        Some(Err(_)) => format!("gave up after the {} timeout", Operation::Read.name()),
        None => "stopped because Terraform asked the provider to stop".to_owned(),
    };
    ReadResponse {
        new_state: state.clone(),
        diagnostics: Diagnostic::error(
            "Virtual Cluster Read Failed",
            format!("{TYPE_NAME} {name:?}: {problem}."),
        )
        .into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shortcut [`stored_config`] takes holds only if the rendered text reads back as
    /// the rendered values.
    #[test]
    fn a_stored_vcluster_yaml_of_the_rendered_text_is_the_rendered_values() {
        use base64::Engine as _;
        let other = render::render(
            &Spec::from_value(&Value::object([
                ("name", Value::string("team-b")),
                ("namespace", Value::string("vc-team-b")),
            ]))
            .expect("a valid spec"),
        );
        let overrides = "controlPlane:\n  statefulSet:\n    resources:\n      limits:\n        cpu: \"1.5\"\n        memory: 2Gi\n  proxy:\n    extraSANs: [\"10.0.0.1\", \"true\"]\nsync:\n  toHost:\n    pods:\n      enabled: true\nexperimental:\n  deploy:\n    host:\n      manifests: \"a: 1.0\"\n";
        for extra in [
            vec![],
            vec![("isolation", Value::string("private"))],
            vec![("values_override", Value::string(overrides))],
        ] {
            let mut attrs = vec![
                ("name", Value::string("team-a")),
                ("namespace", Value::string("vc-team-a")),
            ];
            attrs.extend(extra);
            let spec = Spec::from_value(&Value::object(attrs)).expect("a valid spec");
            let rendered = render::render(&spec);
            let secret = serde_json::json!({ "data": {
                render::CONFIG_KEY: base64::engine::general_purpose::STANDARD
                    .encode(&rendered.vcluster_yaml),
            } });
            let (_, parsed) = adopt::config_of(&secret).expect("a vcluster.yaml");
            assert_eq!(parsed, rendered.values);
            assert_eq!(stored_config(&secret, Some(&rendered)), Some(parsed));
            // Another tenant's rendering is another text: the stored one is parsed.
            assert_eq!(
                stored_config(&secret, Some(&other)),
                Some(rendered.values.clone())
            );
        }
    }

    fn limit_range(default_cpu: &str, request_cpu: &str) -> Json {
        serde_json::json!({ "spec": { "limits": [{
            "type": "Container",
            "default": { "cpu": default_cpu },
            "defaultRequest": { "cpu": request_cpu },
        }] } })
    }

    #[test]
    fn a_request_the_api_server_defaulted_to_the_limit_reads_as_unset() {
        let lr = limit_range("1", "1");
        let read = limit_range_value(Some(&lr), None);
        assert!(read.get("default_request_cpu").is_null());
        assert_eq!(read.get("default_cpu").as_str(), Some("1"));
    }

    #[test]
    fn a_request_the_configuration_named_reads_back_even_when_it_equals_the_limit() {
        let lr = limit_range("1", "1000m");
        let prior = LimitRangeConfig {
            default_request_cpu: Known::Value("1".to_owned()),
            ..LimitRangeConfig::default()
        };
        let read = limit_range_value(Some(&lr), Some(&prior));
        assert_eq!(read.get("default_request_cpu").as_str(), Some("1"));
    }

    #[test]
    fn a_request_other_than_the_limit_reads_back_as_drift() {
        let lr = limit_range("1", "500m");
        let read = limit_range_value(Some(&lr), None);
        assert_eq!(read.get("default_request_cpu").as_str(), Some("500m"));
    }
}
