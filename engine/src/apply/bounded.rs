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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::apply::step_error::tests::Broken;

    const LIMIT: Duration = Duration::from_secs(60);

    async fn never() -> Result<(), StepError<Broken>> {
        std::future::pending().await
    }

    #[tokio::test(start_paused = true)]
    async fn a_step_that_ends_in_time_gives_its_own_result() {
        let ctx = Context::default();
        let started = Instant::now();
        let r = bounded(&ctx, Operation::Create, started, started + LIMIT, async {
            Err::<(), _>(StepError::<Broken>::Conflict("taken".to_owned()))
        })
        .await;
        assert!(matches!(r, Err(StepError::Conflict(m)) if m == "taken"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_step_past_the_deadline_times_out_with_the_whole_wait() {
        let ctx = Context::default();
        let started = Instant::now();
        tokio::time::advance(Duration::from_secs(10)).await;
        let r = bounded(&ctx, Operation::Update, started, started + LIMIT, never()).await;
        match r {
            Err(StepError::TimedOut { op, waited }) => {
                assert_eq!(op, Operation::Update);
                assert!(waited >= LIMIT, "{waited:?}");
            }
            other => panic!("expected a timeout, got {other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_stop_request_ends_the_step_at_once() {
        let ctx = Context::default();
        ctx.cancel.cancel();
        let started = Instant::now();
        let r = bounded(&ctx, Operation::Delete, started, started + LIMIT, never()).await;
        assert!(matches!(r, Err(StepError::Cancelled)));
        assert_eq!(started.elapsed(), Duration::ZERO);
    }
}
