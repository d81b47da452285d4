//! The virtual clusters this provider process has planned to create and not yet created.
//!
//! Terraform opens an ephemeral resource while planning as soon as its configuration is
//! known, whatever its `depends_on` says. A connection to a virtual cluster the same run
//! creates would then fail the plan, since there is nothing to connect to yet. The plan of
//! the virtual cluster records its id here, and the connection opened during that plan
//! answers with unknown values instead, as Terraform does for a configuration it cannot
//! know yet. The apply of the creation takes the id out again, so the connection opened
//! after it (the apply re-plans first, in the same process) reaches the new control plane.

use std::{
    collections::HashSet,
    sync::{Mutex, PoisonError},
};

/// Ids (`<namespace>/<name>`) planned for creation in this process.
#[derive(Debug, Default)]
pub struct PlannedCreations(Mutex<HashSet<String>>);

impl PlannedCreations {
    /// `id` is planned for creation.
    pub fn planned(&self, id: &str) {
        self.lock().insert(id.to_owned());
    }

    /// The creation of `id` has been applied, or has failed: it is no longer pending.
    pub fn applied(&self, id: &str) {
        self.lock().remove(id);
    }

    /// Whether `id` is planned for creation and not yet applied.
    pub fn pending(&self, id: &str) -> bool {
        self.lock().contains(id)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        // The set stays valid whatever panicked while holding it.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_creation_is_pending_from_its_plan_to_its_apply() {
        let c = PlannedCreations::default();
        assert!(!c.pending("vc-a/a"));
        c.planned("vc-a/a");
        assert!(c.pending("vc-a/a"));
        assert!(!c.pending("vc-b/b"));
        c.applied("vc-a/a");
        assert!(!c.pending("vc-a/a"));
    }
}
