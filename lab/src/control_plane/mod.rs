//! Bringing the lab up and down, in layers: one component's steps ([`steps`]: spawn,
//! health, whether a running one is current), the Kubernetes control plane in order
//! ([`start`]), the API emulators ([`emulators`]), stopping ([`stop`]) and the Go builds
//! ([`build`]). [`crate::Lab`] composes them.

pub mod build;
pub mod emulators;
pub mod start;
pub mod steps;
pub mod stop;

use std::time::Duration;

/// How long a component gets to exit after SIGTERM before SIGKILL.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(15);
