//! The release artifacts of `scripts/release`: one zip per published platform (linux_amd64,
//! and cross-compiled linux_arm64, darwin_amd64, darwin_arm64 and windows_amd64) under one
//! `SHA256SUMS`, locked for every platform the way a team with Macs, Windows agents and Linux
//! CI does, and installed the way users install any provider: through a `filesystem_mirror`
//! with a normal `terraform init` (no `dev_overrides`), which records `h1:` hashes in the lock
//! file, applies the quickstart against the lab with the installed binary, and refuses a zip
//! that no longer matches the lock file. (`acceptance/tests/platforms.rs` runs the arm64
//! binary under qemu and the Windows one under Wine, and checks the macOS binaries'
//! structure.)

use std::path::{Path, PathBuf};
use std::process::Command;

use gpufleet_acceptance::{
    Workdir,
    binaries::{
        CPU_TYPE_ARM64, CPU_TYPE_X86_64, IMAGE_FILE_MACHINE_AMD64, elf_machine, mach_o, pe_machine,
    },
    workspace_root,
};
use gpufleet_lab::Lab;

const VERSION: &str = "0.1.0";
const NAME: &str = "terraform-provider-gpufleet";

/// What a platform's binary is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Binary {
    /// An ELF executable for this `e_machine`.
    Elf(u16),
    /// A Mach-O executable for this `cputype`.
    MachO(u32),
    /// A PE32+ executable for this `Machine`.
    Pe(u16),
}

/// The platforms `scripts/release` publishes by default, with what each binary is.
const PLATFORMS: [(&str, Binary); 5] = [
    ("linux_amd64", Binary::Elf(0x3E)),
    ("linux_arm64", Binary::Elf(0xB7)),
    ("darwin_amd64", Binary::MachO(CPU_TYPE_X86_64)),
    ("darwin_arm64", Binary::MachO(CPU_TYPE_ARM64)),
    ("windows_amd64", Binary::Pe(IMAGE_FILE_MACHINE_AMD64)),
];

/// Terraform's name for this machine's platform, as in the zip's file name.
fn platform() -> String {
    let os = std::env::consts::OS;
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    format!("{os}_{arch}")
}

struct Release {
    _dir: tempfile::TempDir,
    out: PathBuf,
    mirror: PathBuf,
}

/// Runs `scripts/release --debug` (the debug build the other tests already made, and the
/// arm64 cross build unless `extra` names `--platforms`) into a fresh directory, with `extra`
/// arguments.
fn release(extra: &[&str], env: &[(&str, &Path)]) -> Release {
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir.path().join("dist");
    let mirror = dir.path().join("mirror");
    let status = Command::new(workspace_root().join("scripts/release"))
        .args(["--debug", "--version", VERSION, "--out"])
        .arg(&out)
        .arg("--mirror")
        .arg(&mirror)
        .args(extra)
        .envs(env.iter().map(|(k, v)| (*k, *v)))
        .status()
        .expect("scripts/release runs");
    assert!(
        status.success(),
        "scripts/release failed: {status} (the cross builds need scripts/setup, which runs scripts/install-cross)"
    );
    Release {
        _dir: dir,
        out,
        mirror,
    }
}

fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("sha256sum runs");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .expect("a digest")
        .to_owned()
}

/// What the binary in `zip` is, judged by the format `like` has.
fn zipped_binary(zip: &Path, like: Binary) -> Binary {
    let out = Command::new("unzip")
        .arg("-p")
        .arg(zip)
        .output()
        .expect("unzip runs");
    match like {
        Binary::Elf(_) => Binary::Elf(elf_machine(&out.stdout)),
        Binary::MachO(_) => Binary::MachO(mach_o(&out.stdout).cpu_type),
        Binary::Pe(_) => Binary::Pe(pe_machine(&out.stdout)),
    }
}

#[test]
fn release_artifacts_have_the_registry_layout() {
    let r = release(&[], &[]);
    let zips: Vec<String> = PLATFORMS
        .iter()
        .map(|(platform, _)| format!("{NAME}_{VERSION}_{platform}.zip"))
        .collect();
    let manifest = format!("{NAME}_{VERSION}_manifest.json");
    let sums = format!("{NAME}_{VERSION}_SHA256SUMS");

    let manifest_json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(r.out.join(&manifest)).expect("manifest written"),
    )
    .expect("manifest is JSON");
    assert_eq!(
        manifest_json,
        serde_json::json!({"version": 1, "metadata": {"protocol_versions": ["6.0"]}})
    );

    // One SHA256SUMS names every zip and the manifest with their real digests, and nothing
    // else.
    let sums_text = std::fs::read_to_string(r.out.join(&sums)).expect("SHA256SUMS written");
    for file in zips.iter().chain([&manifest]) {
        let line = format!("{}  {file}", sha256(&r.out.join(file)));
        assert!(
            sums_text.lines().any(|l| l == line),
            "{file} missing or wrong in SHA256SUMS:\n{sums_text}"
        );
    }
    assert_eq!(
        sums_text.lines().count(),
        zips.len() + 1,
        "SHA256SUMS lists other files:\n{sums_text}"
    );

    for (zip, (platform, binary)) in zips.iter().zip(PLATFORMS) {
        // Each zip holds exactly the binary, named as Terraform expects, executable.
        let listing = Command::new("unzip")
            .arg("-Z1")
            .arg(r.out.join(zip))
            .output()
            .expect("unzip runs");
        let exe = if matches!(binary, Binary::Pe(_)) {
            ".exe"
        } else {
            ""
        };
        assert_eq!(
            String::from_utf8_lossy(&listing.stdout).trim(),
            format!("{NAME}_v{VERSION}{exe}")
        );
        let mode = Command::new("unzip")
            .arg("-Z")
            .arg(r.out.join(zip))
            .output()
            .expect("unzip runs");
        assert!(
            String::from_utf8_lossy(&mode.stdout).contains("-rwxr-xr-x"),
            "the binary is not executable in {zip}:\n{}",
            String::from_utf8_lossy(&mode.stdout)
        );
        // ... built for the zip's platform.
        let found = zipped_binary(&r.out.join(zip), binary);
        assert_eq!(found, binary, "the {platform} zip holds another binary");

        // The mirror gets every platform, in the packed layout.
        assert!(
            r.mirror
                .join("registry.terraform.io/gpufleet/gpufleet")
                .join(zip)
                .is_file(),
            "{zip} is not in the mirror"
        );
    }

    // A team that plans on Macs and applies from Linux CI locks every platform: Terraform
    // picks each platform's package from the mirror and records its own hash of each.
    let wd = Workdir::without_provider(
        r#"
terraform {
  required_providers {
    gpufleet = { source = "gpufleet/gpufleet", version = "0.1.0" }
  }
}
"#,
    );
    let mirror = format!("-fs-mirror={}", r.mirror.display());
    let mut args = vec!["providers", "lock", "-no-color", mirror.as_str()];
    let platforms: Vec<String> = PLATFORMS
        .iter()
        .map(|(p, _)| format!("-platform={p}"))
        .collect();
    args.extend(platforms.iter().map(String::as_str));
    let locked = wd.run_ok(&args);
    for (platform, _) in PLATFORMS {
        assert!(
            locked.contains(&format!(
                "Obtained gpufleet/gpufleet checksums for {platform}"
            )),
            "{platform} was not locked:\n{locked}"
        );
    }
    let lock = wd.read(".terraform.lock.hcl");
    let hashes: std::collections::BTreeSet<&str> =
        lock.split('"').filter(|s| s.starts_with("h1:")).collect();
    assert_eq!(
        hashes.len(),
        PLATFORMS.len(),
        "one hash per package:\n{lock}"
    );
}

#[test]
fn mirror_install_writes_the_lock_file_and_refuses_a_tampered_zip() {
    let r = release(&[], &[]);
    let quickstart = std::fs::read_to_string(workspace_root().join("examples/quickstart/main.tf"))
        .expect("the quickstart");
    let wd = Workdir::without_provider(&quickstart);
    let lock = wd.init_from_mirror(&r.mirror, "registry.terraform.io");
    assert!(
        lock.lines()
            .any(|l| l.trim().starts_with("version") && l.trim().ends_with("= \"0.1.0\"")),
        "{lock}"
    );

    // The installed binary runs the quickstart against the lab, and tears it down again.
    let lab = Lab::shared().settings_env();
    let env: Vec<(&str, &str)> = lab.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let apply = wd.run_ok_with_env(
        &["apply", "-auto-approve", "-input=false", "-no-color"],
        &env,
    );
    assert!(
        apply.contains("Apply complete! Resources: 3 added"),
        "{apply}"
    );
    assert!(apply.contains("prod_kubeconfig = <sensitive>"), "{apply}");
    wd.run_ok_with_env(
        &["destroy", "-auto-approve", "-input=false", "-no-color"],
        &env,
    );

    // Change one byte of the mirrored zip: with the lock file in place, a fresh install
    // must refuse it.
    let zip = r
        .mirror
        .join("registry.terraform.io/gpufleet/gpufleet")
        .join(format!("{NAME}_{VERSION}_{}.zip", platform()));
    let mut bytes = std::fs::read(&zip).expect("mirrored zip");
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&zip, bytes).expect("tamper");
    std::fs::remove_dir_all(wd.path().join(".terraform")).expect("remove .terraform");

    let refused = wd.run_err(&["init", "-input=false", "-no-color"]);
    assert!(
        refused.contains("checksum") || refused.contains("doesn't match"),
        "init did not explain the refusal:\n{refused}"
    );
    assert!(
        !wd.path()
            .join(".terraform/providers")
            .join("registry.terraform.io/gpufleet/gpufleet/0.1.0")
            .exists()
    );
}

#[test]
fn sums_are_signed_when_a_key_is_given() {
    let home = tempfile::tempdir().expect("GNUPGHOME");
    // gpg refuses to trust a home directory others can read.
    std::fs::set_permissions(
        home.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .expect("chmod GNUPGHOME");
    let gpg = |args: &[&str]| {
        let out = Command::new("gpg")
            .args(["--batch", "--pinentry-mode", "loopback", "--passphrase", ""])
            .args(args)
            .env("GNUPGHOME", home.path())
            .output()
            .expect("gpg runs");
        assert!(
            out.status.success(),
            "gpg {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    gpg(&[
        "--quick-generate-key",
        "gpufleet release test <release@gpufleet.test>",
        "ed25519",
        "sign",
        "1d",
    ]);

    // One platform is enough here: the signature covers SHA256SUMS, whatever it lists.
    let r = release(
        &["--platforms", "host", "--gpg-key", "release@gpufleet.test"],
        &[("GNUPGHOME", home.path())],
    );
    let sums = r.out.join(format!("{NAME}_{VERSION}_SHA256SUMS"));
    let sig = r.out.join(format!("{NAME}_{VERSION}_SHA256SUMS.sig"));
    assert!(sig.is_file(), "no detached signature");
    gpg(&["--verify", &sig.to_string_lossy(), &sums.to_string_lossy()]);

    // The signature covers the sums: a changed file no longer verifies.
    std::fs::write(&sums, "tampered\n").expect("tamper");
    let bad = Command::new("gpg")
        .args(["--batch", "--verify"])
        .arg(&sig)
        .arg(&sums)
        .env("GNUPGHOME", home.path())
        .output()
        .expect("gpg runs");
    assert!(
        !bad.status.success(),
        "a tampered SHA256SUMS still verified"
    );
}
