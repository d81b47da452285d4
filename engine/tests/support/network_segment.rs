//! Shared by the `network_segment_*` tests (included with `#[path]`; it lives under
//! `support/` so that it is not a test binary of its own): a faithful in-memory
//! Netris controller behind the [`NetrisApi`] trait, and a harness that drives a resource kind
//! the way Terraform core does, checking Terraform's consistency rules on every plan, apply and
//! refresh.
//!
//! The fake enforces the controller rules a segment runs into (globally unique V-Net names,
//! subnets inside an allocation of the same VPC, allocations that do not overlap, gateways in a
//! `common` subnet of the V-Net's tenant, ports that exist and serve one V-Net, subnets in use
//! cannot be deleted, allocation deletes cascade), allocates VLANs and VNIs, keeps V-Nets
//! `provisioning` for a number of reads, and logs every call as `METHOD /path {body}` so tests
//! can assert the exact request sequence.
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::{
    collections::{BTreeMap, VecDeque},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use async_trait::async_trait;
use gpufleet_engine::{
    backends::netris::{
        AllocationWrite, ApiError, CallStats, GatewayRead, IpamNode, Link, Named, NetrisApi,
        NetrisError, PortRead, PortRef, Server, Site, StatusLabel, SubnetWrite, Tenant, VNet,
        VNetWrite, Vpc,
    },
    kinds::ResourceKind,
    resources::network_segment::NetworkSegment,
    validate::Ipv4Net,
    value::Value,
};

// =============================================================================================
// The fake controller

/// A failure to inject into the next call of a route.
#[derive(Debug, Clone)]
pub enum Fault {
    /// The controller answers this status; the call is not carried out.
    Status(u16, &'static str),
    /// The call is carried out, but its answer is lost (a transient error reaches the caller):
    /// what a provider killed mid-call or a client out of retries sees.
    LostAnswer,
}

#[derive(Debug, Clone)]
struct Alloc {
    name: String,
    prefix: Ipv4Net,
    vpc: i64,
    tenant: i64,
    description: String,
}

#[derive(Debug, Clone)]
struct Sub {
    name: String,
    prefix: Ipv4Net,
    vpc: i64,
    tenant: i64,
    gateway: String,
    tags: Vec<String>,
}

#[derive(Debug, Clone)]
struct Net {
    body: VNetWrite,
    vlan: i64,
    vni: i64,
    polls_left: u32,
}

#[derive(Debug, Default)]
struct State {
    tenants: Vec<Named>,
    sites: Vec<Named>,
    vpcs: Vec<Named>,
    servers: Vec<Server>,
    switch_ports: Vec<String>,
    allocations: BTreeMap<i64, Alloc>,
    subnets: BTreeMap<i64, Sub>,
    vnets: BTreeMap<i64, Net>,
    next_id: i64,
    log: Vec<String>,
    faults: VecDeque<(String, Fault)>,
    provisioning_polls: u32,
    calls: BTreeMap<String, u64>,
    /// Calls still carried out before every call fails with 503.
    budget: sweep::Budget,
}

/// The fake controller.
#[derive(Debug, Default)]
pub struct FakeNetris {
    state: Mutex<State>,
}

fn named(id: i64, name: &str) -> Named {
    Named {
        id,
        name: name.to_owned(),
    }
}

fn bad(status: u16, message: impl Into<String>) -> ApiError {
    ApiError::Status {
        status,
        message: message.into(),
        errors: String::new(),
    }
}

fn lost() -> ApiError {
    ApiError::Status {
        status: 502,
        message: "Bad Gateway (answer lost)".to_owned(),
        errors: String::new(),
    }
}

impl FakeNetris {
    /// A controller with tenant `tenant-a` (2), VPC `vpc-a` (2) and `Default` (1), site `dc1`
    /// (1), servers `gpu-001` (cabled to swp1@leaf-01 and swp1@leaf-02) and `gpu-002` (swp2@…),
    /// free ports swp10..swp12 on leaf-01, and V-Nets that provision for one read.
    pub fn new() -> Arc<FakeNetris> {
        let server = |id: i64, name: &str, port: &str| Server {
            id,
            name: name.to_owned(),
            links: ["leaf-01", "leaf-02"]
                .iter()
                .enumerate()
                .map(|(i, sw)| Link {
                    local: PortRef {
                        id: None,
                        name: Some(format!("eth{i}")),
                    },
                    remote: PortRef {
                        id: None,
                        name: Some(format!("{port}@{sw}")),
                    },
                })
                .collect(),
        };
        let state = State {
            tenants: vec![
                named(1, "Admin"),
                named(2, "tenant-a"),
                named(3, "tenant-b"),
            ],
            sites: vec![named(1, "dc1")],
            vpcs: vec![named(1, "Default"), named(2, "vpc-a")],
            servers: vec![server(1, "gpu-001", "swp1"), server(2, "gpu-002", "swp2")],
            switch_ports: ["swp1", "swp2", "swp10", "swp11", "swp12"]
                .iter()
                .flat_map(|p| ["leaf-01", "leaf-02"].map(|sw| format!("{p}@{sw}")))
                .collect(),
            next_id: 100,
            provisioning_polls: 1,
            ..State::default()
        };
        Arc::new(FakeNetris {
            state: Mutex::new(state),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The calls made so far, one line each, and forgets them.
    pub fn take_log(&self) -> Vec<String> {
        std::mem::take(&mut self.lock().log)
    }

    /// The next call of `route` ("POST /api/v2/vnet") fails with `fault`.
    pub fn fail_next(&self, route: &str, fault: Fault) {
        self.lock().faults.push_back((route.to_owned(), fault));
    }

    /// How many reads a created or updated V-Net stays provisioning for (`u32::MAX`: stuck).
    pub fn set_provisioning_polls(&self, n: u32) {
        self.lock().provisioning_polls = n;
    }

    /// Counts of objects: (allocations, subnets, V-Nets).
    pub fn counts(&self) -> (usize, usize, usize) {
        let s = self.lock();
        (s.allocations.len(), s.subnets.len(), s.vnets.len())
    }

    /// Removes a V-Net behind Terraform's back.
    pub fn delete_vnet_out_of_band(&self, name: &str) {
        self.lock().vnets.retain(|_, v| v.body.name != name);
    }

    /// Creates a V-Net behind Terraform's back, without gpufleet's tags.
    pub fn create_foreign_vnet(&self, name: &str) -> i64 {
        let mut s = self.lock();
        s.next_id += 1;
        let id = s.next_id;
        let body = VNetWrite {
            name: name.to_owned(),
            tenant: gpufleet_engine::backends::netris::IdRef { id: 2 },
            guest_tenants: Vec::new(),
            sites: vec![gpufleet_engine::backends::netris::IdRef { id: 1 }],
            vpc: gpufleet_engine::backends::netris::IdRef { id: 2 },
            state: "active".to_owned(),
            vlan: "auto".to_owned(),
            vxlan_id: 0,
            ip_family: "ipv4".to_owned(),
            tags: Vec::new(),
            mtu: 1500,
            gateways: Vec::new(),
            ports: Vec::new(),
        };
        s.vnets.insert(
            id,
            Net {
                body,
                vlan: 3000,
                vni: 30000,
                polls_left: 0,
            },
        );
        id
    }

    /// Changes a V-Net's ports behind Terraform's back: `(port, untagged)`.
    pub fn set_ports_out_of_band(&self, name: &str, ports: &[(&str, bool)]) {
        let mut s = self.lock();
        if let Some(v) = s.vnets.values_mut().find(|v| v.body.name == name) {
            v.body.ports = ports
                .iter()
                .map(|(p, u)| gpufleet_engine::backends::netris::PortWrite {
                    name: (*p).to_owned(),
                    access_mode: *u,
                    state: "active".to_owned(),
                    lacp: "off".to_owned(),
                })
                .collect();
        }
    }

    /// Logs and counts a call, and takes its fault if one is due.
    fn enter(&self, route: &str, target: String, body: Option<String>) -> Option<Fault> {
        let mut s = self.lock();
        let line = match body {
            Some(b) => format!("{target} {b}"),
            None => target,
        };
        s.log.push(line);
        *s.calls.entry(route.to_owned()).or_default() += 1;
        if !s.budget.spend() {
            return Some(Fault::Status(503, "Service Unavailable"));
        }
        let pos = s.faults.iter().position(|(r, _)| r == route)?;
        s.faults.remove(pos).map(|(_, f)| f)
    }

    /// Runs a call: faults first, then `op` on the state.
    fn run<T>(
        &self,
        route: &str,
        target: String,
        body: Option<String>,
        step: impl Fn(ApiError) -> NetrisError,
        op: impl FnOnce(&mut State) -> Result<T, ApiError>,
    ) -> Result<T, NetrisError> {
        match self.enter(route, target, body) {
            Some(Fault::Status(status, message)) => Err(step(bad(status, message))),
            Some(Fault::LostAnswer) => {
                let _ = op(&mut self.lock());
                Err(step(lost()))
            }
            None => op(&mut self.lock()).map_err(step),
        }
    }
}

fn json(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v).unwrap_or_else(|e| format!("<unencodable: {e}>"))
}

fn check_gateway(s: &State, body: &VNetWrite) -> Result<(), ApiError> {
    for g in &body.gateways {
        let (addr, len) = g
            .prefix
            .split_once('/')
            .ok_or_else(|| bad(400, "gateway prefix must be address/len"))?;
        let subnet = s.subnets.values().find(|sub| {
            sub.vpc == body.vpc.id
                && u8::try_from(len.parse::<u32>().unwrap_or(99)).ok()
                    == Some(sub.prefix.prefix_len())
                && addr.parse().is_ok_and(|a| sub.prefix.contains(a))
        });
        match subnet {
            None => {
                return Err(bad(
                    400,
                    format!("gateway {} is not inside any subnet of the vpc", g.prefix),
                ));
            }
            Some(sub) if sub.tenant != body.tenant.id => {
                return Err(bad(
                    400,
                    format!("gateway {} is in a subnet of another tenant", g.prefix),
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

fn check_ports(s: &State, body: &VNetWrite, me: Option<i64>) -> Result<(), ApiError> {
    for p in &body.ports {
        if !s.switch_ports.contains(&p.name) {
            return Err(bad(400, format!("port {} does not exist", p.name)));
        }
        if let Some((_, other)) = s
            .vnets
            .iter()
            .find(|(id, v)| Some(**id) != me && v.body.ports.iter().any(|o| o.name == p.name))
        {
            return Err(bad(
                400,
                format!("port {} is in use by vnet '{}'", p.name, other.body.name),
            ));
        }
    }
    Ok(())
}

fn pick(want: &str, used: &[i64], lo: i64) -> i64 {
    match want.parse::<i64>() {
        Ok(n) if n > 0 => n,
        _ => (lo..).find(|n| !used.contains(n)).unwrap_or(lo),
    }
}

/// A read of V-Net `id` (by id or in a list), which counts down its provisioning.
fn read_counted(s: &mut State, id: i64) -> Option<VNet> {
    let v = s.vnets.get(&id).cloned()?;
    let read = vnet_read(s, id, &v);
    // u32::MAX means stuck: it never counts down.
    if let Some(v) = s.vnets.get_mut(&id)
        && v.polls_left != u32::MAX
    {
        v.polls_left = v.polls_left.saturating_sub(1);
    }
    Some(read)
}

fn vnet_read(s: &State, id: i64, v: &Net) -> VNet {
    let name_of = |items: &[Named], id: i64| {
        items
            .iter()
            .find(|n| n.id == id)
            .cloned()
            .unwrap_or_else(|| named(id, ""))
    };
    let provisioning = v.polls_left > 0;
    VNet {
        id,
        name: v.body.name.clone(),
        tenant: Some(name_of(&s.tenants, v.body.tenant.id)),
        sites: v
            .body
            .sites
            .iter()
            .map(|r| name_of(&s.sites, r.id))
            .collect(),
        vpc: Some(name_of(&s.vpcs, v.body.vpc.id)),
        state: v.body.state.clone(),
        provisioning,
        status: Some(StatusLabel {
            label: if provisioning {
                "Provisioning"
            } else {
                "Active"
            }
            .to_owned(),
            value: if provisioning {
                "provisioning"
            } else {
                "active"
            }
            .to_owned(),
        }),
        vlan: Some(v.vlan),
        vxlan_id: Some(v.vni),
        tags: v.body.tags.clone(),
        mtu: Some(v.body.mtu),
        gateways: v
            .body
            .gateways
            .iter()
            .map(|g| GatewayRead {
                prefix: g.prefix.clone(),
                dhcp_enabled: Some(g.dhcp_enabled),
                dhcp: g.dhcp.clone(),
            })
            .collect(),
        ports: v
            .body
            .ports
            .iter()
            .map(|p| {
                let (port, switch) = p.name.split_once('@').unwrap_or((&p.name, ""));
                PortRead {
                    name: Some(p.name.clone()),
                    port: Some(port.to_owned()),
                    switch_name: Some(switch.to_owned()),
                    untagged: Some(p.access_mode),
                    access_mode: None,
                }
            })
            .collect(),
    }
}

#[async_trait]
impl NetrisApi for FakeNetris {
    async fn tenants(&self) -> Result<Vec<Tenant>, NetrisError> {
        let step = |source| NetrisError::List {
            what: "tenants",
            source,
        };
        self.run(
            "GET /api/tenants",
            "GET /api/tenants".into(),
            None,
            step,
            |s| Ok(s.tenants.clone()),
        )
    }

    async fn sites(&self) -> Result<Vec<Site>, NetrisError> {
        let step = |source| NetrisError::List {
            what: "sites",
            source,
        };
        self.run(
            "GET /api/v2/sites",
            "GET /api/v2/sites".into(),
            None,
            step,
            |s| Ok(s.sites.clone()),
        )
    }

    async fn vpcs(&self) -> Result<Vec<Vpc>, NetrisError> {
        let step = |source| NetrisError::List {
            what: "VPCs",
            source,
        };
        self.run(
            "GET /api/v2/vpc",
            "GET /api/v2/vpc".into(),
            None,
            step,
            |s| Ok(s.vpcs.clone()),
        )
    }

    async fn servers(&self) -> Result<Vec<Server>, NetrisError> {
        let step = |source| NetrisError::List {
            what: "servers",
            source,
        };
        self.run(
            "GET /api/v2/hw/server",
            "GET /api/v2/hw/server".into(),
            None,
            step,
            |s| Ok(s.servers.clone()),
        )
    }

    async fn ipam(&self, vpc_id: Option<i64>) -> Result<Vec<IpamNode>, NetrisError> {
        let step = |source| NetrisError::List {
            what: "IPAM",
            source,
        };
        let target = match vpc_id {
            Some(id) => format!("GET /api/v2/ipam?filterByVpc={id}"),
            None => "GET /api/v2/ipam".to_owned(),
        };
        self.run("GET /api/v2/ipam", target, None, step, |s| {
            let vpc = vpc_id.unwrap_or(1);
            Ok(s.allocations
                .iter()
                .filter(|(_, a)| a.vpc == vpc)
                .map(|(id, a)| IpamNode {
                    id: *id,
                    name: a.name.clone(),
                    prefix: a.prefix.to_string(),
                    kind: "allocation".to_owned(),
                    description: a.description.clone(),
                    children: s
                        .subnets
                        .iter()
                        .filter(|(_, sub)| {
                            sub.vpc == vpc && a.prefix.contains(sub.prefix.network())
                        })
                        .map(|(sid, sub)| IpamNode {
                            id: *sid,
                            name: sub.name.clone(),
                            prefix: sub.prefix.to_string(),
                            kind: "subnet".to_owned(),
                            purpose: "common".to_owned(),
                            default_gateway: sub.gateway.clone(),
                            tags: sub.tags.clone(),
                            ..IpamNode::default()
                        })
                        .collect(),
                    ..IpamNode::default()
                })
                .collect())
        })
    }

    async fn create_allocation(&self, body: &AllocationWrite) -> Result<i64, NetrisError> {
        let name = body.name.clone();
        let step = |source| NetrisError::CreateAllocation {
            name: name.clone(),
            source,
        };
        self.run(
            "POST /api/v2/ipam/allocation",
            "POST /api/v2/ipam/allocation".into(),
            Some(json(body)),
            step,
            |s| {
                let prefix: Ipv4Net = body.prefix.parse().map_err(|_| bad(400, "bad prefix"))?;
                if let Some(o) = s.allocations.values().find(|a| {
                    a.vpc == body.vpc.id
                        && (a.prefix.contains(prefix.network())
                            || prefix.contains(a.prefix.network()))
                }) {
                    return Err(bad(
                        400,
                        format!("{prefix} overlaps allocation '{}'", o.name),
                    ));
                }
                s.next_id += 1;
                let id = s.next_id;
                s.allocations.insert(
                    id,
                    Alloc {
                        name: body.name.clone(),
                        prefix,
                        vpc: body.vpc.id,
                        tenant: body.tenant.id,
                        description: body.description.clone(),
                    },
                );
                Ok(id)
            },
        )
    }

    async fn delete_allocation(&self, id: i64) -> Result<bool, NetrisError> {
        let step = |source| NetrisError::DeleteAllocation { id, source };
        self.run(
            "DELETE /api/v2/ipam/allocation/{id}",
            format!("DELETE /api/v2/ipam/allocation/{id}"),
            None,
            step,
            |s| {
                let Some(a) = s.allocations.get(&id).cloned() else {
                    return Ok(false);
                };
                let inside: Vec<i64> = s
                    .subnets
                    .iter()
                    .filter(|(_, sub)| sub.vpc == a.vpc && a.prefix.contains(sub.prefix.network()))
                    .map(|(id, _)| *id)
                    .collect();
                s.allocations.remove(&id);
                for sid in inside {
                    s.subnets.remove(&sid);
                }
                Ok(true)
            },
        )
    }

    async fn create_subnet(&self, body: &SubnetWrite) -> Result<i64, NetrisError> {
        let name = body.name.clone();
        let step = |source| NetrisError::CreateSubnet {
            name: name.clone(),
            source,
        };
        self.run(
            "POST /api/v2/ipam/subnet",
            "POST /api/v2/ipam/subnet".into(),
            Some(json(body)),
            step,
            |s| {
                let prefix: Ipv4Net = body.prefix.parse().map_err(|_| bad(400, "bad prefix"))?;
                if !s.allocations.values().any(|a| {
                    a.vpc == body.vpc.id
                        && a.prefix.contains(prefix.network())
                        && a.prefix.prefix_len() <= prefix.prefix_len()
                }) {
                    return Err(bad(400, "IP prefix is out of any allocation"));
                }
                s.next_id += 1;
                let id = s.next_id;
                s.subnets.insert(
                    id,
                    Sub {
                        name: body.name.clone(),
                        prefix,
                        vpc: body.vpc.id,
                        tenant: body.tenant.id,
                        gateway: body.default_gateway.clone(),
                        tags: body.tags.clone(),
                    },
                );
                Ok(id)
            },
        )
    }

    async fn update_subnet(&self, id: i64, body: &SubnetWrite) -> Result<(), NetrisError> {
        let name = body.name.clone();
        let step = |source| NetrisError::UpdateSubnet {
            name: name.clone(),
            source,
        };
        self.run(
            "PUT /api/v2/ipam/subnet/{id}",
            format!("PUT /api/v2/ipam/subnet/{id}"),
            Some(json(body)),
            step,
            |s| {
                let sub = s
                    .subnets
                    .get_mut(&id)
                    .ok_or_else(|| bad(404, "subnet not found"))?;
                sub.gateway = body.default_gateway.clone();
                Ok(())
            },
        )
    }

    async fn delete_subnet(&self, id: i64) -> Result<bool, NetrisError> {
        let step = |source| NetrisError::DeleteSubnet { id, source };
        self.run(
            "DELETE /api/v2/ipam/subnet/{id}",
            format!("DELETE /api/v2/ipam/subnet/{id}"),
            None,
            step,
            |s| {
                let Some(sub) = s.subnets.get(&id).cloned() else {
                    return Ok(false);
                };
                let in_use = s.vnets.values().any(|v| {
                    v.body.vpc.id == sub.vpc
                        && v.body.gateways.iter().any(|g| {
                            g.prefix
                                .split_once('/')
                                .and_then(|(a, _)| a.parse().ok())
                                .is_some_and(|a| sub.prefix.contains(a))
                        })
                });
                if in_use {
                    return Err(bad(
                        400,
                        format!("subnet {} is in use by a vnet", sub.prefix),
                    ));
                }
                s.subnets.remove(&id);
                Ok(true)
            },
        )
    }

    async fn vnets(&self, vpc_id: Option<i64>) -> Result<Vec<VNet>, NetrisError> {
        let step = |source| NetrisError::List {
            what: "V-Nets",
            source,
        };
        let target = match vpc_id {
            Some(id) => format!("GET /api/v2/vnet?filterByVpc={id}"),
            None => "GET /api/v2/vnet".to_owned(),
        };
        self.run("GET /api/v2/vnet", target, None, step, |s| {
            let ids: Vec<i64> = s
                .vnets
                .iter()
                .filter(|(_, v)| vpc_id.is_none_or(|vpc| v.body.vpc.id == vpc))
                .map(|(id, _)| *id)
                .collect();
            Ok(ids
                .into_iter()
                .filter_map(|id| read_counted(s, id))
                .collect())
        })
    }

    async fn vnet(&self, id: i64) -> Result<Option<VNet>, NetrisError> {
        let step = |source| NetrisError::GetVNet { id, source };
        self.run(
            "GET /api/v2/vnet/{id}",
            format!("GET /api/v2/vnet/{id}"),
            None,
            step,
            |s| Ok(read_counted(s, id)),
        )
    }

    async fn create_vnet(&self, body: &VNetWrite) -> Result<i64, NetrisError> {
        let name = body.name.clone();
        let step = |source| NetrisError::CreateVNet {
            name: name.clone(),
            source,
        };
        self.run(
            "POST /api/v2/vnet",
            "POST /api/v2/vnet".into(),
            Some(json(body)),
            step,
            |s| {
                if s.vnets.values().any(|v| v.body.name == body.name) {
                    return Err(bad(
                        400,
                        format!("Vnet name '{}' is already in use", body.name),
                    ));
                }
                check_gateway(s, body)?;
                check_ports(s, body, None)?;
                let vlans: Vec<i64> = s.vnets.values().map(|v| v.vlan).collect();
                let vnis: Vec<i64> = s.vnets.values().map(|v| v.vni).collect();
                s.next_id += 1;
                let id = s.next_id;
                let net = Net {
                    body: body.clone(),
                    vlan: pick(&body.vlan, &vlans, 2),
                    vni: pick(&body.vxlan_id.to_string(), &vnis, 10_000),
                    polls_left: s.provisioning_polls,
                };
                s.vnets.insert(id, net);
                Ok(id)
            },
        )
    }

    async fn update_vnet(&self, id: i64, body: &VNetWrite) -> Result<(), NetrisError> {
        let name = body.name.clone();
        let step = |source| NetrisError::UpdateVNet {
            name: name.clone(),
            source,
        };
        self.run(
            "PUT /api/v2/vnet/{id}",
            format!("PUT /api/v2/vnet/{id}"),
            Some(json(body)),
            step,
            |s| {
                let old = s
                    .vnets
                    .get(&id)
                    .cloned()
                    .ok_or_else(|| bad(404, format!("vnet {id} not found")))?;
                check_gateway(s, body)?;
                check_ports(s, body, Some(id))?;
                let vlan = body
                    .vlan
                    .parse::<i64>()
                    .ok()
                    .filter(|n| *n > 0)
                    .unwrap_or(old.vlan);
                let vni = i64::from(body.vxlan_id);
                let polls = s.provisioning_polls;
                let net = s.vnets.get_mut(&id).ok_or_else(|| bad(404, "gone"))?;
                // Quirk: the VPC cannot change on update.
                let vpc = net.body.vpc;
                net.body = body.clone();
                net.body.vpc = vpc;
                net.vlan = vlan;
                net.vni = if vni > 0 { vni } else { old.vni };
                net.polls_left = polls;
                Ok(())
            },
        )
    }

    async fn delete_vnet(&self, id: i64) -> Result<bool, NetrisError> {
        let step = |source| NetrisError::DeleteVNet { id, source };
        self.run(
            "DELETE /api/v2/vnet/{id}",
            format!("DELETE /api/v2/vnet/{id}"),
            None,
            step,
            |s| Ok(s.vnets.remove(&id).is_some()),
        )
    }

    fn stats(&self) -> CallStats {
        CallStats {
            calls: self.lock().calls.clone(),
        }
    }
}

// =============================================================================================
// Terraform core, as far as one resource instance goes

/// The segment kind over `fake`.
pub fn kind(fake: &Arc<FakeNetris>) -> NetworkSegment<Arc<FakeNetris>> {
    NetworkSegment(Arc::clone(fake))
}

/// A full configuration object: every attribute null except the given ones.
pub fn config(kind: &dyn ResourceKind, attrs: &[(&str, Value)]) -> Value {
    let schema = kind.schema();
    let mut obj: BTreeMap<String, Value> = schema
        .block
        .attributes
        .iter()
        .map(|a| (a.name.to_owned(), Value::Null))
        .chain(
            schema
                .block
                .blocks
                .iter()
                .map(|b| (b.type_name.to_owned(), Value::Null)),
        )
        .collect();
    for (k, v) in attrs {
        obj.insert((*k).to_owned(), v.clone());
    }
    Value::Object(obj)
}

/// The standard test segment, with extra attributes.
pub fn segment(kind: &dyn ResourceKind, extra: &[(&str, Value)]) -> Value {
    let mut attrs = vec![
        ("name", Value::string("tenant-a-net")),
        ("tenant", Value::string("tenant-a")),
        ("vpc", Value::string("vpc-a")),
        ("site", Value::string("dc1")),
        ("cidr", Value::string("10.20.0.0/24")),
    ];
    attrs.extend(extra.iter().cloned());
    config(kind, &attrs)
}

/// A member object.
pub fn member(port: Option<&str>, hostname: Option<&str>, untagged: Option<bool>) -> Value {
    Value::object([
        ("port", port.map(Value::string).into()),
        ("hostname", hostname.map(Value::string).into()),
        ("untagged", untagged.map(Value::Bool).into()),
    ])
}

// =============================================================================================
// Terraform's side, shared with the other resources' suites.

#[path = "terraform.rs"]
mod terraform;
pub use terraform::*;

#[path = "sweep.rs"]
pub mod sweep;

impl sweep::Budgeted for FakeNetris {
    fn budget<R>(&self, f: impl FnOnce(&mut sweep::Budget) -> R) -> R {
        f(&mut self.lock().budget)
    }
    /// By kind and name: `allocation gf-x`, `subnet gf-x`, `vnet x`.
    fn owned(&self) -> Vec<String> {
        let s = self.lock();
        let mut out: Vec<String> = s
            .allocations
            .values()
            .map(|a| format!("allocation {}", a.name))
            .chain(s.subnets.values().map(|x| format!("subnet {}", x.name)))
            .chain(s.vnets.values().map(|v| format!("vnet {}", v.body.name)))
            .collect();
        out.sort();
        out
    }
}

/// A DHCP object.
pub fn dhcp(start: &str, end: &str) -> Value {
    Value::object([("start", Value::string(start)), ("end", Value::string(end))])
}
