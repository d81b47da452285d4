//! Adopting what already runs with `terraform query` (Terraform 1.14 and newer list
//! resources), through the real CLI against the shared lab: objects made out of band (the way
//! a team's own scripts made them, or by another workspace) are found by `list` blocks;
//! `-generate-config-out` writes import and resource blocks; the plan imports them changing
//! nothing; after the apply the next plan is empty; and a destroy removes them like any
//! other. Node pools are adopted without a change to their nodes.

use gpufleet_acceptance::{
    Output, Session,
    emulators::{bcm_call, bcm_device, bcm_power_calls as power_calls, netris_curl, netris_login},
};
use gpufleet_lab::{Lab, rest::KubeRest};
use serde_json::{Value, json};

/// A session whose configuration is only the provider, with `query` as its query file.
fn query_session(query: &str) -> Session {
    let s = Session::on_shared_lab("");
    s.wd.write("adopt.tfquery.hcl", query);
    s
}

/// `terraform query -generate-config-out=generated.tf`, which must succeed; its output and
/// the file it wrote.
fn generate(s: &Session) -> (Output, String) {
    let out = s.ok(&["query", "-no-color", "-generate-config-out=generated.tf"]);
    (out, s.wd.read("generated.tf"))
}

/// The plan's resource changes as (address, actions, importing).
fn planned(s: &Session) -> Vec<(String, Vec<String>, bool)> {
    s.ok(&["plan", "-input=false", "-no-color", "-out=tfplan"]);
    let plan = s.ok(&["show", "-json", "-no-color", "tfplan"]).json();
    plan["resource_changes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|rc| {
            let actions = rc["change"]["actions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a.as_str().map(str::to_owned))
                .collect();
            (
                rc["address"].as_str().unwrap_or_default().to_owned(),
                actions,
                !rc["change"]["importing"].is_null(),
            )
        })
        .collect()
}

/// Plans the generated configuration, which must import exactly `count` objects changing
/// nothing, applies that plan, and requires the next plan to be empty.
fn import_unchanged(s: &Session, count: usize, generated: &str) {
    let plan = planned(s);
    assert_eq!(plan.len(), count, "{plan:?}\n{generated}");
    for (address, actions, importing) in &plan {
        assert!(*importing, "{address} is not imported: {plan:?}");
        assert_eq!(
            actions,
            &["no-op"],
            "{address} would change: {plan:?}\n{generated}\n{}",
            s.run(&["show", "-no-color", "tfplan"])
        );
    }
    s.ok(&["apply", "-input=false", "-no-color", "tfplan"]);
    s.assert_plan_empty();
}

/// The id of the object named `name` in the list at `path`.
fn netris_id(jar: &tempfile::NamedTempFile, path: &str, name: &str) -> i64 {
    let (status, body) = netris_curl("GET", path, None, Some(jar.path()));
    assert_eq!(status, 200, "{body}");
    body["data"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|o| o["name"] == name)
        .and_then(|o| o["id"].as_i64())
        .unwrap_or_else(|| panic!("{path} has no {name}: {body}"))
}

/// Makes a V-Net the way a team's own automation would: an allocation and a subnet of its own
/// naming, then the V-Net with a gateway in it; no gpufleet tags.
fn vnet_out_of_band(name: &str, tenant: &str, prefix: &str, gateway: &str) {
    let jar = netris_login();
    let tenant_id = netris_id(&jar, "/api/tenants", tenant);
    let vpc_id = netris_id(&jar, "/api/v2/vpc", "Default");
    let site_id = netris_id(&jar, "/api/v2/sites", &site());
    let post = |path: &str, body: Value| {
        let (status, answer) = netris_curl("POST", path, Some(&body), Some(jar.path()));
        assert_eq!(status, 200, "POST {path}: {answer}");
    };
    post(
        "/api/v2/ipam/allocation",
        json!({"name": format!("ops-{name}"), "prefix": prefix, "tenant": {"id": tenant_id},
               "vpc": {"id": vpc_id}, "description": "made by the ops team"}),
    );
    post(
        "/api/v2/ipam/subnet",
        json!({"name": format!("ops-{name}"), "prefix": prefix, "purpose": "common",
               "tenant": {"id": tenant_id}, "sites": [{"id": site_id}], "vpc": {"id": vpc_id},
               "defaultGateway": gateway, "tags": [], "globalRouting": false,
               "description": "made by the ops team"}),
    );
    let len = prefix.split_once('/').map_or("24", |(_, l)| l);
    post(
        "/api/v2/vnet",
        json!({"name": name, "tenant": {"id": tenant_id}, "guestTenants": [],
               "sites": [{"id": site_id}], "vpc": {"id": vpc_id}, "state": "active",
               "vlan": "auto", "vxlanID": 0, "ipFamily": "ipv4", "tags": [], "mtu": 9000,
               "gateways": [{"prefix": format!("{gateway}/{len}"), "dhcpEnabled": false}],
               "ports": []}),
    );
}

/// Removes the allocation and subnet [`vnet_out_of_band`] made for `name`, as the team whose
/// objects they are would: an adopted segment does not own IPAM objects of other names, so
/// its destroy leaves them. Subnets go first, as the controller requires.
fn remove_ipam_out_of_band(name: &str) {
    let jar = netris_login();
    let (status, tree) = netris_curl("GET", "/api/v2/ipam", None, Some(jar.path()));
    assert_eq!(status, 200, "{tree}");
    fn walk<'a>(node: &'a Value, out: &mut Vec<&'a Value>) {
        out.push(node);
        for child in node["children"].as_array().into_iter().flatten() {
            walk(child, out);
        }
    }
    let mut nodes = Vec::new();
    for root in tree["data"].as_array().into_iter().flatten() {
        walk(root, &mut nodes);
    }
    let ours = format!("ops-{name}");
    for kind in ["subnet", "allocation"] {
        for node in nodes.iter().filter(|n| {
            n["name"] == ours.as_str()
                && n["type"]
                    .as_str()
                    .is_some_and(|t| t.eq_ignore_ascii_case(kind))
        }) {
            let path = format!("/api/v2/ipam/{kind}/{}", node["id"]);
            let (status, answer) = netris_curl("DELETE", &path, None, Some(jar.path()));
            assert_eq!(status, 200, "DELETE {path}: {answer}");
        }
    }
}

/// The first site of the emulator's inventory.
fn site() -> String {
    let jar = netris_login();
    let (status, body) = netris_curl("GET", "/api/v2/sites", None, Some(jar.path()));
    assert_eq!(status, 200, "{body}");
    body["data"][0]["name"]
        .as_str()
        .expect("the emulator has a site")
        .to_owned()
}

#[test]
fn vnets_made_out_of_band_are_adopted_as_segments_without_a_change() {
    let names = ["acc-adopt-a", "acc-adopt-b"];
    // What an earlier run on the same lab left, if it stopped half-way.
    for name in names {
        remove_ipam_out_of_band(name);
    }
    vnet_out_of_band(names[0], "tenant-a", "10.151.0.0/24", "10.151.0.1");
    vnet_out_of_band(names[1], "tenant-a", "10.151.1.0/24", "10.151.1.1");
    let s = query_session(
        r#"
list "gpufleet_network_segment" "ops" {
  provider = gpufleet
  config {
    tenant = "tenant-a"
  }
}
"#,
    );
    let _cleanup = s.destroy_on_panic();

    // Listing alone shows what is there, by name, without reading each segment.
    let out = s.ok(&["query", "-no-color"]);
    for name in names {
        assert!(out.contains(name), "query does not list {name}:\n{out}");
    }

    let (_, generated) = generate(&s);
    for name in names {
        assert!(
            generated.contains(&format!("name = \"{name}\"")) || generated.contains(name),
            "generated.tf has no block for {name}:\n{generated}"
        );
    }
    // Only the two made above are imported; other tests' segments of tenant-a may exist, so
    // keep just ours.
    let ours: String = generated
        .split("\n\n")
        .filter(|block| names.iter().any(|n| block.contains(&format!("\"{n}\""))))
        .collect::<Vec<_>>()
        .join("\n\n");
    s.wd.write("generated.tf", &ours);

    import_unchanged(&s, 2, &ours);
    let state = s.wd.run(&["state", "list"]).stdout;
    assert_eq!(state.lines().count(), 2, "{state}");
    s.destroy();
    let jar = netris_login();
    let (_, vnets) = netris_curl("GET", "/api/v2/vnet", None, Some(jar.path()));
    for name in names {
        assert!(
            !vnets.to_string().contains(&format!("\"{name}\"")),
            "{name} outlived the destroy: {vnets}"
        );
    }
    // The allocations and subnets of other names were never the segments' to remove.
    for name in names {
        remove_ipam_out_of_band(name);
    }
}

/// The lowest hostname of `rack`, away from the nodes the node tests take (the highest).
fn node_in(rack: &str) -> String {
    Lab::shared()
        .fleet()
        .nodes()
        .iter()
        .filter(|n| n.rack == rack)
        .map(|n| n.name.clone())
        .min()
        .unwrap_or_else(|| panic!("the lab has no {rack}"))
}

#[test]
fn a_node_a_tenant_holds_is_adopted_without_a_reboot_and_a_filter_mistake_is_named() {
    let host = node_in("rack-a2");
    // Held the way an earlier workspace (or an operator) left it: in a tenant category,
    // marked with the tenant.
    let compute = bcm_call("cmdevice", "getCategories", &json!([]))
        .as_array()
        .and_then(|all| all.iter().find(|c| c["name"] == "gpu-compute").cloned())
        .expect("BCM has the gpu-compute category");
    let mut d = bcm_device(&host);
    d["category"] = compute["uuid"].clone();
    d["extra_values"]["gpufleet_tenant"] = json!("acc-adopter");
    let r = bcm_call("cmdevice", "updateDevice", &json!([d, 0]));
    assert_eq!(r["success"], true, "{r}");
    let _release = Release(&host);
    let journal_before = power_calls(&host);

    let s = query_session(
        r#"
list "gpufleet_bcm_node" "held" {
  provider = gpufleet
  config {
    tenant = "acc-adopter"
  }
}
"#,
    );
    let _cleanup = s.destroy_on_panic();
    let (out, generated) = generate(&s);
    assert!(out.contains(&host), "{out}");
    assert!(generated.contains(&host), "{generated}");
    assert!(
        generated.contains("tenant") && generated.contains("acc-adopter"),
        "{generated}"
    );
    import_unchanged(&s, 1, &generated);
    assert_eq!(
        power_calls(&host),
        journal_before,
        "adopting the node must not power it"
    );

    // A status BCM never reports is refused at the filter, before anything is listed.
    s.wd.write(
        "adopt.tfquery.hcl",
        r#"
list "gpufleet_bcm_node" "held" {
  provider = gpufleet
  config {
    status = "RUNNING"
  }
}
"#,
    );
    let bad = s.run(&["query", "-no-color"]);
    assert!(!bad.success(), "{bad}");
    assert!(bad.contains("Unknown Status"), "{bad}");
    assert!(
        bad.contains("status = \"RUNNING\""),
        "not shown on the attribute:\n{bad}"
    );

    s.destroy();
    assert!(
        bcm_device(&host)["extra_values"]["gpufleet_tenant"].is_null(),
        "the destroy released the node"
    );
}

/// Puts a node this test marked back into the free pool if the test ends before its destroy
/// released it, so the next tests find the fleet as they expect.
struct Release<'a>(&'a str);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        let mut d = bcm_device(self.0);
        if d["extra_values"]["gpufleet_tenant"] != "acc-adopter" {
            return;
        }
        let free = bcm_call("cmdevice", "getCategories", &json!([]))
            .as_array()
            .and_then(|all| all.iter().find(|c| c["name"] == "free-pool").cloned());
        if let Some(free) = free {
            d["category"] = free["uuid"].clone();
        }
        d["extra_values"]["gpufleet_tenant"] = Value::Null;
        bcm_call("cmdevice", "updateDevice", &json!([d, 0]));
    }
}

/// The uids of the control-plane pods in host namespace `ns`, sorted. Pods the syncer copies
/// from inside the tenant (its DNS) come and go on their own, so they are left out.
fn pod_uids(ns: &str) -> Vec<String> {
    let host = KubeRest::from_kubeconfig(&Lab::shared().kubeconfig_path()).expect("host client");
    let pods = host
        .get(&format!(
            "/api/v1/namespaces/{ns}/pods?labelSelector=app%3Dvcluster"
        ))
        .expect("pods");
    let mut uids: Vec<String> = pods["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["metadata"]["uid"].as_str().map(str::to_owned))
        .collect();
    uids.sort();
    uids
}

#[test]
fn a_virtual_cluster_another_workspace_made_is_adopted_without_restarting_its_control_plane() {
    let name = "acc-adopt-vc";
    let ns = format!("vc-{name}");
    let resource = format!(
        r#"
resource "gpufleet_virtual_cluster" "t" {{
  name   = "{name}"
  labels = {{ "example.com/tier" = "acc-adopt" }}
  quota  = {{ gpus = 2, cpu = "8", memory = "32Gi", pods = 40 }}
}}
"#
    );
    // The workspace that made it, whose state is then lost to the adopting one.
    let maker = Session::on_shared_lab(&resource);
    let _cleanup = maker.destroy_on_panic();
    maker.apply();
    let control_plane = pod_uids(&ns);
    assert!(!control_plane.is_empty(), "the control plane runs");

    let s = query_session(
        r#"
list "gpufleet_virtual_cluster" "gold" {
  provider = gpufleet
  config {
    labels = { "example.com/tier" = "acc-adopt" }
  }
}
"#,
    );
    let (out, generated) = generate(&s);
    assert!(out.contains(name), "{out}");
    import_unchanged(&s, 1, &generated);
    assert_eq!(
        pod_uids(&ns),
        control_plane,
        "adopting restarted the control plane"
    );

    // A label filter that is no label is refused on its attribute.
    s.wd.write(
        "adopt.tfquery.hcl",
        r#"
list "gpufleet_virtual_cluster" "gold" {
  provider = gpufleet
  config {
    labels = { "tier" = "gold,app=other" }
  }
}
"#,
    );
    let bad = s.run(&["query", "-no-color"]);
    assert!(!bad.success(), "{bad}");
    assert!(bad.contains("Invalid Label Filter"), "{bad}");

    // Hand it back: the adopting workspace forgets it, the maker destroys it.
    s.ok(&[
        "state",
        "rm",
        "-no-color",
        "gpufleet_virtual_cluster.gold_0",
    ]);
    maker.destroy();
}

/// What gpufleet writes on host node `name`: its labels, annotations, taints and cordon
/// (a kubelet's own status updates are left out).
fn node_marks(name: &str) -> Value {
    let host = KubeRest::from_kubeconfig(&Lab::shared().kubeconfig_path()).expect("host client");
    let node = host
        .get(&format!("/api/v1/nodes/{name}"))
        .expect("the node");
    json!({
        "labels": node["metadata"]["labels"],
        "annotations": node["metadata"]["annotations"],
        "taints": node["spec"]["taints"],
        "unschedulable": node["spec"]["unschedulable"],
    })
}

#[test]
fn a_node_pool_another_workspace_made_is_adopted_without_touching_its_nodes() {
    let name = "acc-adopt-pool";
    let resource = format!(
        r#"
resource "gpufleet_virtual_cluster" "t" {{
  name      = "{name}"
  isolation = "dedicated"
}}

resource "gpufleet_gpu_node_pool" "p" {{
  name               = "infer"
  virtual_cluster_id = gpufleet_virtual_cluster.t.id
  gpu_product        = "NVIDIA-L40S"
  node_count         = 1
  sharing            = {{ strategy = "time-slicing", replicas = 4 }}
  node_labels        = {{ "example.com/team" = "inference" }}
}}
"#
    );
    let maker = Session::on_shared_lab(&resource);
    let _cleanup = maker.destroy_on_panic();
    maker.apply();
    let nodes = maker.resource("gpufleet_gpu_node_pool.p")["nodes"].clone();
    let node = nodes[0].as_str().expect("the pool's node").to_owned();
    let marks = node_marks(&node);

    let s = query_session(&format!(
        r#"
list "gpufleet_gpu_node_pool" "tenant" {{
  provider = gpufleet
  config {{
    virtual_cluster_id = "vc-{name}/{name}"
  }}
}}
"#
    ));
    let (out, generated) = generate(&s);
    assert!(out.contains("infer"), "{out}");
    assert!(generated.contains("replicas"), "{generated}");
    import_unchanged(&s, 1, &generated);
    let adopted = s.resource("gpufleet_gpu_node_pool.tenant_0");
    assert_eq!(adopted["nodes"], nodes, "{adopted:#}");
    assert_eq!(
        node_marks(&node),
        marks,
        "adopting wrote to the pool's node"
    );

    // A filter that names no virtual cluster is refused on its attribute.
    s.wd.write(
        "adopt.tfquery.hcl",
        r#"
list "gpufleet_gpu_node_pool" "tenant" {
  provider = gpufleet
  config {
    virtual_cluster_id = "acc-adopt-pool"
  }
}
"#,
    );
    let bad = s.run(&["query", "-no-color"]);
    assert!(!bad.success(), "{bad}");
    assert!(
        bad.contains("Invalid Virtual Cluster ID") && bad.contains("virtual_cluster_id"),
        "{bad}"
    );

    // Hand it back: the adopting workspace forgets it, the maker destroys it.
    s.ok(&[
        "state",
        "rm",
        "-no-color",
        "gpufleet_gpu_node_pool.tenant_0",
    ]);
    maker.destroy();
}

/// Helm and the pinned vCluster chart, from the Go module proxy, where `scripts/install-helm`
/// (run by `scripts/setup`) keeps them; it builds or fetches what is missing.
fn helm_and_chart() -> (String, String) {
    let script = gpufleet_acceptance::workspace_root().join("scripts/install-helm");
    let out = std::process::Command::new(&script)
        .arg("--env")
        .output()
        .expect("scripts/install-helm runs");
    assert!(
        out.status.success(),
        "scripts/install-helm: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let var = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("export {name}=")))
            .unwrap_or_else(|| panic!("scripts/install-helm --env names no {name}: {text}"))
            .to_owned()
    };
    (var("GPUFLEET_HELM"), var("GPUFLEET_VCLUSTER_CHART"))
}

/// Runs Helm against the lab's host cluster; it must succeed.
fn helm(helm: &str, args: &[&str]) -> String {
    let kubeconfig = Lab::shared().kubeconfig_path();
    let out = std::process::Command::new(helm)
        .args(args)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .env(
            "HELM_CACHE_HOME",
            std::env::temp_dir().join("gpufleet-helm-cache"),
        )
        .env(
            "HELM_CONFIG_HOME",
            std::env::temp_dir().join("gpufleet-helm-config"),
        )
        .output()
        .expect("helm runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "helm {args:?}: {text}");
    text
}

/// Waits until host namespace `ns` is gone (an earlier run's leftovers).
fn wait_namespace_gone(host: &KubeRest, ns: &str) {
    let path = format!("/api/v1/namespaces/{ns}");
    for _ in 0..120 {
        match host.get(&path) {
            Err(e) if e.is_not_found() => return,
            _ => std::thread::sleep(std::time::Duration::from_secs(1)),
        }
    }
    panic!("namespace {ns} is still there");
}

/// Waits until the control plane in `ns` has a Ready pod; its uids.
fn wait_control_plane_ready(host: &KubeRest, ns: &str) -> Vec<String> {
    let path = format!("/api/v1/namespaces/{ns}/pods?labelSelector=app%3Dvcluster");
    for _ in 0..240 {
        let ready = host.list(&path).unwrap_or_default().iter().any(|p| {
            p["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        });
        if ready {
            return pod_uids(ns);
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
    panic!("the control plane Helm installed in {ns} never became Ready");
}

#[test]
fn a_vcluster_installed_with_helm_is_adopted_without_restarting_its_control_plane() {
    let name = "acc-helm-vc";
    let ns = "acc-helm-team";
    let host = KubeRest::from_kubeconfig(&Lab::shared().kubeconfig_path()).expect("host client");
    let _ = host.delete(&format!("/api/v1/namespaces/{ns}"));
    wait_namespace_gone(&host, ns);
    let (helm_bin, chart) = helm_and_chart();
    // The values of a team that ran its shared tier with Helm the way gpufleet renders it
    // (OSS image, embedded database, hardened control plane, host nodes of the shared tier),
    // plus a setting of its own that no attribute has: a label on the StatefulSet.
    let values = format!(
        r#"
controlPlane:
  distro:
    k8s:
      enabled: true
      version: v1.36.0
      controllerManager:
        extraArgs:
          - "--controllers=*,-nodeipam,-nodelifecycle,-persistentvolume-binder,-attachdetach,-persistentvolume-expander,-cloud-node-lifecycle,-ttl,-taint-eviction-controller"
      securityContext:
        allowPrivilegeEscalation: false
        capabilities: {{ drop: [ALL] }}
        runAsNonRoot: true
  backingStore:
    database:
      embedded: {{ enabled: true }}
  service:
    spec: {{ type: ClusterIP }}
  proxy:
    extraSANs: [{name}.{ns}.svc]
  statefulSet:
    labels: {{ example.com/team: ml }}
    image: {{ repository: loft-sh/vcluster-oss, tag: "0.36.0" }}
    persistence:
      volumeClaim: {{ size: 5Gi }}
    pods:
      labels: {{ gpufleet.dev/virtual-cluster: {name} }}
    resources:
      limits: {{ ephemeral-storage: null }}
      requests: {{ ephemeral-storage: null }}
    security:
      podSecurityContext:
        runAsNonRoot: true
        runAsUser: 12345
        runAsGroup: 12345
        fsGroup: 12345
        seccompProfile: {{ type: RuntimeDefault }}
      containerSecurityContext:
        allowPrivilegeEscalation: false
        capabilities: {{ drop: [ALL] }}
        runAsNonRoot: true
        runAsUser: 12345
        runAsGroup: 12345
exportKubeConfig:
  server: https://{name}.{ns}.svc:443
sync:
  fromHost:
    nodes:
      enabled: true
      selector:
        labels: {{ gpufleet.dev/isolation: shared }}
policies:
  podSecurityStandard: baseline
  networkPolicy: {{ enabled: true }}
  resourceQuota: {{ enabled: false }}
  limitRange: {{ enabled: false }}
"#
    );
    let values_file = tempfile::NamedTempFile::new().expect("a values file");
    std::fs::write(values_file.path(), values).expect("values written");
    let values_path = values_file.path().to_string_lossy().into_owned();
    helm(
        &helm_bin,
        &[
            "install",
            name,
            &chart,
            "-n",
            ns,
            "--create-namespace",
            "-f",
            &values_path,
        ],
    );
    let control_plane = wait_control_plane_ready(&host, ns);

    let s = query_session(&format!(
        r#"
list "gpufleet_virtual_cluster" "helm" {{
  provider = gpufleet
  config {{
    namespace = "{ns}"
  }}
}}
"#
    ));
    let out = s.ok(&["query", "-no-color"]);
    assert!(out.contains("installed with Helm"), "{out}");
    let (_, generated) = generate(&s);
    assert!(
        generated.contains("example.com/team"),
        "the team's own setting is not in values_override:\n{generated}"
    );
    // The import plans gpufleet's labels on the namespace and the objects, and the config in
    // gpufleet's spelling: an update in place and nothing else.
    let plan = planned(&s);
    assert_eq!(plan.len(), 1, "{plan:?}\n{generated}");
    let (address, actions, importing) = &plan[0];
    assert!(*importing, "{address} is not imported: {plan:?}");
    assert!(
        actions == &["update"],
        "{address}: {actions:?}\n{}",
        s.run(&["show", "-no-color", "tfplan"])
    );
    s.ok(&["apply", "-input=false", "-no-color", "tfplan"]);
    s.assert_plan_empty();
    assert_eq!(
        wait_control_plane_ready(&host, ns),
        control_plane,
        "adopting restarted the control plane"
    );
    let labels = host
        .get(&format!("/api/v1/namespaces/{ns}"))
        .expect("the namespace")["metadata"]["labels"]
        .clone();
    assert_eq!(labels["gpufleet.dev/virtual-cluster"], name, "{labels}");

    // Destroy removes the virtual cluster and hands the namespace, which was there before,
    // back without gpufleet's marks.
    s.ok(&["destroy", "-auto-approve", "-input=false", "-no-color"]);
    let left = host
        .get(&format!("/api/v1/namespaces/{ns}"))
        .expect("the adopted namespace stays");
    assert!(
        left["metadata"]["labels"]
            .get("gpufleet.dev/virtual-cluster")
            .is_none(),
        "{left}"
    );
    let sts = host.get(&format!(
        "/apis/apps/v1/namespaces/{ns}/statefulsets/{name}"
    ));
    assert!(
        sts.is_err_and(|e| e.is_not_found()),
        "the control plane is gone"
    );
    let _ = host.delete(&format!("/api/v1/namespaces/{ns}"));
}
