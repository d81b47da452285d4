//! Contract tests of the Netris emulator's API, called in-process through the
//! dispatcher (no network): auth, envelope, IPAM rules, V-Net rules and quirks,
//! provisioning on a manual clock, and fault injection.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use gpufleet_lab::netris::dispatch::ROUTES;
use gpufleet_lab::netris::{
    ApiConfig, Controller, ManualClock, NetrisInventory, Outcome, Request, Response,
};
use serde_json::{Value, json};

const T0: u64 = 1_700_000_000_000;

struct Lab {
    ctl: Controller,
    clock: ManualClock,
    cookie: String,
}

fn inventory() -> NetrisInventory {
    NetrisInventory::from_nodes(&[
        ("site-a", "rack-a1", "gpu-a1-01"),
        ("site-a", "rack-a1", "gpu-a1-02"),
        ("site-a", "rack-a2", "gpu-a2-01"),
        ("site-b", "rack-b1", "gpu-b1-01"),
    ])
}

impl Lab {
    fn new() -> Self {
        let clock = ManualClock::new(T0);
        let api = ApiConfig {
            session_ttl: Duration::from_secs(600),
            provisioning_delay: Duration::from_millis(1500),
            ..ApiConfig::default()
        };
        let ctl = Controller::in_memory(inventory(), Arc::new(clock.clone()), api);
        let mut lab = Self {
            ctl,
            clock,
            cookie: String::new(),
        };
        lab.login();
        lab
    }

    fn login(&mut self) {
        let r = self.send(
            &Request::new("POST", "/api/auth")
                .json(&json!({"user": "netris", "password": "newNet0ps", "auth_scheme_id": 1})),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        self.cookie = r.session_cookie().expect("connect.sid cookie");
    }

    fn send(&self, req: &Request) -> Response {
        match self.ctl.handle(req) {
            Outcome::Reply(r) => r,
            Outcome::Drop => panic!("{} {} was dropped", req.method, req.path),
        }
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Response {
        let mut req = Request::new(method, path).cookie(self.cookie.clone());
        if let Some(b) = body {
            req = req.json(&b);
        }
        self.send(&req)
    }

    /// A call that must succeed; its `data`.
    fn ok(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let r = self.call(method, path, body);
        assert_eq!(r.status, 200, "{method} {path}: {}", r.body);
        r.body["data"].clone()
    }

    /// A call that must fail with `status`; the whole envelope.
    fn fails(&self, status: u16, method: &str, path: &str, body: Option<Value>) -> Value {
        let r = self.call(method, path, body);
        assert_eq!(r.status, status, "{method} {path}: {}", r.body);
        assert_envelope(&r);
        r.body
    }

    fn create(&self, path: &str, body: Value) -> u64 {
        self.ok("POST", path, Some(body))["id"]
            .as_u64()
            .expect("data.id")
    }

    fn tenant(&self, name: &str) -> u64 {
        self.create("/api/tenants", json!({"name": name, "description": ""}))
    }

    fn vpc(&self, name: &str, tenant: u64) -> u64 {
        self.create(
            "/api/v2/vpc",
            json!({"name": name, "adminTenant": {"id": tenant}, "guestTenant": [], "tags": []}),
        )
    }

    fn allocation(&self, prefix: &str, tenant: u64, vpc: u64) -> u64 {
        self.create(
            "/api/v2/ipam/allocation",
            json!({"name": format!("alloc {prefix}"), "prefix": prefix, "tenant": {"id": tenant}, "vpc": {"id": vpc}}),
        )
    }

    fn subnet(&self, prefix: &str, tenant: u64, vpc: u64, purpose: &str) -> u64 {
        self.create(
            "/api/v2/ipam/subnet",
            json!({"name": format!("subnet {prefix}"), "prefix": prefix, "tenant": {"id": tenant},
                   "vpc": {"id": vpc}, "purpose": purpose, "sites": []}),
        )
    }

    fn site(&self, name: &str) -> u64 {
        let sites = self.ok("GET", "/api/v2/sites", None);
        sites
            .as_array()
            .expect("sites")
            .iter()
            .find(|s| s["name"] == name)
            .and_then(|s| s["id"].as_u64())
            .expect("site")
    }

    /// The switch ports of a server, by hostname, through its links.
    fn ports_of(&self, host: &str) -> Vec<String> {
        let servers = self.ok("GET", "/api/v2/hw/server", None);
        let server = servers
            .as_array()
            .expect("servers")
            .iter()
            .find(|s| s["name"] == host)
            .cloned()
            .expect("server");
        server["links"]
            .as_array()
            .expect("links")
            .iter()
            .map(|l| l["remote"]["name"].as_str().expect("port name").to_owned())
            .collect()
    }

    /// A tenant, VPC, allocation 10.0.0.0/16 and common subnet 10.0.1.0/24 in it.
    fn network(&self) -> (u64, u64) {
        let t = self.tenant("acme");
        let vpc = self.vpc("acme-vpc", t);
        self.allocation("10.0.0.0/16", t, vpc);
        self.subnet("10.0.1.0/24", t, vpc, "common");
        (t, vpc)
    }

    fn vnet_body(&self, name: &str, tenant: u64, vpc: u64, site: u64) -> Value {
        json!({
            "name": name, "tenant": {"id": tenant}, "guestTenants": [], "sites": [{"id": site}],
            "vpc": {"id": vpc}, "state": "active", "vlan": "auto", "vxlanID": 0,
            "gateways": [], "ports": [], "tags": [],
        })
    }
}

fn assert_envelope(r: &Response) {
    let b = &r.body;
    for key in ["data", "isSuccess", "message", "errors", "meta"] {
        assert!(b.get(key).is_some(), "envelope lacks {key}: {b}");
    }
    assert_eq!(b["meta"]["apiVersion"], "v2");
    assert_eq!(b["meta"]["statusCode"].as_u64(), Some(u64::from(r.status)));
    assert_eq!(b["isSuccess"], r.status == 200);
    assert!(b["message"].is_string());
}

#[test]
fn every_route_but_login_needs_a_session() {
    let lab = Lab::new();
    for (method, path) in ROUTES {
        if *path == "/api/auth" {
            continue;
        }
        let path = path.replace("{id}", "1").replace("{key}", "1");
        for cookie in [None, Some("connect.sid=s%3Anot-a-session")] {
            let mut req = Request::new(method, &path).json(&json!({}));
            if let Some(c) = cookie {
                req = req.cookie(c);
            }
            let r = lab.send(&req);
            assert_eq!(r.status, 401, "{method} {path}: {}", r.body);
            assert_envelope(&r);
        }
    }
    // GET /api/auth answers 401 without a session, 200 with one.
    assert_eq!(lab.send(&Request::new("GET", "/api/auth")).status, 401);
    assert_eq!(lab.call("GET", "/api/auth", None).status, 200);
}

#[test]
fn login_checks_credentials_and_sets_connect_sid() {
    let lab = Lab::new();
    let bad = lab.send(
        &Request::new("POST", "/api/auth")
            .json(&json!({"user": "netris", "password": "nope", "auth_scheme_id": 1})),
    );
    assert_eq!(bad.status, 401);
    assert_envelope(&bad);
    assert!(bad.set_cookie.is_none());
    let good = lab.send(
        &Request::new("POST", "/api/auth")
            .json(&json!({"user": "netris", "password": "newNet0ps", "auth_scheme_id": 1})),
    );
    assert_eq!(good.status, 200);
    let cookie = good.set_cookie.as_deref().expect("set-cookie");
    assert!(cookie.starts_with("connect.sid="), "{cookie}");
    assert_envelope(&good);
}

#[test]
fn sessions_expire_after_the_ttl() {
    let mut lab = Lab::new();
    assert_eq!(lab.call("GET", "/api/v2/sites", None).status, 200);
    lab.clock.advance(Duration::from_secs(599));
    assert_eq!(lab.call("GET", "/api/v2/sites", None).status, 200);
    lab.clock.advance(Duration::from_secs(2));
    lab.fails(401, "GET", "/api/v2/sites", None);
    assert_eq!(lab.call("GET", "/api/auth", None).status, 401);
    lab.login();
    assert_eq!(lab.call("GET", "/api/v2/sites", None).status, 200);
}

#[test]
fn envelopes_wrap_successes_failures_and_unknown_routes() {
    let lab = Lab::new();
    let r = lab.call("GET", "/api/v2/vpc", None);
    assert_envelope(&r);
    assert_eq!(r.body["errors"], Value::Null);
    let (t, _) = lab.network();
    let r = lab.call(
        "POST",
        "/api/v2/vpc",
        Some(json!({"name": "v2", "adminTenant": {"id": t}})),
    );
    assert_envelope(&r);
    assert!(r.body["data"]["id"].as_u64().is_some());
    let body = lab.fails(404, "GET", "/api/v2/nothing-here", None);
    assert_eq!(body["data"], Value::Null);
    lab.fails(404, "GET", "/api/v2/vnet/999", None);
    let body = lab.fails(400, "POST", "/api/v2/vpc", None);
    assert!(body["errors"]["body"].is_string(), "{body}");
}

#[test]
fn a_subnet_outside_any_allocation_of_its_vpc_is_refused() {
    let lab = Lab::new();
    let (t, vpc) = lab.network();
    let body = lab.fails(
        400,
        "POST",
        "/api/v2/ipam/subnet",
        Some(json!({"name": "s", "prefix": "192.168.0.0/24", "tenant": {"id": t}, "vpc": {"id": vpc}, "purpose": "common"})),
    );
    assert_eq!(
        body["errors"]["prefix"],
        "IP prefix is out of any allocation"
    );
    // Inside an allocation, but of another VPC: refused too.
    let other = lab.vpc("other", t);
    lab.fails(
        400,
        "POST",
        "/api/v2/ipam/subnet",
        Some(json!({"name": "s", "prefix": "10.0.2.0/24", "tenant": {"id": t}, "vpc": {"id": other}, "purpose": "common"})),
    );
    // Tenant is required, purpose must be known, prefix must be a network.
    let body = lab.fails(
        400,
        "POST",
        "/api/v2/ipam/subnet",
        Some(json!({"name": "s", "prefix": "10.0.2.0/24", "vpc": {"id": vpc}})),
    );
    assert!(body["errors"]["tenant"].is_string(), "{body}");
    lab.fails(
        400,
        "POST",
        "/api/v2/ipam/subnet",
        Some(json!({"name": "s", "prefix": "10.0.2.0/24", "tenant": {"id": t}, "vpc": {"id": vpc}, "purpose": "public"})),
    );
    let body = lab.fails(
        400,
        "POST",
        "/api/v2/ipam/subnet",
        Some(
            json!({"name": "s", "prefix": "10.0.2.1/24", "tenant": {"id": t}, "vpc": {"id": vpc}}),
        ),
    );
    assert!(
        body["message"]
            .as_str()
            .expect("msg")
            .contains("10.0.2.0/24"),
        "{body}"
    );
    // Overlapping subnets and allocations are refused.
    lab.fails(
        400,
        "POST",
        "/api/v2/ipam/subnet",
        Some(json!({"name": "s", "prefix": "10.0.1.128/25", "tenant": {"id": t}, "vpc": {"id": vpc}})),
    );
    lab.fails(
        400,
        "POST",
        "/api/v2/ipam/allocation",
        Some(json!({"name": "a", "prefix": "10.0.0.0/8", "tenant": {"id": t}, "vpc": {"id": vpc}})),
    );
    // Every purpose is accepted.
    for (i, p) in [
        "common",
        "loopback",
        "management",
        "load-balancer",
        "nat",
        "inactive",
    ]
    .iter()
    .enumerate()
    {
        lab.subnet(&format!("10.0.{}.0/24", 10 + i), t, vpc, p);
    }
}

#[test]
fn deleting_an_allocation_deletes_its_subnets() {
    let lab = Lab::new();
    let t = lab.tenant("acme");
    let vpc = lab.vpc("acme-vpc", t);
    let a = lab.allocation("10.0.0.0/16", t, vpc);
    let keep = lab.allocation("10.1.0.0/16", t, vpc);
    let s1 = lab.subnet("10.0.1.0/24", t, vpc, "common");
    let s2 = lab.subnet("10.0.2.0/24", t, vpc, "management");
    let s3 = lab.subnet("10.1.1.0/24", t, vpc, "common");
    lab.ok("DELETE", &format!("/api/v2/ipam/allocation/{a}"), None);
    for s in [s1, s2] {
        lab.fails(404, "GET", &format!("/api/v2/ipam/subnet/{s}"), None);
    }
    lab.ok("GET", &format!("/api/v2/ipam/subnet/{s3}"), None);
    let subnets = lab.ok(
        "GET",
        &format!("/api/v2/ipam/subnets?filterByVpc={vpc}"),
        None,
    );
    assert_eq!(subnets.as_array().expect("list").len(), 1);
    // Delete by prefix works too (URL-encoded or not).
    lab.ok("DELETE", "/api/v2/ipam/allocation/10.1.0.0%2F16", None);
    lab.fails(404, "GET", &format!("/api/v2/ipam/allocation/{keep}"), None);
    lab.fails(404, "GET", &format!("/api/v2/ipam/subnet/{s3}"), None);
    let state = lab.ctl.store().snapshot();
    assert!(state.subnets.is_empty() && state.allocations.is_empty());
}

#[test]
fn allocation_and_subnet_ids_come_from_separate_counters() {
    let lab = Lab::new();
    let t = lab.tenant("acme");
    let vpc = lab.vpc("acme-vpc", t);
    let a1 = lab.allocation("10.0.0.0/16", t, vpc);
    let s1 = lab.subnet("10.0.1.0/24", t, vpc, "common");
    let a2 = lab.allocation("10.1.0.0/16", t, vpc);
    let s2 = lab.subnet("10.1.1.0/24", t, vpc, "common");
    assert_eq!((a1, a2), (1, 2));
    assert_eq!((s1, s2), (1, 2));
    // Same number, different objects.
    assert_eq!(
        lab.ok("GET", "/api/v2/ipam/allocation/1", None)["prefix"],
        "10.0.0.0/16"
    );
    assert_eq!(
        lab.ok("GET", "/api/v2/ipam/subnet/1", None)["prefix"],
        "10.0.1.0/24"
    );
    // Ids are not reused after a delete.
    lab.ok("DELETE", &format!("/api/v2/ipam/subnet/{s2}"), None);
    assert_eq!(lab.subnet("10.1.2.0/24", t, vpc, "common"), 3);
}

#[test]
fn the_ipam_tree_shows_only_the_default_vpc_without_a_filter() {
    let lab = Lab::new();
    let (t, vpc) = lab.network();
    lab.allocation("172.16.0.0/12", 1, 1);
    let tree = lab.ok("GET", "/api/v2/ipam", None);
    let prefixes: Vec<&str> = tree
        .as_array()
        .expect("tree")
        .iter()
        .filter_map(|a| a["prefix"].as_str())
        .collect();
    assert_eq!(prefixes, ["172.16.0.0/12"]);
    let tree = lab.ok("GET", &format!("/api/v2/ipam?filterByVpc={vpc}"), None);
    assert_eq!(tree[0]["prefix"], "10.0.0.0/16");
    assert_eq!(tree[0]["children"][0]["prefix"], "10.0.1.0/24");
    assert_eq!(tree[0]["children"][0]["purpose"], "common");
    assert_eq!(tree[0]["tenant"]["id"].as_u64(), Some(t));
    let both = lab.ok("GET", &format!("/api/v2/ipam?filterByVpc=1,{vpc}"), None);
    assert_eq!(both.as_array().expect("tree").len(), 2);
}

#[test]
fn vnet_names_are_globally_unique() {
    let lab = Lab::new();
    let (t, vpc) = lab.network();
    let site_a = lab.site("site-a");
    let site_b = lab.site("site-b");
    lab.create("/api/v2/vnet", lab.vnet_body("blue", t, vpc, site_a));
    let body = lab.fails(
        400,
        "POST",
        "/api/v2/vnet",
        Some(lab.vnet_body("blue", t, vpc, site_b)),
    );
    assert!(
        body["errors"]["name"]
            .as_str()
            .expect("names the field")
            .contains("blue"),
        "{body}"
    );
    // A rename onto an existing name is refused too.
    let red = lab.create("/api/v2/vnet", lab.vnet_body("red", t, vpc, site_b));
    lab.fails(
        400,
        "PUT",
        &format!("/api/v2/vnet/{red}"),
        Some(json!({"name": "blue"})),
    );
    assert_eq!(lab.ctl.store().snapshot().vnets.len(), 2);
}

#[test]
fn vlans_and_vnis_are_allocated_per_site_and_conflicts_refused() {
    let lab = Lab::new();
    let (t, vpc) = lab.network();
    let a = lab.site("site-a");
    let b = lab.site("site-b");
    let first = lab.create("/api/v2/vnet", lab.vnet_body("v1", t, vpc, a));
    let v = lab.ok("GET", &format!("/api/v2/vnet/{first}"), None);
    assert_eq!(v["vlan"], "2", "lowest of the default range 2-4094");
    assert_eq!(v["vxlanID"].as_u64(), Some(10_000));
    let second = lab.create("/api/v2/vnet", lab.vnet_body("v2", t, vpc, a));
    let v = lab.ok("GET", &format!("/api/v2/vnet/{second}"), None);
    assert_eq!(v["vlan"], "3");
    assert_eq!(v["vxlanID"].as_u64(), Some(10_001));

    let mut body = lab.vnet_body("v100", t, vpc, a);
    body["vlan"] = json!("100");
    let v100 = lab.create("/api/v2/vnet", body);
    // Switching to "auto" on a PUT keeps an id that is still valid.
    lab.ok(
        "PUT",
        &format!("/api/v2/vnet/{v100}"),
        Some(json!({"vlan": "auto", "vxlanID": 0})),
    );
    assert_eq!(
        lab.ok("GET", &format!("/api/v2/vnet/{v100}"), None)["vlan"],
        "100"
    );
    let mut clash = lab.vnet_body("v100-again", t, vpc, a);
    clash["vlan"] = json!(100);
    let err = lab.fails(400, "POST", "/api/v2/vnet", Some(clash.clone()));
    assert_eq!(err["message"], "vlan 100 is in use by vnet 'v100'");
    assert!(err["errors"]["vlan"].is_string());
    // The same VLAN at another site is fine.
    clash["sites"] = json!([{"id": b}]);
    lab.create("/api/v2/vnet", clash);
    // A given VNI in use at the site is refused; out of range is refused.
    let mut vni = lab.vnet_body("vni", t, vpc, a);
    vni["vxlanID"] = json!(10_000);
    let err = lab.fails(400, "POST", "/api/v2/vnet", Some(vni.clone()));
    assert!(
        err["errors"]["vxlanID"]
            .as_str()
            .expect("vni")
            .contains("'v1'"),
        "{err}"
    );
    vni["vxlanID"] = json!(5);
    lab.fails(400, "POST", "/api/v2/vnet", Some(vni));
    let mut bad = lab.vnet_body("bad", t, vpc, a);
    bad["vlan"] = json!("4095");
    lab.fails(400, "POST", "/api/v2/vnet", Some(bad));
    // A deleted V-Net's VLAN is free again.
    lab.ok("DELETE", &format!("/api/v2/vnet/{first}"), None);
    let again = lab.create("/api/v2/vnet", lab.vnet_body("v1b", t, vpc, a));
    assert_eq!(
        lab.ok("GET", &format!("/api/v2/vnet/{again}"), None)["vlan"],
        "2"
    );
}

#[test]
fn a_switch_port_serves_one_vnet_at_most() {
    let lab = Lab::new();
    let (t, vpc) = lab.network();
    let a = lab.site("site-a");
    let ports = lab.ports_of("gpu-a1-02");
    assert_eq!(ports, ["swp2@rack-a1-leaf1", "swp2@rack-a1-leaf2"]);
    let mut blue = lab.vnet_body("blue", t, vpc, a);
    blue["ports"] =
        json!([{"name": ports[0], "vlan": "auto", "untagged": true, "state": "active"}]);
    let blue_id = lab.create("/api/v2/vnet", blue);
    let mut red = lab.vnet_body("red", t, vpc, a);
    red["ports"] = json!([{"name": ports[1]}, {"name": ports[0]}]);
    let err = lab.fails(400, "POST", "/api/v2/vnet", Some(red.clone()));
    let msg = err["errors"]["ports"].as_str().expect("ports error");
    assert!(
        msg.contains("swp2@rack-a1-leaf1") && msg.contains("'blue'"),
        "{msg}"
    );
    // The port list shows the owner.
    let all = lab.ok("GET", "/api/v2/ports", None);
    let p = all
        .as_array()
        .expect("ports")
        .iter()
        .find(|p| p["name"] == ports[0].as_str())
        .cloned()
        .expect("port");
    assert_eq!(p["vnet"]["name"], "blue");
    assert_eq!(p["server"]["name"], "gpu-a1-02");
    assert_eq!(p["switchName"], "rack-a1-leaf1");
    // A port at another site is refused; listing a port twice is refused.
    let mut far = lab.vnet_body("far", t, vpc, a);
    far["ports"] = json!([{"name": lab.ports_of("gpu-b1-01")[0]}]);
    lab.fails(400, "POST", "/api/v2/vnet", Some(far));
    let mut twice = lab.vnet_body("twice", t, vpc, a);
    twice["ports"] = json!([{"name": ports[1]}, {"name": ports[1]}]);
    lab.fails(400, "POST", "/api/v2/vnet", Some(twice));
    // Once blue lets go of it, red may have it.
    lab.ok(
        "PUT",
        &format!("/api/v2/vnet/{blue_id}"),
        Some(json!({"ports": []})),
    );
    let red_id = lab.create("/api/v2/vnet", red);
    let got = lab.ok("GET", &format!("/api/v2/vnet/{red_id}"), None);
    assert_eq!(got["ports"][1]["name"], "swp2@rack-a1-leaf1");
    assert_eq!(got["ports"][1]["switchName"], "rack-a1-leaf1");
    assert_eq!(got["ports"][1]["port"], "swp2");
}

#[test]
fn a_put_that_changes_the_vpc_is_accepted_and_ignored() {
    let lab = Lab::new();
    let (t, vpc) = lab.network();
    let other = lab.vpc("other", t);
    let a = lab.site("site-a");
    let id = lab.create("/api/v2/vnet", lab.vnet_body("blue", t, vpc, a));
    let r = lab.call(
        "PUT",
        &format!("/api/v2/vnet/{id}"),
        Some(json!({"vpc": {"id": other}, "tags": ["moved?"]})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let v = lab.ok("GET", &format!("/api/v2/vnet/{id}"), None);
    assert_eq!(v["vpc"]["id"].as_u64(), Some(vpc), "vpc unchanged");
    assert_eq!(v["tags"], json!(["moved?"]), "the rest of the PUT applies");
    // Same quirk for IPAM objects.
    let sub = lab.subnet("10.0.9.0/24", t, vpc, "common");
    lab.ok(
        "PUT",
        &format!("/api/v2/ipam/subnet/{sub}"),
        Some(json!({"vpc": {"id": other}})),
    );
    assert_eq!(
        lab.ok("GET", &format!("/api/v2/ipam/subnet/{sub}"), None)["vpc"]["id"].as_u64(),
        Some(vpc)
    );
    // And state: disabled is allowed, shown once provisioned.
    lab.ok(
        "PUT",
        &format!("/api/v2/vnet/{id}"),
        Some(json!({"state": "disabled"})),
    );
    lab.clock.advance(Duration::from_secs(2));
    let v = lab.ok("GET", &format!("/api/v2/vnet/{id}"), None);
    assert_eq!(v["state"], "disabled");
    assert_eq!(v["status"]["label"], "Disabled");
}

#[test]
fn provisioning_finishes_on_the_clock_and_restarts_on_update() {
    let lab = Lab::new();
    let (t, vpc) = lab.network();
    let a = lab.site("site-a");
    let id = lab.create("/api/v2/vnet", lab.vnet_body("blue", t, vpc, a));
    let get = || lab.ok("GET", &format!("/api/v2/vnet/{id}"), None);
    let v = get();
    assert_eq!(v["provisioning"], true);
    assert_eq!(v["status"]["label"], "Provisioning");
    lab.clock.advance(Duration::from_millis(1499));
    assert_eq!(get()["provisioning"], true);
    lab.clock.advance(Duration::from_millis(1));
    let v = get();
    assert_eq!(v["provisioning"], false);
    assert_eq!(v["status"], json!({"label": "Active", "value": "active"}));
    lab.ok(
        "PUT",
        &format!("/api/v2/vnet/{id}"),
        Some(json!({"tags": ["x"]})),
    );
    assert_eq!(get()["provisioning"], true);
    lab.clock.advance(Duration::from_secs(2));
    assert_eq!(get()["provisioning"], false);
}

#[test]
fn stuck_provisioning_never_finishes_until_cleared() {
    let lab = Lab::new();
    let (t, vpc) = lab.network();
    let a = lab.site("site-a");
    let before = lab.create("/api/v2/vnet", lab.vnet_body("before", t, vpc, a));
    let r =
        lab.send(&Request::new("POST", "/_admin/fault").json(&json!({"provisioning_stuck": true})));
    assert_eq!(r.status, 200, "{}", r.body);
    let stuck = lab.create("/api/v2/vnet", lab.vnet_body("stuck", t, vpc, a));
    lab.clock.advance(Duration::from_secs(500));
    assert_eq!(
        lab.ok("GET", &format!("/api/v2/vnet/{stuck}"), None)["provisioning"],
        true
    );
    assert_eq!(
        lab.ok("GET", &format!("/api/v2/vnet/{before}"), None)["provisioning"],
        false
    );
    lab.send(&Request::new("DELETE", "/_admin/fault"));
    assert_eq!(
        lab.ok("GET", &format!("/api/v2/vnet/{stuck}"), None)["provisioning"],
        true
    );
    lab.clock.advance(Duration::from_secs(2));
    assert_eq!(
        lab.ok("GET", &format!("/api/v2/vnet/{stuck}"), None)["provisioning"],
        false
    );
}

#[test]
fn route_faults_count_down_and_do_not_carry_out_the_call() {
    let lab = Lab::new();
    let (t, vpc) = lab.network();
    let a = lab.site("site-a");
    let r = lab.send(
        &Request::new("POST", "/_admin/fault")
            .json(&json!({"route": "POST /api/v2/vnet", "status": 503, "count": 3})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    for i in 0..3 {
        let body = lab.fails(
            503,
            "POST",
            "/api/v2/vnet",
            Some(lab.vnet_body(&format!("x{i}"), t, vpc, a)),
        );
        assert_eq!(body["isSuccess"], false);
        // Other routes are unaffected.
        lab.ok("GET", "/api/v2/vnet", None);
    }
    assert!(
        lab.ctl.store().snapshot().vnets.is_empty(),
        "no call was carried out"
    );
    lab.create("/api/v2/vnet", lab.vnet_body("x", t, vpc, a));
    // A fault on a route pattern with an id placeholder and a custom message.
    lab.send(&Request::new("POST", "/_admin/fault").json(
        &json!({"route": "GET /api/v2/vnet/{id}", "status": 500, "count": 1, "message": "boom"}),
    ));
    let body = lab.fails(500, "GET", "/api/v2/vnet/1", None);
    assert_eq!(body["message"], "boom");
    lab.ok("GET", "/api/v2/vnet/1", None);
    // Bad fault requests are refused.
    for bad in [
        json!({"status": 42}),
        json!({"typo": true}),
        json!({"count": 2}),
    ] {
        assert_eq!(
            lab.send(&Request::new("POST", "/_admin/fault").json(&bad))
                .status,
            400,
            "{bad}"
        );
    }
}

#[test]
fn latency_faults_delay_the_answer_of_a_call_that_took_effect() {
    let lab = Lab::new();
    let t = lab.tenant("acme");
    lab.send(
        &Request::new("POST", "/_admin/fault")
            .json(&json!({"route": "POST /api/v2/vpc", "latency_ms": 2000, "count": 1})),
    );
    let r = lab.call(
        "POST",
        "/api/v2/vpc",
        Some(json!({"name": "slow", "adminTenant": {"id": t}})),
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.delay, Duration::from_millis(2000));
    assert!(
        lab.ctl
            .store()
            .snapshot()
            .vpcs
            .values()
            .any(|v| v.name == "slow")
    );
    assert_eq!(lab.call("GET", "/api/v2/vpc", None).delay, Duration::ZERO);
}

#[test]
fn expire_sessions_and_down_faults() {
    let mut lab = Lab::new();
    lab.send(&Request::new("POST", "/_admin/fault").json(&json!({"expire_sessions": true})));
    lab.fails(401, "GET", "/api/v2/sites", None);
    lab.login();
    lab.send(&Request::new("POST", "/_admin/fault").json(&json!({"down": true})));
    let req = Request::new("GET", "/api/v2/sites").cookie(lab.cookie.clone());
    assert_eq!(lab.ctl.handle(&req), Outcome::Drop);
    // The admin plane still answers, and brings it back.
    let r = lab.send(&Request::new("GET", "/_admin/healthz"));
    assert_eq!(r.status, 200);
    lab.send(&Request::new("POST", "/_admin/fault").json(&json!({"down": false})));
    lab.ok("GET", "/api/v2/sites", None);
}

#[test]
fn gateways_need_a_common_subnet_of_the_tenant_at_the_site() {
    let lab = Lab::new();
    let (t, vpc) = lab.network();
    let a = lab.site("site-a");
    let b = lab.site("site-b");
    let other_tenant = lab.tenant("globex");
    lab.subnet("10.0.2.0/24", t, vpc, "management");
    lab.subnet("10.0.3.0/24", other_tenant, vpc, "common");
    lab.create(
        "/api/v2/ipam/subnet",
        json!({"name": "b-only", "prefix": "10.0.4.0/24", "tenant": {"id": t}, "vpc": {"id": vpc},
               "purpose": "common", "sites": [{"id": b}]}),
    );
    let with_gw = |name: &str, gw: &str| {
        let mut body = lab.vnet_body(name, t, vpc, a);
        body["gateways"] = json!([{"prefix": gw, "dhcpEnabled": true, "dhcp": {"start": "10.0.1.100", "end": "10.0.1.200"}}]);
        body
    };
    for (gw, why) in [
        ("10.9.0.1/24", "not inside any subnet"),
        ("10.0.2.1/24", "management"),
        ("10.0.3.1/24", "tenant"),
        ("10.0.4.1/24", "site"),
        ("10.0.1.0/24", "network or broadcast"),
    ] {
        let body = lab.fails(400, "POST", "/api/v2/vnet", Some(with_gw("gw", gw)));
        let msg = body["errors"]["gateways"].as_str().expect("gateways error");
        assert!(msg.contains(why), "{gw}: {msg}");
    }
    let id = lab.create("/api/v2/vnet", with_gw("gw", "10.0.1.1/24"));
    let v = lab.ok("GET", &format!("/api/v2/vnet/{id}"), None);
    assert_eq!(v["gateways"][0]["prefix"], "10.0.1.1/24");
    assert_eq!(v["gateways"][0]["dhcp"]["start"], "10.0.1.100");
    // Another V-Net may not use the same gateway network.
    lab.fails(
        400,
        "POST",
        "/api/v2/vnet",
        Some(with_gw("gw2", "10.0.1.2/24")),
    );
    // The subnet (and its allocation) cannot go while the gateway uses it.
    let body = lab.fails(400, "DELETE", "/api/v2/ipam/subnet/10.0.1.0%2F24", None);
    assert!(
        body["message"].as_str().expect("msg").contains("'gw'"),
        "{body}"
    );
    lab.fails(400, "DELETE", "/api/v2/ipam/allocation/1", None);
    lab.fails(
        400,
        "PUT",
        "/api/v2/ipam/subnet/1",
        Some(json!({"purpose": "nat"})),
    );
    lab.ok("DELETE", &format!("/api/v2/vnet/{id}"), None);
    lab.ok("DELETE", "/api/v2/ipam/allocation/1", None);
}

#[test]
fn referenced_objects_cannot_be_deleted() {
    let lab = Lab::new();
    let (t, vpc) = lab.network();
    let a = lab.site("site-a");
    let id = lab.create("/api/v2/vnet", lab.vnet_body("blue", t, vpc, a));
    lab.fails(400, "DELETE", &format!("/api/v2/vpc/{vpc}"), None);
    lab.fails(400, "DELETE", &format!("/api/tenants/{t}"), None);
    lab.fails(400, "DELETE", &format!("/api/v2/sites/{a}"), None);
    lab.fails(400, "DELETE", "/api/v2/vpc/1", None);
    lab.fails(400, "DELETE", "/api/tenants/1", None);
    lab.ok("DELETE", &format!("/api/v2/vnet/{id}"), None);
    lab.ok("DELETE", "/api/v2/ipam/allocation/1", None);
    lab.ok("DELETE", &format!("/api/v2/vpc/{vpc}"), None);
    lab.ok("DELETE", &format!("/api/tenants/{t}"), None);
    lab.fails(404, "DELETE", &format!("/api/v2/vpc/{vpc}"), None);
}

#[test]
fn inventory_resolves_hostnames_to_switch_ports() {
    let lab = Lab::new();
    let switches = lab.ok("GET", "/api/v2/hw/switch", None);
    assert_eq!(switches.as_array().expect("switches").len(), 6);
    let hw = lab.ok("GET", "/api/v2/hw", None);
    assert_eq!(hw.as_array().expect("hw").len(), 6 + 4);
    let server = lab.ok("GET", "/api/v2/hw/server", None)[3].clone();
    assert_eq!(server["name"], "gpu-b1-01");
    assert_eq!(server["site"]["name"], "site-b");
    assert_eq!(server["links"][0]["local"]["name"], "eth0");
    assert_eq!(server["links"][0]["remote"]["switchName"], "rack-b1-leaf1");
    let port_id = server["links"][1]["remote"]["id"]
        .as_u64()
        .expect("port id");
    let port = lab.ok("GET", &format!("/api/v2/ports/{port_id}"), None);
    assert_eq!(port["name"], "swp1@rack-b1-leaf2");
    assert_eq!(port["vnet"], Value::Null);
    assert_eq!(port["server"]["nic"], "eth1");
}

#[test]
fn admin_state_reset_and_seed() {
    let lab = Lab::new();
    let (t, vpc) = lab.network();
    let a = lab.site("site-a");
    lab.create("/api/v2/vnet", lab.vnet_body("blue", t, vpc, a));
    let state = lab.send(&Request::new("GET", "/_admin/state")).body;
    assert_eq!(state["vnets"][0]["name"], "blue");
    assert_eq!(state["counters"]["vnet"].as_u64(), Some(1));
    assert_eq!(state["sessions"].as_u64(), Some(1));
    let names: HashSet<&str> = state["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(
        names.len(),
        state["ports"].as_array().expect("ports").len(),
        "port names unique"
    );

    let r = lab.send(&Request::new("POST", "/_admin/reset"));
    assert_eq!(r.status, 200, "{}", r.body);
    let state = lab.send(&Request::new("GET", "/_admin/state")).body;
    assert_eq!(state["vnets"], json!([]));
    assert_eq!(state["counters"]["vnet"].as_u64(), Some(0));
    assert_eq!(
        state["servers"].as_array().expect("servers").len(),
        4,
        "inventory kept"
    );
    // Reset logged everyone out.
    lab.fails(401, "GET", "/api/v2/vnet", None);

    let r = lab.send(
        &Request::new("POST", "/_admin/seed")
            .json(&json!({"nodes": [["east", "e1", "node-1"], ["west", "w1", "node-2"], ["west", "w1", "node-3"]]})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["servers"].as_u64(), Some(3));
    assert_eq!(r.body["sites"].as_u64(), Some(2));
    let inv = serde_json::to_value(NetrisInventory::from_nodes(&[("s", "r", "h")])).expect("inv");
    assert_eq!(
        lab.send(&Request::new("POST", "/_admin/seed").json(&inv))
            .status,
        200
    );
    let bad = json!({"sites": [], "switches": [{"name": "x", "site": "nowhere"}]});
    assert_eq!(
        lab.send(&Request::new("POST", "/_admin/seed").json(&bad))
            .status,
        400
    );
    assert_eq!(lab.send(&Request::new("GET", "/_admin/nope")).status, 404);
}
