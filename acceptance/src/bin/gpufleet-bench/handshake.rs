//! Provider start to handshake line, beside the Go peer.

use std::{
    io::{BufRead, BufReader},
    process::{Command, Stdio},
    time::Instant,
};

use gpufleet_acceptance::provider_binary;

use crate::measure::median;
use crate::peer::peer_binary;

const COOKIE: (&str, &str) = (
    "TF_PLUGIN_MAGIC_COOKIE",
    "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2",
);

/// A P-521 client certificate like the one Terraform generates, made with openssl.
fn client_cert_pem() -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    let status = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-521",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-keyout",
        ])
        .arg(dir.path().join("key.pem"))
        .arg("-out")
        .arg(dir.path().join("cert.pem"))
        .stderr(Stdio::null())
        .status()
        .expect("run openssl");
    assert!(status.success(), "openssl failed");
    std::fs::read_to_string(dir.path().join("cert.pem")).expect("read cert")
}

pub(crate) fn handshake(runs: usize) {
    let cert = client_cert_pem();
    let (median, min, max) = launches(&provider_binary(), &cert, runs);
    println!(
        "handshake: start to handshake line over {runs} launches: median {median:.2} ms (min {min:.2}, max {max:.2})"
    );
    if let Some(peer) = peer_binary() {
        let (median, min, max) = launches(&peer, &cert, runs);
        println!(
            "handshake: the Go framework peer: median {median:.2} ms (min {min:.2}, max {max:.2})"
        );
    }
}

/// Launch to handshake line of `binary` with Terraform's client certificate, `runs` times:
/// median, min and max in milliseconds.
fn launches(binary: &std::path::Path, cert: &str, runs: usize) -> (f64, f64, f64) {
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        let mut child = Command::new(binary)
            .env(COOKIE.0, COOKIE.1)
            .env("PLUGIN_PROTOCOL_VERSIONS", "5,6")
            .env("PLUGIN_CLIENT_CERT", cert)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start provider");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("handshake");
        times.push(started.elapsed().as_secs_f64() * 1000.0);
        assert!(line.starts_with("1|6|"), "bad handshake {line:?}");
        let _ = child.kill();
        let _ = child.wait();
    }
    let min = times.iter().copied().fold(f64::INFINITY, f64::min);
    let max = times.iter().copied().fold(0.0, f64::max);
    (median(&mut times), min, max)
}
