use std::{collections::BTreeMap, sync::Mutex};

use k8s_openapi::{api::coordination::v1::LeaseSpec, apimachinery::pkg::apis::meta::v1::MicroTime};
use kube::core::Status;

use super::{
    history::{with_release, with_turn},
    holder_id::identity,
    transitions::{duration_seconds, holder_of, released, renewed},
    *,
};

const SECOND: Duration = Duration::from_secs(1);

fn ts(s: &str) -> Timestamp {
    s.parse().expect("timestamp")
}

fn spec(holder: Option<&str>, duration: Option<i32>) -> LeaseSpec {
    LeaseSpec {
        holder_identity: holder.map(str::to_owned),
        lease_duration_seconds: duration,
        acquire_time: Some(MicroTime(ts("2026-01-01T00:00:00Z"))),
        renew_time: Some(MicroTime(ts("2026-01-01T00:00:05Z"))),
        ..LeaseSpec::default()
    }
}

fn lease_ref() -> LeaseRef {
    LeaseRef {
        namespace: "vc-a".to_owned(),
        name: "gpufleet-turn-a-train".to_owned(),
    }
}

// ---- staleness ----

#[test]
fn a_free_lease_or_our_own_is_taken_at_once() {
    let d = 15 * SECOND;
    for spec in [
        None,
        Some(spec(None, Some(15))),
        Some(spec(Some(""), Some(15))),
    ] {
        assert_eq!(
            decide(spec.as_ref(), "me", Duration::ZERO, d),
            Decision::Take { took_over: None }
        );
    }
    assert_eq!(
        decide(Some(&spec(Some("me"), Some(15))), "me", Duration::ZERO, d),
        Decision::Take { took_over: None }
    );
}

#[test]
fn another_holder_is_waited_for_until_it_has_not_renewed_for_its_duration() {
    let held = spec(Some("other"), Some(15));
    let Decision::Wait(holder) = decide(Some(&held), "me", 14 * SECOND, 3 * SECOND) else {
        panic!("a live turn must be waited for");
    };
    assert_eq!(holder.identity, "other");
    assert_eq!(holder.acquired, Some(ts("2026-01-01T00:00:00Z")));
    assert_eq!(holder.renewed, Some(ts("2026-01-01T00:00:05Z")));
    // The Lease's own duration counts, not the waiter's.
    assert_eq!(
        decide(Some(&held), "me", 15 * SECOND, 60 * SECOND),
        Decision::Take {
            took_over: Some("other".to_owned())
        }
    );
}

#[test]
fn a_lease_without_a_duration_goes_stale_after_the_waiters_own() {
    for duration in [None, Some(0), Some(-5)] {
        let held = spec(Some("other"), duration);
        assert!(matches!(
            decide(Some(&held), "me", 2 * SECOND, 3 * SECOND),
            Decision::Wait(_)
        ));
        assert_eq!(
            decide(Some(&held), "me", 3 * SECOND, 3 * SECOND),
            Decision::Take {
                took_over: Some("other".to_owned())
            }
        );
    }
}

// ---- history ----

fn turn(holder: &str, released: bool) -> Turn {
    Turn {
        holder: holder.to_owned(),
        acquired: ts("2026-01-01T00:00:00Z"),
        released: released.then(|| ts("2026-01-01T00:01:00Z")),
        took_over: None,
    }
}

#[test]
fn the_history_keeps_the_last_twenty_turns() {
    let mut h = Vec::new();
    for i in 0..25 {
        h = with_turn(h, turn(&format!("h{i}"), true));
    }
    assert_eq!(h.len(), HISTORY_LEN);
    assert_eq!(h[0].holder, "h5");
    assert_eq!(h[19].holder, "h24");
}

#[test]
fn a_release_closes_only_the_holders_open_turn() {
    let h = vec![turn("a", true), turn("b", false), turn("a", false)];
    let at = ts("2026-01-01T00:09:00Z");
    let h = with_release(h, "a", at);
    assert_eq!(h[0].released, Some(ts("2026-01-01T00:01:00Z")));
    assert_eq!(h[1].released, None);
    assert_eq!(h[2].released, Some(at));
}

#[test]
fn the_history_is_json_with_null_for_unreleased_turns() {
    let mut taken_over = turn("b", false);
    taken_over.took_over = Some("a".to_owned());
    let json = serde_json::to_value([turn("a", true), taken_over]).expect("json");
    assert_eq!(
        json,
        serde_json::json!([
            {"holder": "a", "acquired": "2026-01-01T00:00:00Z", "released": "2026-01-01T00:01:00Z"},
            {"holder": "b", "acquired": "2026-01-01T00:00:00Z", "released": null, "took_over": "a"},
        ])
    );
}

#[test]
fn an_edited_history_reads_as_none() {
    let mut lease = Lease::default();
    assert!(history(&lease).is_empty());
    lease.metadata.annotations = Some(BTreeMap::from([(
        HISTORY_ANNOTATION.to_owned(),
        "not json".to_owned(),
    )]));
    assert!(history(&lease).is_empty());
}

// ---- the Lease as written ----

#[test]
fn a_new_lease_is_held_with_its_duration_and_first_turn() {
    let now = ts("2026-02-02T10:00:00.123456Z");
    let lease = taken(&lease_ref(), None, "me", 15 * SECOND, now, None);
    assert_eq!(
        lease.metadata.name.as_deref(),
        Some("gpufleet-turn-a-train")
    );
    assert_eq!(lease.metadata.namespace.as_deref(), Some("vc-a"));
    assert_eq!(
        lease
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(MANAGED_BY)),
        Some(&MANAGED_BY_VALUE.to_owned())
    );
    let spec = lease.spec.clone().expect("spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("me"));
    assert_eq!(spec.lease_duration_seconds, Some(15));
    assert_eq!(spec.lease_transitions, Some(0));
    assert_eq!(spec.acquire_time, Some(MicroTime(now)));
    assert_eq!(spec.renew_time, Some(MicroTime(now)));
    assert_eq!(
        history(&lease),
        vec![Turn {
            holder: "me".to_owned(),
            acquired: now,
            released: None,
            took_over: None,
        }]
    );
}

#[test]
fn a_takeover_counts_a_transition_and_names_the_old_holder() {
    let t0 = ts("2026-02-02T10:00:00Z");
    let t1 = ts("2026-02-02T10:05:00Z");
    let old = taken(&lease_ref(), None, "old", 15 * SECOND, t0, None);
    let new = taken(
        &lease_ref(),
        Some(&old),
        "new",
        20 * SECOND,
        t1,
        Some("old".to_owned()),
    );
    let spec = new.spec.clone().expect("spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("new"));
    assert_eq!(spec.lease_transitions, Some(1));
    assert_eq!(spec.acquire_time, Some(MicroTime(t1)));
    assert_eq!(spec.lease_duration_seconds, Some(20));
    let h = history(&new);
    assert_eq!(h.len(), 2);
    assert_eq!(h[0].released, None, "the stale turn never released");
    assert_eq!(h[1].took_over.as_deref(), Some("old"));
}

#[test]
fn a_release_clears_the_holder_and_closes_the_turn() {
    let t0 = ts("2026-02-02T10:00:00Z");
    let t1 = ts("2026-02-02T10:00:30Z");
    let held = taken(&lease_ref(), None, "me", 15 * SECOND, t0, None);
    let renewed = renewed(&held, t1);
    assert_eq!(
        renewed.spec.as_ref().and_then(|s| s.renew_time.clone()),
        Some(MicroTime(t1))
    );
    assert_eq!(history(&renewed), history(&held), "a renewal is not a turn");
    let free = released(&renewed, "me", t1);
    assert_eq!(holder_of(&free), None);
    assert_eq!(history(&free)[0].released, Some(t1));
    // The next holder's turn is a transition.
    let next = taken(&lease_ref(), Some(&free), "next", 15 * SECOND, t1, None);
    assert_eq!(next.spec.and_then(|s| s.lease_transitions), Some(1));
}

#[test]
fn durations_are_whole_seconds_rounded_up() {
    assert_eq!(duration_seconds(15 * SECOND), 15);
    assert_eq!(duration_seconds(Duration::from_millis(2500)), 3);
    assert_eq!(duration_seconds(Duration::ZERO), 1);
}

// ---- identity ----

#[test]
fn identities_name_the_host_process_and_pipeline_run() {
    let env = |name: &str| match name {
        "TFC_RUN_ID" => Some("run-abc123".to_owned()),
        "CI_PIPELINE_ID" => Some("  ".to_owned()),
        _ => None,
    };
    assert_eq!(
        identity("runner-7", 4242, "x9k2q1", env),
        "runner-7/4242/x9k2q1 TFC_RUN_ID=run-abc123"
    );
    assert_eq!(identity("runner-7", 1, "a", |_| None), "runner-7/1/a");
}

#[test]
fn every_identity_is_a_new_holder_of_this_process() {
    let (a, b) = (holder_identity(), holder_identity());
    assert_ne!(a, b);
    let pid = format!("/{}/", std::process::id());
    assert!(a.contains(&pid), "{a}");
    assert!(!a.starts_with('/'), "{a} names the host");
}

// ---- taking turns, against a Lease kept in memory ----

type Interference = Box<dyn FnOnce(&mut Lease) + Send>;

/// A Lease store with the API server's optimistic concurrency: creating an existing Lease
/// and replacing with a stale resourceVersion are both 409s.
#[derive(Default)]
struct Memory {
    lease: Mutex<Option<Lease>>,
    version: Mutex<u64>,
    /// Failures the next reads return, in order.
    failing_reads: Mutex<Vec<kube::Error>>,
    /// A write by somebody else, made just before our next replace lands.
    interference: Mutex<Option<Interference>>,
}

fn api_error(code: u16, reason: &str) -> kube::Error {
    kube::Error::Api(Box::new(Status::failure(reason, reason).with_code(code)))
}

impl Memory {
    fn snapshot(&self) -> Lease {
        self.lease
            .lock()
            .expect("lock")
            .clone()
            .expect("the Lease exists")
    }

    fn bump(&self, lease: &mut Lease) {
        let mut v = self.version.lock().expect("lock");
        *v += 1;
        lease.metadata.resource_version = Some(v.to_string());
    }

    /// Writes `change` as another client would.
    fn write(&self, change: impl FnOnce(&mut Lease)) {
        let mut lease = self.snapshot();
        change(&mut lease);
        self.bump(&mut lease);
        *self.lease.lock().expect("lock") = Some(lease);
    }
}

#[async_trait]
impl LeaseStore for Memory {
    async fn get(&self) -> Result<Option<Lease>, kube::Error> {
        if let Some(e) = self.failing_reads.lock().expect("lock").pop() {
            return Err(e);
        }
        Ok(self.lease.lock().expect("lock").clone())
    }

    async fn create(&self, lease: &Lease) -> Result<Lease, kube::Error> {
        if self.lease.lock().expect("lock").is_some() {
            return Err(api_error(409, "AlreadyExists"));
        }
        let mut lease = lease.clone();
        self.bump(&mut lease);
        *self.lease.lock().expect("lock") = Some(lease.clone());
        Ok(lease)
    }

    async fn replace(&self, lease: &Lease) -> Result<Lease, kube::Error> {
        let interference = self.interference.lock().expect("lock").take();
        if let Some(change) = interference {
            self.write(change);
        }
        let stored = self.lease.lock().expect("lock").clone();
        let Some(stored) = stored else {
            return Err(api_error(404, "NotFound"));
        };
        if stored.metadata.resource_version != lease.metadata.resource_version {
            return Err(api_error(409, "Conflict"));
        }
        let mut lease = lease.clone();
        self.bump(&mut lease);
        *self.lease.lock().expect("lock") = Some(lease.clone());
        Ok(lease)
    }
}

fn turn_on(store: &Arc<Memory>, holder: &str, duration: Duration) -> TurnLease {
    TurnLease {
        store: Arc::clone(store) as Arc<dyn LeaseStore>,
        lease: lease_ref(),
        holder: holder.to_owned(),
        duration,
    }
}

async fn take(store: &Arc<Memory>, holder: &str, duration: Duration) -> TurnGuard {
    turn_on(store, holder, duration)
        .acquire(&CancellationToken::new(), |_| {})
        .await
        .expect("the turn")
}

#[tokio::test(start_paused = true)]
async fn concurrent_turns_never_overlap_and_all_are_recorded() {
    let store = Arc::new(Memory::default());
    let mut runs = Vec::new();
    for i in 0..3 {
        let store = Arc::clone(&store);
        runs.push(tokio::spawn(async move {
            let guard = take(&store, &format!("run-{i}"), 3 * SECOND).await;
            let start = Instant::now();
            // Longer than the lease duration: the turn lives on renewals.
            tokio::time::sleep(10 * SECOND).await;
            assert!(!guard.is_lost());
            let end = Instant::now();
            guard.release().await.expect("release");
            (start, end)
        }));
    }
    let mut spans = Vec::new();
    for run in runs {
        spans.push(run.await.expect("run"));
    }
    spans.sort();
    for pair in spans.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "turns overlap: {spans:?}");
    }
    let lease = store.snapshot();
    let h = history(&lease);
    assert_eq!(h.len(), 3, "{h:?}");
    assert!(
        h.iter()
            .all(|t| t.released.is_some() && t.took_over.is_none()),
        "{h:?}"
    );
    assert_eq!(holder_of(&lease), None);
    assert_eq!(lease.spec.and_then(|s| s.lease_transitions), Some(2));
}

#[tokio::test(start_paused = true)]
async fn a_holder_that_stops_renewing_is_taken_over_after_the_lease_duration() {
    let store = Arc::new(Memory::default());
    let dead = take(&store, "dead", 3 * SECOND).await;
    tokio::time::sleep(5 * SECOND).await; // renewed meanwhile
    let stopped = Instant::now();
    drop(dead);
    let mut waited_for = Vec::new();
    let next = turn_on(&store, "next", 15 * SECOND)
        .acquire(&CancellationToken::new(), |h| {
            waited_for.push(h.identity.clone());
        })
        .await
        .expect("the turn");
    let waited = stopped.elapsed();
    assert!(
        waited >= 3 * SECOND && waited < 5 * SECOND,
        "taken over after {waited:?}"
    );
    assert_eq!(waited_for, ["dead"]);
    let h = history(&store.snapshot());
    assert_eq!(h.len(), 2);
    assert_eq!((h[0].holder.as_str(), h[0].released), ("dead", None));
    assert_eq!(h[1].took_over.as_deref(), Some("dead"));
    assert_eq!(
        store.snapshot().spec.and_then(|s| s.lease_transitions),
        Some(1)
    );
    next.release().await.expect("release");
}

#[tokio::test(start_paused = true)]
async fn a_release_lets_the_waiter_go_at_once() {
    let store = Arc::new(Memory::default());
    let first = take(&store, "first", 15 * SECOND).await;
    let waiter = {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            let guard = take(&store, "second", 15 * SECOND).await;
            (Instant::now(), guard)
        })
    };
    tokio::time::sleep(20 * SECOND).await;
    assert!(
        !waiter.is_finished(),
        "the waiter must wait for a live turn"
    );
    let released_at = Instant::now();
    first.release().await.expect("release");
    let (taken_at, second) = waiter.await.expect("waiter");
    assert!(
        taken_at - released_at <= 2 * SECOND,
        "the waiter went {:?} after the release",
        taken_at - released_at
    );
    assert_eq!(holder_of(&store.snapshot()), Some("second"));
    second.release().await.expect("release");
}

#[tokio::test(start_paused = true)]
async fn a_write_between_read_and_write_is_a_lost_race_not_an_error() {
    let store = Arc::new(Memory::default());
    let first = take(&store, "first", 3 * SECOND).await;
    first.release().await.expect("release");
    // Another process takes the free Lease just before our write lands.
    *store.interference.lock().expect("lock") = Some(Box::new(|l: &mut Lease| {
        *l = taken(
            &lease_ref(),
            Some(l),
            "sneaky",
            60 * SECOND,
            wall_now(),
            None,
        );
    }));
    let cancel = CancellationToken::new();
    let waiting = {
        let (store, cancel) = (Arc::clone(&store), cancel.clone());
        tokio::spawn(async move {
            let mut seen = Vec::new();
            let r = turn_on(&store, "me", 3 * SECOND)
                .acquire(&cancel, |h| seen.push(h.identity.clone()))
                .await;
            (r, seen)
        })
    };
    tokio::time::sleep(10 * SECOND).await;
    cancel.cancel();
    let (result, seen) = waiting.await.expect("waiter");
    assert_eq!(seen, ["sneaky"], "the winner is waited for");
    match result {
        Err(LeaseError::Cancelled { holder, .. }) => assert_eq!(holder.as_deref(), Some("sneaky")),
        other => panic!(
            "expected a cancelled wait, got {:?}",
            other.map(|g| g.holder().to_owned())
        ),
    }
    assert_eq!(holder_of(&store.snapshot()), Some("sneaky"));
}

#[tokio::test(start_paused = true)]
async fn a_turn_taken_by_another_holder_is_lost_and_left_to_it() {
    let store = Arc::new(Memory::default());
    let mine = take(&store, "me", 3 * SECOND).await;
    store.write(|l| {
        *l = taken(
            &lease_ref(),
            Some(l),
            "other",
            3 * SECOND,
            wall_now(),
            Some("me".into()),
        );
    });
    tokio::time::timeout(5 * SECOND, mine.lost())
        .await
        .expect("the next renewal notices");
    assert!(mine.is_lost());
    mine.release().await.expect("release");
    assert_eq!(holder_of(&store.snapshot()), Some("other"));
}

#[tokio::test(start_paused = true)]
async fn failed_reads_are_ridden_out_unless_refused() {
    let store = Arc::new(Memory::default());
    *store.failing_reads.lock().expect("lock") = (0..3)
        .map(|_| api_error(503, "ServiceUnavailable"))
        .collect();
    let guard = take(&store, "me", 3 * SECOND).await;
    guard.release().await.expect("release");

    *store.failing_reads.lock().expect("lock") = vec![api_error(403, "Forbidden")];
    let refused = turn_on(&store, "me", 3 * SECOND)
        .acquire(&CancellationToken::new(), |_| {})
        .await;
    let Err(e) = refused else {
        panic!("a refusal must fail the acquire");
    };
    assert!(matches!(e, LeaseError::Call { call: "read", .. }), "{e}");
    assert!(
        e.to_string()
            .starts_with("failed to read Lease gpufleet-turn-a-train in vc-a: "),
        "{e}"
    );
}
