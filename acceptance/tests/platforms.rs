//! The linux_arm64 release artifact, proven on this machine: `scripts/release --platforms
//! linux_arm64` cross-compiles it, the zip's binary must be an aarch64 ELF that needs no newer
//! glibc than Debian 12's, and the real Terraform CLI starts it (through a wrapper that execs
//! `qemu-aarch64-static` on it, so no binfmt_misc is needed), completes the plugin handshake
//! and plans the GPU catalog with it.
//!
//! The windows_amd64 artifact is run the same way under Wine, over TCP loopback. The
//! darwin_arm64 and darwin_amd64 artifacts are built here too, and checked, not run (no
//! macOS runs here): their Mach-O structure and what they link. Their TLS client is run
//! against the lab in `acceptance/tests/bundled_tls.rs`.
//!
//! Needs the cross toolchains and qemu that `scripts/setup` installs (through
//! `scripts/install-cross`); without them the tests fail and say so, they never skip.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use gpufleet_acceptance::{
    Workdir,
    binaries::{
        CPU_TYPE_ARM64, CPU_TYPE_X86_64, IMAGE_FILE_MACHINE_AMD64, elf_machine, mach_o, pe_machine,
    },
    workspace_root,
};

const VERSION: &str = "0.1.0";
const NAME: &str = "terraform-provider-gpufleet";

/// ELF `e_machine` of AArch64.
const EM_AARCH64: u16 = 0xB7;

/// Where Debian's libc6-arm64-cross puts the arm64 dynamic loader and glibc, which qemu
/// needs (`-L`) to run a dynamically linked arm64 binary.
const ARM64_SYSROOT: &str = "/usr/aarch64-linux-gnu";

/// The newest glibc the release may need: Debian 12's.
const MAX_GLIBC: (u32, u32) = (2, 36);

const INSTALL_HINT: &str = "run scripts/install-cross (as root) to install the cross \
                            toolchains (arm64, MinGW-w64), Rust's targets, qemu and Wine";

/// Runs `scripts/release --debug --platforms PLATFORMS` into `out`, and prints how long it took.
fn release(platforms: &str, out: &Path) {
    let started = Instant::now();
    let release = Command::new(workspace_root().join("scripts/release"))
        .args([
            "--debug",
            "--platforms",
            platforms,
            "--version",
            VERSION,
            "--out",
        ])
        .arg(out)
        .output()
        .expect("scripts/release runs");
    assert!(
        release.status.success(),
        "scripts/release --platforms {platforms} failed ({}); zig and cargo-zigbuild come from \
         scripts/setup; else {INSTALL_HINT}\n{}",
        release.status,
        String::from_utf8_lossy(&release.stderr)
    );
    eprintln!(
        "[platforms] scripts/release --debug --platforms {platforms} took {:.1}s",
        started.elapsed().as_secs_f64()
    );
}

/// The binary `file` of `platform`'s zip, which `scripts/release --debug` makes in `dir`,
/// unpacked there.
fn released_binary(dir: &Path, platform: &str, file: &str) -> PathBuf {
    let out = dir.join("dist");
    release(platform, &out);
    let zip = out.join(format!("{NAME}_{VERSION}_{platform}.zip"));
    assert!(zip.is_file(), "scripts/release wrote no {}", zip.display());

    let unpacked = dir.join("unpacked");
    let unzip = Command::new("unzip")
        .args(["-q", "-o"])
        .arg(&zip)
        .arg("-d")
        .arg(&unpacked)
        .output()
        .unwrap_or_else(|err| panic!("cannot run unzip ({err}); {INSTALL_HINT}"));
    assert!(
        unzip.status.success(),
        "unzip {} failed: {}",
        zip.display(),
        String::from_utf8_lossy(&unzip.stderr)
    );
    let binary = unpacked.join(file);
    assert!(binary.is_file(), "the zip holds no {}", binary.display());
    binary
}

/// The newest `GLIBC_x.y` symbol version the binary names (its version requirements).
fn newest_glibc(bytes: &[u8]) -> Option<(u32, u32)> {
    let tag = b"GLIBC_";
    let number = |at: usize| -> (u32, usize) {
        let digits = bytes[at..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let value = std::str::from_utf8(&bytes[at..at + digits])
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (value, at + digits)
    };
    let mut newest = None;
    for at in 0..bytes.len().saturating_sub(tag.len()) {
        if &bytes[at..at + tag.len()] != tag {
            continue;
        }
        let (major, end) = number(at + tag.len());
        if end == at + tag.len() || bytes.get(end) != Some(&b'.') {
            continue;
        }
        let (minor, end_minor) = number(end + 1);
        if end_minor == end + 1 {
            continue;
        }
        newest = newest.max(Some((major, minor)));
    }
    newest
}

/// The program that runs arm64 binaries here: nothing on an arm64 machine, else qemu.
fn emulator() -> Option<PathBuf> {
    if std::env::consts::ARCH == "aarch64" {
        return None;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = ["qemu-aarch64-static", "qemu-aarch64"]
        .iter()
        .find_map(|name| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(name))
                .find(|candidate| candidate.is_file())
        });
    let Some(qemu) = found else {
        panic!("neither qemu-aarch64-static nor qemu-aarch64 is on PATH; {INSTALL_HINT}");
    };
    let loader = Path::new(ARM64_SYSROOT).join("lib/ld-linux-aarch64.so.1");
    assert!(
        loader.exists(),
        "{} is missing, so qemu cannot load the arm64 binary; {INSTALL_HINT}",
        loader.display()
    );
    Some(qemu)
}

/// Quotes `path` for a POSIX shell.
fn quote(path: &Path) -> String {
    format!("'{}'", path.to_string_lossy().replace('\'', r"'\''"))
}

/// A directory holding `terraform-provider-gpufleet`: a script that records each start in
/// `starts` and then runs `run` (a shell command line) with Terraform's arguments.
fn wrapper_dir(dir: &Path, run: &str) -> PathBuf {
    let wrapper_dir = dir.join("provider");
    std::fs::create_dir_all(&wrapper_dir).expect("create the wrapper directory");
    let script = format!(
        "#!/bin/sh\n\
         # Terraform starts this as the provider: run the release binary instead.\n\
         echo started >> {starts}\n\
         exec {run} \"$@\"\n",
        starts = quote(&wrapper_dir.join("starts")),
    );
    let wrapper = wrapper_dir.join(NAME);
    std::fs::write(&wrapper, script).expect("write the wrapper");
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod the wrapper");
    wrapper_dir
}

/// Seconds since midnight of a Terraform log line's leading `YYYY-MM-DDTHH:MM:SS.mmmZ`.
fn log_seconds(line: &str) -> Option<f64> {
    let time = line.get(11..23)?;
    let mut parts = time.split(':');
    let hours: f64 = parts.next()?.parse().ok()?;
    let minutes: f64 = parts.next()?.parse().ok()?;
    let seconds: f64 = parts.next()?.parse().ok()?;
    Some(hours * 3600.0 + minutes * 60.0 + seconds)
}

/// For each provider start in a `TF_LOG=debug` log: the time from "plugin started" to
/// "using plugin: version=6", that is, process start and the go-plugin handshake.
fn handshake_times(log: &str) -> Vec<f64> {
    let mut times = Vec::new();
    let mut started = None;
    for line in log.lines() {
        if line.contains("[DEBUG] provider: plugin started:") {
            started = log_seconds(line);
        } else if line.contains("[DEBUG] provider: using plugin: version=6")
            && let (Some(start), Some(end)) = (started.take(), log_seconds(line))
        {
            times.push((end - start).rem_euclid(86_400.0));
        }
    }
    times
}

#[test]
fn arm64_release_plans_the_catalog_under_emulation() {
    let started = Instant::now();
    let dir = tempfile::Builder::new()
        .prefix("gpufleet-arm64-")
        .tempdir()
        .expect("temporary directory");
    let qemu = emulator();
    let binary = released_binary(dir.path(), "linux_arm64", &format!("{NAME}_v{VERSION}"));

    let bytes = std::fs::read(&binary).expect("read the arm64 binary");
    let machine = elf_machine(&bytes);
    assert_eq!(
        machine, EM_AARCH64,
        "the linux_arm64 zip holds a binary for ELF machine {machine:#x}, not aarch64 (0xb7)"
    );
    let glibc = newest_glibc(&bytes).expect("the binary names the glibc versions it needs");
    assert!(
        glibc <= MAX_GLIBC,
        "the arm64 binary needs glibc {}.{}, newer than Debian 12's {}.{}",
        glibc.0,
        glibc.1,
        MAX_GLIBC.0,
        MAX_GLIBC.1
    );

    let run = match &qemu {
        Some(qemu) => format!(
            "{} -L {} {}",
            quote(qemu),
            quote(Path::new(ARM64_SYSROOT)),
            quote(&binary)
        ),
        None => quote(&binary),
    };
    let provider_dir = wrapper_dir(dir.path(), &run);
    let under = if qemu.is_some() {
        "the arm64 provider under qemu"
    } else {
        "the arm64 provider (native)"
    };
    plan_the_catalog(&provider_dir, under, started);
}

#[test]
fn glibc_versions_are_read_from_version_names() {
    assert_eq!(
        newest_glibc(b"\0GLIBC_2.17\0GLIBC_2.34\0GLIBC_2.3.4\0GLIBC_PRIVATE\0"),
        Some((2, 34))
    );
    assert_eq!(newest_glibc(b"no versions here"), None);
}

#[test]
fn handshake_times_pair_each_start_with_its_protocol() {
    let log = "\
2026-11-24T11:41:14.212Z [DEBUG] provider: plugin started: path=/p pid=1
2026-11-24T11:41:14.673Z [DEBUG] provider: using plugin: version=6
2026-11-24T23:59:59.900Z [DEBUG] provider: plugin started: path=/p pid=2
2026-11-25T00:00:00.400Z [DEBUG] provider: using plugin: version=6
";
    let times = handshake_times(log);
    assert_eq!(times.len(), 2);
    assert!((times[0] - 0.461).abs() < 1e-6, "{times:?}");
    assert!((times[1] - 0.5).abs() < 1e-6, "{times:?}");
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// The macOS releases are built here, not run (no macOS runs on this machine): each zip's
/// binary is a Mach-O executable for its CPU that links libSystem and nothing else (none of
/// Apple's frameworks), and carries the plugin handshake and the TLS roots it verifies with.
#[test]
fn darwin_releases_are_mach_o_executables_that_link_only_libsystem() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir.path().join("dist");
    release("darwin_arm64,darwin_amd64", &out);
    for (platform, cpu) in [
        ("darwin_arm64", CPU_TYPE_ARM64),
        ("darwin_amd64", CPU_TYPE_X86_64),
    ] {
        let zip = out.join(format!("{NAME}_{VERSION}_{platform}.zip"));
        let unzip = Command::new("unzip")
            .arg("-p")
            .arg(&zip)
            .output()
            .expect("unzip runs");
        assert!(unzip.status.success(), "unzip {}", zip.display());
        let bytes = unzip.stdout;
        let m = mach_o(&bytes);
        assert_eq!(m.cpu_type, cpu, "{platform}: {m:?}");
        assert!(m.has_entry_point, "{platform}: no LC_MAIN: {m:?}");
        assert_eq!(m.dylibs, ["/usr/lib/libSystem.B.dylib"], "{platform}");
        // The plugin handshake (the cookie Terraform sets, and its mTLS client certificate)
        // and Mozilla's roots, which the macOS build verifies TLS with.
        for needle in [
            "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2",
            "PLUGIN_PROTOCOL_VERSIONS",
            "PLUGIN_CLIENT_CERT",
            "ISRG Root X1",
        ] {
            assert!(
                contains(&bytes, needle),
                "{platform}: no {needle:?} in the binary"
            );
        }
    }
}

/// Plans the GPU catalog with the provider that the wrapper in `provider_dir` runs (`under`
/// names it in the figures printed), and checks that Terraform started that wrapper, spoke
/// protocol 6 with it and got the catalog's values.
fn plan_the_catalog(provider_dir: &Path, under: &str, started: Instant) {
    let wd = Workdir::with_provider_dir(
        r#"
terraform {
  required_providers {
    gpufleet = { source = "gpufleet/gpufleet" }
  }
}

provider "gpufleet" {}

data "gpufleet_gpu_catalog" "h100" {
  product = "NVIDIA-H100-80GB-HBM3"
}

output "h100_memory_gb" {
  value = data.gpufleet_gpu_catalog.h100.gpu.memory_gb
}

output "h100_architecture" {
  value = data.gpufleet_gpu_catalog.h100.gpu.architecture
}

output "h100_mig_resource_names" {
  value = [for p in provider::gpufleet::mig_profiles("NVIDIA-H100-80GB-HBM3") : p.resource_name]
}
"#,
        provider_dir,
    );

    let plan_started = Instant::now();
    let plan = wd.run_ok_with_env(
        &["plan", "-input=false", "-no-color"],
        &[("TF_LOG", "debug")],
    );
    let plan_secs = plan_started.elapsed().as_secs_f64();

    // The catalog's values, read by the arm64 provider while planning.
    for expected in [
        "data.gpufleet_gpu_catalog.h100: Read complete",
        "+ h100_memory_gb = 80",
        "+ h100_architecture = \"hopper\"",
        "\"nvidia.com/mig-1g.10gb\"",
        "\"nvidia.com/mig-7g.80gb\"",
    ] {
        assert!(
            plan.contains(expected),
            "the plan lacks {expected:?}:\n{plan}"
        );
    }

    // Terraform started the wrapper, not a provider of its own, and spoke protocol 6 with it.
    let wrapper = provider_dir.join(NAME);
    assert!(
        plan.stderr.contains(&format!(
            "provider: plugin started: path={}",
            wrapper.display()
        )),
        "Terraform did not start {}:\n{plan}",
        wrapper.display()
    );
    let starts = std::fs::read_to_string(provider_dir.join("starts")).unwrap_or_default();
    assert!(
        starts.lines().count() >= 1,
        "the wrapper never ran:\n{plan}"
    );
    let handshakes = handshake_times(&plan.stderr);
    assert!(
        !handshakes.is_empty(),
        "no plugin handshake on protocol 6 in Terraform's log:\n{plan}"
    );
    let slowest = handshakes.iter().copied().fold(0.0, f64::max);
    let fastest = handshakes.iter().copied().fold(f64::INFINITY, f64::min);
    eprintln!(
        "[platforms] {} starts of {under}; handshake {fastest:.3}s to {slowest:.3}s; plan \
         {plan_secs:.1}s; whole test {:.1}s",
        handshakes.len(),
        started.elapsed().as_secs_f64()
    );
}

/// Where Debian's wine64 package puts Wine's 64-bit loader and server.
const WINE: &str = "/usr/lib/wine/wine64";
const WINESERVER: &str = "/usr/lib/wine/wineserver";

/// Keeps Wine from offering to install Mono and Gecko when a prefix is made.
const WINE_NO_INSTALLERS: &str = "mscoree,mshtml=";

/// DLLs of the MinGW runtime, which a Windows machine does not have.
const MINGW_RUNTIME: [&str; 3] = ["libgcc", "libwinpthread", "libstdc++"];

/// The DLLs `exe` imports, as MinGW's objdump lists them.
fn imported_dlls(exe: &Path) -> Vec<String> {
    let out = Command::new("x86_64-w64-mingw32-objdump")
        .arg("-p")
        .arg(exe)
        .output()
        .unwrap_or_else(|e| panic!("x86_64-w64-mingw32-objdump: {e}; {INSTALL_HINT}"));
    assert!(out.status.success(), "objdump -p {}", exe.display());
    let mut dlls: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().strip_prefix("DLL Name: "))
        .map(str::to_ascii_lowercase)
        .collect();
    dlls.sort();
    dlls.dedup();
    dlls
}

/// The windows_amd64 release, run under Wine through a real Terraform plugin handshake (over
/// TCP loopback, with Terraform's mutual TLS) and a plan of the GPU catalog. Wine 8 lacks
/// bcryptprimitives.dll, part of Windows 10 and newer, so the test puts a stand-in for its one
/// function beside the binary (`acceptance/tests/wine/bcryptprimitives.c`).
#[test]
fn windows_release_plans_the_catalog_under_wine() {
    let started = Instant::now();
    let dir = tempfile::Builder::new()
        .prefix("gpufleet-windows-")
        .tempdir()
        .expect("temporary directory");
    // The .exe name is the one Terraform runs on Windows.
    let exe = released_binary(
        dir.path(),
        "windows_amd64",
        &format!("{NAME}_v{VERSION}.exe"),
    );
    let bytes = std::fs::read(&exe).expect("read the Windows binary");
    assert_eq!(pe_machine(&bytes), IMAGE_FILE_MACHINE_AMD64);
    let dlls = imported_dlls(&exe);
    assert!(dlls.contains(&"kernel32.dll".to_owned()), "{dlls:?}");
    for dll in &dlls {
        assert!(
            !MINGW_RUNTIME.iter().any(|r| dll.starts_with(r)),
            "the binary needs {dll}, which Windows does not have: {dlls:?}"
        );
    }

    // The stand-in for bcryptprimitives.dll, beside the binary, where Windows looks first.
    let unpacked = exe.parent().expect("the unpacked directory");
    let wine_src = workspace_root().join("acceptance/tests/wine");
    let cc = Command::new("x86_64-w64-mingw32-gcc")
        .args(["-shared", "-O2", "-o"])
        .arg(unpacked.join("bcryptprimitives.dll"))
        .arg(wine_src.join("bcryptprimitives.c"))
        .arg(wine_src.join("bcryptprimitives.def"))
        .arg("-ladvapi32")
        .output()
        .unwrap_or_else(|e| panic!("x86_64-w64-mingw32-gcc: {e}; {INSTALL_HINT}"));
    assert!(
        cc.status.success(),
        "building the bcryptprimitives stand-in: {}",
        String::from_utf8_lossy(&cc.stderr)
    );

    // A Wine prefix of the test's own, made before Terraform starts the provider, with a
    // server that stays up (and the service processes it keeps) until the test ends: a
    // service that Wine started from the provider would hold Terraform's pipes open after
    // the provider exits, and Terraform would wait for them.
    assert!(
        Path::new(WINE).is_file(),
        "{WINE} is missing; {INSTALL_HINT}"
    );
    let prefix = dir.path().join("wine");
    std::fs::create_dir_all(&prefix).expect("the Wine prefix");
    let server = WineServer::start(&prefix);
    // Wine's services keep what they inherit: wineboot's output goes nowhere, so that
    // waiting for wineboot does not wait for them.
    // No display and no Mono or Gecko installer, so no dialog can wait for a click; and a
    // time limit all the same.
    let boot = Command::new("timeout")
        .args(["300", WINE, "wineboot", "--init"])
        .env("WINEPREFIX", &prefix)
        .env("WINEDEBUG", "-all")
        .env("WINEDLLOVERRIDES", WINE_NO_INSTALLERS)
        .env_remove("DISPLAY")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("wineboot runs");
    assert!(boot.success(), "wineboot --init: {boot}");

    let run = format!(
        "env -u DISPLAY WINEPREFIX={} WINEDEBUG=-all WINEDLLOVERRIDES={WINE_NO_INSTALLERS} {} {}",
        quote(&prefix),
        quote(Path::new(WINE)),
        quote(&exe)
    );
    let provider_dir = wrapper_dir(dir.path(), &run);
    plan_the_catalog(
        &provider_dir,
        "the windows_amd64 provider under Wine",
        started,
    );
    drop(server);
}

/// A persistent Wine server for one prefix, killed (with what runs in the prefix) on drop.
struct WineServer(PathBuf);

impl WineServer {
    fn start(prefix: &Path) -> WineServer {
        let status = Command::new(WINESERVER)
            .arg("-p")
            .env("WINEPREFIX", prefix)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .expect("wineserver runs");
        assert!(status.success(), "wineserver -p: {status}");
        WineServer(prefix.to_owned())
    }
}

impl Drop for WineServer {
    fn drop(&mut self) {
        let _ = Command::new(WINESERVER)
            .arg("-k")
            .env("WINEPREFIX", &self.0)
            .status();
    }
}
