//! Clients of the systems gpufleet manages. This is the only part of the engine that talks to
//! the network (reqwest, tokio networking); resources see each backend through a trait, so
//! their logic can be tested against fakes and the planner stays offline.

pub mod bcm;
pub mod kube;
pub mod netris;
