//! StopProvider: in-flight operations are cancelled, and the server keeps serving.

use std::time::{Duration, Instant};

use gpufleet_engine::value::Value;
use terraform_provider_gpufleet::proto::tfplugin6 as pb;

use crate::{
    support::{Action, Harness, single_error},
    widget::{self, TYPE, config, timeouts, with},
};

/// How long the widget would wait for cancellation; apply must return long before.
const CREATE_TIMEOUT: &str = "60s";

/// What "promptly" means.
const PROMPTLY: Duration = Duration::from_secs(10);

#[tokio::test]
async fn stop_provider_cancels_in_flight_apply_and_keeps_serving() {
    let h = Harness::start().await;
    let name = "await-stop-1";
    let cfg = with(config(name), "timeouts", timeouts(CREATE_TIMEOUT));
    let plan = h.plan(TYPE, &Value::Null, &cfg).await;
    assert_eq!(plan.action, Action::Create);

    let started = Instant::now();
    let stop = async {
        // Only stop once apply is waiting; bounded in case it never gets there.
        tokio::time::timeout(PROMPTLY, widget::started_applying(name))
            .await
            .expect("apply started waiting for StopProvider");
        h.client()
            .stop_provider(pb::stop_provider::Request {})
            .await
            .expect("StopProvider")
            .into_inner()
    };
    let (applied, stopped) = tokio::join!(h.apply(&plan, &cfg), stop);

    assert_eq!(stopped.error, "", "StopProvider reports no error");
    assert!(
        started.elapsed() < PROMPTLY,
        "apply returned after {:?}, not promptly",
        started.elapsed()
    );
    let d = single_error(&applied.diagnostics, "cancelled apply");
    assert!(
        d.summary.to_lowercase().contains("cancelled"),
        "{}: {}",
        d.summary,
        d.detail
    );
    assert!(
        !applied.new_state.is_null(),
        "the half-made object is returned so Terraform records it"
    );
    assert_eq!(applied.new_state.get("name"), &Value::string(name));
    assert_eq!(applied.new_state.get("status"), &Value::string("cancelled"));

    // The server is still there.
    let schema = h
        .client()
        .get_provider_schema(pb::get_provider_schema::Request {})
        .await
        .expect("GetProviderSchema after StopProvider")
        .into_inner();
    assert!(schema.resource_schemas.contains_key(TYPE));
    let read = h.read(TYPE, &applied.new_state).await;
    assert_eq!(read.new_state, applied.new_state, "refresh still works");
}

#[tokio::test]
async fn stop_provider_with_nothing_in_flight_is_harmless() {
    let h = Harness::start().await;
    for _ in 0..2 {
        let resp = h
            .client()
            .stop_provider(pb::stop_provider::Request {})
            .await
            .expect("StopProvider")
            .into_inner();
        assert_eq!(resp.error, "");
    }
    let meta = h
        .client()
        .get_metadata(pb::get_metadata::Request {})
        .await
        .expect("GetMetadata after StopProvider")
        .into_inner();
    assert!(meta.resources.iter().any(|r| r.type_name == TYPE));
}
