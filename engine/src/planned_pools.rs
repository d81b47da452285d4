//! What this provider process has planned for GPU node pools in the current run, for the
//! benchmarks that run on them and plan after them (Terraform plans a resource after those
//! its configuration refers to). A benchmark checks its `nodes` against the pool's node count
//! at plan; a pool this run creates or resizes has not got those nodes yet, so the check uses
//! the planned count instead of what the host cluster shows.

use std::{
    collections::HashMap,
    sync::{Mutex, MutexGuard, PoisonError},
};

/// Planned node counts by pool id (`<namespace>/<name>/<pool>`); `None` when not known at plan
/// (autoscaled, or unknown until apply).
#[derive(Debug, Default)]
pub struct PlannedPools(Mutex<HashMap<String, Option<i64>>>);

impl PlannedPools {
    /// `id` is planned to be created or changed, with `node_count` when known.
    pub fn planned(&self, id: &str, node_count: Option<i64>) {
        self.lock().insert(id.to_owned(), node_count);
    }

    /// The change of `id` has been applied, or has failed: the host cluster is the truth again.
    pub fn applied(&self, id: &str) {
        self.lock().remove(id);
    }

    /// `Some(count)` while a change of `id` is planned and not applied (`count` is `None`
    /// when not known at plan); `None` when this run does not change the pool.
    pub fn node_count(&self, id: &str) -> Option<Option<i64>> {
        self.lock().get(id).copied()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Option<i64>>> {
        // The map stays valid whatever panicked while holding it.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_planned_count_holds_until_applied() {
        let p = PlannedPools::default();
        assert_eq!(p.node_count("vc-a/a/train"), None);
        p.planned("vc-a/a/train", Some(3));
        p.planned("vc-a/a/auto", None);
        assert_eq!(p.node_count("vc-a/a/train"), Some(Some(3)));
        assert_eq!(p.node_count("vc-a/a/auto"), Some(None));
        p.applied("vc-a/a/train");
        assert_eq!(p.node_count("vc-a/a/train"), None);
    }
}
