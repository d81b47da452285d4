//! Tests of the BCM node kind.

use super::apply::*;
use super::*;
use crate::{
    backends::bcm::{Device, SysInfo},
    validate::validate_block,
};

fn config(overrides: &[(&str, Value)]) -> Value {
    let mut v = node_schema().block.complete(&Value::object([
        ("hostname", Value::string("gpu-001")),
        ("category", Value::string("gpu-compute")),
        ("tenant", Value::string("tenant-a")),
    ]));
    for (k, x) in overrides {
        v.set_attr(k, x.clone());
    }
    v
}

fn error_paths(config: &Value) -> Vec<String> {
    let mut d = validate_block(&node_schema().block, config);
    d.extend(validate_node(config));
    d.iter()
        .map(|d| d.path.as_ref().map(ToString::to_string).unwrap_or_default())
        .collect()
}

#[test]
fn bad_input_is_diagnosed_on_its_attribute() {
    let cases: &[(&str, Value, &str)] = &[
        ("install_mode", Value::string("MAIN"), "install_mode"),
        ("install_mode", Value::string("auto"), "install_mode"),
        ("power", Value::string("reboot"), "power"),
        ("hostname", Value::string("gpu 001"), "hostname"),
        ("tenant", Value::string(""), "tenant"),
        ("software_image", Value::string(" "), "software_image"),
    ];
    for (attr, v, want) in cases {
        assert_eq!(
            error_paths(&config(&[(attr, v.clone())])),
            [*want],
            "{attr}"
        );
    }
    assert!(error_paths(&config(&[])).is_empty());
    assert!(error_paths(&config(&[("install_mode", Value::unknown())])).is_empty());
}

#[test]
fn import_skeleton_names_every_attribute() {
    let s = import_skeleton(" gpu-001 ").expect("skeleton");
    assert!(s.conforms_to(&node_schema().value_type()));
    assert_eq!(s.get("hostname"), &Value::string("gpu-001"));
    assert!(import_skeleton("").is_err());
}

#[test]
fn a_wipe_counts_only_when_the_installer_consumed_it_and_every_disk_was_cleared() {
    use crate::backends::bcm::DiskInfo;
    let cleared = vec!["/dev/sda".to_owned(), "/dev/nvme0n1".to_owned()];
    let info = SysInfo {
        disks: vec![
            DiskInfo { name: "sda".into() },
            DiskInfo {
                name: "/dev/nvme0n1".into(),
            },
        ],
        ..SysInfo::default()
    };
    let done = Device {
        hostname: "gpu-001".into(),
        ..Device::default()
    };
    assert!(check_wiped(&done, &cleared, Some(&info), "t").is_ok());

    let mut pending = done.clone();
    pending.next_boot_install_mode = Some("FULL".into());
    pending
        .block_devices_cleared_on_next_boot
        .clone_from(&cleared);
    let Err(m) = check_wiped(&pending, &cleared, Some(&info), "t") else {
        panic!("a pending wipe is not a wipe");
    };
    assert!(m.contains("did not run"), "{m}");

    let Err(m) = check_wiped(&done, &cleared, None, "t") else {
        panic!("unknown disks are not verified");
    };
    assert!(m.contains("no system information"), "{m}");

    let mut more = info.clone();
    more.disks.push(DiskInfo {
        name: "/dev/nvme1n1".into(),
    });
    let Err(m) = check_wiped(&done, &cleared, Some(&more), "t") else {
        panic!("an uncleared disk fails the check");
    };
    assert!(
        m.contains("/dev/nvme1n1") && m.contains("stays out of the free pool"),
        "{m}"
    );
}

#[test]
fn polls_grow_and_are_capped() {
    assert_eq!(poll_delay(0), POLL_FIRST);
    assert!(poll_delay(1) > poll_delay(0));
    assert_eq!(poll_delay(40), POLL_MAX);
}
