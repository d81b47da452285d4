//! ValidateProviderConfig and ConfigureProvider: the provider block, known and unknown.

use gpufleet_engine::value::Value;
use terraform_provider_gpufleet::proto::tfplugin6 as pb;

use crate::{
    support::{Harness, client_capabilities, dv},
    widget::{TYPE, config},
};

/// A provider block as Terraform decodes it: absent backend blocks are null.
fn provider_config(kubernetes: Value, netris: Value) -> Value {
    Value::object([
        ("kubernetes", kubernetes),
        ("bcm", Value::Null),
        ("netris", netris),
        ("gpu_product", Value::List(Vec::new())),
    ])
}

/// One `gpu_product` block with only its required attributes.
fn gpu_product(name: &str) -> Value {
    Value::object([
        ("name", Value::string(name)),
        ("aliases", Value::Null),
        ("display_name", Value::Null),
        ("architecture", Value::Null),
        ("memory_mib", Value::int(46_068)),
        ("gpus_per_node", Value::int(8)),
        ("nvlink_domain_size", Value::Null),
        ("mig_profiles", Value::Null),
    ])
}

fn declaring(products: Vec<Value>) -> Value {
    let mut cfg = provider_config(Value::Null, Value::Null);
    if let Some(o) = cfg.as_object_mut() {
        o.insert("gpu_product".to_owned(), Value::List(products));
    }
    cfg
}

fn netris(endpoint: &str, password: &str) -> Value {
    Value::object([
        ("endpoint", Value::string(endpoint)),
        ("username", Value::string("admin")),
        ("password", Value::string(password)),
        ("ca_certificate", Value::Null),
    ])
}

async fn configure(h: &Harness, cfg: &Value) -> Vec<pb::Diagnostic> {
    h.client()
        .configure_provider(pb::configure_provider::Request {
            terraform_version: "1.12.0".to_owned(),
            config: Some(dv(cfg, &h.provider_type())),
            client_capabilities: Some(client_capabilities()),
        })
        .await
        .expect("ConfigureProvider")
        .into_inner()
        .diagnostics
}

#[tokio::test]
async fn validate_provider_config_accepts_a_full_block() {
    let h = Harness::start().await;
    let cfg = provider_config(Value::Null, netris("https://netris.example", "s3cret-pass"));
    let resp = h
        .client()
        .validate_provider_config(pb::validate_provider_config::Request {
            config: Some(dv(&cfg, &h.provider_type())),
        })
        .await
        .expect("ValidateProviderConfig")
        .into_inner();
    assert!(resp.diagnostics.is_empty(), "{:?}", resp.diagnostics);

    let resp = h
        .client()
        .validate_provider_config(pb::validate_provider_config::Request {
            config: Some(dv(
                &provider_config(Value::unknown(), Value::Null),
                &h.provider_type(),
            )),
        })
        .await
        .expect("ValidateProviderConfig")
        .into_inner();
    assert!(
        resp.diagnostics.is_empty(),
        "unknowns are fine: {:?}",
        resp.diagnostics
    );
}

#[tokio::test]
async fn configure_provider_with_an_unknown_kubernetes_block_succeeds() {
    let h = Harness::start().await;

    // Before configuration the widget sees default settings.
    let plan = h
        .plan(TYPE, &Value::Null, &config("configure-before"))
        .await;
    assert!(plan.diagnostics.is_empty(), "{:?}", plan.diagnostics);

    let diags = configure(&h, &provider_config(Value::unknown(), Value::Null)).await;
    assert!(
        diags.is_empty(),
        "an unknown block is fine at plan time: {diags:?}"
    );

    // The settings reach operations: the widget warns that kubernetes is pending.
    let plan = h.plan(TYPE, &Value::Null, &config("configure-after")).await;
    let summaries: Vec<&str> = plan
        .diagnostics
        .iter()
        .map(|d| d.summary.as_str())
        .collect();
    assert_eq!(summaries, ["Provider Configuration Pending"]);
    assert_eq!(
        plan.diagnostics[0].severity(),
        pb::diagnostic::Severity::Warning
    );

    // Configuring again with known values replaces the settings.
    let known = Value::object([
        ("config_path", Value::string("/dev/null")),
        ("context", Value::Null),
        ("host", Value::Null),
        ("cluster_ca_certificate", Value::Null),
        ("token", Value::string("a-token")),
        ("client_certificate", Value::Null),
        ("client_key", Value::Null),
        ("device_plugin_namespace", Value::Null),
        ("default_mig_config", Value::Null),
    ]);
    let diags = configure(&h, &provider_config(known, Value::Null)).await;
    assert!(diags.is_empty(), "{diags:?}");
    let plan = h.plan(TYPE, &Value::Null, &config("configure-known")).await;
    assert!(plan.diagnostics.is_empty(), "{:?}", plan.diagnostics);
}

#[tokio::test]
async fn declared_gpu_products_are_checked_and_reach_the_catalog() {
    let h = Harness::start().await;
    // A product the catalog has is refused on the block's name.
    let resp = h
        .client()
        .validate_provider_config(pb::validate_provider_config::Request {
            config: Some(dv(
                &declaring(vec![gpu_product("NVIDIA-L40S")]),
                &h.provider_type(),
            )),
        })
        .await
        .expect("ValidateProviderConfig")
        .into_inner();
    assert_eq!(resp.diagnostics.len(), 1, "{:?}", resp.diagnostics);
    assert_eq!(
        resp.diagnostics[0].summary,
        "GPU Product Already In Catalog"
    );
    assert_eq!(
        resp.diagnostics[0]
            .attribute
            .as_ref()
            .map(|a| crate::support::engine_path(a).to_string()),
        Some("gpu_product[0].name".to_owned())
    );

    // Once configured, the data source reads a declared product.
    let diags = configure(&h, &declaring(vec![gpu_product("NVIDIA-Wire-Test-L9")])).await;
    assert!(diags.is_empty(), "{diags:?}");
    let (state, diags) = h
        .read_data_source(
            "gpufleet_gpu_catalog",
            &Value::object([
                ("product", Value::string("wire-test-l9")),
                ("mig_capable", Value::Null),
                ("gpu", Value::Null),
                ("gpus", Value::Null),
                ("products", Value::Null),
            ]),
        )
        .await;
    assert!(diags.is_empty(), "{diags:?}");
    assert_eq!(
        state.get("gpu").get("product"),
        &Value::string("NVIDIA-Wire-Test-L9")
    );
    assert_eq!(state.get("gpu").get("gpus_per_node"), &Value::int(8));
}
