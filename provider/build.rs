//! Generates the gRPC code for tfplugin6 and go-plugin's services from `../proto`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = [
        "../proto/tfplugin6.proto",
        "../proto/grpc_controller.proto",
        "../proto/grpc_stdio.proto",
        "../proto/grpc_broker.proto",
    ];
    for p in protos {
        println!("cargo:rerun-if-changed={p}");
    }
    tonic_prost_build::configure()
        .build_server(true)
        // The client is only used by the provider's own protocol tests.
        .build_client(true)
        .generate_default_stubs(true)
        .compile_protos(&protos, &["../proto"])?;
    Ok(())
}
