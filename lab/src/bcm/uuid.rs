//! UUIDs: deterministic ones for seeded entities (so a reseed gives the same uuids) and
//! random ones for task ids and login tokens.

use aws_lc_rs::digest::{SHA256, digest};
use aws_lc_rs::rand::{SecureRandom, SystemRandom};

/// Formats 16 bytes as a UUID with the given version nibble and the RFC 4122 variant.
fn format(mut b: [u8; 16], version: u8) -> String {
    b[6] = (b[6] & 0x0f) | (version << 4);
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// A UUID derived from a kind and a name: the same inputs, the same UUID.
#[must_use]
pub fn name_uuid(kind: &str, name: &str) -> String {
    let d = digest(&SHA256, format!("gpufleet-bcm/{kind}/{name}").as_bytes());
    let mut b = [0u8; 16];
    b.copy_from_slice(&d.as_ref()[..16]);
    format(b, 5)
}

/// A random (version 4) UUID.
#[must_use]
pub fn random_uuid() -> String {
    let mut b = [0u8; 16];
    if SystemRandom::new().fill(&mut b).is_err() {
        // No system randomness: fall back to the time, which is unique enough for a
        // loopback test double.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        b = t.to_le_bytes();
    }
    format(b, 4)
}

/// Whether `s` has the shape of a UUID (8-4-4-4-12 hex digits).
#[must_use]
pub fn is_uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 5
        && parts
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(p, n)| p.len() == n && p.bytes().all(|c| c.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_have_the_shape() {
        assert!(is_uuid(&name_uuid("device", "a")));
        assert_eq!(name_uuid("device", "a"), name_uuid("device", "a"));
        assert_ne!(name_uuid("device", "a"), name_uuid("device", "b"));
        assert!(is_uuid(&random_uuid()));
        assert_ne!(random_uuid(), random_uuid());
        assert!(!is_uuid("nope"));
        assert!(is_uuid(super::super::model::ZERO_UUID));
    }
}
