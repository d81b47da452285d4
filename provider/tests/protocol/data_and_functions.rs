//! The `gpufleet_gpu_catalog` data source and the `mig_profiles` function over the wire.

use gpufleet_engine::{
    path::AttrPath,
    value::{Type, Value},
};
use terraform_provider_gpufleet::{codec::type_from_json_bytes, proto::tfplugin6 as pb};

use crate::support::{Harness, assert_no_errors, dv, engine_path, from_dv, single_error};

const CATALOG: &str = "gpufleet_gpu_catalog";

/// A catalog configuration as Terraform sends it: computed attributes null.
fn catalog_config(product: Value) -> Value {
    Value::object([
        ("product", product),
        ("mig_capable", Value::Null),
        ("gpu", Value::Null),
        ("gpus", Value::Null),
        ("products", Value::Null),
    ])
}

fn catalog_type() -> Type {
    gpufleet_engine::registry::data_source(CATALOG)
        .expect("catalog is registered")
        .schema()
        .value_type()
}

#[tokio::test]
async fn gpu_catalog_reads_a_known_product_as_a_wholly_known_object() {
    let h = Harness::start().await;
    // The harness checks the result is non-null, wholly known and fits the schema type.
    let (state, diags) = h
        .read_data_source(CATALOG, &catalog_config(Value::string("A100-80GB")))
        .await;
    assert_no_errors(&diags, "ReadDataSource");
    assert!(diags.is_empty(), "no warnings either: {diags:?}");
    assert_eq!(
        state.get("product"),
        &Value::string("A100-80GB"),
        "the configured value is kept as written"
    );
    let gpu = state.get("gpu");
    assert_eq!(gpu.get("product"), &Value::string("NVIDIA-A100-SXM4-80GB"));
    assert_eq!(gpu.get("memory_gb"), &Value::int(80));
    assert_eq!(gpu.get("mig_capable"), &Value::Bool(true));
    let profiles = gpu.get("mig_profiles").as_seq().expect("profiles list");
    assert!(!profiles.is_empty());
    let products = state.get("products").as_seq().expect("products list");
    assert!(products.contains(&Value::string("NVIDIA-A100-SXM4-80GB")));
    assert_eq!(
        products.len(),
        state.get("gpus").as_seq().map_or(0, <[Value]>::len),
        "one product name per GPU"
    );
}

#[tokio::test]
async fn gpu_catalog_unknown_product_is_an_error_at_product() {
    let h = Harness::start().await;
    let (state, diags) = h
        .read_data_source(CATALOG, &catalog_config(Value::string("RTX-9999")))
        .await;
    let d = single_error(&diags, "reading an unknown product");
    assert_eq!(d.summary, "Unknown GPU Product");
    assert_eq!(
        d.attribute.as_ref().map(engine_path),
        Some(AttrPath::attr("product"))
    );
    assert!(
        d.detail.contains("NVIDIA-B200"),
        "lists known products: {}",
        d.detail
    );
    assert!(state.is_null(), "no result on error");
}

#[tokio::test]
async fn validate_gpu_catalog_leaves_products_to_read() {
    let h = Harness::start().await;
    let ty = catalog_type();
    let validate = |config: Value| {
        let mut client = h.client();
        let ty = ty.clone();
        async move {
            client
                .validate_data_resource_config(pb::validate_data_resource_config::Request {
                    type_name: CATALOG.to_owned(),
                    config: Some(dv(&config, &ty)),
                })
                .await
                .expect("ValidateDataResourceConfig")
                .into_inner()
                .diagnostics
        }
    };

    // The provider block may declare a product the catalog lacks, and validation runs
    // without it: reading refuses an unknown product (see above).
    let diags = validate(catalog_config(Value::string("RTX-9999"))).await;
    assert!(diags.is_empty(), "left for read: {diags:?}");

    let diags = validate(catalog_config(Value::string("NVIDIA-H100-80GB-HBM3"))).await;
    assert!(diags.is_empty(), "a known product is valid: {diags:?}");
    let diags = validate(catalog_config(Value::unknown())).await;
    assert!(
        diags.is_empty(),
        "an unknown product is left for later: {diags:?}"
    );
}

/// Calls a function with string arguments, as Terraform encodes them.
async fn call(h: &Harness, name: &str, args: &[Value]) -> pb::call_function::Response {
    h.client()
        .call_function(pb::call_function::Request {
            name: name.to_owned(),
            arguments: args.iter().map(|a| dv(a, &Type::String)).collect(),
        })
        .await
        .expect("CallFunction")
        .into_inner()
}

#[tokio::test]
async fn mig_profiles_returns_the_profiles_of_an_a100_80gb() {
    let h = Harness::start().await;
    let f = &h.wire_schema().functions["mig_profiles"];
    let return_type =
        type_from_json_bytes(&f.r#return.as_ref().expect("return").r#type).expect("return type");

    let resp = call(&h, "mig_profiles", &[Value::string("A100-80GB")]).await;
    assert_eq!(resp.error, None);
    let result = from_dv(resp.result.as_ref(), &return_type);
    assert!(result.conforms_to(&return_type));
    assert!(result.is_wholly_known());
    let profiles = result.as_seq().expect("a list");
    let names: Vec<&str> = profiles
        .iter()
        .filter_map(|p| p.get("name").as_str())
        .collect();
    assert_eq!(names.first(), Some(&"1g.10gb"), "smallest first: {names:?}");
    assert!(names.contains(&"7g.80gb"), "{names:?}");
    let full = profiles
        .iter()
        .find(|p| p.get("name").as_str() == Some("7g.80gb"))
        .expect("7g.80gb");
    assert_eq!(full.get("memory_gb"), &Value::int(80));
    assert_eq!(full.get("max_instances"), &Value::int(1));
}

#[tokio::test]
async fn mig_profiles_of_an_unknown_product_blames_the_first_argument() {
    let h = Harness::start().await;
    let resp = call(&h, "mig_profiles", &[Value::string("NVIDIA-Z9000")]).await;
    assert_eq!(resp.result, None);
    let err = resp.error.expect("a function error");
    assert_eq!(err.function_argument, Some(0));
    assert!(err.text.contains("NVIDIA-Z9000"), "{}", err.text);

    let resp = call(&h, "mig_profiles", &[Value::Null]).await;
    let err = resp.error.expect("null is not allowed");
    assert_eq!(err.function_argument, Some(0));

    let resp = call(
        &h,
        "mig_profiles",
        &[Value::string("A100-80GB"), Value::string("x")],
    )
    .await;
    let err = resp.error.expect("one argument too many");
    assert_eq!(err.function_argument, Some(1));
}

#[tokio::test]
async fn calling_an_unknown_function_is_a_function_error() {
    let h = Harness::start().await;
    let resp = call(&h, "mig_profile", &[Value::string("A100-80GB")]).await;
    assert_eq!(resp.result, None);
    let err = resp.error.expect("a function error");
    assert_eq!(err.function_argument, None, "no argument is at fault");
    assert!(err.text.contains("mig_profile"), "{}", err.text);
}
