//! Actions: announced with their schemas, validated and planned with diagnostics on the
//! attribute, invoked with progress events streamed in order and exactly one completed event
//! at the end, which carries the outcome.

use gpufleet_engine::{path::AttrPath, value::Value};
use terraform_provider_gpufleet::proto::tfplugin6 as pb;

use crate::{
    support::{Harness, dv, engine_path, single_error, wire_block_type},
    widget::POKE,
};

/// Invokes `action` with `config`; the progress messages, then the completed event's
/// diagnostics. Fails unless the stream is progress events and one completed event last.
async fn invoke(h: &Harness, action: &str, config: &Value) -> (Vec<String>, Vec<pb::Diagnostic>) {
    // An action the provider does not serve has no schema to encode with.
    let served = h.wire_schema().action_schemas.contains_key(action);
    let mut stream = h
        .client()
        .invoke_action(pb::invoke_action::Request {
            action_type: action.to_owned(),
            config: served.then(|| dv(config, &action_type(h, action))),
            client_capabilities: None,
        })
        .await
        .expect("InvokeAction")
        .into_inner();
    let mut progress = Vec::new();
    let mut completed = None;
    while let Some(event) = stream.message().await.expect("an InvokeAction event") {
        assert!(
            completed.is_none(),
            "an event after the completed one: {event:?}"
        );
        match event.r#type.expect("every event has a type") {
            pb::invoke_action::event::Type::Progress(p) => progress.push(p.message),
            pb::invoke_action::event::Type::Completed(c) => completed = Some(c.diagnostics),
        }
    }
    (
        progress,
        completed.expect("the stream ends with a completed event"),
    )
}

fn action_type(h: &Harness, action: &str) -> gpufleet_engine::value::Type {
    let schema = h
        .wire_schema()
        .action_schemas
        .get(action)
        .and_then(|a| a.schema.as_ref())
        .and_then(|s| s.block.as_ref())
        .unwrap_or_else(|| panic!("{action} has no schema"));
    wire_block_type(schema)
}

fn steps(steps: &[&str]) -> Value {
    Value::object([(
        "steps",
        Value::List(steps.iter().map(|s| Value::string(*s)).collect()),
    )])
}

#[tokio::test]
async fn actions_are_announced_with_their_schemas() {
    let h = Harness::start().await;
    let meta = h.metadata().await;
    let names: Vec<&str> = meta.actions.iter().map(|a| a.type_name.as_str()).collect();
    for name in ["gpufleet_bcm_node_power", POKE] {
        assert!(names.contains(&name), "{name} not in {names:?}");
        action_type(&h, name);
    }
}

#[tokio::test]
async fn progress_streams_in_order_and_the_outcome_comes_last() {
    let h = Harness::start().await;
    let (progress, diags) = invoke(&h, POKE, &steps(&["cordon", "drain", "done"])).await;
    assert_eq!(progress, ["cordon", "drain", "done"]);
    assert!(diags.is_empty(), "{diags:?}");

    let (progress, diags) = invoke(&h, POKE, &steps(&["cordon", "fail", "never"])).await;
    assert_eq!(progress, ["cordon"]);
    assert_eq!(single_error(&diags, "InvokeAction").summary, "Poke Failed");

    let (progress, diags) = invoke(&h, "gpufleet_teleport", &Value::Null).await;
    assert!(progress.is_empty());
    assert_eq!(
        single_error(&diags, "InvokeAction").summary,
        "Unknown Action Type"
    );
}

#[tokio::test]
async fn bad_input_and_a_missing_backend_are_reported_before_anything_runs() {
    let h = Harness::start().await;
    let action = "gpufleet_bcm_node_power";
    let ty = action_type(&h, action);
    let config = |op: &str| {
        Value::object([
            ("hostname", Value::string("gpu-01")),
            ("operation", Value::string(op)),
            ("force", Value::Null),
        ])
    };
    let validated = h
        .client()
        .validate_action_config(pb::validate_action_config::Request {
            type_name: action.to_owned(),
            config: Some(dv(&config("cycle"), &ty)),
        })
        .await
        .expect("ValidateActionConfig")
        .into_inner();
    let d = single_error(&validated.diagnostics, "ValidateActionConfig");
    assert_eq!(
        d.attribute.as_ref().map(engine_path),
        Some(AttrPath::attr("operation")),
        "{d:?}"
    );

    // Without the provider's bcm block the plan says what is missing, and nothing runs.
    let planned = h
        .client()
        .plan_action(pb::plan_action::Request {
            action_type: action.to_owned(),
            config: Some(dv(&config("reset"), &ty)),
            client_capabilities: None,
        })
        .await
        .expect("PlanAction")
        .into_inner();
    assert!(!planned.diagnostics.is_empty());
    for d in &planned.diagnostics {
        assert!(d.detail.contains("`bcm` block"), "{}", d.detail);
    }
    let (progress, diags) = invoke(&h, action, &config("reset")).await;
    assert!(progress.is_empty(), "{progress:?}");
    assert!(
        diags.iter().all(|d| d.detail.contains("`bcm` block")),
        "{diags:?}"
    );
}
