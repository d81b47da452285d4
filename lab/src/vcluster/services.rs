//! Services in front of the pods this kubelet runs, made reachable from the machine as a
//! cluster's service proxy and load balancer would make them: a `NodePort` Service on the
//! node address of the lab's nodes (`127.0.0.1:<nodePort>`), and a `LoadBalancer` Service
//! on an address of its own in `127.0.201.0/24` (written to its status, as a load
//! balancer controller does) at its ports, and on its node ports. Traffic goes to the
//! target port inside the sandbox of a ready pod the Service selects. Services whose pods
//! kwok plays are left alone: nothing listens behind them.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;

use k8s_openapi::api::core::v1::Service;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

use super::forward::{self, Forwarder};
use super::netns::NetNs;

/// The first three octets of the addresses given to `LoadBalancer` Services.
const LB_NET: [u8; 3] = [127, 0, 201];

/// A pod that can take a Service's traffic.
#[derive(Debug, Clone)]
pub struct Backend {
    /// Its namespace.
    pub namespace: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its uid.
    pub uid: String,
    /// Its sandbox's `unshare` pid (for its network namespace).
    pub pid: i32,
}

/// One open listener: where, and to which pod and port.
struct Open {
    to: (String, u16),
    _forwarder: Forwarder,
}

/// The Services made reachable, by listen address.
#[derive(Default)]
pub struct ServiceProxy {
    open: BTreeMap<SocketAddr, Open>,
}

impl std::fmt::Debug for ServiceProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceProxy")
            .field("listening", &self.open.keys().collect::<Vec<_>>())
            .finish()
    }
}

fn selects(service: &Service, b: &Backend) -> bool {
    let Some(selector) = service.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
        return false;
    };
    service.metadata.namespace.as_deref() == Some(b.namespace.as_str())
        && !selector.is_empty()
        && selector.iter().all(|(k, v)| b.labels.get(k) == Some(v))
}

/// The address of `LoadBalancer` Service `key`, kept in `<dir>/load-balancers.json`.
fn lb_address(dir: &Path, key: &str) -> Option<Ipv4Addr> {
    let file = dir.join("load-balancers.json");
    let mut known: BTreeMap<String, Ipv4Addr> = std::fs::read(&file)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    if let Some(ip) = known.get(key) {
        return Some(*ip);
    }
    let taken: Vec<Ipv4Addr> = known.values().copied().collect();
    let ip = (1..=254u8)
        .map(|n| Ipv4Addr::new(LB_NET[0], LB_NET[1], LB_NET[2], n))
        .find(|ip| !taken.contains(ip))?;
    known.insert(key.to_owned(), ip);
    let text = serde_json::to_vec_pretty(&known).ok()?;
    std::fs::write(&file, text).ok()?;
    Some(ip)
}

impl ServiceProxy {
    /// One pass: listeners opened for the Services that select one of `backends`, closed
    /// for those that no longer do; load balancer addresses written.
    ///
    /// # Errors
    /// When the Services cannot be listed.
    pub async fn pass(
        &mut self,
        host: &Client,
        dir: &Path,
        backends: &[Backend],
    ) -> Result<(), kube::Error> {
        let services = Api::<Service>::all(host.clone())
            .list(&ListParams::default())
            .await?;
        let mut wanted: BTreeMap<SocketAddr, (Backend, u16)> = BTreeMap::new();
        for svc in &services.items {
            let Some(spec) = &svc.spec else { continue };
            let kind = spec.type_.as_deref().unwrap_or("ClusterIP");
            if kind != "NodePort" && kind != "LoadBalancer" {
                continue;
            }
            let Some(backend) = backends.iter().find(|b| selects(svc, b)) else {
                continue;
            };
            let key = format!(
                "{}/{}",
                svc.metadata.namespace.as_deref().unwrap_or_default(),
                svc.metadata.name.as_deref().unwrap_or_default()
            );
            let lb = if kind == "LoadBalancer" {
                let ip = lb_address(dir, &key);
                if let Some(ip) = ip {
                    publish(host, svc, ip).await;
                }
                ip
            } else {
                None
            };
            for port in spec.ports.iter().flatten() {
                let target = match &port.target_port {
                    Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(p)) => {
                        u16::try_from(*p).ok()
                    }
                    None => u16::try_from(port.port).ok(),
                    // A named port: the syncer's container names none, so take the number.
                    Some(_) => u16::try_from(port.port).ok(),
                };
                let Some(target) = target else { continue };
                if let Some(node_port) = port.node_port.and_then(|p| u16::try_from(p).ok()) {
                    wanted.insert(
                        SocketAddr::from((Ipv4Addr::LOCALHOST, node_port)),
                        (backend.clone(), target),
                    );
                }
                if let (Some(ip), Ok(p)) = (lb, u16::try_from(port.port)) {
                    wanted.insert(
                        SocketAddr::from((IpAddr::V4(ip), p)),
                        (backend.clone(), target),
                    );
                }
            }
        }
        self.open.retain(|addr, open| {
            wanted
                .get(addr)
                .is_some_and(|(b, t)| open.to == (b.uid.clone(), *t))
        });
        for (addr, (backend, target)) in wanted {
            if self.open.contains_key(&addr) {
                continue;
            }
            match tokio::net::TcpListener::bind(addr).await {
                Ok(listener) => {
                    tracing::info!("{addr} leads to port {target} of pod {}", backend.uid);
                    self.open.insert(
                        addr,
                        Open {
                            to: (backend.uid.clone(), target),
                            _forwarder: forward::pod_to_host(
                                NetNs::of_pid(backend.pid),
                                listener,
                                target,
                            ),
                        },
                    );
                }
                Err(e) => tracing::warn!("failed to listen on {addr}: {e}"),
            }
        }
        Ok(())
    }
}

/// Writes the load balancer's address to the Service's status, unless it is there.
async fn publish(host: &Client, svc: &Service, ip: Ipv4Addr) {
    let has = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|l| l.ingress.as_ref())
        .is_some_and(|i| i.iter().any(|i| i.ip.as_deref() == Some(&ip.to_string())));
    if has {
        return;
    }
    let namespace = svc.metadata.namespace.clone().unwrap_or_default();
    let name = svc.metadata.name.clone().unwrap_or_default();
    let body = json!({ "status": { "loadBalancer": { "ingress": [{ "ip": ip.to_string(), "ipMode": "VIP" }] } } });
    match Api::<Service>::namespaced(host.clone(), &namespace)
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(body))
        .await
    {
        Ok(_) => tracing::info!("Service {namespace}/{name}: load balancer at {ip}"),
        Err(e) => {
            tracing::warn!("Service {namespace}/{name}: failed to write its load balancer: {e}");
        }
    }
}
