//! What the replacements this run plans release before they create again. Terraform plans a
//! replacement twice in one provider process: once against the prior state (which says what
//! the resource holds) and once more as a create, with no prior state. A plan-time check of
//! that create would count what the destroy half frees (a node the resource holds, the
//! allocation of a segment it renames, the nodes of a pool it renames) as taken by someone
//! else; the first plan records it here, keyed by what the create will ask for.

use std::{
    collections::HashMap,
    sync::{Mutex, MutexGuard, PoisonError},
};

/// What each planned replacement releases, by what its create asks for (kind-prefixed keys,
/// e.g. `bcm_node:gpu-001`).
#[derive(Debug, Default)]
pub struct PlannedReleases(Mutex<HashMap<String, String>>);

impl PlannedReleases {
    /// The replacement whose create asks for `key` releases `released` first.
    pub fn replacing(&self, key: &str, released: &str) {
        self.lock().insert(key.to_owned(), released.to_owned());
    }

    /// What the replacement asking for `key` releases first, if one is planned.
    pub fn released_for(&self, key: &str) -> Option<String> {
        self.lock().get(key).cloned()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, String>> {
        // The map stays valid whatever panicked while holding it.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replacement_says_what_it_releases() {
        let r = PlannedReleases::default();
        assert_eq!(r.released_for("bcm_node:gpu-001"), None);
        r.replacing("bcm_node:gpu-001", "tenant-a");
        assert_eq!(
            r.released_for("bcm_node:gpu-001").as_deref(),
            Some("tenant-a")
        );
    }
}
