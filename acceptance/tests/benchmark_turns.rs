//! Benchmark runs on one pool take turns across processes, on a `coordination.k8s.io` Lease
//! of the shared lab's real API server: concurrent holders never overlap, a holder that stops
//! renewing (a killed process) is taken over once its Lease expires, a release lets the next
//! waiter go at once, and two `terraform apply` processes benchmarking one pool run one after
//! the other, as the Lease's holder history shows.
//!
//! The Lease-level tests use Leases of their own in `default`; the Terraform test has its own
//! tenant with one A100 node.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use gpufleet_acceptance::Session;
use gpufleet_engine::{
    backends::kube::{
        POOL,
        lease::{
            HISTORY_ANNOTATION, LeaseRef, Turn, TurnGuard, TurnLease, history, holder_identity,
        },
    },
    context::Context,
    resources::benchmark::{model::PoolRef, turn_name::turn_lease},
    tenancy::pool_label,
};
use gpufleet_lab::Lab;
use k8s_openapi::{
    api::{coordination::v1::Lease, core::v1::Node},
    jiff::Timestamp,
};
use kube::{
    Api,
    api::{DeleteParams, ListParams, Patch, PatchParams},
};

const A100: &str = "NVIDIA-A100-SXM4-80GB";
const SECOND: Duration = Duration::from_secs(1);

/// A fresh Lease `name` in `default` (one left by an earlier run is deleted).
async fn fresh_lease(client: &kube::Client, name: &str) -> LeaseRef {
    let api: Api<Lease> = Api::namespaced(client.clone(), "default");
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => panic!("delete Lease {name}: {e}"),
    }
    LeaseRef {
        namespace: "default".to_owned(),
        name: name.to_owned(),
    }
}

async fn read(client: &kube::Client, lease: &LeaseRef) -> Lease {
    Api::<Lease>::namespaced(client.clone(), &lease.namespace)
        .get(&lease.name)
        .await
        .expect("the Lease")
}

async fn take(client: &kube::Client, lease: &LeaseRef, duration: Duration) -> TurnGuard {
    TurnLease::new(client.clone(), lease.clone(), holder_identity(), duration)
        .acquire(&Context::default().cancel, |_| {})
        .await
        .expect("the turn")
}

/// Asserts that the recorded turns never overlap: each was released before the next began.
fn assert_one_after_another(turns: &[Turn]) {
    for pair in turns.windows(2) {
        let released = pair[0].released.expect("every turn released");
        assert!(released <= pair[1].acquired, "turns overlap: {turns:#?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_holders_never_overlap_and_the_history_shows_every_turn() {
    let client = Lab::shared().client();
    let lease = fresh_lease(&client, "turns-concurrent").await;
    let mut runs = Vec::new();
    for _ in 0..2 {
        let (client, lease) = (client.clone(), lease.clone());
        runs.push(tokio::spawn(async move {
            let guard = take(&client, &lease, 15 * SECOND).await;
            let holder = guard.holder().to_owned();
            let start = Instant::now();
            tokio::time::sleep(3 * SECOND).await;
            let end = Instant::now();
            assert!(!guard.is_lost(), "{holder} lost its turn");
            guard.release().await.expect("release");
            (start, end, holder)
        }));
    }
    let mut spans = Vec::new();
    for run in runs {
        spans.push(run.await.expect("run"));
    }
    spans.sort();
    assert!(spans[0].1 <= spans[1].0, "the turns overlap: {spans:?}");

    let now = read(&client, &lease).await;
    assert_eq!(
        now.spec.as_ref().and_then(|s| s.holder_identity.clone()),
        None
    );
    let turns = history(&now);
    let holders: Vec<&str> = turns.iter().map(|t| t.holder.as_str()).collect();
    assert_eq!(
        holders,
        [spans[0].2.as_str(), spans[1].2.as_str()],
        "{turns:#?}"
    );
    assert_one_after_another(&turns);
    assert!(
        now.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(HISTORY_ANNOTATION))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_that_stops_renewing_is_taken_over_once_its_lease_expires() {
    let client = Lab::shared().client();
    let lease = fresh_lease(&client, "turns-takeover").await;
    let dead = take(&client, &lease, 3 * SECOND).await;
    let dead_holder = dead.holder().to_owned();
    // Longer than the lease duration: the holder lives on its renewals.
    tokio::time::sleep(5 * SECOND).await;
    assert!(!dead.is_lost());
    // What a killed process does: it stops renewing, and releases nothing.
    drop(dead);
    let stopped = Instant::now();
    let last_renewed = read(&client, &lease)
        .await
        .spec
        .and_then(|s| s.renew_time)
        .expect("renewTime")
        .0;

    let mut waited_for = Vec::new();
    let next = TurnLease::new(
        client.clone(),
        lease.clone(),
        holder_identity(),
        15 * SECOND,
    )
    .acquire(&Context::default().cancel, |h| {
        waited_for.push(h.identity.clone());
    })
    .await
    .expect("the turn");
    let waited = stopped.elapsed();
    assert_eq!(waited_for, [dead_holder.as_str()]);
    assert!(
        waited >= 3 * SECOND && waited < 8 * SECOND,
        "taken over {waited:?} after the holder stopped"
    );

    let now = read(&client, &lease).await;
    assert_eq!(now.spec.as_ref().and_then(|s| s.lease_transitions), Some(1));
    let turns = history(&now);
    assert_eq!(turns.len(), 2, "{turns:#?}");
    assert_eq!(turns[0].holder, dead_holder);
    assert_eq!(turns[0].released, None, "the dead holder never released");
    assert_eq!(turns[1].holder, next.holder());
    assert_eq!(turns[1].took_over.as_deref(), Some(dead_holder.as_str()));
    let expired = last_renewed
        .checked_add(3 * SECOND)
        .expect("a timestamp in range");
    assert!(
        turns[1].acquired >= expired,
        "taken over at {} before the Lease expired at {expired}",
        turns[1].acquired
    );
    next.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_lets_the_waiter_go_at_once() {
    let client = Lab::shared().client();
    let lease = fresh_lease(&client, "turns-release").await;
    let first = take(&client, &lease, 15 * SECOND).await;
    let waiting = Arc::new(AtomicBool::new(false));
    let waiter = {
        let (client, lease, waiting) = (client.clone(), lease.clone(), Arc::clone(&waiting));
        tokio::spawn(async move {
            let guard = TurnLease::new(client, lease, holder_identity(), 15 * SECOND)
                .acquire(&Context::default().cancel, |_| {
                    waiting.store(true, Ordering::SeqCst);
                })
                .await
                .expect("the turn");
            (Instant::now(), guard)
        })
    };
    let deadline = Instant::now() + 10 * SECOND;
    while !waiting.load(Ordering::SeqCst) {
        assert!(Instant::now() < deadline, "the waiter never waited");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(2 * SECOND).await;
    assert!(!waiter.is_finished(), "the waiter took a live turn");

    let released = Instant::now();
    first.release().await.expect("release");
    let (taken, second) = waiter.await.expect("waiter");
    // Without the release it would wait out the 15 s lease duration.
    assert!(
        taken - released < 3 * SECOND,
        "the waiter went {:?} after the release",
        taken - released
    );
    second.release().await.expect("release");
}

/// A dedicated tenant `tenant` with a pool of one A100 node.
fn pool_config(tenant: &str) -> String {
    format!(
        r#"
terraform {{
  required_providers {{
    gpufleet = {{ source = "gpufleet/gpufleet" }}
  }}
}}

provider "gpufleet" {{}}

resource "gpufleet_virtual_cluster" "t" {{
  name      = "{tenant}"
  isolation = "dedicated"
}}

resource "gpufleet_gpu_node_pool" "p" {{
  name               = "a100"
  virtual_cluster_id = gpufleet_virtual_cluster.t.id
  gpu_product        = "{A100}"
  node_count         = 1
}}
"#
    )
}

/// A gpu-burn benchmark `name` on an existing pool, in a configuration of its own; `extra`
/// is more attribute lines.
fn benchmark_config(name: &str, vc_id: &str, pool_id: &str, extra: &str) -> String {
    format!(
        r#"
terraform {{
  required_providers {{
    gpufleet = {{ source = "gpufleet/gpufleet" }}
  }}
}}

provider "gpufleet" {{}}

resource "gpufleet_benchmark" "b" {{
  name               = "{name}"
  virtual_cluster_id = "{vc_id}"
  node_pool_id       = "{pool_id}"
  suite              = "gpu-burn"
  image              = "nvcr.io/nvidia/pytorch:25.04-py3"
  {extra}
}}
"#
    )
}

/// The virtual cluster's and the pool's ids from the state of a [`pool_config`] session.
fn ids(pool: &Session) -> (String, String) {
    let id = |address: &str| {
        pool.resource(address)["id"]
            .as_str()
            .unwrap_or_else(|| panic!("{address} has an id"))
            .to_owned()
    };
    (
        id("gpufleet_virtual_cluster.t"),
        id("gpufleet_gpu_node_pool.p"),
    )
}

/// Who holds the pool's turn now, if anybody (and if the Lease exists yet).
fn holder_now(lab: &Lab, pool_id: &str) -> Option<String> {
    let lease = turn_lease(&PoolRef::parse(pool_id).expect("a pool id"));
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(async {
            Api::<Lease>::namespaced(lab.client(), &lease.namespace)
                .get_opt(&lease.name)
                .await
                .expect("read the Lease")
        })
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
}

/// Cordons (or uncordons) the nodes the pool holds.
fn cordon_pool(lab: &Lab, pool_id: &str, cordoned: bool) {
    let pool = PoolRef::parse(pool_id).expect("a pool id");
    let selector = format!("{POOL}={}", pool_label(&pool.vc.name, &pool.name));
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(async {
            let nodes = Api::<Node>::all(lab.client());
            let held = nodes
                .list(&ListParams::default().labels(&selector))
                .await
                .expect("list the pool's nodes");
            assert!(!held.items.is_empty(), "the pool holds a node");
            let patch = serde_json::json!({ "spec": { "unschedulable": cordoned } });
            for n in held.items {
                let name = n.metadata.name.unwrap_or_default();
                nodes
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .expect("cordon the node");
            }
        });
}

/// The pool's turn Lease as the lab's API server has it now.
fn lease_now(lab: &Lab, pool_id: &str) -> Lease {
    let lease = turn_lease(&PoolRef::parse(pool_id).expect("a pool id"));
    // The client's connection pool lives on the runtime it is made in.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(async { read(&lab.client(), &lease).await })
}

/// Two `terraform apply` processes, each with a benchmark on the same pool, started together:
/// the benchmarks take turns on the pool's Lease, and its history shows two turns by two
/// processes, one after the other.
#[test]
fn two_terraform_applies_on_one_pool_take_turns() {
    let lab = Lab::shared();
    let pool = Session::new(&pool_config("bench-turns"), lab.settings_env());
    let _pool_cleanup = pool.destroy_on_panic();
    pool.apply();
    let (vc_id, pool_id) = ids(&pool);

    let benchmark = |name: &str| benchmark_config(name, &vc_id, &pool_id, "");
    let sessions: Vec<Session> = ["turn-a", "turn-b"]
        .into_iter()
        .map(|name| Session::new(&benchmark(name), lab.settings_env()))
        .collect();
    std::thread::scope(|scope| {
        let applies: Vec<_> = sessions
            .iter()
            .map(|s| scope.spawn(move || s.apply()))
            .collect();
        for apply in applies {
            apply.join().expect("terraform apply");
        }
    });
    for s in &sessions {
        let r = s.resource("gpufleet_benchmark.b");
        assert_eq!(r["status"], "passed", "{r:#}");
    }

    // The runs as their records tell them: one after the other.
    let mut spans: Vec<(Timestamp, Timestamp)> = sessions
        .iter()
        .map(|s| {
            let r = s.resource("gpufleet_benchmark.b");
            let at = |key: &str| -> Timestamp {
                r[key]
                    .as_str()
                    .and_then(|t| t.parse().ok())
                    .unwrap_or_else(|| panic!("{key}: {r:#}"))
            };
            (at("started_at"), at("finished_at"))
        })
        .collect();
    spans.sort();
    assert!(spans[0].1 <= spans[1].0, "the runs overlap: {spans:?}");

    // The runs as the pool's Lease tells them: two turns, by two processes, one after the other.
    let now = lease_now(lab, &pool_id);
    let turns = history(&now);
    let last_two = &turns[turns.len().saturating_sub(2)..];
    assert_eq!(last_two.len(), 2, "{turns:#?}");
    assert_one_after_another(last_two);
    let pid = |t: &Turn| t.holder.split('/').nth(1).map(str::to_owned);
    assert_ne!(
        pid(&last_two[0]),
        pid(&last_two[1]),
        "two provider processes: {last_two:#?}"
    );

    for s in &sessions {
        s.destroy();
    }
    pool.destroy();
}

/// A provider killed while it holds the pool's turn stops renewing it: the next `terraform
/// apply` on the pool waits until the turn has gone a lease duration without renewal, then
/// takes it over, and the Lease's history says whom it took over from.
#[test]
fn a_killed_providers_turn_is_taken_over_once_it_expires() {
    let lab = Lab::shared();
    let pool = Session::new(&pool_config("bench-turn-kill"), lab.settings_env());
    let _pool_cleanup = pool.destroy_on_panic();
    pool.apply();
    let (vc_id, pool_id) = ids(&pool);

    // A run that holds the turn for a minute: the pool's node is cordoned, so its pod stays
    // Pending and it waits out its start_timeout. (Asking for more GPUs than the node has
    // would be refused at plan.)
    cordon_pool(lab, &pool_id, true);
    let stuck = Session::new(
        &benchmark_config("stuck", &vc_id, &pool_id, "start_timeout = \"60s\""),
        lab.settings_env(),
    );
    let mut apply = stuck.spawn(&["apply", "-auto-approve", "-input=false", "-no-color"]);
    let deadline = Instant::now() + 120 * SECOND;
    let holder = loop {
        if let Some(h) = holder_now(lab, &pool_id) {
            break h;
        }
        assert!(
            Instant::now() < deadline,
            "the stuck run never took the turn"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let killed = gpufleet_acceptance::process::kill_providers_of(&apply);
    let killed_at = Timestamp::now();
    let _ = apply.wait();
    assert!(!killed.is_empty(), "a provider was running");
    cordon_pool(lab, &pool_id, false);

    let next = Session::new(
        &benchmark_config("next", &vc_id, &pool_id, ""),
        lab.settings_env(),
    );
    next.apply();
    let r = next.resource("gpufleet_benchmark.b");
    assert_eq!(r["status"], "passed", "{r:#}");

    let turns = history(&lease_now(lab, &pool_id));
    let last = turns.last().expect("a turn");
    assert_eq!(
        last.took_over.as_deref(),
        Some(holder.as_str()),
        "{turns:#?}"
    );
    // Renewed every 5 s, it expires 15 s after its last renewal: at least 10 s after the kill.
    let waited = last.acquired.duration_since(killed_at);
    assert!(
        waited.as_secs() >= 9,
        "taken over {waited:?} after the kill, before the turn expired: {turns:#?}"
    );
    next.destroy();
    pool.destroy();
}
