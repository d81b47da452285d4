//! RPCs gpufleet does not offer fail with gRPC `Unimplemented`; unknown type names are
//! diagnostics.

use gpufleet_engine::value::Value;
use terraform_provider_gpufleet::proto::tfplugin6 as pb;
use tonic::{Code, Status};

use crate::support::{Harness, dv, single_error};

#[track_caller]
fn assert_unsupported<T: std::fmt::Debug>(result: Result<tonic::Response<T>, Status>, rpc: &str) {
    let status = result.expect_err(&format!("{rpc} should fail"));
    assert_eq!(status.code(), Code::Unimplemented, "{rpc}: {status:?}");
    assert!(
        status.message().contains("not supported by gpufleet"),
        "{rpc}: {}",
        status.message()
    );
    assert!(
        status.message().contains(rpc),
        "{rpc}: {}",
        status.message()
    );
}

#[tokio::test]
async fn unsupported_rpcs_are_unimplemented() {
    let h = Harness::start().await;
    let mut c = h.client();
    assert_unsupported(
        c.move_resource_state(pb::move_resource_state::Request::default())
            .await,
        "MoveResourceState",
    );
    assert_unsupported(
        c.generate_resource_config(pb::generate_resource_config::Request::default())
            .await,
        "GenerateResourceConfig",
    );
    assert_unsupported(
        c.lock_state(pb::lock_state::Request::default()).await,
        "LockState",
    );
}

#[tokio::test]
async fn streaming_unsupported_rpcs_are_unimplemented() {
    let h = Harness::start().await;
    let mut c = h.client();
    assert_unsupported(
        c.read_state_bytes(pb::read_state_bytes::Request::default())
            .await,
        "ReadStateBytes",
    );
    // The server is unaffected.
    let schema = c
        .get_provider_schema(pb::get_provider_schema::Request {})
        .await
        .expect("GetProviderSchema");
    assert!(schema.into_inner().diagnostics.is_empty());
}

#[tokio::test]
async fn unknown_resource_type_is_an_error_diagnostic() {
    let h = Harness::start().await;
    let any = dv(&Value::Null, &gpufleet_engine::value::Type::Dynamic);
    let resp = h
        .client()
        .plan_resource_change(pb::plan_resource_change::Request {
            type_name: "gpufleet_no_such_thing".to_owned(),
            prior_state: Some(any.clone()),
            proposed_new_state: Some(any.clone()),
            config: Some(any),
            ..Default::default()
        })
        .await
        .expect("a diagnostic, not a gRPC error")
        .into_inner();
    let d = single_error(&resp.diagnostics, "PlanResourceChange");
    assert_eq!(d.summary, "Unknown Resource Type");
    assert!(d.detail.contains("gpufleet_no_such_thing"), "{}", d.detail);
    assert_eq!(resp.planned_state, None);

    let resp = h
        .client()
        .read_data_source(pb::read_data_source::Request {
            type_name: "gpufleet_no_such_data".to_owned(),
            ..Default::default()
        })
        .await
        .expect("a diagnostic, not a gRPC error")
        .into_inner();
    assert_eq!(
        single_error(&resp.diagnostics, "ReadDataSource").summary,
        "Unknown Data Source Type"
    );
}
