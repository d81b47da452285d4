//! Create, update and delete against the host cluster.
//!
//! Create and update are the same idempotent steps: make sure the namespace is ours (an
//! earlier delete may still be terminating it), server-side apply the namespace and every
//! rendered object, delete the optional objects the configuration no longer has, then wait
//! for the control plane as `vcluster connect` does, and for the address `expose` asks for
//! (a load balancer's may take a while; [`expose`](super::expose)). When paused, it does
//! instead what `vcluster pause` does after scaling to zero: wait for the control plane's
//! pods to be gone, then delete the pods it synced to the host ([`pause`]). Resuming also
//! removes pause annotations the vCluster CLI wrote.
//! Because every object has a fixed name and every write is a forced server-side apply, an
//! apply that was interrupted, even by killing the provider, converges when run again,
//! without duplicates.
//!
//! A step that fails stops the apply with the shared [`StepError`](crate::apply::StepError)
//! over [`ClusterError`], whose details all say what the step was doing: a create that wrote
//! objects records them in state, an update keeps the prior state, and a wait that runs out of
//! time also says what it last saw.
//!
//! A StatefulSet's volume claims cannot change: when the live StatefulSet has another claim
//! than the planned one (a plan made without a refresh), apply writes nothing and says so
//! rather than meet the API server's immutability error; the plan replaces the virtual
//! cluster instead ([`persistence`]).
//!
//! A Service whose `expose.type` changed is applied like every other object: it changes type
//! in place. Kubernetes itself drops the node ports, the load balancer status and the other
//! fields the new type has no use for, as long as the apply does not set them, and gpufleet
//! sets none (a fixed node port from `values_override` needs a NodePort or LoadBalancer type,
//! which validation checks).
//!
//! Delete removes the namespace and waits until it has finished terminating, so a virtual
//! cluster of the same name can be created right after; the namespace takes the control
//! plane's volume claims along (their retention policy keeps them only from the StatefulSet's
//! own deletion). The cluster-scoped ClusterRole and ClusterRoleBinding, which no namespace
//! takes along, are deleted by name.

use std::time::Duration;

use tokio::time::Instant;

use super::{
    DEFAULT_TIMEOUTS, TYPE_NAME, adopt,
    adopt::owned_by,
    model::{Address, Spec, access_values},
    objects::Names,
    pause,
    persistence::{self, Persistence},
    readiness::{self, Readiness, WaitError},
    render::{self, Rendered},
    schema::{DRIFT, ID, NAMESPACE, STATUS},
};
use crate::{
    apply::{self, KindError},
    backends::kube::{
        ObjectError,
        host::{HostObjects, ObjectKind},
    },
    context::Context,
    diag::{Diagnostic, Diagnostics},
    kinds::ApplyResponse,
    timeouts::{self, Operation, Timeouts},
    value::Value,
};

/// How often a terminating namespace is looked at.
const NAMESPACE_POLL: Duration = Duration::from_secs(1);

/// A virtual cluster's own reasons for a step to stop, beyond those every kind has.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// A host call failed.
    #[error(transparent)]
    Host(#[from] ObjectError),
    /// The control plane cannot start.
    #[error("the control plane cannot start: {0}")]
    CannotStart(String),
    /// A wait for the host ran into the operation's timeout; unlike a plain timeout, it says
    /// what the wait last saw.
    #[error("gave up after {}: {last}", timeouts::render(*.waited))]
    GaveUp {
        /// The operation whose timeout it was.
        op: Operation,
        /// How long the step had waited.
        waited: Duration,
        /// The last reason the wait was not over.
        last: String,
    },
}

impl KindError for ClusterError {
    const TYPE_NAME: &'static str = TYPE_NAME;
    const KEPT_IN_STATE: &'static str = "Apply again to finish.";

    fn detail(&self, what: &str, _name: &str, doing: &str) -> String {
        match self {
            ClusterError::GaveUp { op, waited, last } => format!(
                "{what}: gave up after {} while {doing} (the {op} timeout); last seen: {last}. \
                 Raise timeouts.{op} if the host cluster is slow; what was created is recorded \
                 in state.",
                timeouts::render(*waited),
                op = op.name(),
            ),
            other => format!("{what}: {other} (while {doing})."),
        }
    }

    fn conflict(what: &str, _name: &str, doing: &str, msg: &str) -> String {
        format!("{what}: {msg} (while {doing}).")
    }
}

/// Why a step stopped.
pub type StepError = apply::StepError<ClusterError>;

impl From<ObjectError> for StepError {
    fn from(e: ObjectError) -> StepError {
        StepError::Kind(ClusterError::Host(e))
    }
}

/// The step error of a wait that stopped during operation `op`.
fn from_wait(op: Operation) -> impl FnOnce(WaitError) -> StepError {
    move |e| match e {
        WaitError::Host(e) => e.into(),
        WaitError::Failed(why) => StepError::Kind(ClusterError::CannotStart(why)),
        WaitError::TimedOut { waited, last } => {
            StepError::Kind(ClusterError::GaveUp { op, waited, last })
        }
        WaitError::Cancelled => StepError::Cancelled,
    }
}

/// Waits until `namespace` does not exist, or exists and is not terminating.
async fn settle_namespace(
    host: &dyn HostObjects,
    ctx: &Context,
    namespace: &str,
    op: Operation,
    deadline: Instant,
) -> Result<Option<serde_json::Value>, StepError> {
    let started = Instant::now();
    loop {
        let ns = host.get(ObjectKind::Namespace, None, namespace).await?;
        match ns {
            Some(n) if n.pointer("/metadata/deletionTimestamp").is_some() => {}
            other => return Ok(other),
        }
        if Instant::now() + NAMESPACE_POLL > deadline {
            return Err(StepError::Kind(ClusterError::GaveUp {
                op,
                waited: started.elapsed(),
                last: format!("namespace {namespace} is still terminating"),
            }));
        }
        if ctx
            .cancel
            .run_until_cancelled(tokio::time::sleep(NAMESPACE_POLL))
            .await
            .is_none()
        {
            return Err(StepError::Cancelled);
        }
    }
}

/// Writes every object of `rendered`, and removes the optional ones it lacks.
async fn write_objects(
    host: &dyn HostObjects,
    spec: &Spec,
    rendered: &Rendered,
) -> Result<(), StepError> {
    host.apply(&rendered.namespace).await?;
    for (_, o) in &rendered.objects {
        host.apply(o).await?;
    }
    for r in &rendered.absent {
        host.delete(r.kind, r.namespace(&spec.namespace), &r.name)
            .await?;
    }
    Ok(())
}

/// The state after a successful create or update: the planned value with what apply learned
/// in place of its unknowns. Values already known in the plan are kept as planned.
fn finished_state(planned: &Value, spec: &Spec, readiness: &Readiness) -> Value {
    let mut s = planned.clone();
    let fill = |s: &mut Value, k: &str, v: Value| {
        if s.get(k).is_unknown() {
            s.set_attr(k, v);
        }
    };
    fill(
        &mut s,
        ID,
        Value::string(format!("{}/{}", spec.namespace, spec.name)),
    );
    fill(&mut s, NAMESPACE, Value::string(spec.namespace.clone()));
    let (status, access) = match readiness {
        Readiness::Ready(a) => ("Running", Some(a)),
        Readiness::Paused(a) => ("Paused", a.as_ref()),
        _ => ("Pending", None),
    };
    fill(&mut s, STATUS, Value::string(status));
    // The plan already made the credentials null when they stay out of state.
    for (k, v) in access_values(access, true) {
        fill(&mut s, k, v);
    }
    fill(&mut s, DRIFT, Value::List(Vec::new()));
    s.with_unknowns_nulled()
}

/// How far a create or update got, for the failure's wording and what state to record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    /// Making sure the namespace is free or ours; nothing written yet.
    Namespace,
    /// Checking that the StatefulSet there has the planned volume claim; nothing written yet.
    Claim,
    /// Writing the host objects.
    Write,
    /// Paused: waiting for the control plane's pods to be gone.
    Stop,
    /// Paused: deleting the pods the virtual cluster synced to the host.
    DeleteSynced,
    /// Waiting for the control plane to be ready.
    Ready,
}

impl Phase {
    fn doing(self) -> &'static str {
        match self {
            Phase::Namespace => "preparing the namespace",
            Phase::Claim => "checking the control plane's volume claim",
            Phase::Write => "writing the host objects",
            Phase::Stop => "waiting for the control plane to stop",
            Phase::DeleteSynced => "deleting the pods the virtual cluster synced to the host",
            Phase::Ready => "waiting for the control plane to be ready",
        }
    }
}

/// Pauses as `vcluster pause` does, after the StatefulSet was written scaled to zero: waits
/// for its pods to be gone, then deletes the synced pods (a running syncer would recreate
/// them). Runs on every apply of a paused cluster, so an interrupted pause finishes.
async fn finish_pause(
    host: &dyn HostObjects,
    ctx: &Context,
    spec: &Spec,
    names: &Names,
    op: Operation,
    deadline: Instant,
    phase: &mut Phase,
) -> Result<Readiness, StepError> {
    *phase = Phase::Stop;
    readiness::wait_stopped(host, ctx, &spec.namespace, names, deadline)
        .await
        .map_err(from_wait(op))?;
    *phase = Phase::DeleteSynced;
    let deleted = pause::delete_synced_pods(host, &spec.namespace, &spec.name).await?;
    tracing::info!(
        target: "gpufleet::virtual_cluster",
        "pause {}: deleted {deleted} synced pod(s)",
        spec.name
    );
    Ok(readiness::observe(host, &spec.namespace, names, &spec.expose).await?)
}

/// Refuses to write the StatefulSet when the live one has another volume claim: Kubernetes
/// cannot change it, and the plan replaces the virtual cluster instead. Only a plan made
/// without a refresh, or a create over what an interrupted one left, gets here.
fn check_claim(spec: &Spec, live: &serde_json::Value) -> Result<(), StepError> {
    let have = Persistence::of_statefulset(live);
    if have.as_ref().is_some_and(|h| h.same(&spec.persistence)) {
        return Ok(());
    }
    let has = have.map_or_else(
        || "no volume claim (its data is in the pod)".to_owned(),
        |h| format!("a volume claim of {}", h.describe()),
    );
    Err(StepError::Conflict(format!(
        "StatefulSet {} has {has}, and this apply would give it {}; Kubernetes cannot change \
         the volume claims of a StatefulSet, so nothing was written. Set `persistence` to \
         match, or plan again with a refresh (after `terraform import` if the state does not \
         hold this virtual cluster): the plan then reads the claim and replaces the virtual \
         cluster, which deletes its data",
        spec.name,
        spec.persistence.describe()
    )))
}

/// The steps of operation `op` (a create or update) until `deadline`, recording in `phase`
/// how far they got.
async fn upsert(
    host: &dyn HostObjects,
    ctx: &Context,
    spec: &Spec,
    op: Operation,
    deadline: Instant,
    phase: &mut Phase,
) -> Result<Readiness, StepError> {
    let names = Names::new(&spec.name, &spec.namespace);
    let existing = settle_namespace(host, ctx, &spec.namespace, op, deadline).await?;
    let live = match &existing {
        Some(_) => {
            host.get(ObjectKind::StatefulSet, Some(&spec.namespace), &spec.name)
                .await?
        }
        None => None,
    };
    if let Some(ns) = &existing
        && !owned_by(ns, &spec.name)
    {
        // An update takes over the release Helm installed that an import read; a create
        // never writes into a namespace it did not make.
        if op != Operation::Update || !adopt::recognised(ns, live.as_ref(), &spec.name) {
            return Err(StepError::Conflict(format!(
                "namespace {} already exists and was not created by gpufleet for this \
                 virtual cluster (it lacks the labels app.kubernetes.io/managed-by=gpufleet \
                 and gpufleet.dev/virtual-cluster={}). Choose another namespace, or import \
                 the vCluster installed there",
                spec.namespace, spec.name
            )));
        }
        take_over(host, spec).await?;
    }
    let mut rendered = render::render(spec);
    if let Some(sts) = &live {
        *phase = Phase::Claim;
        check_claim(spec, sts)?;
        let config = if adopt::reads_running_config(sts) {
            host.get(ObjectKind::Secret, Some(&spec.namespace), &names.config())
                .await?
        } else {
            None
        };
        adopt::keep_running_template(&mut rendered, Some(sts), config.as_ref());
    }
    if spec.paused {
        rendered.set_paused_date(&pause::paused_date(live.as_ref()));
    }
    *phase = Phase::Write;
    write_objects(host, spec, &rendered).await?;
    if spec.paused {
        return finish_pause(host, ctx, spec, &names, op, deadline, phase).await;
    }
    // Resuming what the vCluster CLI paused: our apply does not own its annotations.
    if live.as_ref().is_some_and(pause::has_annotations) {
        host.merge_patch(
            ObjectKind::StatefulSet,
            Some(&spec.namespace),
            &spec.name,
            &pause::resume_patch(),
        )
        .await?;
    }
    if live.is_some() {
        super::unwritten::restart_if_owner_replaced(host, &spec.namespace, &names).await?;
    }
    *phase = Phase::Ready;
    readiness::wait_ready(host, ctx, &spec.namespace, &names, &spec.expose, deadline)
        .await
        .map_err(from_wait(op))
}

/// Takes over the namespace of the release Helm installed, once no other namespace uses the
/// virtual cluster's name: marks it as adopted first, so that however far this apply gets,
/// destroy leaves the namespace that was there before.
async fn take_over(host: &dyn HostObjects, spec: &Spec) -> Result<(), StepError> {
    if let Some(other) =
        super::name_taken::other_namespace(host, &spec.name, &spec.namespace).await?
    {
        return Err(StepError::Conflict(super::name_taken::taken(
            &spec.name, &other,
        )));
    }
    host.merge_patch(
        ObjectKind::Namespace,
        None,
        &spec.namespace,
        &serde_json::json!({ "metadata": { "annotations": { adopt::ADOPTED_NAMESPACE: "true" } } }),
    )
    .await?;
    Ok(())
}

/// Create (`prior` null) or update.
pub async fn apply_upsert(
    host: &dyn HostObjects,
    ctx: &Context,
    prior: &Value,
    planned: &Value,
) -> ApplyResponse {
    let spec = match Spec::from_value(planned) {
        Ok(s) => s,
        Err(diagnostics) => {
            return ApplyResponse::refused(prior.clone(), diagnostics);
        }
    };
    let creating = prior.is_null();
    let op = if creating {
        Operation::Create
    } else {
        Operation::Update
    };
    if creating {
        match super::name_taken::other_namespace(host, &spec.name, &spec.namespace).await {
            Ok(None) => {}
            Ok(Some(other)) => {
                return ApplyResponse::refused(
                    prior.clone(),
                    super::name_taken::refusal(&spec.name, &other).into(),
                );
            }
            Err(e) => {
                return ApplyResponse::refused(
                    prior.clone(),
                    Diagnostic::error(
                        "Virtual Cluster Create Failed",
                        format!(
                            "{TYPE_NAME} {:?}: could not check that no other namespace uses \
                             its name: {e}. Nothing was created.",
                            spec.name
                        ),
                    )
                    .into(),
                );
            }
        }
    }
    let t = Timeouts::of_resource(planned, DEFAULT_TIMEOUTS);
    let deadline = Instant::now() + t.get(op);
    let mut phase = Phase::Namespace;
    let calls_before = host.calls();
    let result = upsert(host, ctx, &spec, op, deadline, &mut phase).await;
    tracing::info!(
        target: "gpufleet::virtual_cluster",
        "{} {}: {} host API calls",
        op.name(),
        spec.name,
        host.calls().saturating_sub(calls_before)
    );
    let left = left_to_others(host);
    match result {
        Ok(readiness) => ApplyResponse {
            new_state: finished_state(planned, &spec, &readiness),
            diagnostics: Diagnostics(left.into_iter().collect()),
        },
        Err(e) => {
            let summary = if creating {
                "Virtual Cluster Create Failed"
            } else {
                "Virtual Cluster Update Failed"
            };
            // A create that wrote objects records them (Terraform then replaces the tainted
            // instance, deleting the namespace); an update keeps the prior state, so the next
            // plan shows what is still to do.
            let state = match (creating, phase >= Phase::Write) {
                (true, true) => {
                    let mut s = finished_state(planned, &spec, &Readiness::Waiting(String::new()));
                    s.set_attr(
                        DRIFT,
                        Value::List(vec![Value::string("the last apply did not finish")]),
                    );
                    s
                }
                (true, false) => Value::Null,
                (false, _) => prior.clone(),
            };
            let mut failed = apply::failed(summary, &spec.name, phase.doing(), &e, state);
            failed.diagnostics.0.extend(left);
            failed
        }
    }
}

/// A warning naming the fields this apply left to the controllers that own them, if any.
fn left_to_others(host: &dyn HostObjects) -> Option<Diagnostic> {
    let left = host.left_to_others();
    (!left.is_empty()).then(|| {
        Diagnostic::warning(
            "Fields Left to Other Controllers",
            format!(
                "Other controllers own these fields, so gpufleet left them as they are:\n  - {}\n\
                 gpufleet keeps replica counts and the labels and annotations it does not \
                 reserve with the controller that owns them; edits made with kubectl are \
                 reverted.",
                left.join("\n  - ")
            ),
        )
    })
}

/// Deletes the objects of `names` that live outside the namespace.
async fn delete_cluster_scoped(host: &dyn HostObjects, names: &Names) -> Result<(), StepError> {
    for r in names.all().iter().rev() {
        if r.kind.cluster_scoped() {
            host.delete(r.kind, None, &r.name).await?;
        }
    }
    Ok(())
}

/// Deletes the volume claims the StatefulSet of virtual cluster `name` made in `namespace`:
/// `data-<name>-<ordinal>`, labelled with the StatefulSet's selector. A claim still mounted is
/// removed once its pod is gone.
async fn delete_claims(
    host: &dyn HostObjects,
    namespace: &str,
    name: &str,
) -> Result<(), StepError> {
    let selector = Names::new(name, namespace).control_plane_pods();
    let prefix = persistence::claim_prefix(name);
    let claims = host
        .list(
            ObjectKind::PersistentVolumeClaim,
            Some(namespace),
            &selector,
        )
        .await?;
    for claim in claims
        .iter()
        .filter_map(|c| {
            c.pointer("/metadata/name")
                .and_then(serde_json::Value::as_str)
        })
        .filter(|n| n.starts_with(&prefix))
    {
        host.delete(ObjectKind::PersistentVolumeClaim, Some(namespace), claim)
            .await?;
    }
    Ok(())
}

/// Delete: the namespace and everything in it, waiting until it is gone.
pub async fn apply_delete(host: &dyn HostObjects, ctx: &Context, prior: &Value) -> ApplyResponse {
    let Address { name, namespace } = Address::of_state(prior);
    let t = Timeouts::of_resource(prior, DEFAULT_TIMEOUTS);
    let deadline = Instant::now() + t.delete;
    let calls_before = host.calls();
    let names = Names::new(&name, &namespace);
    let result: Result<(), StepError> = async {
        match host.get(ObjectKind::Namespace, None, &namespace).await? {
            Some(ns) if owned_by(&ns, &name) && !adopt::adopted_namespace(&ns) => {
                host.delete(ObjectKind::Namespace, None, &namespace).await?;
            }
            // Not ours, or there before gpufleet adopted the vCluster in it: leave the
            // namespace, remove only our objects, the volume claims the StatefulSet made
            // included (their retention policy keeps them otherwise), and hand an adopted
            // namespace back without gpufleet's marks.
            Some(ns) => {
                for r in names.all().iter().chain(&names.retired()).rev() {
                    host.delete(r.kind, r.namespace(&namespace), &r.name)
                        .await?;
                }
                delete_claims(host, &namespace, &name).await?;
                if owned_by(&ns, &name) {
                    host.merge_patch(
                        ObjectKind::Namespace,
                        None,
                        &namespace,
                        &adopt::release_namespace_patch(),
                    )
                    .await?;
                }
                return Ok(());
            }
            None => {
                delete_cluster_scoped(host, &names).await?;
                return Ok(());
            }
        }
        delete_cluster_scoped(host, &names).await?;
        match settle_namespace(host, ctx, &namespace, Operation::Delete, deadline).await? {
            None => Ok(()),
            Some(_) => Err(StepError::Conflict(format!(
                "namespace {namespace} was created again while it was being deleted"
            ))),
        }
    }
    .await;
    tracing::info!(
        target: "gpufleet::virtual_cluster",
        "delete {name}: {} host API calls",
        host.calls().saturating_sub(calls_before)
    );
    match result {
        Ok(()) => ApplyResponse::done(Value::Null),
        Err(e) => apply::failed(
            "Virtual Cluster Delete Failed",
            &name,
            "deleting the namespace",
            &e,
            prior.clone(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detail(e: &StepError) -> String {
        let d = e.diagnostic(
            "Virtual Cluster Create Failed",
            "team-a",
            "writing the host objects",
        );
        assert_eq!(d.summary, "Virtual Cluster Create Failed");
        d.detail
    }

    #[test]
    fn every_failure_says_what_the_step_was_doing() {
        assert_eq!(
            detail(&ObjectError::Other("connection refused".to_owned()).into()),
            "gpufleet_virtual_cluster \"team-a\": connection refused (while writing the host \
             objects)."
        );
        assert_eq!(
            detail(&StepError::Conflict(
                "namespace vc-team-a is taken".to_owned()
            )),
            "gpufleet_virtual_cluster \"team-a\": namespace vc-team-a is taken (while writing \
             the host objects)."
        );
        assert_eq!(
            detail(&from_wait(Operation::Create)(WaitError::Failed(
                "pod team-a-0 is in CrashLoopBackOff".to_owned()
            ))),
            "gpufleet_virtual_cluster \"team-a\": the control plane cannot start: pod team-a-0 \
             is in CrashLoopBackOff (while writing the host objects)."
        );
        assert_eq!(
            detail(&from_wait(Operation::Create)(WaitError::Cancelled)),
            "gpufleet_virtual_cluster \"team-a\": stopped while writing the host objects, \
             because Terraform asked the provider to stop. Apply again to finish."
        );
    }

    #[test]
    fn a_wait_that_times_out_says_what_it_last_saw_and_which_timeout_to_raise() {
        let e = from_wait(Operation::Update)(WaitError::TimedOut {
            waited: Duration::from_secs(600),
            last: "pod team-a-0 is not ready".to_owned(),
        });
        assert_eq!(
            detail(&e),
            "gpufleet_virtual_cluster \"team-a\": gave up after 10m while writing the host \
             objects (the update timeout); last seen: pod team-a-0 is not ready. Raise \
             timeouts.update if the host cluster is slow; what was created is recorded in \
             state."
        );
    }
}
