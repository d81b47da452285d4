//! Generates the gRPC code for tfplugin6 and go-plugin's services from `../proto`.
//!
//! The .proto files are compiled by protox, a protobuf compiler written in Rust that carries
//! the well-known types (`google/protobuf/timestamp.proto`), so the build needs no `protoc`
//! and no system protobuf headers: cargo alone builds the provider on any machine.

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
    let descriptors = protox::compile(protos, ["../proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        // The client is only used by the provider's own protocol tests.
        .build_client(true)
        .generate_default_stubs(true)
        .compile_fds(descriptors)?;
    Ok(())
}
