//! Two labs on one machine, each with its own MPI Operator: the operator's health port is
//! fixed, so each runs in a network namespace of its own and its lab checks it through a
//! loopback port of its own.
//!
//! The first lab is the tests' shared one ([`Lab::shared`]); the second is a small one of its
//! own, in a temporary directory, stopped at the end.

use gpufleet_lab::components::Component;
use gpufleet_lab::fleet::FleetSpec;
use gpufleet_lab::status::Health;
use gpufleet_lab::{Lab, LabOptions};

const SMALL_FLEET: &str = r#"
name = "small"

[[site]]
name = "site-s"
zone = "zone-s"

[[site.rack]]
name = "r1"
[[site.rack.nodes]]
product = "NVIDIA-H100-80GB-HBM3"
count = 2
gpus_per_node = 8
cpu = "96"
memory = "1Ti"
"#;

/// Stops a lab when dropped, also when the test fails.
struct Down(std::path::PathBuf);

impl Drop for Down {
    fn drop(&mut self) {
        if let Err(e) = Lab::down(&self.0) {
            eprintln!("could not stop the lab in {}: {e}", self.0.display());
        }
    }
}

fn options(dir: std::path::PathBuf) -> LabOptions {
    let mut options = LabOptions::new(dir);
    options.fleet = Some(FleetSpec::from_toml(SMALL_FLEET).expect("fleet"));
    options
}

async fn mpi_operator_health(dir: &std::path::Path) -> (u16, Health) {
    let status = Lab::status(dir).await.expect("status");
    let c = status
        .components
        .iter()
        .find(|c| c.component == Component::MpiOperator)
        .expect("the MPI Operator is a component");
    (c.port, c.health.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_labs_run_their_own_mpi_operator_at_once() {
    let a = Lab::shared().dir().to_path_buf();
    let tmp = tempfile::tempdir().expect("temp dir");
    let b = tmp.path().join("b");
    let _down_b = Down(b.clone());

    Lab::up(options(b.clone()))
        .await
        .expect("the second lab comes up beside the shared one, MPI Operator included");

    let (port_a, health_a) = mpi_operator_health(&a).await;
    let (port_b, health_b) = mpi_operator_health(&b).await;
    assert_eq!(health_a, Health::Healthy, "the shared lab's MPI Operator");
    assert_eq!(health_b, Health::Healthy, "the second lab's MPI Operator");
    assert_ne!(
        port_a, port_b,
        "each lab checks its operator on a port of its own"
    );
}
