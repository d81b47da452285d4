//! What the lab's API emulators ([`crate::bcm`], [`crate::netris`]) share: everything
//! around their APIs that has nothing to do with which API it is.
//!
//! - [`request`] and [`answer`]: what a handler is asked ([`Request`]) and what it gives
//!   ([`Response`], [`Outcome`]).
//! - `server`: TLS and HTTP/1.1 around a synchronous handler (the `Service` an emulator
//!   implements), the `down` fault as a dropped connection, latency as a sleep.
//! - `start`: the state directory, the listener, and the handle that stops the server.
//! - `tls`: the certificates both make the same way (a CA's parameters, the serving
//!   certificate, the rustls configuration). Who may call stays with each emulator.
//! - [`store`]: the [`Store`] trait both emulators' stores implement (objects, time,
//!   faults), and the part they keep alike; `persisted`: a state kept in memory and
//!   written through to its state file.
//! - [`clock`]: the time, real or moved by hand in tests.
//! - `admin`: the bits of the `/_admin/` plane that answer alike; `fault_rules`: how
//!   injected fault rules are used up.
//! - [`cli`]: what the emulator binaries set up alike.
//!
//! Each emulator keeps its wire format, its authentication, its admin routes and what its
//! state holds in its own module; this one only carries them.

pub(crate) mod admin;
pub mod answer;
pub mod cli;
pub mod clock;
pub(crate) mod fault_rules;
pub(crate) mod persisted;
pub mod request;
pub(crate) mod server;
pub(crate) mod start;
pub mod store;
pub(crate) mod tls;

use std::sync::{Mutex, MutexGuard, PoisonError};

pub use self::answer::{Outcome, Response};
pub use self::clock::{Clock, ManualClock, SystemClock};
pub use self::persisted::StoreError;
pub use self::request::Request;
pub(crate) use self::server::Service;
pub use self::start::{Running, StartError};
pub use self::store::Store;

/// Locks a mutex, carrying on past poisoning: every critical section of the emulators'
/// stores leaves its data consistent (commits are a single assignment), so a panic
/// elsewhere cannot tear it.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
