//! `gpufleet_bcm_node` through whole Terraform runs against a faithful fake head node: claim
//! and provision, no-op re-plan, in-place updates, replacement, wiping destroy, drift, import,
//! adoption after an interrupted apply, failed installs, timeouts, concurrent changes and bad
//! input. Every plan, apply and refresh is checked against Terraform's consistency rules by the
//! harness.

#[path = "support/bcm_node.rs"]
mod support;

use gpufleet_engine::{
    backends::bcm::{BcmApi, FromSettings, PowerOp},
    kinds::ResourceKind,
    path::AttrPath,
    resources::bcm_node::BcmNode,
    value::Value,
};
use support::{
    Action, DISKS, FakeBcm, Fault, Leak, Terraform, kind, node, show, single_error, sweep, uuid,
};

fn timeouts(t: &str) -> Value {
    Value::object([
        ("create", Value::string(t)),
        ("update", Value::string(t)),
        ("delete", Value::string(t)),
        ("read", Value::Null),
    ])
}

/// Only the calls' names.
fn calls(fake: &FakeBcm) -> Vec<String> {
    fake.take_log()
        .into_iter()
        .map(|l| l.split(' ').next().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn create_claims_provisions_and_replans_as_no_op() {
    let fake = FakeBcm::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    let c = node(&k, "gpu-b3-001", &[]);
    assert_eq!(tf.apply_ok(&c).await, Action::Create);
    let s = &tf.state;
    assert_eq!(s.get("status"), &Value::string("UP"));
    assert_eq!(s.get("power"), &Value::string("on"));
    assert_eq!(s.get("install_mode"), &Value::string("AUTO"));
    assert_eq!(s.get("wipe_on_destroy"), &Value::Bool(true));
    assert_eq!(s.get("rack"), &Value::string("rack-b3"));
    assert_eq!(s.get("gpu_product"), &Value::string("NVIDIA-B200"));
    assert_eq!(s.get("gpu_count"), &Value::int(8));
    assert!(s.get("mac").as_str().is_some());
    assert!(
        s.get("ip").as_str().is_some(),
        "assigned while provisioning"
    );
    let d = fake.device("gpu-b3-001");
    assert_eq!(s.get("id"), &Value::string(d.uuid.clone()));
    assert_eq!(d.tenant(), Some("tenant-a"));
    assert_eq!(d.category.as_deref(), Some(uuid(12).as_str()));
    assert_eq!(d.image(), Some(uuid(2).as_str()));
    assert_eq!(fake.node("gpu-b3-001").2.as_deref(), Some("tenant-a"));

    assert_eq!(tf.plan(&c).await.action, Action::NoOp);
}

#[tokio::test(start_paused = true)]
async fn a_running_node_is_rebooted_into_its_image() {
    let fake = FakeBcm::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&node(&k, "gpu-001", &[])).await;
    let log = fake.take_log();
    assert!(
        log.iter().any(|l| l.contains("\"operation\":\"RESET\"")),
        "{log:#?}"
    );
    assert_eq!(tf.state.get("status"), &Value::string("UP"));
}

#[tokio::test(start_paused = true)]
async fn a_node_of_another_tenant_is_refused_and_left_alone() {
    let fake = FakeBcm::new();
    fake.edit("gpu-002", |d| d.set_tenant(Some("tenant-z")));
    let before = fake.device("gpu-002");
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    // Refused at plan, and at apply (the fleet can change after a plan that passed).
    let (plan, d) = tf.apply_despite_plan(&node(&k, "gpu-002", &[])).await;
    assert!(
        single_error(&plan).contains("held by tenant \"tenant-z\""),
        "{}",
        show(&plan)
    );
    let detail = single_error(&d);
    assert!(detail.contains("held by tenant \"tenant-z\""), "{detail}");
    assert!(detail.contains("gpu-002"), "{detail}");
    assert!(tf.state.is_null());
    assert_eq!(fake.device("gpu-002"), before);
}

#[tokio::test(start_paused = true)]
async fn unknown_category_or_node_is_a_clear_error() {
    let fake = FakeBcm::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    // Refused at plan, and at apply (the fleet can change after a plan that passed).
    let (plan, d) = tf
        .apply_despite_plan(&node(&k, "gpu-001", &[("category", Value::string("nope"))]))
        .await;
    assert!(single_error(&plan).contains("no category named \"nope\""));
    assert!(single_error(&d).contains("no category named \"nope\""));
    let (plan, d) = tf.apply_despite_plan(&node(&k, "gpu-999", &[])).await;
    assert!(single_error(&plan).contains("no node named \"gpu-999\""));
    assert!(single_error(&d).contains("no node named \"gpu-999\""));
    assert!(tf.state.is_null());
}

#[tokio::test(start_paused = true)]
async fn category_changes_in_place_without_a_reboot() {
    let fake = FakeBcm::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&node(&k, "gpu-b3-001", &[])).await;
    let id = tf.state.get("id").clone();
    fake.take_log();
    let c = node(
        &k,
        "gpu-b3-001",
        &[("category", Value::string("gpu-inference"))],
    );
    assert_eq!(tf.apply_ok(&c).await, Action::Update);
    let log = calls(&fake);
    assert!(
        !log.contains(&"cmdevice.powerOperation".to_owned()),
        "{log:?}"
    );
    assert_eq!(tf.state.get("id"), &id);
    assert_eq!(
        fake.device("gpu-b3-001").category.as_deref(),
        Some(uuid(13).as_str())
    );
    assert_eq!(tf.plan(&c).await.action, Action::NoOp);
}

#[tokio::test(start_paused = true)]
async fn an_image_change_reprovisions_the_node() {
    let fake = FakeBcm::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&node(&k, "gpu-b3-001", &[])).await;
    fake.take_log();
    let c = node(
        &k,
        "gpu-b3-001",
        &[("software_image", Value::string("ubuntu2404-cuda13.0"))],
    );
    assert_eq!(tf.apply_ok(&c).await, Action::Update);
    let log = fake.take_log();
    let update = log
        .iter()
        .find(|l| l.starts_with("cmdevice.updateDevice"))
        .expect("an update");
    assert!(
        update.contains("\"nextBootInstallMode\":\"AUTO\""),
        "{update}"
    );
    assert!(log.iter().any(|l| l.contains("\"operation\":\"RESET\"")));
    assert_eq!(tf.state.get("status"), &Value::string("UP"));
    assert_eq!(fake.device("gpu-b3-001").image(), Some(uuid(3).as_str()));
    assert_eq!(tf.plan(&c).await.action, Action::NoOp);
}

#[tokio::test(start_paused = true)]
async fn power_goes_off_and_on_in_place() {
    let fake = FakeBcm::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&node(&k, "gpu-b3-002", &[])).await;
    let off = node(&k, "gpu-b3-002", &[("power", Value::string("off"))]);
    assert_eq!(tf.apply_ok(&off).await, Action::Update);
    assert_eq!(tf.state.get("status"), &Value::string("DOWN"));
    assert!(!fake.node("gpu-b3-002").1);
    assert_eq!(tf.plan(&off).await.action, Action::NoOp);
    let on = node(&k, "gpu-b3-002", &[]);
    assert_eq!(tf.apply_ok(&on).await, Action::Update);
    assert_eq!(tf.state.get("status"), &Value::string("UP"));
    assert_eq!(tf.plan(&on).await.action, Action::NoOp);
}

#[tokio::test(start_paused = true)]
async fn hostname_and_tenant_changes_replace() {
    let fake = FakeBcm::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&node(&k, "gpu-003", &[])).await;
    for (attr, v) in [
        ("hostname", Value::string("gpu-004")),
        ("tenant", Value::string("tenant-b")),
    ] {
        let mut c = node(&k, "gpu-003", &[]);
        if let Some(m) = c.as_object_mut() {
            m.insert(attr.to_owned(), v);
        }
        let p = tf.plan(&c).await;
        assert_eq!(p.action, Action::Replace, "{attr}");
        assert_eq!(p.requires_replace, [AttrPath::attr(attr)]);
    }
}

#[tokio::test(start_paused = true)]
async fn destroy_wipes_releases_and_restores_idle_power() {
    let fake = FakeBcm::new();
    let k = kind(&fake);
    for host in ["gpu-b3-001", "gpu-001"] {
        let mut tf = Terraform::new(&k);
        tf.apply_ok(&node(&k, host, &[])).await;
        let d = tf.destroy().await;
        assert!(!d.has_error(), "{}", show(&d));
        assert!(tf.state.is_null());
        let dev = fake.device(host);
        assert_eq!(dev.tenant(), None, "{host}");
        assert_eq!(dev.category.as_deref(), Some(uuid(11).as_str()), "{host}");
        assert_eq!(dev.image(), None, "{host}: back to the pool's image");
        let (status, on, owner, wipes) = fake.node(host);
        assert_eq!((owner, wipes), (None, 1), "{host}: wiped");
        // rack-b3 idles powered off; rack-a1 stays on.
        let idle_on = host == "gpu-001";
        assert_eq!(on, idle_on, "{host}");
        assert_eq!(status, if idle_on { "UP" } else { "DOWN" }, "{host}");
    }
}

#[tokio::test(start_paused = true)]
async fn wiping_between_tenants_leaks_nothing_and_release_without_wipe_does() {
    let fake = FakeBcm::new();
    let k = kind(&fake);
    for (wipe, host) in [(true, "gpu-b3-001"), (false, "gpu-b3-002")] {
        let mut a = Terraform::new(&k);
        a.apply_ok(&node(&k, host, &[("wipe_on_destroy", Value::Bool(wipe))]))
            .await;
        assert!(!a.destroy().await.has_error());
        let mut b = Terraform::new(&k);
        b.apply_ok(&node(&k, host, &[("tenant", Value::string("tenant-b"))]))
            .await;
        b.destroy().await;
    }
    assert_eq!(
        fake.leaks(),
        [Leak {
            hostname: "gpu-b3-002".into(),
            from: "tenant-a".into(),
            to: "tenant-b".into(),
        }]
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_wipe_keeps_the_node_out_of_the_free_pool_until_it_finishes() {
    let fake = FakeBcm::new();
    let k = kind(&fake);
    let host = "gpu-b3-002";
    let mut a = Terraform::new(&k);
    a.apply_ok(&node(&k, host, &[])).await;

    // The wiping boot fails: destroy is an error and the node stays in state.
    fake.install_fault(host, Some("INSTALLER_FAILED"));
    let d = a.destroy().await;
    assert!(d.has_error(), "a failed wipe must fail the destroy");
    assert!(!a.state.is_null(), "the node stays recorded");
    assert_eq!(
        fake.device(host).tenant(),
        None,
        "no longer held by tenant-a"
    );

    // Not free either: another tenant cannot claim it while tenant-a's data is on it.
    let mut b = Terraform::new(&k);
    let claim = node(&k, host, &[("tenant", Value::string("tenant-b"))]);
    let (_, d) = b.apply(&claim).await;
    assert!(
        single_error(&d).contains("still being wiped after tenant \"tenant-a\""),
        "{}",
        show(&d)
    );

    // A refresh keeps it as tenant-a's, and a destroy after the fault finishes the wipe.
    assert_eq!(a.plan(&node(&k, host, &[])).await.action, Action::Update);
    fake.install_fault(host, None);
    let d = a.destroy().await;
    assert!(!d.has_error(), "{}", show(&d));
    let (_, _, owner, wipes) = fake.node(host);
    assert_eq!(owner, None, "wiped");
    assert!(wipes >= 1);
    b.apply_ok(&claim).await;
    assert!(fake.leaks().is_empty(), "{:?}", fake.leaks());
}

#[tokio::test(start_paused = true)]
async fn destroy_clears_every_disk_of_the_disk_setup_of_a_dgx_like_node() {
    let fake = FakeBcm::new();
    let k = kind(&fake);
    let host = "gpu-001";
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&node(&k, host, &[])).await;
    assert!(
        fake.disk_data(host)
            .iter()
            .all(|(_, o)| o.as_deref() == Some("tenant-a")),
        "the tenant's data is on every disk"
    );
    fake.take_log();
    let d = tf.destroy().await;
    assert!(!d.has_error(), "{}", show(&d));
    let wipe = fake
        .take_log()
        .into_iter()
        .find(|l| l.contains("\"nextBootInstallMode\":\"FULL\""))
        .expect("the wiping update");
    assert!(
        wipe.contains(&format!(
            "\"blockDevicesClearedOnNextBoot\":{}",
            serde_json::json!(DISKS)
        )),
        "the OS disk and all four NVMe data disks: {wipe}"
    );
    assert_eq!(
        fake.disk_data(host),
        DISKS
            .iter()
            .map(|d| ((*d).to_owned(), None))
            .collect::<Vec<_>>()
    );
    assert_eq!(fake.device(host).releasing(), None, "free again");
}

#[tokio::test(start_paused = true)]
async fn a_disk_left_out_of_the_disk_setup_fails_the_destroy_and_keeps_the_node_out_of_the_pool() {
    let fake = FakeBcm::new();
    let k = kind(&fake);
    let host = "gpu-002";
    let mut a = Terraform::new(&k);
    a.apply_ok(&node(&k, host, &[])).await;
    // The node's disk setup forgets its fourth NVMe data disk.
    fake.set_disk_setup(host, &DISKS[..4]);
    let d = a.destroy().await;
    let msg = single_error(&d);
    assert!(msg.contains("/dev/nvme3n1"), "{msg}");
    assert!(msg.contains("does not name"), "{msg}");
    assert!(!a.state.is_null(), "the node stays recorded");
    let dev = fake.device(host);
    assert_eq!(dev.tenant(), None);
    assert_eq!(
        dev.releasing(),
        Some("tenant-a"),
        "still marked: nobody can claim it"
    );
    let data = fake.disk_data(host);
    assert_eq!(
        data[4],
        ("/dev/nvme3n1".to_owned(), Some("tenant-a".to_owned()))
    );
    assert!(data[..4].iter().all(|(_, o)| o.is_none()), "{data:?}");

    let mut b = Terraform::new(&k);
    let claim = node(&k, host, &[("tenant", Value::string("tenant-b"))]);
    let (_, d) = b.apply(&claim).await;
    assert!(
        single_error(&d).contains("still being wiped"),
        "{}",
        show(&d)
    );

    // With the disk setup complete, the next destroy repeats the wipe and frees the node.
    fake.set_disk_setup(host, &DISKS);
    let d = a.destroy().await;
    assert!(!d.has_error(), "{}", show(&d));
    assert!(fake.disk_data(host).iter().all(|(_, o)| o.is_none()));
    b.apply_ok(&claim).await;
    assert!(fake.leaks().is_empty(), "{:?}", fake.leaks());
}

#[tokio::test(start_paused = true)]
async fn a_node_without_a_disk_setup_is_not_released() {
    let fake = FakeBcm::new();
    let k = kind(&fake);
    let host = "gpu-003";
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&node(&k, host, &[])).await;
    fake.edit(host, |d| {
        d.rest.remove("disksetup");
    });
    let d = tf.destroy().await;
    assert!(
        single_error(&d).contains("no disk setup naming a block device"),
        "{}",
        show(&d)
    );
    let dev = fake.device(host);
    assert_eq!(dev.tenant(), Some("tenant-a"), "untouched: still held");
    assert!(dev.block_devices_cleared_on_next_boot.is_empty());
}

#[tokio::test(start_paused = true)]
async fn drift_in_category_power_and_status_is_reported_and_repaired() {
    let fake = FakeBcm::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    let c = node(&k, "gpu-b3-001", &[]);
    tf.apply_ok(&c).await;
    fake.edit("gpu-b3-001", |d| {
        d.category = Some(uuid(13));
        d.set_image(None);
    });
    fake.power_off_out_of_band("gpu-b3-001");
    let p = tf.plan(&c).await;
    assert_eq!(p.action, Action::Update);
    assert_eq!(tf.state.get("category"), &Value::string("gpu-inference"));
    assert_eq!(tf.state.get("software_image"), &Value::Null);
    assert_eq!(tf.state.get("power"), &Value::string("off"));
    assert_eq!(tf.state.get("status"), &Value::string("DOWN"));
    tf.apply_ok(&c).await;
    assert_eq!(tf.state.get("status"), &Value::string("UP"));
    assert_eq!(tf.plan(&c).await.action, Action::NoOp);
}

#[tokio::test(start_paused = true)]
async fn a_node_released_by_someone_else_is_gone_and_claimed_again() {
    let fake = FakeBcm::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    let c = node(&k, "gpu-002", &[]);
    tf.apply_ok(&c).await;
    fake.edit("gpu-002", |d| d.set_tenant(None));
    let p = tf.plan(&c).await;
    assert!(tf.state.is_null(), "refresh drops the node");
    assert_eq!(p.action, Action::Create);
    fake.edit("gpu-002", |d| d.set_tenant(Some("tenant-q")));
    let (plan, d) = tf.apply_despite_plan(&c).await;
    assert!(single_error(&plan).contains("tenant-q"));
    assert!(single_error(&d).contains("tenant-q"));
}

#[tokio::test(start_paused = true)]
async fn import_by_hostname_reproduces_the_state() {
    let fake = FakeBcm::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    let c = node(&k, "gpu-b3-002", &[]);
    tf.apply_ok(&c).await;
    let mut imported = Terraform::new(&k);
    let d = imported.import("gpu-b3-002").await;
    assert!(!d.has_error(), "{}", show(&d));
    for attr in [
        "id",
        "hostname",
        "category",
        "software_image",
        "install_mode",
        "power",
        "tenant",
        "wipe_on_destroy",
        "status",
        "mac",
        "ip",
        "rack",
        "gpu_product",
        "gpu_count",
    ] {
        assert_eq!(imported.state.get(attr), tf.state.get(attr), "{attr}");
    }
    assert_eq!(imported.plan(&c).await.action, Action::NoOp);

    // A free node is nothing to import.
    let mut free = Terraform::new(&k);
    assert!(!free.import("gpu-004").await.has_error());
    assert!(free.state.is_null());
}

#[tokio::test(start_paused = true)]
async fn a_failed_install_names_the_node_keeps_state_and_converges_later() {
    let fake = FakeBcm::new();
    fake.install_fault("gpu-b3-001", Some("INSTALLER_FAILED"));
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    let c = node(&k, "gpu-b3-001", &[]);
    let (_, d) = tf.apply(&c).await;
    let detail = single_error(&d);
    assert!(
        detail.contains("node gpu-b3-001 stopped in INSTALLER_FAILED"),
        "{detail}"
    );
    assert_eq!(tf.state.get("status"), &Value::string("INSTALLER_FAILED"));
    assert!(
        tf.state.get("id").as_str().is_some(),
        "recorded, not orphaned"
    );
    assert!(tf.tainted);

    fake.install_fault("gpu-b3-001", None);
    assert_eq!(tf.apply_ok(&c).await, Action::Replace);
    assert_eq!(tf.state.get("status"), &Value::string("UP"));
    assert_eq!(tf.plan(&c).await.action, Action::NoOp);
    assert!(fake.leaks().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_stuck_install_times_out_naming_the_node() {
    let fake = FakeBcm::new();
    fake.stuck("gpu-b3-001", true);
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    let c = node(&k, "gpu-b3-001", &[("timeouts", timeouts("2m"))]);
    let (_, d) = tf.apply(&c).await;
    let detail = single_error(&d);
    assert!(
        detail.contains("node gpu-b3-001 was not UP after 2m"),
        "{detail}"
    );
    assert_eq!(tf.state.get("status"), &Value::string("INSTALLING"));
    assert!(tf.state.get("id").as_str().is_some());
}

#[tokio::test(start_paused = true)]
async fn reapply_after_an_interrupted_create_adopts_without_a_second_claim() {
    let fake = FakeBcm::new();
    let k = kind(&fake);
    // The first apply claimed the node and powered it on, then the provider died.
    fake.edit("gpu-b3-002", |d| {
        d.category = Some(uuid(12));
        d.set_image(Some(&uuid(2)));
        d.install_mode = Some("AUTO".to_owned());
        d.set_tenant(Some("tenant-a"));
    });
    let d = fake.device("gpu-b3-002");
    fake.power(&[d.uuid], PowerOp::On, "node gpu-b3-002")
        .await
        .expect("power");
    fake.take_log();
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&node(&k, "gpu-b3-002", &[])).await;
    let log = calls(&fake);
    assert!(
        !log.contains(&"cmdevice.updateDevice".to_owned()),
        "{log:?}"
    );
    assert!(
        !log.contains(&"cmdevice.powerOperation".to_owned()),
        "{log:?}"
    );
    assert_eq!(tf.state.get("status"), &Value::string("UP"));
}

#[tokio::test(start_paused = true)]
async fn a_concurrent_change_fails_loudly_instead_of_being_overwritten() {
    let fake = FakeBcm::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&node(&k, "gpu-b3-001", &[])).await;
    fake.race_next_update("gpu-b3-001");
    let c = node(&k, "gpu-b3-001", &[("install_mode", Value::string("FULL"))]);
    let (_, d) = tf.apply(&c).await;
    let detail = single_error(&d);
    assert!(detail.contains("changed by someone else"), "{detail}");
    assert!(detail.contains("revision mismatch"), "{detail}");
    let dev = fake.device("gpu-b3-001");
    assert_eq!(
        dev.category.as_deref(),
        Some(uuid(13).as_str()),
        "the other change stands"
    );
    assert_eq!(dev.install_mode.as_deref(), Some("AUTO"));
    // The next run works from the current state.
    tf.apply_ok(&c).await;
    assert_eq!(
        fake.device("gpu-b3-001").install_mode.as_deref(),
        Some("FULL")
    );
}

#[tokio::test(start_paused = true)]
async fn a_refused_write_is_a_clear_permission_error() {
    let fake = FakeBcm::new();
    fake.fail_next(
        "cmdevice.updateDevice",
        Fault::Refuse("Profile readonly does not allow access to cmdevice.updateDevice"),
    );
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    let (_, d) = tf.apply(&node(&k, "gpu-003", &[])).await;
    let detail = single_error(&d);
    assert!(
        detail.contains("Profile readonly does not allow access"),
        "{detail}"
    );
    assert!(detail.contains("admin"), "{detail}");
    assert!(tf.state.is_null());
}

#[tokio::test(start_paused = true)]
async fn bad_input_fails_at_plan_on_its_attribute_and_calls_nothing() {
    let fake = FakeBcm::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    let c = node(
        &k,
        "gpu-001",
        &[
            ("install_mode", Value::string("MAIN")),
            ("power", Value::string("reboot")),
        ],
    );
    let p = tf.plan(&c).await;
    let paths: Vec<String> = p
        .diagnostics
        .iter()
        .map(|d| d.path.as_ref().map(ToString::to_string).unwrap_or_default())
        .collect();
    assert_eq!(paths, ["install_mode", "power"]);
    assert!(
        show(&p.diagnostics).contains("`AUTO`"),
        "{}",
        show(&p.diagnostics)
    );
    assert_eq!(fake.take_log(), Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn missing_settings_fail_apply_not_plan() {
    let k = BcmNode(FromSettings);
    let mut tf = Terraform::new(&k);
    let c = node(&k, "gpu-001", &[]);
    let p = tf.plan(&c).await;
    assert!(!p.diagnostics.has_error(), "{}", show(&p.diagnostics));
    let (_, d) = tf.apply(&c).await;
    assert!(show(&d).contains("GPUFLEET_BCM_ENDPOINT"), "{}", show(&d));
    assert!(k.import(&tf.ctx, "gpu-001").await.is_err());
}

/// Sweeps one node operation on `host`, from `before` to `target`, interrupted at every call.
async fn sweep_node(
    op: &'static str,
    before: &[(&str, &[(&str, Value)])],
    target: Option<(&str, &[(&str, Value)])>,
) {
    let k = kind(&FakeBcm::new());
    let case = sweep::Case::new("bcm_node", op, |(h, a)| node(&k, h, a), before, target);
    sweep::sweep_both(case, || {
        let fake = FakeBcm::new();
        let k = kind(&fake);
        (fake, k)
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_node_claim_interrupted_at_any_call_converges() {
    sweep_node("create", &[], Some(("gpu-b3-001", &[]))).await;
}

#[tokio::test(start_paused = true)]
async fn a_reprovision_interrupted_at_any_call_converges() {
    let image = [("software_image", Value::string("ubuntu2404-cuda13.0"))];
    sweep_node(
        "update",
        &[("gpu-b3-001", &[])],
        Some(("gpu-b3-001", &image)),
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_node_swap_interrupted_at_any_call_converges() {
    sweep_node("replace", &[("gpu-003", &[])], Some(("gpu-004", &[]))).await;
}

#[tokio::test(start_paused = true)]
async fn a_release_interrupted_at_any_call_converges() {
    sweep_node("delete", &[("gpu-b3-001", &[])], None).await;
}
