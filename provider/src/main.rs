//! The `terraform-provider-gpufleet` binary: Terraform launches it; `--debug` starts it for a
//! debugger to attach to.

use std::process::ExitCode;

use terraform_provider_gpufleet::{logging, plugin};

fn main() -> ExitCode {
    let env = |k: &str| std::env::var(k).ok();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--version" || a == "-v") {
        println!("terraform-provider-gpufleet {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    let debug = args.iter().any(|a| a == "--debug" || a == "-debug");
    logging::init(logging::level_from_env(&env));

    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("gpufleet: failed to start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let served = runtime.block_on(async {
        if debug {
            plugin::serve_debug(&env).await
        } else {
            plugin::serve_managed(&env).await
        }
    });
    // Background tasks (idle streams, the accept loop) must not delay exit: Terraform kills
    // providers that linger after shutdown.
    runtime.shutdown_background();
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpufleet: {e}");
            ExitCode::FAILURE
        }
    }
}
