//! One virtual cluster's PKI, under `<cluster dir>/pki/`: a CA of its own (so a tenant's
//! credentials are worthless against the host and every other tenant), the API server's
//! serving certificate, an admin client certificate in group `system:masters`, and the
//! service-account key pair. Generated once and kept, so the kubeconfig in the Secret stays
//! valid across pauses and restarts of the stand-in.

use std::path::{Path, PathBuf};

use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, Issuer, KeyPair, KeyUsagePurpose};

use crate::pki::{PkiError, client_cert, new_ca, set_validity};

/// The common name of the admin client certificate (the user the tenant acts as).
pub const ADMIN_USER: &str = "vcluster-admin";

/// The group of the admin client certificate: it bypasses RBAC.
pub const ADMIN_GROUP: &str = "system:masters";

/// The PKI files of one virtual cluster.
#[derive(Debug, Clone)]
pub struct ClusterPki {
    dir: PathBuf,
}

impl ClusterPki {
    /// The PKI in `dir` (which need not exist yet).
    #[must_use]
    pub fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
        }
    }

    /// The CA certificate (PEM).
    #[must_use]
    pub fn ca_cert(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// The API server's serving certificate (PEM).
    #[must_use]
    pub fn serving_cert(&self) -> PathBuf {
        self.dir.join("apiserver.crt")
    }

    /// The API server's serving key (PEM).
    #[must_use]
    pub fn serving_key(&self) -> PathBuf {
        self.dir.join("apiserver.key")
    }

    /// The admin client certificate (PEM).
    #[must_use]
    pub fn admin_cert(&self) -> PathBuf {
        self.dir.join("admin.crt")
    }

    /// The admin client key (PEM).
    #[must_use]
    pub fn admin_key(&self) -> PathBuf {
        self.dir.join("admin.key")
    }

    /// The service-account signing key.
    #[must_use]
    pub fn sa_key(&self) -> PathBuf {
        self.dir.join("sa.key")
    }

    /// The service-account public key.
    #[must_use]
    pub fn sa_pub(&self) -> PathBuf {
        self.dir.join("sa.pub")
    }

    fn files(&self) -> [PathBuf; 7] {
        [
            self.ca_cert(),
            self.serving_cert(),
            self.serving_key(),
            self.admin_cert(),
            self.admin_key(),
            self.sa_key(),
            self.sa_pub(),
        ]
    }

    /// Generates the PKI unless every file is there. `sans` are the serving certificate's
    /// extra names (besides loopback and the in-cluster `kubernetes` names). Returns whether
    /// it generated.
    ///
    /// # Errors
    /// When generation fails or a file cannot be written.
    pub fn ensure(&self, sans: &[String]) -> Result<bool, PkiError> {
        if self.files().iter().all(|f| f.is_file()) {
            return Ok(false);
        }
        std::fs::create_dir_all(&self.dir).map_err(|source| PkiError::Write {
            path: self.dir.clone(),
            source,
        })?;
        let (ca_params, ca_key, ca) = new_ca("vcluster-ca")?;
        let issuer = Issuer::new(ca_params, &ca_key);

        let key = KeyPair::generate()?;
        let mut names: Vec<String> = crate::pki::APISERVER_SANS
            .iter()
            .map(|s| (*s).to_string())
            .collect();
        names.extend(sans.iter().cloned());
        let mut params = CertificateParams::new(names)?;
        params
            .distinguished_name
            .push(DnType::CommonName, "vcluster-apiserver");
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        set_validity(&mut params);
        let serving = params.signed_by(&key, &issuer)?;
        write(&self.serving_cert(), &serving.pem(), false)?;
        write(&self.serving_key(), &key.serialize_pem(), true)?;

        let (cert, key) = client_cert(ADMIN_USER, Some(ADMIN_GROUP), &issuer)?;
        write(&self.admin_cert(), &cert, false)?;
        write(&self.admin_key(), &key, true)?;

        let sa = KeyPair::generate()?;
        write(&self.sa_key(), &sa.serialize_pem(), true)?;
        write(&self.sa_pub(), &sa.public_key_pem(), false)?;
        // The CA last: the set is only complete once everything else is written.
        write(&self.dir.join("ca.key"), &ca_key.serialize_pem(), true)?;
        write(&self.ca_cert(), &ca.pem(), false)?;
        Ok(true)
    }
}

/// Writes one file atomically enough for a restart; keys get mode 0600.
fn write(path: &Path, contents: &str, secret: bool) -> Result<(), PkiError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let err = |source| PkiError::Write {
        path: path.to_path_buf(),
        source,
    };
    let _ = std::fs::remove_file(path);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    if secret {
        options.mode(0o600);
    }
    options
        .open(path)
        .and_then(|mut f| f.write_all(contents.as_bytes()))
        .map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_once_and_keeps_the_ca() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pki = ClusterPki::new(&dir.path().join("pki"));
        assert!(pki.ensure(&["demo.vc-demo.svc".into()]).expect("generate"));
        let ca = std::fs::read(pki.ca_cert()).expect("ca");
        assert!(!pki.ensure(&[]).expect("again"));
        assert_eq!(std::fs::read(pki.ca_cert()).expect("ca"), ca);
        let other = ClusterPki::new(&dir.path().join("other"));
        other.ensure(&[]).expect("generate");
        assert_ne!(std::fs::read(other.ca_cert()).expect("ca"), ca);
    }
}
