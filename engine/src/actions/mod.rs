//! Actions: day-2 operations that change no state, run by `terraform apply
//! -invoke=action.<type>.<name>` or by a resource's `action_trigger`.

pub mod bcm_node_power;
pub mod bcm_node_reprovision;
mod bcm_node_steps;
pub mod benchmark_run;
pub mod gpu_node_pool_drain;
