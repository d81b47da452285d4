//! Kill-at-every-step sweeps (included with `#[path]` by the lifecycle suites): an operation
//! is interrupted after its k-th backend call, for k = 0, 1, … until a run needs no more than
//! k calls, each time on a fresh backend, and the same operation, re-run, must converge.
//!
//! Two interruptions are played. `Fails`: the backend fails every call from the (k+1)-th on
//! without carrying it out, and Terraform keeps the state the provider returned with its
//! error. `Killed`: the provider dies after call k, so Terraform keeps the state it had before
//! the run (calls after k fail, which is what a dead provider's calls amount to).
//!
//! After each re-run the plan must be empty, the backend must hold exactly what an
//! uninterrupted run leaves (an object too many is a duplicate), and destroy must leave the
//! backend as found (an object left is an orphan). Each sweep prints one table row;
//! `scripts/sweep` collects them.
#![allow(dead_code, unreachable_pub)]

use std::{collections::BTreeMap, sync::Arc};

use gpufleet_engine::{kinds::ResourceKind, value::Value};

use crate::support::{Action, Terraform, show};

/// A backend double that can be interrupted.
pub trait Interruptible {
    /// From now on, `n` more calls are carried out and every later one fails without being
    /// carried out.
    fn fail_after(&self, n: u64);
    /// Calls are carried out again.
    fn heal(&self);
    /// The objects gpufleet owns on the backend now, one stable key each (no generated ids),
    /// so that two runs compare.
    fn owned(&self) -> Vec<String>;
    /// Everything on the backend that destroy must put back as it was.
    fn snapshot(&self) -> String;
}

/// How an operation is interrupted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// The backend fails from the next call on; the provider returns what it has.
    Fails,
    /// The provider is killed; Terraform keeps the state from before the run.
    Killed,
}

/// One operation to interrupt: apply `before` in order, then apply `target` (destroy when
/// it is null).
pub struct Case {
    pub kind: &'static str,
    pub op: &'static str,
    pub before: Vec<Value>,
    pub target: Value,
}

/// What a sweep found.
#[derive(Debug, Default)]
pub struct Row {
    pub points: u64,
    pub orphans: usize,
    pub duplicates: usize,
    /// The first orphan or duplicate, described.
    pub first: Option<String>,
}

fn counted(keys: Vec<String>) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for k in keys {
        *m.entry(k).or_default() += 1;
    }
    m
}

/// Objects in `now` beyond those in `want`, with the keys.
fn extra(now: &[String], want: &[String]) -> (usize, Vec<String>) {
    let want = counted(want.to_vec());
    let mut n = 0;
    let mut keys = Vec::new();
    for (k, c) in counted(now.to_vec()) {
        let more = c.saturating_sub(want.get(&k).copied().unwrap_or(0));
        if more > 0 {
            n += more;
            keys.push(k);
        }
    }
    (n, keys)
}

/// Sweeps `case` with `cut` over backends from `make`; panics when a re-run fails or does not
/// converge, and counts orphans and duplicates. Prints the row.
pub async fn sweep<B, K>(case: &Case, cut: Cut, make: impl Fn() -> (Arc<B>, K)) -> Row
where
    B: Interruptible,
    K: ResourceKind,
{
    let what = format!("{} {} ({cut:?})", case.kind, case.op);
    // An uninterrupted run: what the backend holds after it.
    let clean = {
        let (backend, kind) = make();
        let mut tf = Terraform::new(&kind);
        for c in &case.before {
            tf.apply_ok(c).await;
        }
        let d = tf.try_run(&case.target).await;
        assert!(!d.has_error(), "{what}, uninterrupted:\n{}", show(&d));
        backend.owned()
    };
    let mut row = Row::default();
    for k in 0..1000 {
        let (backend, kind) = make();
        let found = backend.snapshot();
        let mut tf = Terraform::new(&kind);
        for c in &case.before {
            tf.apply_ok(c).await;
        }
        let (state, tainted) = (tf.state.clone(), tf.tainted);
        backend.fail_after(k);
        let interrupted = tf.try_run(&case.target).await.has_error();
        backend.heal();
        if !interrupted {
            assert!(k > 0, "{what} made no backend call");
            row.points = k;
            break;
        }
        if cut == Cut::Killed {
            (tf.state, tf.tainted) = (state, tainted);
        }
        let again = tf.try_run(&case.target).await;
        assert!(
            !again.has_error(),
            "{what}, re-run after call {k}:\n{}",
            show(&again)
        );
        if !case.target.is_null() {
            let p = tf.plan(&case.target).await;
            assert_eq!(p.action, Action::NoOp, "{what}: plan after call {k}");
            let (n, keys) = extra(&backend.owned(), &clean);
            if n > 0 {
                row.duplicates += n;
                row.first
                    .get_or_insert(format!("after call {k}: duplicate {keys:?}"));
            }
            let d = tf.destroy().await;
            assert!(
                !d.has_error(),
                "{what}, destroy after call {k}:\n{}",
                show(&d)
            );
        }
        assert!(tf.state.is_null(), "{what}: state after destroy, call {k}");
        let left = backend.owned();
        if !left.is_empty() {
            row.orphans += left.len();
            row.first
                .get_or_insert(format!("after call {k}: orphan {left:?}"));
        } else if backend.snapshot() != found {
            row.orphans += 1;
            row.first.get_or_insert(format!(
                "after call {k}: not as found:\n{}\nwas:\n{found}",
                backend.snapshot()
            ));
        }
    }
    assert!(
        row.points > 0,
        "{what} was still interrupted after 1000 calls"
    );
    println!(
        "sweep | {:<17} | {:<10} | {:<6} | {:>6} | {:>7} | {:>10}",
        case.kind,
        case.op,
        format!("{cut:?}").to_lowercase(),
        row.points,
        row.orphans,
        row.duplicates
    );
    row
}

/// Sweeps `case` both ways and fails on any orphan or duplicate.
pub async fn sweep_both<B, K>(case: Case, make: impl Fn() -> (Arc<B>, K))
where
    B: Interruptible,
    K: ResourceKind,
{
    for cut in [Cut::Fails, Cut::Killed] {
        let row = sweep(&case, cut, &make).await;
        assert!(
            row.orphans == 0 && row.duplicates == 0,
            "{} {} ({cut:?}): {} orphans, {} duplicates; {}",
            case.kind,
            case.op,
            row.orphans,
            row.duplicates,
            row.first.unwrap_or_default()
        );
    }
}
