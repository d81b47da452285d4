//! Temporary check (deleted after use).
#[test]
fn builds_provider_and_points_terraform_at_it() {
    let bin = gpufleet_acceptance::provider_binary();
    assert!(bin.is_file(), "{}", bin.display());
    let again = gpufleet_acceptance::provider_binary();
    assert_eq!(bin, again);
    let wd = gpufleet_acceptance::Workdir::new(
        "terraform {\n  required_providers {\n    gpufleet = { source = \"gpufleet/gpufleet\" }\n  }\n}\nprovider \"gpufleet\" {}\n",
    );
    println!("{}", wd.read(".terraformrc"));
    wd.init();
    let out = wd.run(&["plan", "-no-color"]);
    println!("{out}");
    assert!(out.contains(&format!("Path: {}", bin.display())), "{out}");
}
