//! A held turn: renewed in the background until it is released or lost.

use std::{sync::Arc, time::Duration};

use tokio::{task::JoinHandle, time::Instant};
use tokio_util::sync::CancellationToken;

use super::{
    LeaseError, LeaseRef, LeaseStore, MAX_CONFLICTS, POLL_INTERVAL, TurnLease,
    transitions::{conflict, holder_of, released, renewed, wall_now},
};

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

impl std::fmt::Debug for TurnGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnGuard")
            .field("lease", &self.lease)
            .field("holder", &self.holder)
            .field("lost", &self.lost.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl TurnGuard {
    pub(super) fn start(turn: TurnLease) -> TurnGuard {
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
