//! Scripted scenarios: the exact controller calls of each operation, in order. A missing,
//! extra or reordered call fails the test; the create and delete sequences, with their request
//! bodies, are also `insta` snapshots, so a change to what gpufleet sends shows up in review.
//! The counts double as the "API calls per resource" figures: a refresh is one call.

#[path = "support/network_segment.rs"]
mod support;

use std::sync::Arc;

use gpufleet_engine::value::Value;
use gpufleet_engine::{backends::netris::Cached, resources::network_segment::NetworkSegment};
use support::{Action, FakeNetris, Terraform, kind, member, segment};

/// The calls made since the last check, without bodies.
fn routes(fake: &Arc<FakeNetris>) -> Vec<String> {
    fake.take_log()
        .into_iter()
        .map(|l| match l.split_once(" {") {
            Some((route, _)) => route.to_owned(),
            None => l,
        })
        .collect()
}

#[track_caller]
fn expect(fake: &Arc<FakeNetris>, want: &[&str]) {
    assert_eq!(routes(fake), want);
}

#[tokio::test(start_paused = true)]
async fn create_sequence() {
    let fake = FakeNetris::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    let c = segment(
        &k,
        &[(
            "members",
            Value::set(vec![
                member(None, Some("gpu-001"), None),
                member(Some("swp10@leaf-01"), None, Some(true)),
            ]),
        )],
    );
    tf.apply_ok(&c).await;
    let log = fake.take_log();
    insta::assert_snapshot!("create", log.join("\n"));
    let routes: Vec<&str> = log
        .iter()
        .map(|l| l.split(" {").next().unwrap_or(l))
        .collect();
    assert_eq!(
        routes,
        [
            // Plan: the tenant, VPC and site exist, the member host is in the inventory,
            // and the CIDR overlaps no allocation of the VPC.
            "GET /api/tenants",
            "GET /api/v2/vpc",
            "GET /api/v2/sites",
            "GET /api/v2/hw/server",
            "GET /api/v2/ipam?filterByVpc=2",
            // Apply checks again, then creates.
            "GET /api/tenants",
            "GET /api/v2/vpc",
            "GET /api/v2/sites",
            "GET /api/v2/hw/server",
            "GET /api/v2/ipam?filterByVpc=2",
            "POST /api/v2/ipam/allocation",
            "POST /api/v2/ipam/subnet",
            "GET /api/v2/vnet?filterByVpc=2",
            "POST /api/v2/vnet",
            // Provisioning for one read, then done.
            "GET /api/v2/vnet/103",
            "GET /api/v2/vnet/103",
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn refresh_is_one_call() {
    let fake = FakeNetris::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    let c = segment(&k, &[]);
    tf.apply_ok(&c).await;
    fake.take_log();
    tf.plan(&c).await;
    expect(&fake, &["GET /api/v2/vnet/103"]);
}

#[tokio::test(start_paused = true)]
async fn member_update_sequence() {
    let fake = FakeNetris::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&segment(&k, &[])).await;
    fake.take_log();
    let c = segment(
        &k,
        &[(
            "members",
            Value::set(vec![member(None, Some("gpu-002"), None)]),
        )],
    );
    tf.apply_ok(&c).await;
    // Refresh; plan checks the new member against the server inventory; apply reads the
    // V-Net, resolves the member's ports and writes the V-Net.
    expect(
        &fake,
        &[
            "GET /api/v2/vnet/103",
            "GET /api/v2/hw/server",
            "GET /api/v2/vnet/103",
            "GET /api/v2/hw/server",
            "PUT /api/v2/vnet/103",
            "GET /api/v2/vnet/103",
            "GET /api/v2/vnet/103",
        ],
    );
}

#[tokio::test(start_paused = true)]
async fn gateway_update_moves_the_subnet_gateway_first() {
    let fake = FakeNetris::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&segment(&k, &[])).await;
    fake.take_log();
    tf.apply_ok(&segment(&k, &[("gateway", Value::string("10.20.0.254"))]))
        .await;
    expect(
        &fake,
        &[
            "GET /api/v2/vnet/103",
            "GET /api/v2/vnet/103",
            "PUT /api/v2/ipam/subnet/102",
            "PUT /api/v2/vnet/103",
            "GET /api/v2/vnet/103",
            "GET /api/v2/vnet/103",
        ],
    );
}

#[tokio::test(start_paused = true)]
async fn delete_sequence() {
    let fake = FakeNetris::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&segment(&k, &[])).await;
    fake.take_log();
    assert!(!tf.destroy().await.has_error());
    let log = fake.take_log();
    insta::assert_snapshot!("delete", log.join("\n"));
    assert_eq!(
        log,
        [
            // The refresh before the plan.
            "GET /api/v2/vnet/103",
            "DELETE /api/v2/vnet/103",
            // Gone: the subnet may go now.
            "GET /api/v2/vnet/103",
            "DELETE /api/v2/ipam/subnet/102",
            "DELETE /api/v2/ipam/allocation/101",
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn retried_create_adopts_instead_of_posting_again() {
    let fake = FakeNetris::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    let c = segment(&k, &[]);
    // The first apply stops after the allocation was created but its answer was lost.
    fake.fail_next("POST /api/v2/ipam/allocation", support::Fault::LostAnswer);
    let (_, d) = tf.apply(&c).await;
    assert!(d.has_error());
    // Nothing recorded: Terraform keeps no state, the next apply is a plain create.
    assert!(tf.state.is_null());
    fake.take_log();
    tf.apply_ok(&c).await;
    let calls = routes(&fake);
    assert!(
        !calls.contains(&"POST /api/v2/ipam/allocation".to_owned()),
        "{calls:?}"
    );
    assert_eq!(fake.counts(), (1, 1, 1));
}

/// The segment kind over `fake`, with the lists of one provider process kept and one poll per
/// VPC, as the provider runs it.
fn cached_kind(fake: &Arc<FakeNetris>) -> NetworkSegment<Arc<Cached<FakeNetris>>> {
    NetworkSegment(Arc::new(Cached::new(Arc::clone(fake))))
}

#[tokio::test(start_paused = true)]
async fn many_segments_in_one_process_share_their_lists_and_one_poll() {
    let fake = FakeNetris::new();
    let k = cached_kind(&fake);
    let n: usize = 20;
    let configs: Vec<Value> = (0..n)
        .map(|i| {
            segment(
                &k,
                &[
                    ("name", Value::string(format!("seg-{i}"))),
                    ("cidr", Value::string(format!("10.30.{i}.0/24"))),
                ],
            )
        })
        .collect();
    let mut runs: Vec<Terraform> = configs.iter().map(|_| Terraform::new(&k)).collect();
    futures_util::future::join_all(runs.iter_mut().zip(&configs).map(|(tf, c)| tf.apply_ok(c)))
        .await;
    let calls = routes(&fake);
    let count = |route: &str| calls.iter().filter(|c| c.as_str() == route).count();
    // Every segment wrote its three objects; nothing else was asked more than once, except
    // the polls of the V-Nets being provisioned, which are one list for all of them.
    for post in [
        "POST /api/v2/ipam/allocation",
        "POST /api/v2/ipam/subnet",
        "POST /api/v2/vnet",
    ] {
        assert_eq!(count(post), n, "{post}: {calls:#?}");
    }
    for list in [
        "GET /api/tenants",
        "GET /api/v2/vpc",
        "GET /api/v2/sites",
        "GET /api/v2/ipam?filterByVpc=2",
    ] {
        assert_eq!(count(list), 1, "{list}: {calls:#?}");
    }
    assert_eq!(count("GET /api/v2/vnet/{id}"), 0, "{calls:#?}");
    let polls = count("GET /api/v2/vnet?filterByVpc=2");
    assert!(
        calls.len() <= 4 * n,
        "{} calls for {n} segments (polls: {polls}): {calls:#?}",
        calls.len()
    );
    for tf in &runs {
        assert_eq!(tf.state.get("status").as_str(), Some("active"));
    }
}

#[tokio::test(start_paused = true)]
async fn a_replacement_under_the_same_name_does_not_adopt_what_it_deleted() {
    let fake = FakeNetris::new();
    let first_run = cached_kind(&fake);
    let mut tf = Terraform::new(&first_run);
    tf.apply_ok(&segment(&first_run, &[])).await;
    let first = tf.state.get("allocation_id").clone();
    // The next run (a new process) replaces the segment under the same name for a new cidr:
    // its plan keeps the IPAM tree with the old allocation, which the delete then removes.
    let next_run = cached_kind(&fake);
    let state = tf.state.clone();
    let mut tf = Terraform::new(&next_run);
    tf.state = state;
    let c = segment(&next_run, &[("cidr", Value::string("10.21.0.0/24"))]);
    assert_eq!(tf.apply_ok(&c).await, Action::Replace);
    assert_ne!(tf.state.get("allocation_id"), &first);
    assert_eq!(tf.state.get("cidr").as_str(), Some("10.21.0.0/24"));
    assert_eq!(fake.counts(), (1, 1, 1));
}

#[tokio::test(start_paused = true)]
async fn listing_is_one_list_and_a_read_per_result_only_when_the_resource_is_asked_for() {
    use gpufleet_engine::{
        apply::Listing,
        context::Context,
        kinds::{ListKind, ListRequest},
    };
    let fake = FakeNetris::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&segment(&k, &[])).await;
    let mut other = Terraform::new(&k);
    other
        .apply_ok(&segment(
            &k,
            &[
                ("name", Value::string("tenant-a-net-2")),
                ("cidr", Value::string("10.20.1.0/24")),
            ],
        ))
        .await;
    fake.take_log();
    let lister = Listing(kind(&fake));
    let ctx = Context::default();
    let request = |include_resource: bool, limit: usize| ListRequest {
        config: Value::object([("tenant", Value::string("tenant-a"))]),
        include_resource,
        limit,
    };

    let names = lister.list(&ctx, request(false, 100)).await;
    assert!(names.diagnostics.is_empty(), "{:?}", names.diagnostics);
    let found: Vec<&Value> = names.results.iter().map(|r| r.state.get("name")).collect();
    assert_eq!(
        found,
        [
            &Value::string("tenant-a-net"),
            &Value::string("tenant-a-net-2")
        ]
    );
    expect(&fake, &["GET /api/v2/vnet"]);

    let full = lister.list(&ctx, request(true, 1)).await;
    assert_eq!(full.results.len(), 1, "the limit is honoured");
    assert_eq!(
        full.results[0].state.get("cidr"),
        &Value::string("10.20.0.0/24"),
        "the object as a read after an import records it"
    );
    let log = routes(&fake);
    assert_eq!(log.first().map(String::as_str), Some("GET /api/v2/vnet"));
    assert!(
        log.iter()
            .filter(|r| r.starts_with("GET /api/v2/vnet"))
            .count()
            >= 2,
        "the listed segment is read: {log:?}"
    );
}
