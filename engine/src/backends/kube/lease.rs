//! Turns on a shared resource across processes, held as a `coordination.k8s.io/v1` Lease on
//! the host cluster.
//!
//! Two benchmark runs on one pool at once share its GPUs and skew each other's results, and
//! the runs may come from different `terraform apply` processes, machines or pipelines. So a
//! run takes its turn by holding a Lease: [`TurnLease::acquire`] waits until the Lease is free
//! (or its holder stopped renewing it), writes itself in as holder, and returns a
//! [`TurnGuard`] that renews the Lease in the background until [`TurnGuard::release`].
//!
//! # Expected flow
//!
//! 1. Read the Lease; create it, held by us, when it does not exist.
//! 2. Free (no holder, or ourselves): write ourselves in as holder.
//! 3. Held by another holder: poll about every second. When the holder has not renewed for
//!    its `leaseDurationSeconds`, take the Lease over (`leaseTransitions` counts every change
//!    of holder).
//! 4. While held, renew `renewTime` every third of the lease duration.
//! 5. Release: clear `holderIdentity` if it is still ours, so the next waiter goes at once.
//!
//! # Guarantees
//!
//! Every write carries the `resourceVersion` it was computed from, so of two processes that
//! write at once exactly one wins; the other gets `409 Conflict` (or `AlreadyExists` on
//! create), reads the Lease again and goes on from what the winner wrote.
//!
//! Staleness is judged by the waiter's own monotonic clock, from the moment it first saw the
//! Lease unchanged, not by comparing the holder's `renewTime` with the waiter's wall clock:
//! two CI runners whose clocks disagree by more than a renewal interval would otherwise take
//! over each other's live turns. This is how the Lease API defines `leaseDurationSeconds`
//! ("measured against the time of last observed renewTime") and how client-go's leader
//! election reads it. The cost: a waiter that arrives at a long-dead Lease still waits one
//! lease duration before taking it over.
//!
//! A holder that is killed simply stops renewing; its Lease is taken over one lease duration
//! after the waiters last saw it change. A holder that cannot renew for a whole lease duration
//! (API server unreachable) or finds another holder on the Lease marks its guard as lost
//! ([`TurnGuard::is_lost`]), since another run may be on the pool by then.
//!
//! # Holder history
//!
//! A Lease only shows its current holder, which says nothing about whether two runs ever
//! overlapped. So every turn is also recorded in the annotation [`HISTORY_ANNOTATION`]: a JSON
//! list of the last [`HISTORY_LEN`] turns, each with its holder, when it was acquired and when
//! released (`null` when the turn never released: it is still on, or its holder died and the
//! next turn took over, naming the old holder in `took_over`). Operators read it with
//! `kubectl get lease … -o yaml`; tests use it to show the turns never overlapped.
//!
//! # Caveats
//!
//! [`TurnLease::acquire`] has no timeout of its own; wrap it in `tokio::time::timeout` when
//! the wait must be bounded. Cancellation is only acted on between API calls, so a cancelled
//! acquire never leaves behind a Lease it wrote but does not renew.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use async_trait::async_trait;
use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::Timestamp,
};
use kube::{Api, api::PostParams};
use serde::{Deserialize, Serialize};
use tokio::{task::JoinHandle, time::Instant};
use tokio_util::sync::CancellationToken;

use super::{MANAGED_BY, MANAGED_BY_VALUE, status_code};

/// The annotation on a turn Lease that keeps its last turns, as a JSON list of [`Turn`]s.
pub const HISTORY_ANNOTATION: &str = "gpufleet.dev/turn-history";

/// How many turns [`HISTORY_ANNOTATION`] keeps.
pub const HISTORY_LEN: usize = 20;

/// How often a waiter looks at the Lease again (give or take a fifth, so waiters that started
/// together do not keep colliding).
const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// How soon a waiter that lost a race looks again: at once, but not in a tight loop.
const RACE_BACKOFF: Duration = Duration::from_millis(100);

/// How many API failures in a row a waiter rides out (an API server restarting, a dropped
/// connection) before it gives up.
const MAX_TRANSIENT_FAILURES: u32 = 5;

/// The shortest lease duration: renewals come every third of it.
const MIN_DURATION: Duration = Duration::from_secs(1);

/// How many lost races in a row a release or renewal retries before it gives up.
const MAX_CONFLICTS: u32 = 10;

/// Environment variables that name the pipeline run a process belongs to (Terraform Cloud,
/// GitLab CI, GitHub Actions), added to holder identities when set.
const PIPELINE_VARIABLES: [&str; 3] = ["TFC_RUN_ID", "CI_PIPELINE_ID", "GITHUB_RUN_ID"];

/// Which Lease: its namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LeaseRef {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl std::fmt::Display for LeaseRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Lease {} in {}", self.name, self.namespace)
    }
}

/// Why a turn could not be taken, kept or given back.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// The API server refused a call or could not be reached.
    #[error("failed to {call} {lease}: {}", super::objects::explain(source))]
    Call {
        /// The step: `read`, `create`, `take`, `renew` or `release`.
        call: &'static str,
        /// The Lease.
        lease: LeaseRef,
        /// kube's error (status code and the server's message).
        #[source]
        source: Box<kube::Error>,
    },
    /// The wait was cancelled (Terraform asked the provider to stop).
    #[error("stopped waiting for {lease}{}", held_by(.holder.as_deref()))]
    Cancelled {
        /// The Lease.
        lease: LeaseRef,
        /// Who held it when the wait stopped.
        holder: Option<String>,
    },
    /// Other writers kept changing the Lease between our read and our write.
    #[error("failed to {call} {lease}: it changed under every one of {MAX_CONFLICTS} attempts")]
    Contended {
        /// The step that kept losing.
        call: &'static str,
        /// The Lease.
        lease: LeaseRef,
    },
}

fn held_by(holder: Option<&str>) -> String {
    holder.map(|h| format!(", held by {h}")).unwrap_or_default()
}

/// A Lease's current holder, as a waiter sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// `holderIdentity`.
    pub identity: String,
    /// `acquireTime`: when its turn began.
    pub acquired: Option<Timestamp>,
    /// `renewTime`: when it last said it is alive.
    pub renewed: Option<Timestamp>,
}

/// One turn in [`HISTORY_ANNOTATION`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    /// The holder identity.
    pub holder: String,
    /// When the turn began.
    pub acquired: Timestamp,
    /// When the holder released the Lease; `None` while the turn is on, or when its holder
    /// died and the next turn took over.
    pub released: Option<Timestamp>,
    /// The holder whose stale turn this one took over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub took_over: Option<String>,
}

/// The turns recorded on a Lease, oldest first. An annotation that is missing or that someone
/// edited into something else reads as no history.
pub fn history(lease: &Lease) -> Vec<Turn> {
    lease
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(HISTORY_ANNOTATION))
        .and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_default()
}

/// A holder identity for this process: `<hostname>/<pid>/<random suffix>`, followed by the
/// pipeline run (`TFC_RUN_ID=…`, `CI_PIPELINE_ID=…`, `GITHUB_RUN_ID=…`) when the process runs
/// in one, so an operator can tell whose turn it is. Every call gives a new suffix: two turns
/// in one process are two holders.
pub fn holder_identity() -> String {
    identity(&hostname(), std::process::id(), &random_suffix(), |name| {
        std::env::var(name).ok()
    })
}

fn identity(
    hostname: &str,
    pid: u32,
    suffix: &str,
    env: impl Fn(&str) -> Option<String>,
) -> String {
    let mut id = format!("{hostname}/{pid}/{suffix}");
    for name in PIPELINE_VARIABLES {
        if let Some(value) = env(name).filter(|v| !v.trim().is_empty()) {
            id.push_str(&format!(" {name}={}", value.trim()));
        }
    }
    id
}

/// The machine's name, from the kernel on Linux, else the usual variables, else `hostname`.
fn hostname() -> String {
    let from_file = || std::fs::read_to_string("/proc/sys/kernel/hostname").ok();
    let from_env = || {
        std::env::var("HOSTNAME")
            .or_else(|_| std::env::var("COMPUTERNAME"))
            .ok()
    };
    let from_command = || {
        std::process::Command::new("hostname")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
    };
    from_file()
        .or_else(from_env)
        .or_else(from_command)
        .map(|h| h.trim().chars().take(63).collect::<String>())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".to_owned())
}

fn random_suffix() -> String {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    (0..6)
        .map(|_| char::from(CHARS[fastrand::usize(..CHARS.len())]))
        .collect()
}

/// What a waiter does on seeing the Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Decision {
    /// Write ourselves in as holder; `took_over` names a stale holder we replace.
    Take { took_over: Option<String> },
    /// Someone else holds a live turn.
    Wait(Holder),
}

/// Whether to take the Lease, given how long this waiter has seen it unchanged.
/// `default_duration` stands in for a Lease that states no duration.
fn decide(
    spec: Option<&LeaseSpec>,
    me: &str,
    unchanged_for: Duration,
    default_duration: Duration,
) -> Decision {
    let holder = spec
        .and_then(|s| s.holder_identity.as_deref())
        .filter(|h| !h.is_empty());
    let Some(holder) = holder else {
        return Decision::Take { took_over: None };
    };
    if holder == me {
        return Decision::Take { took_over: None };
    }
    let duration = spec
        .and_then(|s| s.lease_duration_seconds)
        .and_then(|s| u64::try_from(s).ok())
        .filter(|s| *s > 0)
        .map_or(default_duration, Duration::from_secs);
    if unchanged_for >= duration {
        return Decision::Take {
            took_over: Some(holder.to_owned()),
        };
    }
    Decision::Wait(Holder {
        identity: holder.to_owned(),
        acquired: spec.and_then(|s| s.acquire_time.as_ref()).map(|t| t.0),
        renewed: spec.and_then(|s| s.renew_time.as_ref()).map(|t| t.0),
    })
}

/// `history` with `turn` added, keeping the last [`HISTORY_LEN`].
fn with_turn(mut history: Vec<Turn>, turn: Turn) -> Vec<Turn> {
    // Taking back a turn we still hold (the same holder) continues it.
    let continues = history
        .last()
        .is_some_and(|t| t.holder == turn.holder && t.released.is_none());
    if !continues {
        history.push(turn);
    }
    let excess = history.len().saturating_sub(HISTORY_LEN);
    history.drain(..excess);
    history
}

/// `history` with `holder`'s open turn closed at `at`.
fn with_release(mut history: Vec<Turn>, holder: &str, at: Timestamp) -> Vec<Turn> {
    if let Some(turn) = history
        .iter_mut()
        .rev()
        .find(|t| t.holder == holder && t.released.is_none())
    {
        turn.released = Some(at);
    }
    history
}

fn set_history(lease: &mut Lease, history: &[Turn]) {
    // A list of plain strings and timestamps always serialises.
    let json = serde_json::to_string(history).unwrap_or_else(|_| "[]".to_owned());
    lease
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(HISTORY_ANNOTATION.to_owned(), json);
}

/// Whole seconds, at least one, rounded up: a Lease states its duration in seconds.
fn duration_seconds(d: Duration) -> i32 {
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    i32::try_from(secs.max(1)).unwrap_or(i32::MAX)
}

/// `current` (or a new Lease at `lease` when there is none) held by `me` from `now`.
fn taken(
    lease: &LeaseRef,
    current: Option<&Lease>,
    me: &str,
    duration: Duration,
    now: Timestamp,
    took_over: Option<String>,
) -> Lease {
    let mut next = current.cloned().unwrap_or_else(|| Lease {
        metadata: ObjectMeta {
            name: Some(lease.name.clone()),
            namespace: Some(lease.namespace.clone()),
            labels: Some(BTreeMap::from([(
                MANAGED_BY.to_owned(),
                MANAGED_BY_VALUE.to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            lease_transitions: Some(0),
            ..LeaseSpec::default()
        }),
    });
    let history = with_turn(
        history(&next),
        Turn {
            holder: me.to_owned(),
            acquired: now,
            released: None,
            took_over,
        },
    );
    set_history(&mut next, &history);
    let spec = next.spec.get_or_insert_with(LeaseSpec::default);
    // Taking back a turn we still hold (the same holder) continues it.
    let continues = spec.holder_identity.as_deref() == Some(me);
    if !continues || spec.acquire_time.is_none() {
        spec.acquire_time = Some(MicroTime(now));
    }
    if current.is_some() && !continues {
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
    }
    spec.holder_identity = Some(me.to_owned());
    spec.renew_time = Some(MicroTime(now));
    spec.lease_duration_seconds = Some(duration_seconds(duration));
    next
}

/// `current` renewed at `now`.
fn renewed(current: &Lease, now: Timestamp) -> Lease {
    let mut next = current.clone();
    next.spec.get_or_insert_with(LeaseSpec::default).renew_time = Some(MicroTime(now));
    next
}

/// `current` given up by `me` at `now`: no holder, and the turn closed in the history.
fn released(current: &Lease, me: &str, now: Timestamp) -> Lease {
    let mut next = current.clone();
    let history = with_release(history(&next), me, now);
    set_history(&mut next, &history);
    let spec = next.spec.get_or_insert_with(LeaseSpec::default);
    spec.holder_identity = None;
    spec.renew_time = Some(MicroTime(now));
    next
}

fn holder_of(lease: &Lease) -> Option<&str> {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        .filter(|h| !h.is_empty())
}

/// The wall clock at microsecond precision, as a Lease records times.
fn wall_now() -> Timestamp {
    let now = Timestamp::now();
    Timestamp::from_microsecond(now.as_microsecond()).unwrap_or(now)
}

/// A conflict: somebody else wrote between our read and our write.
fn conflict(e: &kube::Error) -> bool {
    status_code(e) == Some(409)
}

/// A failure worth riding out: the server overloaded or restarting, or the connection lost.
fn transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 429 || s.code >= 500,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

/// The three calls a turn makes on its Lease.
#[async_trait]
trait LeaseStore: Send + Sync {
    async fn get(&self) -> Result<Option<Lease>, kube::Error>;
    async fn create(&self, lease: &Lease) -> Result<Lease, kube::Error>;
    async fn replace(&self, lease: &Lease) -> Result<Lease, kube::Error>;
}

/// The API rights a turn needs ([`KubeStore`]: read, create, replace), for the
/// provider's ClusterRole ([`crate::backends::kube::rbac`]).
pub const RULES: &[super::rbac::Rule] = &[super::rbac::Rule::new(
    "coordination.k8s.io",
    "leases",
    &["get", "create", "update"],
)];

/// The Lease on the API server.
struct KubeStore {
    api: Api<Lease>,
    name: String,
}

#[async_trait]
impl LeaseStore for KubeStore {
    async fn get(&self) -> Result<Option<Lease>, kube::Error> {
        self.api.get_opt(&self.name).await
    }

    async fn create(&self, lease: &Lease) -> Result<Lease, kube::Error> {
        self.api.create(&PostParams::default(), lease).await
    }

    async fn replace(&self, lease: &Lease) -> Result<Lease, kube::Error> {
        // `lease` carries the resourceVersion it was read at: a stale one is a 409.
        self.api
            .replace(&self.name, &PostParams::default(), lease)
            .await
    }
}

/// A turn to take on one Lease, by one holder.
pub struct TurnLease {
    store: Arc<dyn LeaseStore>,
    lease: LeaseRef,
    holder: String,
    duration: Duration,
}

impl TurnLease {
    /// A turn on `lease` for `holder` (see [`holder_identity`]), which others may take over
    /// when `holder` has not renewed it for `lease_duration` (at least a second).
    pub fn new(
        client: kube::Client,
        lease: LeaseRef,
        holder: impl Into<String>,
        lease_duration: Duration,
    ) -> TurnLease {
        let store = KubeStore {
            api: Api::namespaced(client, &lease.namespace),
            name: lease.name.clone(),
        };
        TurnLease {
            store: Arc::new(store),
            lease,
            holder: holder.into(),
            duration: lease_duration.max(MIN_DURATION),
        }
    }

    /// Waits for the turn and takes it. `on_wait` hears of each holder this waits for, once
    /// per holder, before the wait.
    pub async fn acquire(
        self,
        cancel: &CancellationToken,
        mut on_wait: impl FnMut(&Holder) + Send,
    ) -> Result<TurnGuard, LeaseError> {
        // The Lease as last seen, and since when it has not changed (by our own clock).
        let mut seen: Option<(String, Instant)> = None;
        let mut announced: Option<Holder> = None;
        let mut failures = 0;
        loop {
            if cancel.is_cancelled() {
                return Err(self.cancelled(announced));
            }
            let attempt = self.try_take(&mut seen).await;
            let wait = match attempt {
                Ok(Attempt::Taken) => break,
                Ok(Attempt::Raced) => {
                    failures = 0;
                    RACE_BACKOFF
                }
                Ok(Attempt::Held(holder)) => {
                    failures = 0;
                    let same_turn = announced.as_ref().is_some_and(|a| {
                        a.identity == holder.identity && a.acquired == holder.acquired
                    });
                    if !same_turn {
                        tracing::info!(
                            target: "gpufleet::turns",
                            "waiting for {} (held by {})",
                            self.lease,
                            holder.identity
                        );
                        on_wait(&holder);
                        announced = Some(holder);
                    }
                    POLL_INTERVAL
                }
                Err((call, e)) if transient(&e) && failures < MAX_TRANSIENT_FAILURES => {
                    failures += 1;
                    tracing::warn!(
                        target: "gpufleet::turns",
                        "failed to {call} {} (will retry): {e}",
                        self.lease
                    );
                    POLL_INTERVAL
                }
                Err((call, e)) => {
                    return Err(LeaseError::Call {
                        call,
                        lease: self.lease.clone(),
                        source: Box::new(e),
                    });
                }
            };
            let jittered = wait.mul_f64(0.8 + fastrand::f64() * 0.4);
            tokio::select! {
                () = cancel.cancelled() => return Err(self.cancelled(announced)),
                () = tokio::time::sleep(jittered) => {}
            }
        }
        tracing::info!(target: "gpufleet::turns", "{} taken by {}", self.lease, self.holder);
        Ok(TurnGuard::start(self))
    }

    fn cancelled(&self, waiting_for: Option<Holder>) -> LeaseError {
        LeaseError::Cancelled {
            lease: self.lease.clone(),
            holder: waiting_for.map(|h| h.identity),
        }
    }

    /// One look at the Lease, and one write when the turn is ours to take.
    async fn try_take(
        &self,
        seen: &mut Option<(String, Instant)>,
    ) -> Result<Attempt, (&'static str, kube::Error)> {
        let current = self.store.get().await.map_err(|e| ("read", e))?;
        let Some(current) = current else {
            let new = taken(
                &self.lease,
                None,
                &self.holder,
                self.duration,
                wall_now(),
                None,
            );
            return match self.store.create(&new).await {
                Ok(_) => Ok(Attempt::Taken),
                Err(e) if conflict(&e) => Ok(Attempt::Raced),
                Err(e) => Err(("create", e)),
            };
        };
        let version = current
            .metadata
            .resource_version
            .clone()
            .unwrap_or_default();
        let since = match seen {
            Some((v, since)) if *v == version => *since,
            _ => {
                let now = Instant::now();
                *seen = Some((version, now));
                now
            }
        };
        match decide(
            current.spec.as_ref(),
            &self.holder,
            since.elapsed(),
            self.duration,
        ) {
            Decision::Wait(holder) => Ok(Attempt::Held(holder)),
            Decision::Take { took_over } => {
                if let Some(old) = &took_over {
                    tracing::warn!(
                        target: "gpufleet::turns",
                        "taking over {} from {old}, which stopped renewing it",
                        self.lease
                    );
                }
                let next = taken(
                    &self.lease,
                    Some(&current),
                    &self.holder,
                    self.duration,
                    wall_now(),
                    took_over,
                );
                match self.store.replace(&next).await {
                    Ok(_) => Ok(Attempt::Taken),
                    Err(e) if conflict(&e) => Ok(Attempt::Raced),
                    Err(e) => Err(("take", e)),
                }
            }
        }
    }
}

/// What one look at the Lease came to.
enum Attempt {
    /// The turn is ours.
    Taken,
    /// Somebody wrote between our read and our write; look again at once.
    Raced,
    /// Another holder's live turn.
    Held(Holder),
}

/// Our turn on a Lease: renewed in the background while held; [`TurnGuard::release`] gives
/// it to the next waiter at once. Dropping the guard without releasing stops the renewals
/// (as a killed process would), and the Lease is taken over once it goes stale.
pub struct TurnGuard {
    store: Arc<dyn LeaseStore>,
    lease: LeaseRef,
    holder: String,
    lost: CancellationToken,
    renewal: JoinHandle<()>,
}

impl TurnGuard {
    fn start(turn: TurnLease) -> TurnGuard {
        let lost = CancellationToken::new();
        let renewal = tokio::spawn(renew_until_lost(
            Arc::clone(&turn.store),
            turn.lease.clone(),
            turn.holder.clone(),
            turn.duration,
            lost.clone(),
        ));
        TurnGuard {
            store: turn.store,
            lease: turn.lease,
            holder: turn.holder,
            lost,
            renewal,
        }
    }

    /// The holder identity this turn is held under.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// The Lease.
    pub fn lease(&self) -> &LeaseRef {
        &self.lease
    }

    /// Whether the turn may no longer be ours: another holder is on the Lease, or renewals
    /// failed for a whole lease duration.
    pub fn is_lost(&self) -> bool {
        self.lost.is_cancelled()
    }

    /// Completes when the turn is lost (see [`TurnGuard::is_lost`]).
    pub async fn lost(&self) {
        self.lost.cancelled().await;
    }

    /// Ends the turn: stops renewing and clears the holder, if it is still us, so the next
    /// waiter goes at once. A turn already taken over is left to its new holder.
    pub async fn release(self) -> Result<(), LeaseError> {
        self.renewal.abort();
        for _ in 0..MAX_CONFLICTS {
            let current = self
                .store
                .get()
                .await
                .map_err(|e| self.error("release", e))?;
            let Some(current) = current.filter(|l| holder_of(l) == Some(self.holder.as_str()))
            else {
                tracing::warn!(
                    target: "gpufleet::turns",
                    "{} was no longer held by {} at release",
                    self.lease,
                    self.holder
                );
                return Ok(());
            };
            match self
                .store
                .replace(&released(&current, &self.holder, wall_now()))
                .await
            {
                Ok(_) => {
                    tracing::info!(
                        target: "gpufleet::turns",
                        "{} released by {}",
                        self.lease,
                        self.holder
                    );
                    return Ok(());
                }
                Err(e) if conflict(&e) => {}
                Err(e) => return Err(self.error("release", e)),
            }
        }
        Err(LeaseError::Contended {
            call: "release",
            lease: self.lease.clone(),
        })
    }

    fn error(&self, call: &'static str, e: kube::Error) -> LeaseError {
        LeaseError::Call {
            call,
            lease: self.lease.clone(),
            source: Box::new(e),
        }
    }
}

impl Drop for TurnGuard {
    fn drop(&mut self) {
        self.renewal.abort();
    }
}

/// What one renewal came to.
enum Renewal {
    Renewed,
    /// The Lease is gone or has another holder.
    Lost,
    Failed(LeaseError),
}

/// Renews every third of `duration` until the turn is lost (or the task is aborted).
async fn renew_until_lost(
    store: Arc<dyn LeaseStore>,
    lease: LeaseRef,
    holder: String,
    duration: Duration,
    lost: CancellationToken,
) {
    let interval = duration / 3;
    let retry = interval.min(POLL_INTERVAL);
    let mut last_renewed = Instant::now();
    let mut wait = interval;
    loop {
        tokio::time::sleep(wait).await;
        match renew_once(store.as_ref(), &lease, &holder).await {
            Renewal::Renewed => {
                last_renewed = Instant::now();
                wait = interval;
            }
            Renewal::Lost => {
                tracing::warn!(
                    target: "gpufleet::turns",
                    "{holder} lost {lease}: another holder took it over"
                );
                lost.cancel();
                return;
            }
            Renewal::Failed(e) if last_renewed.elapsed() >= duration => {
                tracing::warn!(
                    target: "gpufleet::turns",
                    "{holder} could not renew {lease} for {duration:?}, so another run may \
                     take it over: {e}"
                );
                lost.cancel();
                return;
            }
            Renewal::Failed(e) => {
                tracing::warn!(target: "gpufleet::turns", "{e} (will retry)");
                wait = retry;
            }
        }
    }
}

async fn renew_once(store: &dyn LeaseStore, lease: &LeaseRef, holder: &str) -> Renewal {
    let error = |e| {
        Renewal::Failed(LeaseError::Call {
            call: "renew",
            lease: lease.clone(),
            source: Box::new(e),
        })
    };
    for _ in 0..MAX_CONFLICTS {
        let current = match store.get().await {
            Ok(Some(l)) if holder_of(&l) == Some(holder) => l,
            Ok(_) => return Renewal::Lost,
            Err(e) => return error(e),
        };
        match store.replace(&renewed(&current, wall_now())).await {
            Ok(_) => return Renewal::Renewed,
            Err(e) if conflict(&e) => {}
            Err(e) => return error(e),
        }
    }
    Renewal::Failed(LeaseError::Contended {
        call: "renew",
        lease: lease.clone(),
    })
}

#[cfg(test)]
mod tests;
