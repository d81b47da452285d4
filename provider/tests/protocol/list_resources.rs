//! List resources (`terraform query`): announced with their schemas, validated on the
//! attribute inside the list block's `config`, and answered with results that carry the
//! resource's identity and, when asked, an object that fits the resource's schema; at most the
//! limit, and problems after the results.

use gpufleet_engine::{path::AttrPath, value::Value};
use terraform_provider_gpufleet::proto::tfplugin6 as pb;

use crate::{
    support::{Harness, assert_no_errors, engine_path, single_error},
    widget::{TYPE, config, with},
};

/// The list types the registry serves, each over a managed resource of the same name.
const SERVED: &[&str] = &["gpufleet_network_segment", "gpufleet_bcm_node"];

#[tokio::test]
async fn list_resources_are_announced_with_schemas_and_identities() {
    let h = Harness::start().await;
    let meta = h.metadata().await;
    let announced: Vec<&str> = meta
        .list_resources
        .iter()
        .map(|l| l.type_name.as_str())
        .collect();
    let schema = h.wire_schema();
    for name in SERVED.iter().chain([&TYPE]) {
        assert!(announced.contains(name), "{name} not in {announced:?}");
        assert!(
            schema.list_resource_schemas.contains_key(*name),
            "{name} has no list schema"
        );
        // Terraform refuses a list resource whose resource has no identity.
        assert!(
            h.identity_type(name).is_some(),
            "{name} is listed but has no identity"
        );
    }
}

#[tokio::test]
async fn results_carry_identities_and_when_asked_objects_of_the_resource_schema() {
    let h = Harness::start().await;
    let mut zones = Vec::new();
    for (name, zone) in [
        ("list-b", "zone-q"),
        ("list-a", "zone-q"),
        ("list-c", "zone-r"),
    ] {
        let state = h
            .create(TYPE, &with(config(name), "zone", Value::string(zone)))
            .await;
        zones.push(state);
    }
    let filter = Value::object([("zone", Value::string("zone-q"))]);

    let names = h.list(TYPE, &filter, false, 100).await;
    assert_no_errors(&names.diagnostics, "ListResource");
    let found: Vec<&Value> = names.results.iter().map(|r| &r.1).collect();
    assert_eq!(
        found,
        [
            &Value::object([("name", Value::string("list-a"))]),
            &Value::object([("name", Value::string("list-b"))]),
        ],
        "the widgets of zone-q, by name"
    );

    let full = h.list(TYPE, &filter, true, 100).await;
    assert_no_errors(&full.diagnostics, "ListResource");
    let objects: Vec<&Value> = full.results.iter().map(|r| &r.2).collect();
    assert_eq!(objects, [&zones[1], &zones[0]], "the objects as stored");

    let one = h.list(TYPE, &filter, true, 1).await;
    assert_eq!(one.results.len(), 1, "the limit is honoured");
}

#[tokio::test]
async fn a_bad_filter_is_refused_on_its_attribute_inside_config() {
    let h = Harness::start().await;
    let listing = h
        .list(
            TYPE,
            &Value::object([("zone", Value::string("moon"))]),
            false,
            100,
        )
        .await;
    let d = single_error(&listing.diagnostics, "ValidateListResourceConfig");
    assert_eq!(d.summary, "Invalid Zone");
    let path = d.attribute.as_ref().map(engine_path);
    assert_eq!(
        path,
        Some(AttrPath::attr("config").push_attr("zone")),
        "Terraform resolves the path from the list block"
    );
    assert!(listing.results.is_empty());

    // A status filter BCM never reports, on a served list type.
    let listing = h
        .list(
            "gpufleet_bcm_node",
            &Value::object([
                ("tenant", Value::Null),
                ("category", Value::Null),
                ("rack", Value::Null),
                ("status", Value::string("RUNNING")),
            ]),
            false,
            100,
        )
        .await;
    let d = single_error(&listing.diagnostics, "ValidateListResourceConfig");
    assert_eq!(
        d.attribute.as_ref().map(engine_path),
        Some(AttrPath::attr("config").push_attr("status"))
    );
}

#[tokio::test]
async fn an_unknown_list_type_and_a_missing_backend_are_diagnostics_not_failures() {
    let h = Harness::start().await;
    let mut stream = h
        .client()
        .list_resource(pb::list_resource::Request {
            type_name: "gpufleet_nonsense".to_owned(),
            config: None,
            include_resource_object: false,
            limit: 10,
        })
        .await
        .expect("ListResource answers")
        .into_inner();
    let event = stream
        .message()
        .await
        .expect("an event")
        .expect("one event");
    assert!(event.identity.is_none());
    assert_eq!(
        single_error(&event.diagnostic, "ListResource").summary,
        "Unknown List Resource Type"
    );

    // Without the provider's netris block there is nothing to list from: the settings
    // diagnostic says which block is missing.
    let listing = h
        .list(
            "gpufleet_network_segment",
            &Value::object([
                ("tenant", Value::Null),
                ("vpc", Value::Null),
                ("site", Value::Null),
            ]),
            true,
            100,
        )
        .await;
    assert!(!listing.diagnostics.is_empty());
    for d in &listing.diagnostics {
        assert_eq!(d.severity, pb::diagnostic::Severity::Error as i32);
        assert!(d.detail.contains("`netris` block"), "{}", d.detail);
    }
    assert!(listing.results.is_empty());
}
