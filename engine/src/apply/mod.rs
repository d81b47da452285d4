//! The apply runtime the resource kinds share.
//!
//! A kind's apply, read and import run as steps against its backend. Every step can stop the
//! same few ways (a backend call fails, the remote objects do not allow it, the operation's
//! timeout passes, Terraform asks the provider to stop), each kind adds its own, and a failure
//! still returns the state of whatever the earlier steps made, so nothing is orphaned:
//!
//! - [`StepError`] is why a step stopped, over the kind's own failures ([`KindError`]);
//! - [`bounded`] runs steps within the operation's timeout and Terraform's stop request, and
//!   [`run_steps`] drives an apply written as a state machine of [`Step`]s through it;
//! - [`failed`] is the apply response for a failure: the diagnostic and the partial state
//!   ([`read_outcome`] the read response); [`local_update`] answers an update that changes
//!   nothing the backend holds;
//! - [`RemoteKind`] is what a kind over one backend client writes (BCM nodes, network
//!   segments, virtual clusters, benchmarks); it gets its
//!   [`ResourceKind`](crate::kinds::ResourceKind) from it, and a [`ListableKind`] its list
//!   resource through [`Listing`].

mod bounded;
mod failed;
mod local_update;
mod remote_kind;
mod remote_list;
mod step_error;
mod steps;

pub use bounded::bounded;
pub use failed::{failed, read_outcome};
pub use local_update::local_update;
pub use remote_kind::RemoteKind;
pub use remote_list::{Found, ListableKind, Listing, read_found};
pub use step_error::{KindError, StepError, stopped_detail, subject};
pub use steps::{Machine, Step, Stopped, run_steps};
