//! The step-loop driver: an apply written as a state machine whose steps each name the next.

use async_trait::async_trait;
use tokio::time::Instant;

use super::{KindError, StepError, bounded};
use crate::{context::Context, timeouts::Operation};

/// One step of an apply that runs as a state machine.
pub trait Step: Copy + PartialEq + Send {
    /// The step that ends the machine.
    const DONE: Self;
    /// What the step does, in the words a failure reports ("waiting for the V-Net to finish
    /// provisioning").
    fn doing(self) -> &'static str;
}

/// An apply as a state machine: what its steps read, and what they made so far, which a
/// failure still reports as partial state.
#[async_trait]
pub trait Machine: Send {
    /// The machine's steps.
    type Step: Step;
    /// The kind's own failures.
    type Error: KindError + Send;
    /// Runs one step and names the next.
    async fn step(&mut self, step: Self::Step) -> Result<Self::Step, StepError<Self::Error>>;
}

/// Why a machine stopped before [`Step::DONE`]: the step's error and what that step did.
#[derive(Debug)]
pub struct Stopped<E> {
    /// The step's error.
    pub error: StepError<E>,
    /// [`Step::doing`] of the step that failed.
    pub doing: &'static str,
}

/// Runs `machine` from `first` until a step returns [`Step::DONE`], each step [`bounded`] by
/// the operation's deadline and Terraform's stop request.
pub async fn run_steps<M: Machine>(
    ctx: &Context,
    op: Operation,
    started: Instant,
    deadline: Instant,
    first: M::Step,
    machine: &mut M,
) -> Result<(), Stopped<M::Error>> {
    let mut current = first;
    while current != M::Step::DONE {
        match bounded(ctx, op, started, deadline, machine.step(current)).await {
            Ok(next) => current = next,
            Err(error) => {
                return Err(Stopped {
                    error,
                    doing: current.doing(),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::apply::step_error::tests::Broken;

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Count {
        At(u32),
        Done,
    }

    impl Step for Count {
        const DONE: Self = Count::Done;
        fn doing(self) -> &'static str {
            match self {
                Count::At(_) => "counting",
                Count::Done => "finishing",
            }
        }
    }

    /// Counts to three, failing at `fail_at` or sleeping forever at `hang_at`.
    #[derive(Default)]
    struct Counter {
        seen: Vec<u32>,
        fail_at: Option<u32>,
        hang_at: Option<u32>,
    }

    #[async_trait]
    impl Machine for Counter {
        type Step = Count;
        type Error = Broken;
        async fn step(&mut self, step: Count) -> Result<Count, StepError<Broken>> {
            let Count::At(n) = step else {
                return Ok(Count::Done);
            };
            if self.hang_at == Some(n) {
                std::future::pending::<()>().await;
            }
            if self.fail_at == Some(n) {
                return Err(StepError::Conflict(format!("step {n}")));
            }
            self.seen.push(n);
            Ok(if n == 3 {
                Count::Done
            } else {
                Count::At(n + 1)
            })
        }
    }

    async fn run(m: &mut Counter) -> Result<(), Stopped<Broken>> {
        let ctx = Context::default();
        let started = Instant::now();
        let deadline = started + Duration::from_secs(60);
        run_steps(&ctx, Operation::Create, started, deadline, Count::At(1), m).await
    }

    #[tokio::test(start_paused = true)]
    async fn every_step_runs_in_order_until_done() {
        let mut m = Counter::default();
        assert!(run(&mut m).await.is_ok());
        assert_eq!(m.seen, [1, 2, 3]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_step_stops_the_machine_and_keeps_what_earlier_steps_made() {
        let mut m = Counter {
            fail_at: Some(2),
            ..Counter::default()
        };
        let Err(stopped) = run(&mut m).await else {
            panic!("step 2 fails");
        };
        assert!(matches!(stopped.error, StepError::Conflict(ref s) if s == "step 2"));
        assert_eq!(stopped.doing, "counting");
        assert_eq!(m.seen, [1]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_hanging_step_times_out_with_the_whole_wait() {
        let mut m = Counter {
            hang_at: Some(3),
            ..Counter::default()
        };
        let Err(stopped) = run(&mut m).await else {
            panic!("step 3 hangs");
        };
        assert!(
            matches!(stopped.error, StepError::TimedOut { waited, .. } if waited >= Duration::from_secs(60))
        );
        assert_eq!(m.seen, [1, 2]);
    }
}
