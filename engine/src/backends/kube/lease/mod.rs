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

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use k8s_openapi::{api::coordination::v1::Lease, jiff::Timestamp};
use kube::{Api, api::PostParams};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{MANAGED_BY, MANAGED_BY_VALUE, status_code};

mod guard;
mod history;
mod holder_id;
mod transitions;

pub use guard::TurnGuard;
pub use history::{Turn, history};
pub use holder_id::holder_identity;
use transitions::{Decision, conflict, decide, taken, transient, wall_now};

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

/// The three calls a turn makes on its Lease.
#[async_trait]
trait LeaseStore: Send + Sync {
    async fn get(&self) -> Result<Option<Lease>, kube::Error>;
    async fn create(&self, lease: &Lease) -> Result<Lease, kube::Error>;
    async fn replace(&self, lease: &Lease) -> Result<Lease, kube::Error>;
}

/// The API rights a turn needs (`KubeStore`: read, create, replace), for the
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

impl std::fmt::Debug for TurnLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnLease")
            .field("lease", &self.lease)
            .field("holder", &self.holder)
            .field("duration", &self.duration)
            .finish_non_exhaustive()
    }
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

#[cfg(test)]
mod tests;
