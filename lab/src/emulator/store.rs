//! The one shape of an emulator's state: the [`Store`] trait both emulators' stores
//! implement, and `Core`, the part they keep alike.
//!
//! A store holds the objects its API serves (persisted, changed all-or-nothing), the
//! time, and the injected faults (in memory only, so a restart clears them). Every read
//! hands out a copy; nothing outside the store holds a reference into it. What differs
//! between emulators (sessions, journals, status clocks) sits on top of this.

use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::persisted::{Persisted, StateFormat};
use super::{Clock, StoreError, lock};

/// A change to the objects `D` at a time (epoch ms), answering a value or the
/// emulator's error `E`: what [`Store::transact`] runs.
pub type Change<'a, D, E> = dyn FnMut(&mut D, u64) -> Result<Value, E> + 'a;

/// An emulator's state behind whatever locking it needs.
///
/// Reads return copies. [`Store::transact`] is the only way to change the objects, and
/// is all-or-nothing; [`Store::replace`] starts afresh.
pub trait Store: Send + Sync + fmt::Debug {
    /// The objects the API serves: what the state file holds.
    type Db;
    /// The injected faults.
    type Faults;
    /// How a failed change answers, in the emulator's own wire terms.
    type Error;

    /// The current time, epoch ms.
    fn now_ms(&self) -> u64;

    /// A copy of the objects.
    fn snapshot(&self) -> Self::Db;

    /// Runs `f` on a copy of the objects at time `now` (epoch ms, read once) and, when it
    /// returns `Ok`, makes the copy the new state (persisting it first, when the store
    /// persists). On `Err` nothing changes.
    ///
    /// # Errors
    /// What `f` returns, or the emulator's internal error when the new state cannot be
    /// persisted (the state then stays as it was).
    fn transact(&self, f: &mut Change<'_, Self::Db, Self::Error>) -> Result<Value, Self::Error>;

    /// Replaces the objects (seed, reset) and clears everything kept in memory only.
    ///
    /// # Errors
    /// When the new state cannot be persisted (the old one stays).
    fn replace(&self, db: Self::Db) -> Result<(), StoreError>;

    /// A copy of the faults.
    fn faults(&self) -> Self::Faults;

    /// Changes the faults atomically.
    fn update_faults(&self, f: &mut dyn FnMut(&mut Self::Faults));

    /// The state file, when the store persists.
    fn file(&self) -> Option<&Path>;
}

/// The clock, the persisted objects and the faults: what every [`Store`] keeps the same
/// way, so an emulator's store only adds what is its own.
#[derive(Debug)]
pub(crate) struct Core<D, F> {
    clock: Arc<dyn Clock>,
    db: Persisted<D>,
    faults: Mutex<F>,
}

impl<D: StateFormat, F: Clone + Default> Core<D, F> {
    /// The objects in `db`, on `clock`, with no faults.
    pub(crate) fn new(db: Persisted<D>, clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            db,
            faults: Mutex::new(F::default()),
        }
    }

    pub(crate) fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// A copy of the objects as committed.
    pub(crate) fn snapshot(&self) -> D {
        self.db.get()
    }

    /// [`Store::transact`], with `write_error` turning a failed write into the
    /// emulator's error.
    pub(crate) fn transact<T, E>(
        &self,
        f: impl FnOnce(&mut D, u64) -> Result<T, E>,
        write_error: impl FnOnce(StoreError) -> E,
    ) -> Result<T, E> {
        let now = self.clock.now_ms();
        self.db.transact(|next| f(next, now), write_error)
    }

    /// Replaces the objects and clears the faults.
    pub(crate) fn replace(&self, db: D) -> Result<(), StoreError> {
        self.db.replace(db)?;
        *lock(&self.faults) = F::default();
        Ok(())
    }

    pub(crate) fn faults(&self) -> F {
        lock(&self.faults).clone()
    }

    pub(crate) fn update_faults(&self, f: &mut dyn FnMut(&mut F)) {
        f(&mut lock(&self.faults));
    }

    pub(crate) fn file(&self) -> Option<&Path> {
        self.db.file()
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    use super::*;
    use crate::emulator::ManualClock;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct State {
        version: u32,
        at: u64,
    }

    impl StateFormat for State {
        const VERSION: u32 = 1;

        fn version(&self) -> u32 {
            self.version
        }
    }

    fn core(clock: &ManualClock) -> Core<State, Vec<u32>> {
        let state = State { version: 1, at: 0 };
        Core::new(Persisted::in_memory(state), Arc::new(clock.clone()))
    }

    #[test]
    fn a_change_sees_the_clock() {
        let clock = ManualClock::new(42);
        let core = core(&clock);
        core.transact(
            |s, now| {
                s.at = now;
                Ok::<_, StoreError>(())
            },
            |e| e,
        )
        .expect("commit");
        assert_eq!(core.snapshot().at, 42);
    }

    #[test]
    fn replacing_the_objects_clears_the_faults() {
        let core = core(&ManualClock::new(0));
        core.update_faults(&mut |f| f.push(7));
        assert_eq!(core.faults(), vec![7]);
        core.replace(State { version: 1, at: 9 }).expect("replace");
        assert!(core.faults().is_empty());
        assert_eq!(core.snapshot().at, 9);
    }
}
