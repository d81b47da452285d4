//! Kill-at-every-step sweeps through the real Terraform CLI against a lab controller: the
//! engine suites' in-process sweep, played with the provider as Terraform runs it and the
//! controller reached over HTTPS.
//!
//! An operation whose uninterrupted run makes N controller calls is interrupted after its
//! k-th call by a fault rule that lets k calls through and then refuses every call (with a
//! status the provider does not retry, so a point takes seconds). `Fails`: Terraform keeps
//! the state the provider returned with its error. `Killed`: the state is put back as it was
//! before the run, which is what Terraform has when the provider dies mid-run. Then the
//! operation runs again and must succeed; the plan must be empty, the controller must hold
//! what an uninterrupted run leaves (one more is a duplicate), and destroy must leave
//! nothing of the sweep's (anything left is an orphan).
//!
//! The suite tries a few k spread over the run; `GPUFLEET_SWEEP=full` tries every one.

use serde_json::Value;

use crate::Session;

/// Calls let through in the uninterrupted run, to count them.
const COUNTING: u32 = 1_000_000;

/// How the run is interrupted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// The controller refuses every call from the (k+1)-th on.
    Fails,
    /// The provider dies after call k: Terraform keeps the state from before the run.
    Killed,
}

/// A lab emulator driven through its admin plane, whose fault rules take `after` (the
/// Netris and BCM emulators share that part of the plane).
pub trait Controller {
    /// `method path` on the admin plane, with an optional JSON body; the answer.
    fn admin(&self, method: &str, path: &str, body: Option<&Value>) -> Value;
    /// A fault rule refusing every call, in this emulator's words, with a status the
    /// provider does not retry.
    fn refusal(&self) -> Value;
    /// The objects of the sweep's names, one line each without ids (so two runs compare).
    fn owned(&self) -> Vec<String>;

    /// Lets `after` more calls through, then refuses every call until [`Self::heal`].
    fn fail_after(&self, after: u32) {
        let mut rule = self.refusal();
        rule["after"] = after.into();
        self.admin("POST", "/_admin/fault", Some(&rule));
    }
    /// Calls still to let through before the refusals start.
    fn calls_left(&self) -> u32 {
        self.admin("GET", "/_admin/fault", None)["rules"][0]["after"]
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(0)
    }
    /// Clears the fault.
    fn heal(&self) {
        self.admin("DELETE", "/_admin/fault", None);
    }
}

/// One operation to sweep: the configurations applied before it, then its target (`None`:
/// destroy).
#[derive(Debug, Clone)]
pub struct Case {
    /// The resource kind, for the table.
    pub kind: &'static str,
    /// The operation, for the table.
    pub op: &'static str,
    /// Configurations applied first, in order.
    pub before: Vec<String>,
    /// The configuration the operation applies, or `None` for destroy.
    pub target: Option<String>,
}

/// One table row: calls of an uninterrupted run, points tried, runs the provider got past
/// with a warning, and what was found.
#[derive(Debug, Default)]
pub struct Row {
    /// Controller calls of an uninterrupted run.
    pub calls: u32,
    /// Interruption points tried.
    pub points: u32,
    /// Runs that succeeded despite the fault.
    pub absorbed: u32,
    /// Objects left after destroy.
    pub orphans: usize,
    /// Objects beyond an uninterrupted run's.
    pub duplicates: usize,
}

/// The interruption points for a run of `calls` calls: every one with `GPUFLEET_SWEEP=full`,
/// else the first, the middle and the last.
fn points(calls: u32) -> Vec<u32> {
    if std::env::var("GPUFLEET_SWEEP").is_ok_and(|v| v == "full") {
        return (0..calls).collect();
    }
    let mut p = vec![0, calls / 2, calls.saturating_sub(1)];
    p.dedup();
    p
}

fn run(s: &Session, target: Option<&str>) -> crate::Output {
    match target {
        Some(main_tf) => {
            s.write(main_tf);
            s.run(&["apply", "-auto-approve", "-input=false", "-no-color"])
        }
        None => s.run(&["destroy", "-auto-approve", "-input=false", "-no-color"]),
    }
}

fn counted(lines: &[String], want: &[String]) -> usize {
    let mut want = want.to_vec();
    lines
        .iter()
        .filter(|l| match want.iter().position(|w| w == *l) {
            Some(i) => {
                want.swap_remove(i);
                false
            }
            None => true,
        })
        .count()
}

/// Sweeps `case` with `cut`; panics when a re-run fails, the plan does not converge, or a
/// destroy fails, and counts orphans and duplicates. Prints the row.
///
/// # Panics
/// As above; the message names the point.
pub fn sweep(
    case: &Case,
    cut: Cut,
    controller: &dyn Controller,
    session: impl Fn(&str) -> Session,
) -> Row {
    let what = format!("{} {} ({cut:?})", case.kind, case.op);
    let first = case
        .before
        .first()
        .or(case.target.as_ref())
        .expect("a configuration");
    let prepared = || {
        let s = session(first);
        for c in &case.before {
            s.write(c);
            s.apply();
        }
        s
    };
    let (clean, calls) = {
        let s = prepared();
        controller.fail_after(COUNTING);
        let out = run(&s, case.target.as_deref());
        let calls = COUNTING - controller.calls_left();
        controller.heal();
        assert!(out.success(), "{what}, uninterrupted:\n{out}");
        let clean = controller.owned();
        if case.target.is_some() {
            s.destroy();
        }
        (clean, calls)
    };
    assert!(calls > 0, "{what} made no controller call");
    let mut row = Row {
        calls,
        ..Row::default()
    };
    for k in points(calls) {
        let s = prepared();
        let state_file = s.wd.path().join("terraform.tfstate");
        let state = std::fs::read(&state_file).ok();
        controller.fail_after(k);
        let out = run(&s, case.target.as_deref());
        controller.heal();
        row.points += 1;
        let absorbed = out.success() && cut == Cut::Fails;
        if absorbed {
            // Passing over a failure in silence would hide what it left until destroy.
            assert!(
                out.contains("Warning"),
                "{what}: call {k} failed unnoticed:\n{out}"
            );
            row.absorbed += 1;
        } else {
            if cut == Cut::Killed {
                let put_back = match &state {
                    Some(bytes) => std::fs::write(&state_file, bytes),
                    None => std::fs::remove_file(&state_file),
                };
                put_back.unwrap_or_else(|e| panic!("{what}: put the state back: {e}"));
            }
            let again = run(&s, case.target.as_deref());
            assert!(again.success(), "{what}, re-run after call {k}:\n{again}");
        }
        if case.target.is_some() {
            let plan = s.plan();
            assert_eq!(plan.status_code, 0, "{what}: plan after call {k}:\n{plan}");
            row.duplicates += counted(&controller.owned(), &clean);
            s.destroy();
        }
        row.orphans += controller.owned().len();
    }
    println!(
        "sweep-lab | {:<17} | {:<10} | {:<6} | {:>5} | {:>6} | {:>8} | {:>7} | {:>10}",
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
///
/// # Panics
/// As [`sweep`], and on an orphan or a duplicate.
pub fn sweep_both(case: &Case, controller: &dyn Controller, session: impl Fn(&str) -> Session) {
    for cut in [Cut::Fails, Cut::Killed] {
        let row = sweep(case, cut, controller, &session);
        assert_eq!(
            (row.orphans, row.duplicates),
            (0, 0),
            "{} {} ({cut:?}): orphans and duplicates",
            case.kind,
            case.op
        );
    }
}
