//! `gpufleet_network_segment` through whole Terraform runs against a faithful fake controller:
//! create, no-op re-plan, in-place updates, replacement, destroy, drift, import, interrupted and
//! failed applies, timeouts and cancellation. Every plan, apply and refresh is checked against
//! Terraform's consistency rules by the harness.

#[path = "support/network_segment.rs"]
mod support;

use gpufleet_engine::{
    kinds::{ApplyRequest, ResourceKind},
    path::AttrPath,
    resources::network_segment::NetworkSegment,
    value::Value,
};
use support::{
    Action, FakeNetris, Fault, Terraform, dhcp, kind, member, segment, show, single_error, sweep,
};

fn ports(state: &Value) -> Vec<(String, Option<String>, bool)> {
    let mut out: Vec<_> = state
        .get("attached_ports")
        .as_seq()
        .unwrap_or_default()
        .iter()
        .map(|p| {
            (
                p.get("port").as_str().unwrap_or_default().to_owned(),
                p.get("hostname").as_str().map(str::to_owned),
                p.get("untagged").as_bool().unwrap_or_default(),
            )
        })
        .collect();
    out.sort();
    out
}

fn timeouts(create: &str) -> Value {
    Value::object([
        ("create", Value::string(create)),
        ("update", Value::string(create)),
        ("delete", Value::Null),
        ("read", Value::Null),
    ])
}

#[tokio::test(start_paused = true)]
async fn create_fills_computed_values_and_replans_as_no_op() {
    let fake = FakeNetris::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    let c = segment(&k, &[]);
    assert_eq!(tf.apply_ok(&c).await, Action::Create);
    let s = &tf.state;
    assert_eq!(s.get("status"), &Value::string("active"));
    assert_eq!(s.get("gateway"), &Value::string("10.20.0.1"));
    assert_eq!(s.get("vlan_id"), &Value::int(2));
    assert_eq!(s.get("vni"), &Value::int(10_000));
    assert_eq!(s.get("mtu"), &Value::int(9000));
    assert!(s.get("id").as_str().is_some());
    assert!(s.get("allocation_id").as_str().is_some());
    assert!(s.get("subnet_id").as_str().is_some());
    assert_eq!(fake.counts(), (1, 1, 1));

    let again = tf.plan(&c).await;
    assert_eq!(again.action, Action::NoOp, "{:?}", again.planned);
}

#[tokio::test(start_paused = true)]
async fn hostname_members_resolve_to_the_servers_switch_ports() {
    let fake = FakeNetris::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    let c = segment(
        &k,
        &[(
            "members",
            Value::set(vec![
                member(None, Some("gpu-001"), Some(true)),
                member(Some("swp10@leaf-01"), None, None),
            ]),
        )],
    );
    tf.apply_ok(&c).await;
    assert_eq!(
        ports(&tf.state),
        [
            ("swp10@leaf-01".to_owned(), None, false),
            ("swp1@leaf-01".to_owned(), Some("gpu-001".to_owned()), true),
            ("swp1@leaf-02".to_owned(), Some("gpu-001".to_owned()), true),
        ]
    );
    // The refresh maps the V-Net's ports back to the hostname: no diff.
    assert_eq!(tf.plan(&c).await.action, Action::NoOp);
}

#[tokio::test(start_paused = true)]
async fn unknown_hostname_is_a_clear_error_and_creates_nothing() {
    let fake = FakeNetris::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    let c = segment(
        &k,
        &[(
            "members",
            Value::set(vec![member(None, Some("gpu-999"), None)]),
        )],
    );
    // Refused at plan, and at apply (the fleet can change after a plan that passed).
    let (plan, d) = tf.apply_despite_plan(&c).await;
    assert!(
        single_error(&plan)
            .contains("\"gpu-999\" is not in the Netris controller's server inventory"),
        "{}",
        show(&plan)
    );
    let detail = single_error(&d);
    assert!(
        detail.contains("\"gpu-999\" is not in the controller's server inventory"),
        "{detail}"
    );
    assert!(tf.state.is_null());
    assert_eq!(fake.counts(), (0, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn members_dhcp_mtu_state_and_gateway_change_in_place() {
    let fake = FakeNetris::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&segment(&k, &[])).await;
    let (id, vlan, vni) = (
        tf.state.get("id").clone(),
        tf.state.get("vlan_id").clone(),
        tf.state.get("vni").clone(),
    );
    let changes: Vec<(&str, Value)> = vec![
        (
            "members",
            Value::set(vec![member(Some("swp11@leaf-02"), None, Some(true))]),
        ),
        ("dhcp", dhcp("10.20.0.100", "10.20.0.200")),
        ("mtu", Value::int(1500)),
        ("state", Value::string("disabled")),
        ("gateway", Value::string("10.20.0.254")),
    ];
    let mut attrs: Vec<(&str, Value)> = Vec::new();
    for (attr, v) in changes {
        attrs.push((attr, v.clone()));
        let c = segment(&k, &attrs);
        let p = tf.plan(&c).await;
        assert_eq!(p.action, Action::Update, "{attr}");
        assert!(
            p.requires_replace.is_empty(),
            "{attr}: {:?}",
            p.requires_replace
        );
        tf.apply_ok(&c).await;
        assert_eq!(tf.state.get(attr), &v, "{attr}");
        // Stable identity and allocated numbers.
        assert_eq!(tf.state.get("id"), &id);
        assert_eq!(tf.state.get("vlan_id"), &vlan);
        assert_eq!(tf.state.get("vni"), &vni);
        assert_eq!(tf.plan(&c).await.action, Action::NoOp, "after {attr}");
    }
    assert_eq!(tf.state.get("status"), &Value::string("disabled"));
    assert_eq!(fake.counts(), (1, 1, 1));
}

#[tokio::test(start_paused = true)]
async fn cidr_change_replaces_the_segment_without_leftovers() {
    let fake = FakeNetris::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&segment(&k, &[])).await;
    let old_id = tf.state.get("id").clone();
    let c = segment(&k, &[("cidr", Value::string("10.30.0.0/24"))]);
    let p = tf.plan(&c).await;
    assert_eq!(p.action, Action::Replace);
    assert_eq!(p.requires_replace, [AttrPath::attr("cidr")]);
    tf.apply_ok(&c).await;
    assert_ne!(tf.state.get("id"), &old_id);
    assert_eq!(tf.state.get("gateway"), &Value::string("10.30.0.1"));
    assert_eq!(fake.counts(), (1, 1, 1));
}

#[tokio::test(start_paused = true)]
async fn destroy_removes_every_object() {
    let fake = FakeNetris::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&segment(
        &k,
        &[(
            "members",
            Value::set(vec![member(None, Some("gpu-002"), None)]),
        )],
    ))
    .await;
    let d = tf.destroy().await;
    assert!(!d.has_error(), "{}", show(&d));
    assert!(tf.state.is_null());
    assert_eq!(fake.counts(), (0, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn delete_tolerates_objects_already_gone() {
    let fake = FakeNetris::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&segment(&k, &[])).await;
    let state = tf.state.clone();
    // Someone removed everything already.
    let mut other = Terraform::new(&k);
    other.state = state.clone();
    assert!(!other.destroy().await.has_error());
    let r = k
        .apply(
            &tf.ctx,
            ApplyRequest {
                prior: state,
                planned: Value::Null,
                config: Value::Null,
            },
        )
        .await;
    assert!(!r.diagnostics.has_error(), "{}", show(&r.diagnostics));
    assert!(r.new_state.is_null());
}

#[tokio::test(start_paused = true)]
async fn vnet_deleted_out_of_band_is_recreated_adopting_the_ipam_objects() {
    let fake = FakeNetris::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    let c = segment(&k, &[]);
    tf.apply_ok(&c).await;
    let allocation = tf.state.get("allocation_id").clone();
    fake.delete_vnet_out_of_band("tenant-a-net");
    // The refreshed state keeps the IPAM objects, without the V-Net: apply finishes the create.
    let p = tf.plan(&c).await;
    assert_eq!(p.action, Action::Update);
    assert!(tf.state.get("id").is_null());
    assert_eq!(tf.state.get("allocation_id"), &allocation);
    tf.apply_ok(&c).await;
    assert_eq!(
        tf.state.get("allocation_id"),
        &allocation,
        "adopted, not recreated"
    );
    assert_eq!(fake.counts(), (1, 1, 1));
    assert_eq!(tf.plan(&c).await.action, Action::NoOp);
}

#[tokio::test(start_paused = true)]
async fn destroy_after_the_vnet_went_removes_the_allocation_and_subnet() {
    let fake = FakeNetris::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&segment(&k, &[])).await;
    // A destroy killed after the V-Net delete went through, or the V-Net removed by hand.
    fake.delete_vnet_out_of_band("tenant-a-net");
    assert_eq!(fake.counts(), (1, 1, 0));
    let d = tf.destroy().await;
    assert!(!d.has_error(), "{}", show(&d));
    assert!(tf.state.is_null());
    assert_eq!(
        fake.counts(),
        (0, 0, 0),
        "no allocation or subnet left behind"
    );
}

#[tokio::test(start_paused = true)]
async fn a_segment_whose_objects_are_all_gone_reads_as_gone() {
    let fake = FakeNetris::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    let c = segment(&k, &[]);
    tf.apply_ok(&c).await;
    let mut other = Terraform::new(&k);
    other.state = tf.state.clone();
    assert!(!other.destroy().await.has_error());
    assert_eq!(tf.plan(&c).await.action, Action::Create);
    assert!(tf.state.is_null());
}

#[tokio::test(start_paused = true)]
async fn ports_changed_out_of_band_show_in_members_and_are_repaired() {
    let fake = FakeNetris::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    let c = segment(
        &k,
        &[(
            "members",
            Value::set(vec![member(None, Some("gpu-001"), None)]),
        )],
    );
    tf.apply_ok(&c).await;
    // One of gpu-001's ports detached, a stranger attached untagged.
    fake.set_ports_out_of_band(
        "tenant-a-net",
        &[("swp1@leaf-01", false), ("swp12@leaf-01", true)],
    );
    let p = tf.plan(&c).await;
    assert_eq!(p.action, Action::Update);
    let refreshed = tf.state.get("members").clone();
    assert_eq!(
        refreshed,
        Value::set(vec![
            member(Some("swp1@leaf-01"), None, Some(false)),
            member(Some("swp12@leaf-01"), None, Some(true)),
        ])
    );
    tf.apply_ok(&c).await;
    assert_eq!(tf.plan(&c).await.action, Action::NoOp);
    assert_eq!(ports(&tf.state).len(), 2);
}

#[tokio::test(start_paused = true)]
async fn interrupted_create_converges_without_duplicates() {
    let fake = FakeNetris::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    let c = segment(&k, &[]);
    // The V-Net is created but the answer never arrives.
    fake.fail_next("POST /api/v2/vnet", Fault::LostAnswer);
    let (_, d) = tf.apply(&c).await;
    let detail = single_error(&d);
    assert!(
        detail.contains("failed to create V-Net tenant-a-net: HTTP 502"),
        "{detail}"
    );
    // The partial state records what is known; nothing is orphaned.
    assert!(tf.state.get("allocation_id").as_str().is_some());
    assert!(tf.state.get("subnet_id").as_str().is_some());
    assert_eq!(tf.state.get("status"), &Value::string("incomplete"));
    assert!(tf.tainted);
    assert_eq!(fake.counts(), (1, 1, 1));

    // The next apply finds the V-Net by name on refresh, replaces the tainted instance and
    // ends with exactly one of each object.
    tf.apply_ok(&c).await;
    assert_eq!(fake.counts(), (1, 1, 1));
    assert_eq!(tf.plan(&c).await.action, Action::NoOp);
}

#[tokio::test(start_paused = true)]
async fn failed_step_returns_partial_state_and_the_next_apply_converges() {
    let fake = FakeNetris::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    let c = segment(&k, &[]);
    fake.fail_next(
        "POST /api/v2/ipam/subnet",
        Fault::Status(400, "IP prefix is out of any allocation"),
    );
    let (_, d) = tf.apply(&c).await;
    let detail = single_error(&d);
    assert!(
        detail.contains(
            "failed to create subnet gf-tenant-a-net: HTTP 400: IP prefix is out of any allocation"
        ),
        "{detail}"
    );
    assert!(tf.state.get("allocation_id").as_str().is_some());
    assert!(tf.state.get("subnet_id").is_null());
    assert!(tf.state.get("id").is_null());
    assert_eq!(fake.counts(), (1, 0, 0));

    assert_eq!(tf.apply_ok(&c).await, Action::Replace);
    assert_eq!(fake.counts(), (1, 1, 1));
}

#[tokio::test(start_paused = true)]
async fn provisioning_timeout_names_the_segment_and_keeps_the_vnet() {
    let fake = FakeNetris::new();
    fake.set_provisioning_polls(u32::MAX);
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    let c = segment(&k, &[("timeouts", timeouts("30s"))]);
    let (_, d) = tf.apply(&c).await;
    let detail = single_error(&d);
    assert!(
        detail.contains("gpufleet_network_segment \"tenant-a-net\""),
        "{detail}"
    );
    assert!(detail.contains("gave up after 30s"), "{detail}");
    assert!(detail.contains("provisioning"), "{detail}");
    assert!(
        tf.state.get("id").as_str().is_some(),
        "the V-Net is recorded"
    );
    assert_eq!(tf.state.get("status"), &Value::string("provisioning"));

    // Once the controller catches up, the next apply converges.
    fake.set_provisioning_polls(1);
    tf.apply_ok(&c).await;
    assert_eq!(fake.counts(), (1, 1, 1));
}

#[tokio::test(start_paused = true)]
async fn stop_request_ends_the_wait_with_the_partial_state() {
    let fake = FakeNetris::new();
    fake.set_provisioning_polls(u32::MAX);
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    let cancel = tf.ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
        cancel.cancel();
    });
    let (_, d) = tf.apply(&segment(&k, &[])).await;
    let detail = single_error(&d);
    assert!(
        detail.contains("Terraform asked the provider to stop"),
        "{detail}"
    );
    assert!(tf.state.get("id").as_str().is_some());
}

#[tokio::test(start_paused = true)]
async fn import_by_name_reproduces_the_state() {
    let fake = FakeNetris::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    let c = segment(
        &k,
        &[
            (
                "members",
                Value::set(vec![member(Some("swp10@leaf-01"), None, Some(true))]),
            ),
            ("dhcp", dhcp("10.20.0.10", "10.20.0.20")),
        ],
    );
    tf.apply_ok(&c).await;

    let mut imported = Terraform::new(&k);
    let d = imported.import("tenant-a-net").await;
    assert!(!d.has_error(), "{}", show(&d));
    for attr in [
        "id",
        "name",
        "tenant",
        "vpc",
        "site",
        "cidr",
        "gateway",
        "vlan_id",
        "vni",
        "dhcp",
        "members",
        "mtu",
        "state",
        "status",
        "allocation_id",
        "subnet_id",
        "attached_ports",
    ] {
        assert_eq!(imported.state.get(attr), tf.state.get(attr), "{attr}");
    }
    assert_eq!(imported.plan(&c).await.action, Action::NoOp);
}

#[tokio::test(start_paused = true)]
async fn importing_a_missing_segment_finds_nothing() {
    let fake = FakeNetris::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    let d = tf.import("nope").await;
    assert!(!d.has_error(), "{}", show(&d));
    assert!(tf.state.is_null());
}

#[tokio::test(start_paused = true)]
async fn a_foreign_vnet_of_the_same_name_is_not_adopted() {
    let fake = FakeNetris::new();
    fake.create_foreign_vnet("tenant-a-net");
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    let (_, d) = tf.apply(&segment(&k, &[])).await;
    let detail = single_error(&d);
    assert!(detail.contains("terraform import"), "{detail}");
    assert!(detail.contains("gpufleet:owner=tenant-a-net"), "{detail}");
}

#[tokio::test(start_paused = true)]
async fn timeouts_only_change_calls_nothing() {
    let fake = FakeNetris::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&segment(&k, &[])).await;
    let c = segment(&k, &[("timeouts", timeouts("20m"))]);
    let p = tf.plan(&c).await;
    assert_eq!(p.action, Action::Update);
    fake.take_log();
    let a = support::apply(&k, &tf.ctx, &p).await;
    assert!(!a.diagnostics.has_error(), "{}", show(&a.diagnostics));
    assert_eq!(fake.take_log(), Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn missing_settings_fail_apply_not_plan() {
    let k = NetworkSegment(gpufleet_engine::backends::netris::FromSettings);
    let mut tf = Terraform::new(&k);
    let c = segment(&k, &[]);
    let p = tf.plan(&c).await;
    assert!(!p.diagnostics.has_error(), "{}", show(&p.diagnostics));
    let (_, d) = tf.apply(&c).await;
    assert!(
        show(&d).contains("GPUFLEET_NETRIS_ENDPOINT"),
        "{}",
        show(&d)
    );
    assert!(tf.state.is_null());
    let r = k
        .read(&tf.ctx, segment(&k, &[("id", Value::string("1"))]))
        .await;
    assert!(
        show(&r.diagnostics).contains("`netris` block"),
        "{}",
        show(&r.diagnostics)
    );
    assert!(k.import(&tf.ctx, "x").await.is_err());
}

#[tokio::test(start_paused = true)]
async fn bad_input_changes_nothing() {
    let fake = FakeNetris::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    let c = segment(
        &k,
        &[
            ("gateway", Value::string("10.99.0.1")),
            ("vlan_id", Value::int(5000)),
        ],
    );
    let p = tf.plan(&c).await;
    let paths: Vec<String> = p
        .diagnostics
        .iter()
        .map(|d| d.path.as_ref().map(ToString::to_string).unwrap_or_default())
        .collect();
    assert_eq!(paths, ["vlan_id", "gateway"]);
    assert_eq!(fake.take_log(), Vec::<String>::new());
}

/// Sweeps one segment operation, from `before` to `target`, interrupted at every call.
async fn sweep_segment(
    op: &'static str,
    before: &[&[(&str, Value)]],
    target: Option<&[(&str, Value)]>,
) {
    let k = kind(&FakeNetris::new());
    let case = sweep::Case::new("network_segment", op, |a| segment(&k, a), before, target);
    sweep::sweep_both(case, || {
        let fake = FakeNetris::new();
        let k = kind(&fake);
        (fake, k)
    })
    .await;
}

fn in_place_changes() -> Vec<(&'static str, Value)> {
    vec![
        (
            "members",
            Value::set(vec![member(Some("swp11@leaf-02"), None, Some(true))]),
        ),
        ("dhcp", dhcp("10.20.0.100", "10.20.0.200")),
        ("gateway", Value::string("10.20.0.254")),
    ]
}

#[tokio::test(start_paused = true)]
async fn a_segment_create_interrupted_at_any_call_converges() {
    sweep_segment("create", &[], Some(&[])).await;
}

#[tokio::test(start_paused = true)]
async fn a_segment_update_interrupted_at_any_call_converges() {
    sweep_segment("update", &[&[]], Some(&in_place_changes())).await;
}

#[tokio::test(start_paused = true)]
async fn a_segment_replace_interrupted_at_any_call_converges() {
    let cidr = [("cidr", Value::string("10.30.0.0/24"))];
    sweep_segment("replace", &[&[]], Some(&cidr)).await;
}

#[tokio::test(start_paused = true)]
async fn a_segment_delete_interrupted_at_any_call_converges() {
    sweep_segment("delete", &[&in_place_changes()], None).await;
}
