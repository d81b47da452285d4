//! Fuzz-style property test of the Netris emulator's dispatcher: random sequences of
//! requests (every route, random ids, random and plausible JSON bodies, junk bytes)
//! never panic, always answer a well-formed envelope, and never leave the state
//! inconsistent (duplicate names, double-booked ports, VLAN/VNI clashes, subnets outside
//! allocations, dangling references).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use gpufleet_lab::netris::dispatch::ROUTES;
use gpufleet_lab::netris::model::{Db, Purpose};
use gpufleet_lab::netris::{ApiConfig, Controller, ManualClock, NetrisInventory, Outcome, Request};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

const KEYS: &[&str] = &[
    "name",
    "id",
    "tenant",
    "vpc",
    "sites",
    "gateways",
    "ports",
    "vlan",
    "vxlanID",
    "state",
    "prefix",
    "purpose",
    "adminTenant",
    "guestTenant",
    "guestTenants",
    "tags",
    "mtu",
    "dhcp",
    "dhcpEnabled",
    "start",
    "end",
    "untagged",
    "accessMode",
    "description",
    "defaultGateway",
    "globalRouting",
    "vlanRange",
    "vniRange",
    "user",
    "password",
    "auth_scheme_id",
];

fn plausible() -> Vec<Value> {
    vec![
        json!("auto"),
        json!("a"),
        json!("b"),
        json!(0),
        json!(1),
        json!(2),
        json!(3),
        json!(100),
        json!("100"),
        json!(4095),
        json!(10_000),
        json!(16_777_216),
        json!(-1),
        json!(1.5),
        json!("10.0.0.0/16"),
        json!("10.0.1.0/24"),
        json!("10.0.1.1/24"),
        json!("10.0.1.0/33"),
        json!("0.0.0.0/0"),
        json!("fd00::1/64"),
        json!("10.0.1.10"),
        json!("swp1@r1-leaf1"),
        json!("swp2@r1-leaf2"),
        json!("common"),
        json!("nat"),
        json!("active"),
        json!("disabled"),
        json!("2-4094"),
        json!("5-3"),
        json!({"id": 1}),
        json!({"id": 2}),
        json!({"id": "x"}),
        json!([{"id": 1}]),
        json!([{"id": 1}, {"id": 2}]),
        json!([{"name": "swp1@r1-leaf1", "vlan": "auto"}]),
        json!([{"prefix": "10.0.1.1/24", "dhcp": {"start": "10.0.1.9", "end": "10.0.1.2"}}]),
        json!([{"prefix": "10.0.1.1/24"}]),
        json!(["t1", 2]),
        json!(true),
        json!(null),
        json!("99999999999999999999999"),
        json!(18_446_744_073_709_551_615u64),
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => proptest::sample::select(plausible()),
        1 => any::<i64>().prop_map(|n| json!(n)),
        1 => any::<bool>().prop_map(Value::Bool),
        1 => "[a-z0-9./@%-]{0,10}".prop_map(Value::String),
        1 => any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| json!(f)),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        5 => proptest::sample::select(KEYS).prop_map(str::to_owned),
        1 => "[a-zA-Z]{1,6}",
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 32, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(key(), inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

#[derive(Debug, Clone)]
enum Body {
    Json(Value),
    Bytes(Vec<u8>),
}

fn body() -> impl Strategy<Value = Body> {
    prop_oneof![
        6 => proptest::collection::btree_map(key(), value(), 0..10)
            .prop_map(|m| Body::Json(Value::Object(m.into_iter().collect()))),
        1 => value().prop_map(Body::Json),
        1 => proptest::collection::vec(any::<u8>(), 0..24).prop_map(Body::Bytes),
    ]
}

fn id_segment() -> impl Strategy<Value = String> {
    proptest::sample::select(vec![
        "0",
        "1",
        "2",
        "3",
        "7",
        "-1",
        "abc",
        "",
        "18446744073709551616",
        "10.0.0.0%2F16",
        "10.0.1.0/24",
        "%zz",
        "1%2F",
    ])
    .prop_map(str::to_owned)
}

#[derive(Debug, Clone)]
struct Call {
    method: String,
    path: String,
    body: Body,
}

/// Plausible values per field, for bodies that get past the required-field checks and
/// into the interesting rules (conflicts, placement, ownership).
fn template(path: &str) -> Vec<(&'static str, Vec<Value>)> {
    let name = vec![json!("a"), json!("b"), json!("c")];
    let tenant = vec![
        json!({"id": 1}),
        json!({"id": 2}),
        json!(1),
        json!({"id": 9}),
    ];
    let vpc = vec![json!({"id": 1}), json!({"id": 2}), json!(2)];
    if path.contains("vnet") {
        vec![
            ("name", name),
            ("tenant", tenant),
            (
                "sites",
                vec![
                    json!([{"id": 1}]),
                    json!([{"id": 2}]),
                    json!([{"id": 1}, {"id": 2}]),
                    json!([]),
                ],
            ),
            ("vpc", vpc),
            (
                "vlan",
                vec![
                    json!("auto"),
                    json!(2),
                    json!(3),
                    json!("100"),
                    json!(100),
                    json!(0),
                ],
            ),
            (
                "vxlanID",
                vec![json!(0), json!(10_000), json!(10_001), json!("auto")],
            ),
            ("state", vec![json!("active"), json!("disabled")]),
            (
                "gateways",
                vec![
                    json!([]),
                    json!([{"prefix": "10.0.1.1/24"}]),
                    json!([{"prefix": "10.0.1.2/24", "dhcpEnabled": true, "dhcp": {"start": "10.0.1.10", "end": "10.0.1.20"}}]),
                    json!([{"prefix": "10.0.2.1/24"}]),
                    json!([{"prefix": "10.1.1.1/24"}]),
                ],
            ),
            (
                "ports",
                vec![
                    json!([]),
                    json!([{"name": "swp1@r1-leaf1"}]),
                    json!([{"name": "swp2@r1-leaf1", "vlan": "auto", "untagged": true}, {"id": 3}]),
                    json!([{"name": "swp1@r2-leaf1"}]),
                    json!([{"id": 1}, {"id": 1}]),
                ],
            ),
        ]
    } else if path.contains("allocation") {
        vec![
            ("name", name),
            (
                "prefix",
                vec![
                    json!("10.0.0.0/16"),
                    json!("10.1.0.0/16"),
                    json!("10.0.0.0/8"),
                    json!("192.168.0.0/24"),
                ],
            ),
            ("tenant", tenant),
            ("vpc", vpc),
        ]
    } else if path.contains("subnet") {
        vec![
            ("name", name),
            (
                "prefix",
                vec![
                    json!("10.0.1.0/24"),
                    json!("10.0.2.0/24"),
                    json!("10.1.1.0/24"),
                    json!("192.168.0.0/25"),
                    json!("10.0.0.0/16"),
                ],
            ),
            ("tenant", tenant),
            ("vpc", vpc),
            (
                "purpose",
                vec![json!("common"), json!("nat"), json!("management")],
            ),
            (
                "sites",
                vec![json!([]), json!([{"id": 1}]), json!([{"id": 2}])],
            ),
        ]
    } else if path.contains("vpc") {
        vec![
            ("name", name),
            ("adminTenant", tenant.clone()),
            ("guestTenant", vec![json!([]), json!([{"id": 1}])]),
        ]
    } else if path.contains("sites") {
        vec![
            ("name", name),
            (
                "vlanRange",
                vec![json!("2-4094"), json!("2-3"), json!("100-200")],
            ),
        ]
    } else {
        vec![
            ("name", name),
            ("description", vec![json!("x")]),
            ("id", vec![json!(1), json!(2)]),
        ]
    }
}

fn templated(path: &'static str) -> impl Strategy<Value = Body> {
    let fields = template(path);
    let n = fields.len();
    (
        proptest::collection::vec(any::<proptest::sample::Index>(), n),
        proptest::option::weighted(0.2, any::<proptest::sample::Index>()),
        proptest::option::weighted(0.2, (any::<proptest::sample::Index>(), value())),
    )
        .prop_map(move |(picks, drop, mutate)| {
            let mut obj = Map::new();
            for ((key, pool), pick) in fields.iter().zip(picks) {
                obj.insert((*key).to_owned(), pick.get(pool).clone());
            }
            if let Some(i) = drop {
                obj.remove(fields[i.index(n)].0);
            }
            if let Some((i, v)) = mutate {
                obj.insert(fields[i.index(n)].0.to_owned(), v);
            }
            Body::Json(Value::Object(obj))
        })
}

/// Route indexes, the writes with the most rules repeated so they come up more often.
fn weighted_routes() -> Vec<usize> {
    let mut out = Vec::new();
    for (i, (method, path)) in ROUTES.iter().enumerate() {
        let writes = *method != "GET";
        let weight = match () {
            () if writes && path.contains("vnet") => 8,
            () if writes && path.contains("ipam") => 3,
            () => 1,
        };
        out.extend(std::iter::repeat_n(i, weight));
    }
    out
}

fn call() -> impl Strategy<Value = Call> {
    proptest::sample::select(weighted_routes()).prop_flat_map(|route| {
        let (method, path) = ROUTES[route];
        let methods = proptest::sample::select(vec!["GET", "POST", "PUT", "DELETE", "PATCH"]);
        (
            proptest::bool::weighted(0.9),
            methods,
            id_segment(),
            prop_oneof![3 => templated(path), 2 => body()],
            "[a-z/]{0,16}",
            proptest::bool::weighted(0.05),
        )
            .prop_map(move |(keep_method, other, id, body, junk, use_junk)| {
                let path = if use_junk {
                    format!("/api/{junk}")
                } else {
                    path.replace("{id}", &id).replace("{key}", &id)
                };
                Call {
                    method: if keep_method { method } else { other }.to_owned(),
                    path,
                    body,
                }
            })
    })
}

fn controller() -> (Controller, ManualClock, String) {
    let clock = ManualClock::new(1_000_000);
    let inv =
        NetrisInventory::from_nodes(&[("s1", "r1", "h1"), ("s1", "r1", "h2"), ("s2", "r2", "h3")]);
    let api = ApiConfig {
        provisioning_delay: Duration::from_millis(10),
        ..ApiConfig::default()
    };
    let ctl = Controller::in_memory(inv, Arc::new(clock.clone()), api);
    let login = ctl
        .handle(
            &Request::new("POST", "/api/auth")
                .json(&json!({"user": "netris", "password": "newNet0ps"})),
        )
        .into_response()
        .expect("answered");
    let cookie = login.session_cookie().expect("cookie");
    // Some objects so deeper rules are reachable: a tenant, a VPC, an allocation and a
    // common subnet in the default VPC.
    for (path, b) in [
        ("/api/tenants", json!({"name": "t"})),
        (
            "/api/v2/vpc",
            json!({"name": "v", "adminTenant": {"id": 2}}),
        ),
        (
            "/api/v2/ipam/allocation",
            json!({"name": "a", "prefix": "10.0.0.0/16", "tenant": 1}),
        ),
        (
            "/api/v2/ipam/subnet",
            json!({"name": "s", "prefix": "10.0.1.0/24", "tenant": 1, "purpose": "common"}),
        ),
    ] {
        let r = ctl
            .handle(&Request::new("POST", path).cookie(cookie.clone()).json(&b))
            .into_response()
            .expect("answered");
        assert_eq!(r.status, 200, "{path}: {}", r.body);
    }
    (ctl, clock, cookie)
}

/// The invariants every reachable state keeps.
fn check_invariants(db: &Db) -> Result<(), String> {
    let names: HashSet<&str> = db.vnets.values().map(|v| v.name.as_str()).collect();
    if names.len() != db.vnets.len() {
        return Err("duplicate vnet names".into());
    }
    let mut owners: BTreeMap<u64, u64> = BTreeMap::new();
    for v in db.vnets.values() {
        if !db.tenants.contains_key(&v.tenant) || !db.vpcs.contains_key(&v.vpc) {
            return Err(format!("vnet {} has a dangling tenant or vpc", v.id));
        }
        if v.sites.is_empty() || v.sites.iter().any(|s| !db.sites.contains_key(s)) {
            return Err(format!("vnet {} has bad sites", v.id));
        }
        for p in &v.ports {
            let Some(port) = db.ports.get(&p.port) else {
                return Err(format!("vnet {} has a dangling port", v.id));
            };
            if !db.port_site(port).is_some_and(|s| v.sites.contains(&s)) {
                return Err(format!("vnet {} has a port at another site", v.id));
            }
            if let Some(other) = owners.insert(p.port, v.id) {
                return Err(format!("port {} in vnets {other} and {}", p.port, v.id));
            }
        }
        for g in &v.gateways {
            let net = g.prefix.network();
            let ok = db.subnets.values().any(|s| {
                s.vpc == v.vpc
                    && s.prefix.contains(&net)
                    && s.purpose == Purpose::Common
                    && s.tenant == v.tenant
            });
            if !ok {
                return Err(format!(
                    "vnet {} gateway {} has no common subnet",
                    v.id, g.prefix
                ));
            }
        }
        for w in db.vnets.values().filter(|w| w.id < v.id) {
            if w.sites.iter().any(|s| v.sites.contains(s))
                && (w.vlan == v.vlan || w.vxlan_id == v.vxlan_id)
            {
                return Err(format!("vnets {} and {} clash on vlan/vni", w.id, v.id));
            }
        }
    }
    for s in db.subnets.values() {
        if !db
            .allocations
            .values()
            .any(|a| a.vpc == s.vpc && a.prefix.contains(&s.prefix))
        {
            return Err(format!("subnet {} outside any allocation", s.prefix));
        }
        if db
            .subnets
            .values()
            .any(|o| o.id != s.id && o.vpc == s.vpc && o.prefix.overlaps(&s.prefix))
        {
            return Err(format!("subnet {} overlaps another", s.prefix));
        }
        if !db.tenants.contains_key(&s.tenant) || s.sites.iter().any(|x| !db.sites.contains_key(x))
        {
            return Err(format!("subnet {} has dangling references", s.prefix));
        }
    }
    for a in db.allocations.values() {
        if db
            .allocations
            .values()
            .any(|o| o.id != a.id && o.vpc == a.vpc && o.prefix.overlaps(&a.prefix))
        {
            return Err(format!("allocation {} overlaps another", a.prefix));
        }
        if !db.tenants.contains_key(&a.tenant) || !db.vpcs.contains_key(&a.vpc) {
            return Err(format!("allocation {} has dangling references", a.prefix));
        }
    }
    for v in db.vpcs.values() {
        if !db.tenants.contains_key(&v.admin_tenant)
            || v.guest_tenants.iter().any(|t| !db.tenants.contains_key(t))
        {
            return Err(format!("vpc {} has dangling tenants", v.id));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn random_requests_never_panic_and_keep_the_state_consistent(
        calls in proptest::collection::vec(call(), 1..30),
        with_cookie in proptest::bool::weighted(0.95),
    ) {
        let (ctl, clock, cookie) = controller();
        for c in &calls {
            let mut req = Request::new(&c.method, &c.path);
            req = match &c.body {
                Body::Json(v) => req.json(v),
                Body::Bytes(b) => req.raw(b.clone()),
            };
            if with_cookie {
                req = req.cookie(cookie.clone());
            }
            let out = ctl.handle(&req);
            let Outcome::Reply(r) = out else {
                return Err(TestCaseError::fail("dropped without the down fault"));
            };
            prop_assert!((200..600).contains(&r.status));
            prop_assert_eq!(r.body["meta"]["statusCode"].as_u64(), Some(u64::from(r.status)), "{}", r.body);
            prop_assert_eq!(&r.body["isSuccess"], &json!(r.status == 200));
            prop_assert!(r.body["message"].is_string());
            clock.advance(Duration::from_millis(3));
        }
        let db = ctl.store().snapshot();
        if let Err(e) = check_invariants(&db) {
            return Err(TestCaseError::fail(e));
        }
        // The state always round-trips through its on-disk form.
        let text = serde_json::to_string(&db).expect("serialize");
        let back: Db = serde_json::from_str(&text).expect("deserialize");
        prop_assert_eq!(back, db);
    }
}
