//! Benchmarks that print figures (tests never assert on time):
//!
//! - `handshake`: provider start to handshake line with Terraform's client certificate,
//!   median of 50 launches, beside the same for a Go provider on terraform-plugin-framework
//!   (`bench/peer`, built with `go build`);
//! - `plan`: `terraform plan` of 1,000 `gpufleet_gpu_catalog` instances beside Terraform's
//!   own 1,000 `terraform_data` resources and the peer's 1,000 data sources in the same
//!   run, their ratio, the providers' peak memory, and the provider-side latency of each
//!   RPC.
//!
//! - `vcluster`: `terraform apply` of one virtual cluster until it is ready (vCluster's own
//!   syncer, in the lab), then of ten at once, with each tenant's start-up time and memory
//!   as the lab's vCluster kubelet measured them.
//!
//! - `segments`: `terraform apply -parallelism=10` of 50 and 200 network segments against the
//!   lab's Netris emulator (which takes 500 ms to provision a V-Net), beside as many
//!   `terraform_data` resources, then an in-place update of each and their destroy, with the
//!   controller requests per segment of each (as the emulator counted them, plan included),
//!   and a no-op plan of them beside one of the `terraform_data`.
//!
//! - `refresh`: no-op `terraform plan` of 200 paused virtual clusters, and of 200 node
//!   pools, beside 200 `terraform_data` and 200 resources of the Go peer that read nothing,
//!   with the host API requests each plan made (the lab API server's audit log of the
//!   provider's account) by verb and resource.
//!
//! Every section that runs the provider prints its peak memory (VmHWM); the plans print its
//! CPU time too, so that a plan's wall time splits into the provider's part and the rest.
//!
//! Run with `scripts/bench [handshake|plan|vcluster|segments|refresh|all]`, which measures
//! the release build.

mod handshake;
mod lab_figures;
mod measure;
mod peer;
mod plan;

use handshake::handshake;
use lab_figures::{refresh, segments, vcluster};
use plan::plan;

fn main() {
    if std::env::var_os(gpufleet_acceptance::RELEASE_ENV).is_none() {
        eprintln!(
            "note: measuring a debug build of the provider; scripts/bench measures the release build"
        );
    }
    let what = std::env::args().nth(1).unwrap_or_else(|| "all".to_owned());
    if what == "handshake" || what == "all" {
        handshake(50);
    }
    if what == "plan" || what == "all" {
        plan(1000, 5);
    }
    if what == "vcluster" || what == "all" {
        vcluster(&[1, 10]);
    }
    if what == "segments" || what == "all" {
        segments(&[50, 200]);
    }
    if what == "refresh" || what == "all" {
        // A second argument sets the count (`refresh 20` for a quick look).
        let n = std::env::args()
            .nth(2)
            .and_then(|n| n.parse().ok())
            .unwrap_or(200);
        refresh(n, 3);
    }
}
