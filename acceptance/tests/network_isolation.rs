//! Tenant network isolation, judged by an upstream NetworkPolicy engine: the policy matcher
//! of Cyclonus v0.5.6 (`network_policy_engine/`, a small Go program over its `pkg/matcher`),
//! fed the NetworkPolicies and namespaces as the lab's real API server holds them after
//! `terraform apply`, and the pods the tenants' own virtual clusters synced to the host.
//!
//! The lab runs no network plugin, so nothing enforces these policies in it; a real cluster's
//! CNI (Calico, Cilium) enforces the same policies the same way. What the engine decides is
//! checked against a truth table, for a tenant of each tier: its workloads reach each other,
//! their control plane, their DNS and public addresses, and nothing else (another tenant's
//! pods, control plane or DNS, host pods, host DNS, the host's API server, private ranges);
//! nothing of the host or another tenant reaches its workloads; its control plane reaches the
//! host's DNS and API ports only; its API server's port stays open to all (the chart's rule:
//! the tenant's kubeconfig reaches it through a Service or a load balancer).
//!
//! The check can fail: with any one of a tenant's policies removed, or with
//! `network_isolation = false`, some rows of the table no longer hold.
//!
//! Peers the lab has no pod for are described as a real cluster has them: host DNS is a
//! `k8s-app=kube-dns` pod in `kube-system`, the host API server is a private node address,
//! snapshot jobs are `app=vcluster-snapshot` pods. A pod the lab did not place (so has no
//! address) gets one from the lab's pod range, 100.64.0.0/10, as a CNI would give it.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use gpufleet_acceptance::{
    Session,
    tenant::{eventually, tenant_client},
};
use gpufleet_lab::{Lab, gobuild::find_go, rest::KubeRest};
use serde_json::{Value, json};

const PROVIDER: &str = r#"
terraform {
  required_providers {
    gpufleet = { source = "gpufleet/gpufleet" }
  }
}

provider "gpufleet" {}
"#;

/// One tenant per tier; each one's "other tenant" is the next in the list.
const TENANTS: [(&str, &str); 3] = [
    ("ni-s", "shared"),
    ("ni-d", "dedicated"),
    ("ni-p", "private"),
];

/// The three tenants; `open` names the one whose `network_isolation` is off.
fn config(open: Option<&str>) -> String {
    let mut out = PROVIDER.to_owned();
    for (name, tier) in TENANTS {
        let isolation = if open == Some(name) {
            "network_isolation = false"
        } else {
            ""
        };
        out.push_str(&format!(
            r#"
resource "gpufleet_virtual_cluster" "{name}" {{
  name      = "{name}"
  isolation = "{tier}"
  {isolation}
}}
"#
        ));
    }
    out
}

// --- the engine ---------------------------------------------------------------------------

const SETUP: &str = "run scripts/setup: it downloads the Go modules of \
                     acceptance/tests/network_policy_engine (github.com/mattfenwick/cyclonus \
                     v0.5.6) from the Go module proxy";

/// Builds the engine once per test run, offline (the module cache only).
fn engine() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let go = find_go().unwrap_or_else(|| {
            panic!("this test needs Go 1.26 or newer on PATH to build the policy engine; {SETUP}")
        });
        let bin = Path::new(env!("CARGO_TARGET_TMPDIR")).join("network-policy-engine");
        let out = Command::new(go)
            .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/network_policy_engine"))
            .args(["build", "-o"])
            .arg(&bin)
            .arg(".")
            .env("GOPROXY", "off")
            .env("GOFLAGS", "-mod=readonly -buildvcs=false")
            .env("GOTOOLCHAIN", "local")
            .output()
            .expect("run go build");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "building the policy engine failed ({SETUP}):\n{stderr}"
        );
        bin
    })
}

/// A pod as the engine sees it, or an address outside the cluster (`pod` null).
#[derive(Debug, Clone)]
struct Peer {
    what: String,
    json: Value,
}

impl Peer {
    fn pod(what: &str, namespace: &str, ns_labels: &Value, labels: &Value, ip: &str) -> Peer {
        Peer {
            what: what.to_owned(),
            json: json!({
                "ip": ip,
                "pod": { "namespace": namespace, "namespaceLabels": ns_labels, "labels": labels },
            }),
        }
    }

    fn address(what: &str, ip: &str) -> Peer {
        Peer {
            what: what.to_owned(),
            json: json!({ "ip": ip }),
        }
    }
}

/// One row of the truth table.
#[derive(Debug, Clone)]
struct Row {
    from: Peer,
    to: Peer,
    port: u16,
    protocol: &'static str,
    allowed: bool,
}

impl Row {
    fn name(&self) -> String {
        format!(
            "{} -> {} :{}/{}",
            self.from.what, self.to.what, self.port, self.protocol
        )
    }
}

/// What the engine decides for each row, in order.
fn verdicts(policies: &[Value], rows: &[Row]) -> Vec<bool> {
    let queries: Vec<Value> = rows
        .iter()
        .map(|r| {
            json!({
                "name": r.name(), "from": r.from.json, "to": r.to.json,
                "port": r.port, "protocol": r.protocol,
            })
        })
        .collect();
    let input = json!({ "policies": policies, "queries": queries });
    let mut child = Command::new(engine())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the policy engine");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.to_string().as_bytes())
        .expect("write the engine's input");
    let out = child.wait_with_output().expect("run the policy engine");
    assert!(
        out.status.success(),
        "the policy engine refused its input: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: Value = serde_json::from_slice(&out.stdout).expect("the engine's JSON");
    answer["verdicts"]
        .as_array()
        .expect("verdicts")
        .iter()
        .map(|v| v["allowed"].as_bool().expect("allowed"))
        .collect()
}

/// The rows whose verdict is not the expected one, as readable lines.
fn wrong_rows(policies: &[Value], rows: &[Row]) -> Vec<String> {
    rows.iter()
        .zip(verdicts(policies, rows))
        .filter(|(r, got)| r.allowed != *got)
        .map(|(r, got)| {
            let word = |b: bool| if b { "allowed" } else { "denied" };
            format!("{}: {} (expected {})", r.name(), word(got), word(r.allowed))
        })
        .collect()
}

// --- the fleet as the host holds it ---------------------------------------------------------

/// The peers of one tenant, from its host namespace.
struct Tenant {
    name: &'static str,
    workload: Peer,
    control_plane: Peer,
    dns: Peer,
    snapshot: Peer,
}

/// Addresses of the lab's pod range (100.64.0.0/10) for pods the lab did not place, one
/// each, as a CNI would give them.
#[derive(Default)]
struct SpareIps(u8);

impl SpareIps {
    fn next(&mut self) -> String {
        self.0 += 1;
        format!("100.127.255.{}", self.0)
    }

    /// The pod's own address, or the next spare one.
    fn of(&mut self, pod: &Value) -> String {
        match pod["status"]["podIP"].as_str() {
            Some(ip) if !ip.is_empty() => ip.to_owned(),
            _ => self.next(),
        }
    }
}

/// The labels of namespace `ns`, as the API server holds them.
fn namespace_labels(host: &KubeRest, ns: &str) -> Value {
    host.get(&format!("/api/v1/namespaces/{ns}"))
        .expect("namespace")["metadata"]["labels"]
        .clone()
}

/// What lies outside the tenants: host DNS, a host pod, the host API server, a private and
/// a public address.
struct Outside {
    dns: Peer,
    pod: Peer,
    api: Peer,
    private: Peer,
    public: Peer,
}

fn outside_peers(host: &KubeRest, spare: &mut SpareIps) -> Outside {
    Outside {
        dns: Peer::pod(
            "host DNS",
            "kube-system",
            &namespace_labels(host, "kube-system"),
            &json!({ "k8s-app": "kube-dns" }),
            &spare.next(),
        ),
        pod: Peer::pod(
            "a host pod",
            "default",
            &namespace_labels(host, "default"),
            &json!({ "app": "ingress" }),
            &spare.next(),
        ),
        api: Peer::address("the host API server", "10.0.0.2"),
        private: Peer::address("a private address", "192.168.10.10"),
        public: Peer::address("a public address", "203.0.113.10"),
    }
}

/// Tenant `name`'s pods on the host: its control plane, its DNS and the workload pod `web`.
fn tenant_peers(host: &KubeRest, name: &'static str, spare: &mut SpareIps) -> Tenant {
    let ns = format!("vc-{name}");
    let ns_labels = namespace_labels(host, &ns);
    let pods = host
        .list(&format!("/api/v1/namespaces/{ns}/pods"))
        .expect("list pods");
    let find = |what: &str, pick: &dyn Fn(&Value) -> bool| -> Value {
        pods.iter()
            .find(|p| pick(p))
            .unwrap_or_else(|| panic!("no {what} pod in {ns}"))
            .clone()
    };
    let label = |p: &Value, k: &str| p["metadata"]["labels"][k].as_str().map(str::to_owned);
    let cp = find("control plane", &|p| {
        label(p, "release").as_deref() == Some(name)
    });
    let dns = find("DNS", &|p| {
        label(p, "k8s-app").as_deref() == Some("vcluster-kube-dns")
    });
    let web = find("workload", &|p| {
        p["metadata"]["name"] == format!("web-x-default-x-{name}")
    });
    let peer = |what: &str, p: &Value, spare: &mut SpareIps| {
        Peer::pod(
            &format!("{name}'s {what}"),
            &ns,
            &ns_labels,
            &p["metadata"]["labels"],
            &spare.of(p),
        )
    };
    let workload = peer("workload", &web, spare);
    let control_plane = peer("control plane", &cp, spare);
    let dns = peer("DNS", &dns, spare);
    let snapshot = Peer::pod(
        &format!("{name}'s snapshot job"),
        &ns,
        &ns_labels,
        &json!({ "app": "vcluster-snapshot" }),
        &spare.next(),
    );
    Tenant {
        name,
        workload,
        control_plane,
        dns,
        snapshot,
    }
}

/// The truth table for tenant `t`, with `o` as the other tenant.
fn table(t: &Tenant, o: &Tenant, outside: &Outside) -> Vec<Row> {
    let Outside {
        dns: host_dns,
        pod: host_pod,
        api,
        private,
        public,
    } = outside;
    let row = |from: &Peer, to: &Peer, port: u16, protocol: &'static str, allowed: bool| Row {
        from: from.clone(),
        to: to.clone(),
        port,
        protocol,
        allowed,
    };
    let (w, cp, dns) = (&t.workload, &t.control_plane, &t.dns);
    vec![
        // Its workloads reach their own tenant, DNS and the internet...
        row(w, w, 8080, "TCP", true),
        row(w, cp, 8443, "TCP", true),
        row(w, dns, 1053, "UDP", true),
        row(w, public, 443, "TCP", true),
        // ...and nothing else.
        row(w, &o.workload, 8080, "TCP", false),
        row(w, &o.control_plane, 8443, "TCP", false),
        row(w, &o.dns, 1053, "UDP", false),
        row(w, host_pod, 8080, "TCP", false),
        row(w, host_dns, 53, "UDP", false),
        row(w, api, 443, "TCP", false),
        row(w, private, 443, "TCP", false),
        // Nothing of the host, another tenant or the internet reaches its workloads or DNS.
        row(host_pod, w, 8080, "TCP", false),
        row(&o.workload, w, 8080, "TCP", false),
        row(&o.control_plane, w, 8080, "TCP", false),
        row(public, w, 8080, "TCP", false),
        row(host_pod, dns, 1053, "UDP", false),
        // Its control plane: the API port is open to all, nothing else is.
        row(host_pod, cp, 8443, "TCP", true),
        row(host_pod, cp, 10250, "TCP", false),
        row(cp, api, 443, "TCP", true),
        row(cp, host_dns, 53, "UDP", true),
        row(cp, public, 80, "TCP", false),
        row(cp, &o.workload, 8080, "TCP", false),
        // The chart lets the control plane and snapshots reach the API ports (443, 6443,
        // 8443) of any address, as the host API server's is not known in advance; another
        // tenant's API server is one of them, and it authenticates.
        row(cp, &o.control_plane, 8443, "TCP", true),
        // Its DNS forwards to the host's; snapshots reach the control plane and API ports.
        row(dns, host_dns, 53, "UDP", true),
        row(&t.snapshot, cp, 8443, "TCP", true),
        row(&t.snapshot, public, 80, "TCP", false),
    ]
}

// --- the test ---------------------------------------------------------------------------------

/// A pod that passes the `restricted` pod security standard, as every tier admits.
fn web_pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": "web", "labels": { "app": "web" } },
        "spec": {
            "automountServiceAccountToken": false,
            "securityContext": {
                "runAsNonRoot": true, "runAsUser": 1000,
                "seccompProfile": { "type": "RuntimeDefault" },
            },
            "containers": [{
                "name": "web",
                "image": "nginxinc/nginx-unprivileged:1.29",
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "capabilities": { "drop": ["ALL"] },
                },
                "resources": { "requests": { "cpu": "100m", "memory": "128Mi" },
                               "limits": { "cpu": "100m", "memory": "128Mi" } },
            }],
        },
    })
}

/// Every NetworkPolicy of the host cluster, as its API returns them.
fn policies(host: &KubeRest) -> Vec<Value> {
    host.list("/apis/networking.k8s.io/v1/networkpolicies")
        .expect("list NetworkPolicies")
}

/// The names of tenant `name`'s policies.
fn policy_names(policies: &[Value], name: &str) -> Vec<String> {
    policies
        .iter()
        .filter(|p| p["metadata"]["namespace"] == format!("vc-{name}"))
        .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn every_tier_isolates_its_tenants_network_as_an_upstream_policy_engine_judges_it() {
    let lab = Lab::shared();
    let host = KubeRest::from_kubeconfig(&lab.kubeconfig_path()).expect("host client");
    let s = Session::new(&config(None), lab.settings_env());
    let _cleanup = s.destroy_on_panic();
    s.apply();
    s.assert_plan_empty();

    // A workload in each tenant, created through the tenant's own API and synced to the host.
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, _) in TENANTS {
        let vc = s.resource(&format!("gpufleet_virtual_cluster.{name}"));
        let kubeconfig = vc["kubeconfig"].as_str().expect("a kubeconfig");
        let (tenant, _forward) = tenant_client(dir.path(), &format!("vc-{name}"), name, kubeconfig);
        // The tenant's controller manager makes the default ServiceAccount shortly after start.
        eventually("the tenant accepts a pod", || {
            match tenant.create("/api/v1/namespaces/default/pods", &web_pod()) {
                Ok(_) => Ok(()),
                Err(e) if e.code == 409 => Ok(()),
                Err(e) => Err(e.to_string()),
            }
        });
        eventually(
            "the pod and the tenant's DNS are synced to the host",
            || {
                let pods = host
                    .list(&format!("/api/v1/namespaces/vc-{name}/pods"))
                    .map_err(|e| e.to_string())?;
                let synced = |prefix: &str| {
                    pods.iter().any(|p| {
                        p["metadata"]["name"]
                            .as_str()
                            .is_some_and(|n| n.starts_with(prefix))
                    })
                };
                (synced(&format!("web-x-default-x-{name}")) && synced("coredns-"))
                    .then_some(())
                    .ok_or_else(|| "not yet".to_owned())
            },
        );
    }

    let mut spare = SpareIps::default();
    let outside = outside_peers(&host, &mut spare);
    let tenants: Vec<Tenant> = TENANTS
        .iter()
        .map(|(name, _)| tenant_peers(&host, name, &mut spare))
        .collect();
    let rows: Vec<Row> = (0..tenants.len())
        .flat_map(|i| table(&tenants[i], &tenants[(i + 1) % tenants.len()], &outside))
        .collect();
    let applied = policies(&host);
    let wrong = wrong_rows(&applied, &rows);
    assert!(
        wrong.is_empty(),
        "rows that do not hold:\n{}",
        wrong.join("\n")
    );

    // Each of a tenant's policies carries some row: without it, the table no longer holds.
    for t in &tenants {
        let names = policy_names(&applied, t.name);
        assert_eq!(names.len(), 4, "{}: {names:?}", t.name);
        for name in names {
            let fewer: Vec<Value> = applied
                .iter()
                .filter(|p| {
                    !(p["metadata"]["namespace"] == format!("vc-{}", t.name)
                        && p["metadata"]["name"] == name.as_str())
                })
                .cloned()
                .collect();
            assert!(
                !wrong_rows(&fewer, &rows).is_empty(),
                "{}: without {name} the table still holds",
                t.name
            );
        }
    }

    // With `network_isolation = false` the tenant's policies go, and its workloads are open
    // to the host and open onto private ranges.
    let (open, _) = TENANTS[0];
    s.write(&config(Some(open)));
    s.apply();
    s.assert_plan_empty();
    let without = policies(&host);
    assert!(policy_names(&without, open).is_empty(), "{without:#?}");
    let wrong: BTreeMap<String, ()> = wrong_rows(&without, &rows)
        .into_iter()
        .map(|r| (r, ()))
        .collect();
    let w = &tenants[0].workload.what;
    for expected in [
        format!("a host pod -> {w} :8080/TCP: allowed (expected denied)"),
        format!("{w} -> a private address :443/TCP: allowed (expected denied)"),
        format!("{w} -> the host API server :443/TCP: allowed (expected denied)"),
    ] {
        assert!(
            wrong.contains_key(&expected),
            "{expected} not among {wrong:#?}"
        );
    }

    s.destroy();
}
