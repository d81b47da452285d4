//! Steps bounded by the operation's timeout and by Terraform's stop request.

use std::future::Future;

use tokio::time::Instant;

use super::{KindError, StepError};
use crate::{context::Context, timeouts::Operation};

/// Runs `fut` until it ends, the deadline passes, or Terraform asks to stop.
///
/// `started` is when the operation began, so a timeout reports the whole time waited.
pub async fn bounded<T, E: KindError>(
    ctx: &Context,
    op: Operation,
    started: Instant,
    deadline: Instant,
    fut: impl Future<Output = Result<T, StepError<E>>>,
) -> Result<T, StepError<E>> {
    let timed = tokio::time::timeout_at(deadline, fut);
    match ctx.cancel.run_until_cancelled(timed).await {
        None => Err(StepError::Cancelled),
        Some(Err(_elapsed)) => Err(StepError::TimedOut {
            op,
            waited: started.elapsed(),
        }),
        Some(Ok(r)) => r,
    }
}
