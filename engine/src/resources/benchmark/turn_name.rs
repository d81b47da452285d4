//! Which Lease the runs on a pool take turns on: one per pool, in the pool's host namespace.
//! Pure.
//!
//! The Lease is found from the pool id alone, so every run on the pool meets on the same one,
//! whichever process, pipeline or namespace setting it comes from.

use crate::backends::kube::lease::LeaseRef;

use super::{environment::sha256_hex, model::PoolRef};

/// The start of every turn Lease's name.
pub const PREFIX: &str = "gpufleet-turn-";

/// The longest name that is also a valid DNS label (what `kubectl` users expect of a name).
const MAX_NAME: usize = 63;

/// The turn Lease of `pool`: `gpufleet-turn-<virtual cluster>-<pool>` in the pool's host
/// namespace. A name that would be too long, or that needed characters replaced, is cut and
/// ends in a hash of the pool id instead, so two pools never share a Lease.
pub fn turn_lease(pool: &PoolRef) -> LeaseRef {
    let readable = format!("{PREFIX}{}-{}", pool.vc.name, pool.name);
    let clean = dns_label_chars(&readable);
    let name = if clean == readable && clean.len() <= MAX_NAME {
        clean
    } else {
        let hash = &sha256_hex(pool.id().as_bytes())[..8];
        let keep = MAX_NAME - hash.len() - 1;
        let head: String = clean.chars().take(keep).collect();
        format!("{}-{hash}", head.trim_end_matches('-'))
    };
    LeaseRef {
        namespace: pool.vc.namespace.clone(),
        name,
    }
}

/// The turn Lease of a benchmark that runs on no pool: `gpufleet-turn-run-<name>` in its
/// namespace, so that a run on demand (`gpufleet_benchmark_run`) and the resource's own run of
/// the same name, which share their Job, never run at once. Benchmark names are DNS labels of
/// at most 40 characters, so the name always fits.
pub fn run_lease(namespace: &str, name: &str) -> LeaseRef {
    LeaseRef {
        namespace: namespace.to_owned(),
        name: format!("{PREFIX}run-{name}"),
    }
}

/// `s` in lowercase letters, digits and single dashes, with no dash at either end.
fn dns_label_chars(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(id: &str) -> PoolRef {
        PoolRef::parse(id).expect("pool id")
    }

    fn is_dns_label(s: &str) -> bool {
        !s.is_empty()
            && s.len() <= 63
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !s.starts_with('-')
            && !s.ends_with('-')
    }

    #[test]
    fn a_pool_turns_on_a_lease_named_after_it_in_its_namespace() {
        let lease = turn_lease(&pool("vc-prod/prod/h100"));
        assert_eq!(lease.namespace, "vc-prod");
        assert_eq!(lease.name, "gpufleet-turn-prod-h100");
    }

    #[test]
    fn long_names_are_cut_and_kept_apart_by_a_hash() {
        let long = "p".repeat(60);
        let a = turn_lease(&pool(&format!("vc-a/a/{long}")));
        let b = turn_lease(&pool(&format!("vc-a/a/{long}x")));
        for lease in [&a, &b] {
            assert!(is_dns_label(&lease.name), "{}", lease.name);
            assert_eq!(lease.name.len(), 63, "{}", lease.name);
            assert!(
                lease.name.starts_with("gpufleet-turn-a-ppp"),
                "{}",
                lease.name
            );
        }
        assert_ne!(a.name, b.name);
        // The same pool always gets the same Lease.
        assert_eq!(a, turn_lease(&pool(&format!("vc-a/a/{long}"))));
    }

    #[test]
    fn names_that_are_not_dns_labels_are_cleaned_and_hashed() {
        let a = turn_lease(&pool("vc-a/a/Train_Pool"));
        let b = turn_lease(&pool("vc-a/a/train-pool"));
        assert!(is_dns_label(&a.name), "{}", a.name);
        assert!(
            a.name.starts_with("gpufleet-turn-a-train-pool-"),
            "{}",
            a.name
        );
        assert_eq!(b.name, "gpufleet-turn-a-train-pool");
        assert_ne!(a.name, b.name);
    }
}
