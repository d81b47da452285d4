//! What the HTTP backends (BCM, Netris) share: one client per settings, and PEM values that
//! are either inline text or a path.

use std::{
    collections::HashMap,
    hash::Hash,
    sync::{Arc, Mutex, OnceLock, PoisonError},
};

/// Clients shared by every operation with the same settings, so connections and logins are
/// reused across resources.
pub(crate) struct ClientCache<K, C>(OnceLock<Mutex<HashMap<K, Arc<C>>>>);

impl<K: Hash + Eq + Clone, C> ClientCache<K, C> {
    /// An empty cache, for a `static`.
    pub(crate) const fn new() -> Self {
        ClientCache(OnceLock::new())
    }

    /// The client for `key`, made with `make` the first time.
    pub(crate) fn get_or_make<E>(
        &self,
        key: &K,
        make: impl FnOnce() -> Result<C, E>,
    ) -> Result<Arc<C>, E> {
        let clients = self.0.get_or_init(Mutex::default);
        let mut clients = clients.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = clients.get(key) {
            return Ok(Arc::clone(c));
        }
        let client = Arc::new(make()?);
        clients.insert(key.clone(), Arc::clone(&client));
        Ok(client)
    }
}

/// A PEM setting: the text itself, or the path of a file that holds a PEM block of `label`
/// (`CERTIFICATE`, `PRIVATE KEY`). The error completes "<setting> …".
pub(crate) fn read_pem(value: &str, label: &str) -> Result<Vec<u8>, String> {
    if value.trim_start().starts_with("-----BEGIN") {
        return Ok(value.as_bytes().to_vec());
    }
    let path = value.trim();
    let pem = std::fs::read(path).map_err(|e| {
        format!(
            "is neither PEM text (it does not start with -----BEGIN) nor a readable file: \
             cannot read {path:?}: {e}"
        )
    })?;
    let has_label = String::from_utf8_lossy(&pem)
        .lines()
        .any(|l| l.starts_with("-----BEGIN") && l.contains(label));
    if !has_label {
        return Err(format!(
            "names the file {path:?}, which holds no PEM {}",
            label.to_lowercase()
        ));
    }
    Ok(pem)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_is_text_or_a_path() {
        let pem = "-----BEGIN CERTIFICATE-----\nMII\n-----END CERTIFICATE-----\n";
        assert_eq!(read_pem(pem, "CERTIFICATE"), Ok(pem.as_bytes().to_vec()));
        let err = read_pem("/nonexistent/ca.pem", "CERTIFICATE").expect_err("missing file");
        assert!(err.contains("neither PEM text"), "{err}");
    }

    #[test]
    fn a_file_without_the_block_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("key.pem");
        std::fs::write(&path, "-----BEGIN PRIVATE KEY-----\nMII\n").expect("write");
        let path = path.to_string_lossy();
        assert!(read_pem(&path, "PRIVATE KEY").is_ok());
        let err = read_pem(&path, "CERTIFICATE").expect_err("no certificate");
        assert!(err.ends_with("which holds no PEM certificate"), "{err}");
    }

    #[test]
    fn one_client_per_settings() {
        static CACHE: ClientCache<&str, String> = ClientCache::new();
        let a = CACHE.get_or_make(&"a", || Ok::<_, ()>("first".to_owned()));
        let again = CACHE.get_or_make(&"a", || Ok::<_, ()>("second".to_owned()));
        let (Ok(a), Ok(again)) = (a, again) else {
            panic!("made");
        };
        assert!(Arc::ptr_eq(&a, &again));
        assert_eq!(CACHE.get_or_make(&"b", || Err("refused")), Err("refused"));
        assert!(
            CACHE
                .get_or_make(&"b", || Ok::<_, ()>("made".to_owned()))
                .is_ok()
        );
    }
}
