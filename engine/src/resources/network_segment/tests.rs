//! Tests of the network segment kind.

use super::*;
use std::collections::BTreeMap;

use super::{config::*, model::*, read::*};
use crate::{
    consistency::assert_plan_valid, path::AttrPath, plan::plan_resource, validate::validate_block,
};

fn config(overrides: &[(&str, Value)]) -> Value {
    let mut base: BTreeMap<String, Value> = segment_schema()
        .block
        .attributes
        .iter()
        .map(|a| (a.name.to_owned(), Value::Null))
        .collect();
    base.insert("timeouts".to_owned(), Value::Null);
    for (k, v) in [
        ("name", Value::string("tenant-a-net")),
        ("tenant", Value::string("tenant-a")),
        ("vpc", Value::string("vpc-a")),
        ("site", Value::string("dc1")),
        ("cidr", Value::string("10.20.0.0/24")),
    ] {
        base.insert(k.to_owned(), v);
    }
    for (k, v) in overrides {
        base.insert((*k).to_owned(), v.clone());
    }
    Value::Object(base)
}

fn member(port: Option<&str>, hostname: Option<&str>) -> Value {
    Value::object([
        ("port", port.map(Value::string).into()),
        ("hostname", hostname.map(Value::string).into()),
        ("untagged", Value::Null),
    ])
}

fn dhcp(start: &str, end: &str) -> Value {
    Value::object([("start", Value::string(start)), ("end", Value::string(end))])
}

/// The paths of every error that validation (schema validators plus the kind's checks)
/// reports.
fn error_paths(config: &Value) -> Vec<String> {
    let mut d = validate_block(&segment_schema().block, config);
    d.extend(validate_segment(config));
    d.iter()
        .map(|d| d.path.as_ref().map(ToString::to_string).unwrap_or_default())
        .collect()
}

#[test]
fn valid_configuration_has_no_diagnostics() {
    let c = config(&[
        ("gateway", Value::string("10.20.0.1")),
        ("dhcp", dhcp("10.20.0.100", "10.20.0.200")),
        ("vlan_id", Value::int(210)),
        ("vni", Value::int(16_777_215)),
        (
            "members",
            Value::set(vec![
                member(Some("swp5@leaf-01"), None),
                member(None, Some("gpu-001")),
            ]),
        ),
    ]);
    assert_eq!(error_paths(&c), Vec::<String>::new());
}

#[test]
fn each_bad_input_is_diagnosed_on_its_attribute() {
    /// (case, attributes set, paths of the expected errors)
    type Case<'a> = (&'a str, &'a [(&'a str, Value)], &'a [&'a str]);
    let cases: &[Case<'_>] = &[
        (
            "cidr syntax",
            &[("cidr", Value::string("10.20.0.0"))],
            &["cidr"],
        ),
        (
            "cidr host bits",
            &[("cidr", Value::string("10.20.0.1/24"))],
            &["cidr"],
        ),
        (
            "cidr too small",
            &[("cidr", Value::string("10.20.0.0/31"))],
            &["cidr"],
        ),
        (
            "gateway syntax",
            &[("gateway", Value::string("10.20.0"))],
            &["gateway"],
        ),
        (
            "gateway outside",
            &[("gateway", Value::string("10.21.0.1"))],
            &["gateway"],
        ),
        (
            "gateway network",
            &[("gateway", Value::string("10.20.0.0"))],
            &["gateway"],
        ),
        (
            "gateway broadcast",
            &[("gateway", Value::string("10.20.0.255"))],
            &["gateway"],
        ),
        (
            "dhcp outside",
            &[("dhcp", dhcp("10.20.0.100", "10.20.1.10"))],
            &["dhcp.end"],
        ),
        (
            "dhcp reversed",
            &[("dhcp", dhcp("10.20.0.50", "10.20.0.20"))],
            &["dhcp.end"],
        ),
        (
            "dhcp covers default gateway",
            &[("dhcp", dhcp("10.20.0.1", "10.20.0.20"))],
            &["dhcp"],
        ),
        (
            "dhcp covers set gateway",
            &[
                ("gateway", Value::string("10.20.0.30")),
                ("dhcp", dhcp("10.20.0.2", "10.20.0.99")),
            ],
            &["dhcp"],
        ),
        (
            "dhcp address syntax",
            &[("dhcp", dhcp("x", "10.20.0.20"))],
            &["dhcp.start"],
        ),
        ("vlan low", &[("vlan_id", Value::int(0))], &["vlan_id"]),
        ("vlan high", &[("vlan_id", Value::int(4095))], &["vlan_id"]),
        ("vni low", &[("vni", Value::int(0))], &["vni"]),
        ("vni high", &[("vni", Value::int(16_777_216))], &["vni"]),
        ("mtu low", &[("mtu", Value::int(1279))], &["mtu"]),
        ("mtu high", &[("mtu", Value::int(9217))], &["mtu"]),
        (
            "name upper",
            &[("name", Value::string("Tenant-A"))],
            &["name"],
        ),
        (
            "name long",
            &[("name", Value::string("a".repeat(61)))],
            &["name"],
        ),
        ("state", &[("state", Value::string("paused"))], &["state"]),
        (
            "tenant empty",
            &[("tenant", Value::string(" "))],
            &["tenant"],
        ),
        (
            "member both",
            &[(
                "members",
                Value::set(vec![member(Some("swp1@sw1"), Some("gpu-001"))]),
            )],
            &["members"],
        ),
        (
            "member neither",
            &[("members", Value::set(vec![member(None, None)]))],
            &["members"],
        ),
        (
            "member port format",
            &[("members", Value::set(vec![member(Some("swp1"), None)]))],
            &["members"],
        ),
        (
            "timeouts",
            &[(
                "timeouts",
                Value::object([
                    ("create", Value::string("soon")),
                    ("update", Value::Null),
                    ("delete", Value::Null),
                    ("read", Value::Null),
                ]),
            )],
            &["timeouts.create"],
        ),
    ];
    for (case, overrides, want) in cases {
        let got = error_paths(&config(overrides));
        assert_eq!(&got, want, "{case}");
    }
}

#[test]
fn unknowns_are_tolerated() {
    let c = config(&[
        ("cidr", Value::unknown()),
        ("gateway", Value::string("10.20.0.1")),
        ("dhcp", Value::unknown()),
        (
            "members",
            Value::set(vec![member(Some("swp1@sw1"), None), Value::unknown()]),
        ),
        ("vlan_id", Value::unknown()),
    ]);
    assert_eq!(error_paths(&c), Vec::<String>::new());
    let c = config(&[(
        "dhcp",
        Value::object([
            ("start", Value::unknown()),
            ("end", Value::string("10.20.0.9")),
        ]),
    )]);
    assert_eq!(error_paths(&c), Vec::<String>::new());
}

async fn plan(prior: &Value, config: &Value) -> crate::plan::Planned {
    // Terraform's proposed new state, for the attributes this test uses: config values,
    // prior values for computed attributes the config leaves null.
    let schema = segment_schema();
    let mut proposed = config.clone();
    if !prior.is_null() {
        for a in &schema.block.attributes {
            if a.mode.is_computed() && config.get(a.name).is_null() {
                proposed.set_attr(a.name, prior.get(a.name).clone());
            }
        }
    }
    let p = plan_resource(
        &NetworkSegment(FromSettings),
        &Context::default(),
        prior.clone(),
        proposed,
        config.clone(),
    )
    .await;
    let errs = assert_plan_valid(&schema.block, prior, config, &p.planned);
    assert!(errs.is_empty(), "invalid plan: {errs:?}");
    p
}

fn applied(planned: &Value) -> Value {
    let mut s = planned.clone();
    for (k, v) in [
        ("id", Value::string("7")),
        ("allocation_id", Value::string("3")),
        ("subnet_id", Value::string("4")),
        ("status", Value::string("active")),
        ("vlan_id", Value::int(210)),
        ("vni", Value::int(5210)),
        ("attached_ports", Value::set(Vec::new())),
    ] {
        if s.get(k).is_unknown() {
            s.set_attr(k, v);
        }
    }
    s
}

#[tokio::test]
async fn create_plans_unknown_computed_values_and_the_default_gateway() {
    let p = plan(&Value::Null, &config(&[])).await;
    for a in [
        "id",
        "status",
        "vlan_id",
        "vni",
        "allocation_id",
        "subnet_id",
        "attached_ports",
    ] {
        assert!(p.planned.get(a).is_unknown(), "{a}");
    }
    assert_eq!(p.planned.get("gateway"), &Value::string("10.20.0.1"));
    assert_eq!(p.planned.get("mtu"), &Value::int(9000));
    assert_eq!(p.planned.get("state"), &Value::string("active"));
    assert!(p.requires_replace.is_empty());
    assert!(p.diagnostics.is_empty());
}

#[tokio::test]
async fn plan_works_with_unknown_provider_configuration() {
    // No settings at all: plan never needs the controller.
    let p = plan(&Value::Null, &config(&[("cidr", Value::unknown())])).await;
    assert!(p.planned.get("gateway").is_unknown());
    assert!(!p.diagnostics.has_error());
}

#[tokio::test]
async fn update_keeps_stable_values_and_members_change_in_place() {
    let prior = applied(&plan(&Value::Null, &config(&[])).await.planned);
    let c = config(&[("members", Value::set(vec![member(Some("swp1@sw1"), None)]))]);
    let p = plan(&prior, &c).await;
    for a in [
        "id",
        "vlan_id",
        "vni",
        "allocation_id",
        "subnet_id",
        "gateway",
    ] {
        assert_eq!(p.planned.get(a), prior.get(a), "{a}");
    }
    assert!(p.planned.get("status").is_unknown());
    assert!(p.planned.get("attached_ports").is_unknown());
    assert!(p.requires_replace.is_empty(), "{:?}", p.requires_replace);
}

#[tokio::test]
async fn no_change_is_a_no_op_plan() {
    let prior = applied(&plan(&Value::Null, &config(&[])).await.planned);
    let p = plan(&prior, &config(&[])).await;
    assert_eq!(p.planned, prior);
}

#[tokio::test]
async fn identity_changes_require_replacement() {
    let prior = applied(&plan(&Value::Null, &config(&[])).await.planned);
    for (attr, v) in [
        ("cidr", Value::string("10.30.0.0/24")),
        ("vpc", Value::string("vpc-b")),
        ("site", Value::string("dc2")),
        ("tenant", Value::string("tenant-b")),
        ("name", Value::string("other")),
    ] {
        let p = plan(&prior, &config(&[(attr, v)])).await;
        assert_eq!(p.requires_replace, [AttrPath::attr(attr)], "{attr}");
    }
}

#[tokio::test]
async fn gateway_follows_a_new_default_in_place() {
    let prior = applied(
        &plan(
            &Value::Null,
            &config(&[("gateway", Value::string("10.20.0.254"))]),
        )
        .await
        .planned,
    );
    let p = plan(&prior, &config(&[])).await;
    assert_eq!(p.planned.get("gateway"), &Value::string("10.20.0.1"));
    assert!(p.requires_replace.is_empty());
}

#[tokio::test]
async fn timeouts_only_change_keeps_status() {
    let prior = applied(&plan(&Value::Null, &config(&[])).await.planned);
    let t = Value::object([
        ("create", Value::string("20m")),
        ("update", Value::Null),
        ("delete", Value::Null),
        ("read", Value::Null),
    ]);
    let p = plan(&prior, &config(&[("timeouts", t)])).await;
    assert_eq!(p.planned.get("status"), prior.get("status"));
    assert_eq!(p.planned.get("attached_ports"), prior.get("attached_ports"));
}

#[test]
fn members_keep_hostnames_while_all_their_ports_are_attached() {
    let prior = Value::object([
        (
            "members",
            Value::set(vec![member_value(&Member {
                port: None,
                hostname: Some("gpu-001".into()),
                untagged: true,
            })]),
        ),
        ("attached_ports", attached_value(&gpu_001_ports())),
    ]);
    let both: BTreeMap<String, bool> =
        [("swp1@sw1".to_owned(), true), ("swp1@sw2".to_owned(), true)].into();
    let (m, _) = observed_members(&prior, &both);
    assert_eq!(m, prior.get("members").clone());

    // One port detached and a stranger attached out of band.
    let drifted: BTreeMap<String, bool> = [
        ("swp1@sw1".to_owned(), true),
        ("swp9@sw9".to_owned(), false),
    ]
    .into();
    let (m, a) = observed_members(&prior, &drifted);
    let want = Value::set(vec![
        member_value(&Member {
            port: Some("swp1@sw1".into()),
            hostname: None,
            untagged: true,
        }),
        member_value(&Member {
            port: Some("swp9@sw9".into()),
            hostname: None,
            untagged: false,
        }),
    ]);
    assert_eq!(m, want);
    assert_eq!(a.len(), 2);
}

#[test]
fn import_skeleton_names_every_attribute() {
    let s = import_skeleton(" tenant-a-net ").expect("skeleton");
    assert!(s.conforms_to(&segment_schema().value_type()));
    assert_eq!(s.get("name"), &Value::string("tenant-a-net"));
    assert!(import_skeleton("").is_err());
}

/// The two switch ports of server `gpu-001`, attached through its hostname member.
fn gpu_001_ports() -> [Attached; 2] {
    ["swp1@sw1", "swp1@sw2"].map(|port| Attached {
        port: port.into(),
        hostname: Some("gpu-001".into()),
        untagged: true,
    })
}

/// The V-Net body of an applied segment with VLAN and VNI left to the controller.
fn vnet_body_with(attached: &[Attached]) -> crate::backends::netris::VNetWrite {
    let seg = Segment::from_config(&SegmentConfig::decode(&applied(&config(&[
        ("gateway", Value::string("10.20.0.1")),
        ("mtu", Value::int(9000)),
        ("state", Value::string("active")),
        ("vlan_id", Value::Null),
        ("vni", Value::Null),
    ]))))
    .expect("segment");
    let refs = Refs {
        tenant: 1,
        vpc: 2,
        site: 3,
    };
    seg.vnet_body(refs, attached)
}

#[test]
fn vnet_body_spells_auto_allocation_and_tags() {
    let body = vnet_body_with(&[]);
    assert_eq!(body.vlan, "auto");
    assert_eq!(body.vxlan_id, 0);
    assert_eq!(body.gateways[0].prefix, "10.20.0.1/24");
    assert_eq!(
        body.tags,
        ["gpufleet:owner=tenant-a-net", "gpufleet:mtu=9000"]
    );
}

#[test]
fn hostname_members_travel_in_the_vnet_tags_and_come_back_on_import() {
    let [first, second] = gpu_001_ports();
    let attached = [
        first,
        second,
        Attached {
            port: "swp7@sw1".into(),
            hostname: None,
            untagged: false,
        },
    ];
    let body = vnet_body_with(&attached);
    assert_eq!(
        body.tags,
        [
            "gpufleet:owner=tenant-a-net",
            "gpufleet:mtu=9000",
            "gpufleet:host-port=gpu-001/swp1@sw1",
            "gpufleet:host-port=gpu-001/swp1@sw2",
        ]
    );

    // An import knows only the name: the tags give the hostname member back, and the port
    // that was listed directly stays a port member.
    let (members, tagged) = hostname_members_in(&body.tags).expect("tagged");
    let skeleton = import_skeleton("tenant-a-net").expect("skeleton");
    let mut prior = skeleton.clone();
    prior.set_attr("members", members);
    prior.set_attr("attached_ports", tagged);
    let remote: BTreeMap<String, bool> = [
        ("swp1@sw1".to_owned(), true),
        ("swp1@sw2".to_owned(), true),
        ("swp7@sw1".to_owned(), false),
    ]
    .into();
    let (m, a) = observed_members(&prior, &remote);
    assert_eq!(
        m,
        Value::set(vec![
            member_value(&Member {
                port: None,
                hostname: Some("gpu-001".into()),
                untagged: true,
            }),
            member_value(&Member {
                port: Some("swp7@sw1".into()),
                hostname: None,
                untagged: false,
            }),
        ])
    );
    assert_eq!(a.len(), 3);
    assert!(hostname_members_in(&["gpufleet:owner=x".to_owned()]).is_none());
}
