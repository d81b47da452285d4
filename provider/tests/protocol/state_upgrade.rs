//! UpgradeResourceState: stored JSON state from older and current schema versions.

use gpufleet_engine::value::{BigDecimal, Type, Value};
use terraform_provider_gpufleet::proto::tfplugin6 as pb;

use crate::{
    support::{Action, Harness, assert_no_errors, from_dv, single_error},
    widget::{TYPE, config, with},
};

#[tokio::test]
async fn version_0_state_is_upgraded_to_version_1() {
    let h = Harness::start().await;
    let v0 = br#"{
        "id": "w-legacy-1", "name": "upgrade-v0", "size_gb": 30, "zone": "zone-b",
        "status": "ready", "secret": null, "timeouts": null,
        "port": [{"number": 80, "protocol": "tcp"}]
    }"#;
    let (state, diags) = h.upgrade_state(TYPE, 0, v0).await;
    assert_no_errors(&diags, "UpgradeResourceState");
    assert_eq!(state.get("size"), &Value::int(30), "size_gb became size");
    assert_eq!(state.get("id"), &Value::string("w-legacy-1"));
    assert_eq!(state.get("zone"), &Value::string("zone-b"));
    assert_eq!(
        state.get("port"),
        &Value::List(vec![Value::object([
            ("number", Value::int(80)),
            ("protocol", Value::string("tcp")),
        ])])
    );

    // The upgraded state plans cleanly against a matching configuration.
    let cfg = with(config("upgrade-v0"), "size", Value::int(30));
    let cfg = with(
        cfg,
        "port",
        Value::List(vec![Value::object([
            ("number", Value::int(80)),
            ("protocol", Value::Null),
        ])]),
    );
    let plan = h.plan(TYPE, &state, &cfg).await;
    assert_eq!(plan.action, Action::NoOp, "{:?}", plan.planned);
}

#[tokio::test]
async fn current_version_state_missing_an_attribute_decodes_it_as_null() {
    let h = Harness::start().await;
    // Written before `zone` and the `port` blocks existed, with an attribute since removed.
    let v1 = br#"{
        "id": "w-legacy-2", "name": "upgrade-v1", "size": 12, "status": "ready",
        "secret": null, "timeouts": {"create": "5m"}, "colour": "blue"
    }"#;
    let (state, diags) = h.upgrade_state(TYPE, 1, v1).await;
    assert_no_errors(&diags, "UpgradeResourceState");
    assert_eq!(state.get("zone"), &Value::Null);
    assert_eq!(state.get("port"), &Value::Null);
    assert_eq!(
        state.get("colour"),
        &Value::Null,
        "removed attributes are dropped"
    );
    assert!(state.as_object().is_some_and(|o| !o.contains_key("colour")));
    assert_eq!(state.get("size"), &Value::int(12));
    assert_eq!(state.get("timeouts").get("create"), &Value::string("5m"));
}

#[tokio::test]
async fn state_from_a_newer_schema_version_is_an_error() {
    let h = Harness::start().await;
    let (state, diags) = h
        .upgrade_state(TYPE, 2, br#"{"id": "w-9", "name": "from-the-future"}"#)
        .await;
    let d = single_error(&diags, "UpgradeResourceState");
    assert_eq!(d.summary, "State From A Newer Provider");
    assert!(d.detail.contains("Upgrade the provider"), "{}", d.detail);
    assert_eq!(state, Value::Null, "no state on error");
}

#[tokio::test]
async fn big_numbers_in_state_survive_exactly() {
    let h = Harness::start().await;
    let big = "123456789012345678901234567890";
    let json = format!(
        r#"{{"id": "w-big", "name": "upgrade-big", "size": {big}, "zone": "zone-a",
            "status": "ready", "secret": null, "timeouts": null, "port": []}}"#
    );
    let (state, diags) = h.upgrade_state(TYPE, 1, json.as_bytes()).await;
    assert_no_errors(&diags, "UpgradeResourceState");
    let expected: BigDecimal = big.parse().expect("number");
    assert_eq!(state.get("size"), &Value::Number(expected.clone()));
    assert_eq!(
        state
            .get("size")
            .as_number()
            .map(ToString::to_string)
            .as_deref(),
        Some(big),
        "not rounded through a float"
    );

    // And through a plan round trip over msgpack.
    let cfg = with(config("upgrade-big"), "size", Value::Number(expected));
    let plan = h.plan(TYPE, &state, &cfg).await;
    assert_eq!(plan.action, Action::NoOp);
    assert_eq!(plan.planned, state);

    // A fractional number that no float can hold, too.
    let precise = "0.1000000000000000000000000000001";
    let json = json.replace(big, precise);
    let (state, diags) = h.upgrade_state(TYPE, 1, json.as_bytes()).await;
    assert_no_errors(&diags, "UpgradeResourceState");
    assert_eq!(
        state.get("size"),
        &Value::Number(precise.parse().expect("number"))
    );
}

#[tokio::test]
async fn flatmap_state_is_not_supported() {
    let h = Harness::start().await;
    let resp = h
        .client()
        .upgrade_resource_state(pb::upgrade_resource_state::Request {
            type_name: TYPE.to_owned(),
            version: 0,
            raw_state: Some(pb::RawState {
                json: Vec::new(),
                flatmap: [("id".to_owned(), "w-1".to_owned())].into(),
            }),
        })
        .await
        .expect("UpgradeResourceState")
        .into_inner();
    assert_eq!(
        single_error(&resp.diagnostics, "flatmap").summary,
        "Unsupported State Format"
    );
    assert_eq!(resp.upgraded_state, None);
}

async fn upgrade_identity(h: &Harness, json: &[u8]) -> pb::upgrade_resource_identity::Response {
    h.client()
        .upgrade_resource_identity(pb::upgrade_resource_identity::Request {
            type_name: TYPE.to_owned(),
            version: 0,
            raw_identity: Some(pb::RawState {
                json: json.to_vec(),
                flatmap: Default::default(),
            }),
        })
        .await
        .expect("UpgradeResourceIdentity")
        .into_inner()
}

#[tokio::test]
async fn stored_identity_passes_through_unchanged() {
    let h = Harness::start().await;
    let ty: Type = h.identity_type(TYPE).expect("the widget has an identity");

    let resp = upgrade_identity(&h, br#"{"name": "identity-upgrade"}"#).await;
    assert_no_errors(&resp.diagnostics, "UpgradeResourceIdentity");
    let identity = resp
        .upgraded_identity
        .as_ref()
        .and_then(|i| i.identity_data.as_ref());
    assert_eq!(
        from_dv(identity, &ty),
        Value::object([("name", Value::string("identity-upgrade"))])
    );

    let resp = upgrade_identity(&h, br#"{"name": "x", "region": "y"}"#).await;
    assert_eq!(
        single_error(&resp.diagnostics, "an identity with an unknown attribute").summary,
        "Invalid Stored Identity"
    );
    assert_eq!(resp.upgraded_identity, None);
}
