//! The host-cluster client of the macOS build (`engine/src/backends/kube/bundled_tls.rs`),
//! run here against the lab's real kube-apiserver: the macOS binaries are built and checked,
//! not run, so this is where their TLS is proven. It verifies the API server against the
//! kubeconfig's authority; without one, against the bundled roots, which do not hold the lab's
//! private CA, plus `SSL_CERT_FILE`.

use gpufleet_engine::backends::kube::bundled_tls::{ExtraRoots, client_builder};
use gpufleet_lab::Lab;
use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, config::KubeConfigOptions};

async fn lab_config() -> kube::Config {
    let kubeconfig = kube::config::Kubeconfig::read_from(Lab::shared().kubeconfig_path())
        .expect("the lab's kubeconfig");
    kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("a config")
}

/// Lists namespaces with the bundled client for `config`; the error's text on failure.
async fn list_namespaces(config: &kube::Config, extra: &ExtraRoots) -> Result<usize, String> {
    let client = client_builder(config, extra)
        .map_err(|e| e.to_string())?
        .build();
    Api::<Namespace>::all(client)
        .list(&Default::default())
        .await
        .map(|l| l.items.len())
        .map_err(|e| {
            let mut text = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                text.push_str(&format!(": {s}"));
                source = s.source();
            }
            text
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_macos_client_verifies_the_api_server_against_the_authority_it_is_given() {
    let config = lab_config().await;
    // The lab's kubeconfig names its CA and a client certificate: the usual case.
    let n = list_namespaces(&config, &ExtraRoots::default())
        .await
        .expect("the lab's API server, verified against its CA");
    assert!(n > 0);

    // Without the authority, the bundled roots do not know the lab's CA.
    let ca = config.root_cert.clone().expect("the lab's CA")[0].clone();
    let mut bare = config.clone();
    bare.root_cert = None;
    let e = list_namespaces(&bare, &ExtraRoots::default())
        .await
        .expect_err("a private CA is not among the bundled roots");
    assert!(
        e.contains("UnknownIssuer") || e.contains("unknown issuer"),
        "{e}"
    );

    // SSL_CERT_FILE (here given directly) adds it.
    let dir = tempfile::tempdir().expect("a dir");
    let pem = dir.path().join("lab-ca.pem");
    let b64 = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(&ca)
    };
    let lines: Vec<&str> = b64
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).expect("base64 is ASCII"))
        .collect();
    std::fs::write(
        &pem,
        format!(
            "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
            lines.join("\n")
        ),
    )
    .expect("written");
    let extra = ExtraRoots {
        file: Some(pem),
        dirs: Vec::new(),
    };
    list_namespaces(&bare, &extra)
        .await
        .expect("the lab's API server, verified against SSL_CERT_FILE");

    // A kubeconfig that turns verification off is refused, not obeyed.
    let mut insecure = config.clone();
    insecure.accept_invalid_certs = true;
    let e = list_namespaces(&insecure, &ExtraRoots::default())
        .await
        .expect_err("insecure-skip-tls-verify");
    assert!(e.contains("insecure-skip-tls-verify"), "{e}");
}
