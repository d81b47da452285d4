//! The exact BCM calls of each operation, in order, against the fake head node. The create
//! and destroy sequences, with their request bodies (uuids redacted), are `insta` snapshots,
//! so a change to what gpufleet sends shows up in review. The counts are the "BCM calls per
//! resource" figures.

#[path = "support/bcm_node.rs"]
mod support;

use std::sync::Arc;

use gpufleet_engine::{
    context::Context, data_sources::bcm_nodes::BcmNodes, kinds::DataSourceKind, value::Value,
};
use support::{FakeBcm, Terraform, kind, node, redact_uuids};

/// The calls made since the last check, without arguments.
fn calls(fake: &Arc<FakeBcm>) -> Vec<String> {
    fake.take_log()
        .into_iter()
        .map(|l| l.split(' ').next().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn create_sequence() {
    let fake = FakeBcm::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&node(&k, "gpu-b3-001", &[])).await;
    let log = fake.take_log();
    insta::assert_snapshot!("create", redact_uuids(&log.join("\n")));
    let names: Vec<&str> = log
        .iter()
        .map(|l| l.split(' ').next().unwrap_or_default())
        .collect();
    assert_eq!(
        names,
        [
            // Plan: the category, image and node exist, and no other tenant holds the node.
            // BCM fetches single objects by uuid only, so names are found in the lists.
            "cmdevice.getCategories",
            "cmpart.getSoftwareImages",
            "cmdevice.getDevices",
            // Apply checks again: the fleet can change after the plan.
            "cmdevice.getCategories",
            "cmpart.getSoftwareImages",
            "cmdevice.getDevices",
            "cmdevice.updateDevice",
            // The GPUs, from what BCM reports about the node.
            "cmdevice.getSysInfoCollectors",
            "cmstatus.getStatus",
            "cmdevice.powerOperation",
            // BOOTING, INSTALLING, INSTALLER_CALLING_INIT, UP.
            "cmstatus.getStatus",
            "cmstatus.getStatus",
            "cmstatus.getStatus",
            "cmstatus.getStatus",
            "cmdevice.getDevice",
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn refresh_reads_device_status_category_and_image() {
    let fake = FakeBcm::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    let c = node(&k, "gpu-b3-001", &[]);
    tf.apply_ok(&c).await;
    fake.take_log();
    tf.plan(&c).await;
    assert_eq!(
        calls(&fake),
        [
            "cmdevice.getDevice",
            "cmdevice.getCategory",
            "cmpart.getSoftwareImage",
            "cmstatus.getStatus",
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn destroy_sequence() {
    let fake = FakeBcm::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&node(&k, "gpu-b3-001", &[])).await;
    fake.take_log();
    let d = tf.destroy().await;
    assert!(!d.has_error());
    let log = fake.take_log();
    // The refresh before the destroy plan, then the release.
    insta::assert_snapshot!("destroy", redact_uuids(&log.join("\n")));
    let names: Vec<&str> = log
        .iter()
        .map(|l| l.split(' ').next().unwrap_or_default())
        .skip(4)
        .collect();
    assert_eq!(
        names,
        [
            "cmdevice.getDevice",
            "cmdevice.getCategories",
            "cmdevice.updateDevice",
            "cmstatus.getStatus",
            "cmdevice.powerOperation",
            "cmstatus.getStatus",
            "cmstatus.getStatus",
            "cmstatus.getStatus",
            "cmstatus.getStatus",
            // The check: the one-shot fields consumed, every disk BCM reports cleared.
            "cmdevice.getDevice",
            "cmdevice.getSysInfoCollectors",
            // Wiped: the node idles powered off, then the releasing mark comes off.
            "cmdevice.powerOperation",
            "cmdevice.updateDevice",
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn the_data_source_lists_and_filters_in_five_calls() {
    let fake = FakeBcm::new();
    let k = kind(&fake);
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&node(&k, "gpu-b3-001", &[])).await;
    fake.take_log();
    let ds = BcmNodes(Arc::clone(&fake));
    let all = read(&ds, &[]).await;
    assert!(all.diagnostics.is_empty(), "{:?}", all.diagnostics);
    assert!(all.new_state.conforms_to(&ds.schema().value_type()));
    assert!(all.new_state.is_wholly_known());
    assert_eq!(
        all.new_state.get("nodes").as_seq().map(<[Value]>::len),
        Some(6)
    );
    assert_eq!(all.new_state.get("gpus"), &Value::int(48));
    assert_eq!(
        calls(&fake),
        [
            "cmdevice.getDevices",
            "cmstatus.getStatusForDevices",
            "cmdevice.getSysInfoCollectors",
            "cmdevice.getCategories",
            "cmpart.getSoftwareImages",
        ]
    );
    let held = all
        .new_state
        .get("nodes")
        .as_seq()
        .unwrap_or_default()
        .iter()
        .find(|n| n.get("hostname") == &Value::string("gpu-b3-001"))
        .cloned()
        .expect("gpu-b3-001");
    assert_eq!(held.get("tenant"), &Value::string("tenant-a"));
    assert_eq!(held.get("category"), &Value::string("gpu-compute"));
    assert_eq!(
        held.get("software_image"),
        &Value::string("ubuntu2404-cuda12.8")
    );
    assert_eq!(held.get("status"), &Value::string("UP"));

    let free_b200 = read(
        &ds,
        &[
            ("free_only", Value::Bool(true)),
            ("gpu_product", Value::string("nvidia-b200")),
        ],
    )
    .await;
    assert_eq!(
        free_b200.new_state.get("hostnames"),
        &Value::List(vec![Value::string("gpu-b3-002")])
    );
    let free_pool = read(
        &ds,
        &[
            ("category", Value::string("free-pool")),
            ("status", Value::string("up")),
            ("rack", Value::string("rack-a1")),
        ],
    )
    .await;
    let names = free_pool
        .new_state
        .get("hostnames")
        .as_seq()
        .map(<[Value]>::len);
    assert_eq!(names, Some(4));
    let first = &free_pool
        .new_state
        .get("nodes")
        .as_seq()
        .unwrap_or_default()[0];
    assert_eq!(first.get("tenant"), &Value::Null);
    assert_eq!(first.get("software_image"), &Value::string("baseline"));
}

async fn read(
    ds: &BcmNodes<Arc<FakeBcm>>,
    filters: &[(&str, Value)],
) -> gpufleet_engine::kinds::ReadResponse {
    let mut cfg = ds.schema().block.complete(&Value::Null);
    for (k, v) in filters {
        if let Some(m) = cfg.as_object_mut() {
            m.insert((*k).to_owned(), v.clone());
        }
    }
    ds.read(&Context::default(), cfg).await
}
