//! What this provider process has planned for virtual clusters in the current run, for the
//! kinds that follow a virtual cluster and plan after it (Terraform plans a resource after
//! those its configuration refers to, and an apply re-plans each resource first, in the
//! same process).
//!
//! - **Creations.** Terraform opens an ephemeral resource while planning as soon as its
//!   configuration is known, whatever its `depends_on` says. A connection to a virtual
//!   cluster the same run creates would fail the plan, since there is nothing to connect to
//!   yet; it answers with unknown values instead, as Terraform does for a configuration it
//!   cannot know yet. The apply of the creation ends the entry, so the connection opened
//!   after it reaches the new control plane.
//! - **Tiers.** A virtual cluster whose `isolation` changes is replaced by the apply; until
//!   then its namespace still carries the old tier. A pool that does not set `isolation`
//!   itself checks the tier rules against the planned tier, so the plan refuses (or
//!   replaces) what the new tier forbids instead of leaving it for a later run.

use std::{
    collections::HashMap,
    sync::{Mutex, MutexGuard, PoisonError},
};

/// The plan of one virtual cluster in this run.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Planned {
    /// It does not exist before this run's apply.
    creating: bool,
    /// Its planned `isolation`, when known.
    isolation: Option<String>,
}

/// Plans by virtual cluster id (`<namespace>/<name>`).
#[derive(Debug, Default)]
pub struct PlannedVirtualClusters(Mutex<HashMap<String, Planned>>);

impl PlannedVirtualClusters {
    /// `id` is planned: created (`creating`) or changed, with `isolation` when known.
    pub fn planned(&self, id: &str, creating: bool, isolation: Option<&str>) {
        self.lock().insert(
            id.to_owned(),
            Planned {
                creating,
                isolation: isolation.map(str::to_owned),
            },
        );
    }

    /// The change of `id` has been applied, or has failed: what the host cluster shows is
    /// true again.
    pub fn applied(&self, id: &str) {
        self.lock().remove(id);
    }

    /// Whether `id` is planned for creation and not yet applied.
    pub fn creating(&self, id: &str) -> bool {
        self.lock().get(id).is_some_and(|p| p.creating)
    }

    /// The planned `isolation` of `id`, while its change is not yet applied.
    pub fn isolation(&self, id: &str) -> Option<String> {
        self.lock().get(id).and_then(|p| p.isolation.clone())
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Planned>> {
        // The map stays valid whatever panicked while holding it.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_creation_is_pending_from_its_plan_to_its_apply() {
        let p = PlannedVirtualClusters::default();
        assert!(!p.creating("vc-a/a"));
        p.planned("vc-a/a", true, Some("shared"));
        assert!(p.creating("vc-a/a"));
        assert!(!p.creating("vc-b/b"));
        p.applied("vc-a/a");
        assert!(!p.creating("vc-a/a"));
    }

    #[test]
    fn a_planned_tier_holds_until_applied() {
        let p = PlannedVirtualClusters::default();
        p.planned("vc-a/a", false, Some("private"));
        assert!(!p.creating("vc-a/a"));
        assert_eq!(p.isolation("vc-a/a").as_deref(), Some("private"));
        p.applied("vc-a/a");
        assert_eq!(p.isolation("vc-a/a"), None);
    }
}
