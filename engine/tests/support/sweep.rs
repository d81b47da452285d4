//! Kill-at-every-step sweeps (a module of the suites' shared support): an operation
//! whose uninterrupted run makes N backend calls is interrupted after its k-th call, for
//! k = 0 … N-1, each time on a fresh backend, and the same operation, re-run, must converge.
//! The suite tries a few k spread over the run; `GPUFLEET_SWEEP=full` (`scripts/sweep`) tries
//! every one.
//!
//! Two interruptions are played. `Fails`: the backend fails every call from the (k+1)-th on
//! without carrying it out, and Terraform keeps the state the provider returned with its
//! error. `Killed`: the provider dies after call k, so Terraform keeps the state it had before
//! the run (calls after k fail, which is what a dead provider's calls amount to).
//!
//! After each re-run the plan must be empty, the backend must hold exactly what an
//! uninterrupted run leaves (an object too many is a duplicate), and destroy must leave the
//! backend as found (an object left is an orphan). A failure the provider gets past (it warns
//! and records the run) is "absorbed": nothing is re-run, and destroy must still remove what
//! the run left. Each sweep prints one table row;
//! `scripts/sweep` collects them.
#![allow(dead_code, unreachable_pub)]

use std::{collections::BTreeMap, sync::Arc};

use gpufleet_engine::{diag::Severity, kinds::ResourceKind, value::Value};

use crate::support::{Action, Terraform, show};

/// The calls a backend double still carries out before it fails every further one: what
/// [`Interruptible::fail_after`] sets and each call spends.
#[derive(Debug, Default, Clone, Copy)]
pub struct Budget(Option<u64>);

impl Budget {
    /// `n` more calls go through.
    pub fn limit(&mut self, n: u64) {
        self.0 = Some(n);
    }
    /// No limit any more.
    pub fn lift(&mut self) {
        self.0 = None;
    }
    /// Calls left (`u64::MAX` without a limit).
    pub fn left(&self) -> u64 {
        self.0.unwrap_or(u64::MAX)
    }
    /// Takes one call; `false` when none is left, and the call must fail.
    pub fn spend(&mut self) -> bool {
        match self.0 {
            Some(0) => false,
            Some(n) => {
                self.0 = Some(n - 1);
                true
            }
            None => true,
        }
    }
}

/// A backend double that can be interrupted.
pub trait Interruptible {
    /// From now on, `n` more calls are carried out and every later one fails without being
    /// carried out.
    fn fail_after(&self, n: u64);
    /// Calls are carried out again.
    fn heal(&self);
    /// How many of the calls [`Interruptible::fail_after`] allowed are left.
    fn calls_left(&self) -> u64;
    /// The objects gpufleet owns on the backend now, one stable key each (no generated ids),
    /// so that two runs compare.
    fn owned(&self) -> Vec<String>;
    /// Everything on the backend that destroy must put back as it was; by default, what
    /// gpufleet owns.
    fn snapshot(&self) -> String {
        self.owned().join("\n")
    }
}

/// A backend double whose calls spend a [`Budget`] it keeps under its own lock; it is
/// [`Interruptible`] through that budget.
pub trait Budgeted {
    /// Runs `f` on the budget the double's calls spend.
    fn budget<R>(&self, f: impl FnOnce(&mut Budget) -> R) -> R;
    /// As [`Interruptible::owned`].
    fn owned(&self) -> Vec<String>;
    /// As [`Interruptible::snapshot`].
    fn snapshot(&self) -> String {
        self.owned().join("\n")
    }
}

impl<T: Budgeted> Interruptible for T {
    fn fail_after(&self, n: u64) {
        self.budget(|b| b.limit(n));
    }
    fn heal(&self) {
        self.budget(Budget::lift);
    }
    fn calls_left(&self) -> u64 {
        self.budget(|b| b.left())
    }
    fn owned(&self) -> Vec<String> {
        Budgeted::owned(self)
    }
    fn snapshot(&self) -> String {
        Budgeted::snapshot(self)
    }
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

impl Case {
    /// The case whose configurations `config` makes from `before` and `target` (`None`:
    /// destroy).
    pub fn new<A>(
        kind: &'static str,
        op: &'static str,
        config: impl Fn(&A) -> Value,
        before: &[A],
        target: Option<A>,
    ) -> Case {
        Case {
            kind,
            op,
            before: before.iter().map(&config).collect(),
            target: target.map_or(Value::Null, |t| config(&t)),
        }
    }
}

/// What a sweep found.
#[derive(Debug, Default)]
pub struct Row {
    /// Backend calls of an uninterrupted run.
    pub calls: u64,
    /// Interruption points tried.
    pub points: u64,
    /// Points whose failure the provider got past with a warning.
    pub absorbed: u64,
    pub orphans: usize,
    pub duplicates: usize,
    /// The first orphan or duplicate, described.
    pub first: Option<String>,
}

/// Points tried in the fast form.
const FAST_POINTS: u64 = 6;

/// The calls after which to interrupt, out of `calls`: every one with `GPUFLEET_SWEEP=full`,
/// else the first, the last and a few spread between (the suite's fast form).
fn points(calls: u64) -> Vec<u64> {
    let full = std::env::var("GPUFLEET_SWEEP").is_ok_and(|v| v == "full");
    if full || calls <= FAST_POINTS {
        return (0..calls).collect();
    }
    let mut p: Vec<u64> = (0..FAST_POINTS)
        .map(|i| i * (calls - 1) / (FAST_POINTS - 1))
        .collect();
    p.dedup();
    p
}

fn counted(keys: &[String]) -> BTreeMap<&str, usize> {
    let mut m = BTreeMap::new();
    for k in keys {
        *m.entry(k.as_str()).or_default() += 1;
    }
    m
}

/// Objects in `now` beyond those in `want`, with the keys.
fn extra(now: &[String], want: &[String]) -> (usize, Vec<String>) {
    let want = counted(want);
    let mut n = 0;
    let mut keys = Vec::new();
    for (k, c) in counted(now) {
        let more = c.saturating_sub(want.get(k).copied().unwrap_or(0));
        if more > 0 {
            n += more;
            keys.push(k.to_owned());
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
    let (clean, calls) = {
        let (backend, kind) = make();
        let mut tf = Terraform::new(&kind);
        for c in &case.before {
            tf.apply_ok(c).await;
        }
        backend.fail_after(u64::MAX);
        let d = tf.try_run(&case.target).await;
        assert!(!d.has_error(), "{what}, uninterrupted:\n{}", show(&d));
        (backend.owned(), u64::MAX - backend.calls_left())
    };
    assert!(calls > 0, "{what} made no backend call");
    let mut row = Row {
        calls,
        ..Row::default()
    };
    for k in points(calls) {
        let (backend, kind) = make();
        let found = backend.snapshot();
        let mut tf = Terraform::new(&kind);
        for c in &case.before {
            tf.apply_ok(c).await;
        }
        let (state, tainted) = (tf.state.clone(), tf.tainted);
        backend.fail_after(k);
        let run = tf.try_run(&case.target).await;
        let interrupted = run.has_error();
        backend.heal();
        row.points += 1;
        let absorbed = !interrupted && cut == Cut::Fails;
        if absorbed {
            // The provider got past the failure (a cleanup it could not finish is a warning):
            // the run stands, and destroy must remove whatever it left. Passing over it in
            // silence would hide what is left on the backend until then.
            assert!(
                run.iter().any(|d| d.severity == Severity::Warning),
                "{what}: the failure after call {k} was passed over without a warning"
            );
            row.absorbed += 1;
        } else {
            if cut == Cut::Killed {
                (tf.state, tf.tainted) = (state, tainted);
            }
            let again = tf.try_run(&case.target).await;
            assert!(
                !again.has_error(),
                "{what}, re-run after call {k}:\n{}",
                show(&again)
            );
        }
        if !case.target.is_null() {
            let p = tf.plan(&case.target).await;
            assert_eq!(p.action, Action::NoOp, "{what}: plan after call {k}");
            let (n, keys) = extra(&backend.owned(), &clean);
            if n > 0 && !absorbed {
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
    println!(
        "sweep | {:<17} | {:<10} | {:<6} | {:>5} | {:>6} | {:>8} | {:>7} | {:>10}",
        case.kind,
        case.op,
        format!("{cut:?}").to_lowercase(),
        row.calls,
        row.points,
        row.absorbed,
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
