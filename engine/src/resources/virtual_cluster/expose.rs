//! `expose`: how a virtual cluster is reached from outside the host cluster, and the URL its
//! credentials point at. Pure: the readiness check hands in what it read.
//!
//! The vCluster chart makes the Service `<name>` of type `controlPlane.service.spec.type`
//! (port `https` 443 → 8443). vCluster's syncer signs its serving certificate for localhost,
//! 127.0.0.1, the Service's ClusterIP, the addresses in the Service's load balancer status,
//! the host IPs of its pods when the Service is a NodePort, and
//! `controlPlane.proxy.extraSANs`; gpufleet puts `expose.host` in the last, so every URL below
//! is one the certificate covers. The URL, with `https://`:
//!
//! | `type` | without `host` | with `host` |
//! |---|---|---|
//! | `ClusterIP` | `<name>.<namespace>.svc:443`, inside the host cluster only | `<host>:443` |
//! | `NodePort` | `<hostIP of the control-plane pod>:<nodePort of port https>` | `<host>:<nodePort>` |
//! | `LoadBalancer` | `<status.loadBalancer.ingress[0] ip or hostname>:<port https>` | `<host>:<port https>` |
//!
//! A LoadBalancer counts as reachable only once the host cluster's load balancer controller
//! has given the Service an address, with `host` too (the name is expected to lead to it).
//!
//! A ClusterIP Service without `host` has no address outside the host cluster. gpufleet then
//! sets the syncer's `exportKubeConfig.server` to the Service's cluster DNS name and adds
//! that name to `controlPlane.proxy.extraSANs` (the syncer's own names cover `<name>` and
//! `<name>.<namespace>` but not `.svc`), so the outputs name the address pods in the host
//! cluster use, and a plan warns that clients outside reach it through the ephemeral
//! resource `gpufleet_virtual_cluster_connection` (a port-forward through the host API
//! server) instead.

use serde_json::Value as Json;

use super::yaml::to_yaml;

/// The Service types, as `expose.type` spells them (Kubernetes' own spelling).
pub const SERVICE_TYPES: &[&str] = &["ClusterIP", "NodePort", "LoadBalancer"];

/// The port of the Service's `https` port, and what `host` alone is reached on.
pub const HTTPS_PORT: i64 = 443;

/// The type of the Service `<name>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ServiceType {
    /// Reachable inside the host cluster only (the chart's default).
    #[default]
    ClusterIp,
    /// A port on every host node.
    NodePort,
    /// An address from the host cluster's load balancer controller.
    LoadBalancer,
}

impl ServiceType {
    /// Parses Kubernetes' spelling.
    pub fn parse(s: &str) -> Option<ServiceType> {
        match s {
            "ClusterIP" => Some(ServiceType::ClusterIp),
            "NodePort" => Some(ServiceType::NodePort),
            "LoadBalancer" => Some(ServiceType::LoadBalancer),
            _ => None,
        }
    }

    /// Kubernetes' spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceType::ClusterIp => "ClusterIP",
            ServiceType::NodePort => "NodePort",
            ServiceType::LoadBalancer => "LoadBalancer",
        }
    }
}

/// `expose`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Expose {
    /// `type`.
    pub service_type: ServiceType,
    /// `host`: a DNS name or IP address in front of the control plane.
    pub host: Option<String>,
}

impl Expose {
    /// What the host cluster says: the live Service's type (the stored vcluster.yaml's when
    /// the Service is missing) and the host gpufleet put in `controlPlane.proxy.extraSANs`.
    pub fn observed(service: Option<&Json>, config: Option<&Json>) -> Expose {
        let from_config = config
            .and_then(|c| c.pointer("/controlPlane/service/spec/type"))
            .and_then(Json::as_str);
        let service_type = service
            .and_then(|s| s.pointer("/spec/type"))
            .and_then(Json::as_str)
            .or(from_config)
            .and_then(ServiceType::parse)
            .unwrap_or_default();
        // The in-cluster name gpufleet adds when there is no host is the one the exported
        // server names; any other first name is `host`.
        let exported = config
            .and_then(|c| c.pointer("/exportKubeConfig/server"))
            .and_then(Json::as_str);
        let host = config
            .and_then(|c| c.pointer("/controlPlane/proxy/extraSANs"))
            .and_then(Json::as_array)
            .and_then(|sans| sans.first())
            .and_then(Json::as_str)
            .filter(|san| exported != Some(url(san, HTTPS_PORT).as_str()))
            .map(str::to_owned);
        Expose { service_type, host }
    }

    /// Whether the URL is reachable only inside the host cluster: a ClusterIP Service with
    /// no `host` in front of it.
    pub fn in_cluster_only(&self) -> bool {
        self.service_type == ServiceType::ClusterIp && self.host.is_none()
    }

    /// Whether the URL depends on the Service `<name>` (its node port or load balancer).
    pub fn needs_service(&self) -> bool {
        self.service_type != ServiceType::ClusterIp
    }

    /// The URL of the virtual API server, from the server the syncer wrote to Secret
    /// `vc-<name>`, the Service `<name>` (`name` in messages) and the running control-plane
    /// pod; `Err` says what is not there yet. `Ok(None)` only for a ClusterIP whose Secret
    /// names no server.
    pub fn server(
        &self,
        name: &str,
        secret_server: Option<&str>,
        service: Option<&Json>,
        pod: Option<&Json>,
    ) -> Result<Option<String>, String> {
        let service = || service.ok_or_else(|| format!("Service {name} does not exist"));
        match self.service_type {
            ServiceType::ClusterIp => Ok(match &self.host {
                Some(h) => Some(url(h, HTTPS_PORT)),
                None => secret_server.map(str::to_owned),
            }),
            ServiceType::NodePort => {
                let node_port = https_port(service()?)
                    .and_then(|p| p.get("nodePort"))
                    .and_then(Json::as_i64)
                    .filter(|p| *p > 0)
                    .ok_or_else(|| format!("Service {name} has no node port yet"))?;
                let host = match &self.host {
                    Some(h) => h.clone(),
                    None => {
                        let pod = pod.ok_or_else(|| {
                            "no control-plane pod runs, so no node address is known".to_owned()
                        })?;
                        pod.pointer("/status/hostIP")
                            .and_then(Json::as_str)
                            .filter(|ip| !ip.is_empty())
                            .ok_or_else(|| {
                                format!(
                                    "pod {} has no host IP yet",
                                    pod.pointer("/metadata/name")
                                        .and_then(Json::as_str)
                                        .unwrap_or("?")
                                )
                            })?
                            .to_owned()
                    }
                };
                Ok(Some(url(&host, node_port)))
            }
            ServiceType::LoadBalancer => {
                let service = service()?;
                let ingress = service
                    .pointer("/status/loadBalancer/ingress/0")
                    .and_then(|i| {
                        [i.get("ip"), i.get("hostname")]
                            .into_iter()
                            .flatten()
                            .filter_map(Json::as_str)
                            .find(|a| !a.is_empty())
                    })
                    .ok_or_else(|| {
                        format!(
                            "Service {name} (LoadBalancer) has no address yet: the host \
                             cluster's load balancer controller has not written \
                             status.loadBalancer.ingress"
                        )
                    })?;
                let port = https_port(service)
                    .and_then(|p| p.get("port"))
                    .and_then(Json::as_i64)
                    .unwrap_or(HTTPS_PORT);
                Ok(Some(url(self.host.as_deref().unwrap_or(ingress), port)))
            }
        }
    }
}

/// The Service's port `https` (the chart's name for the API server's), or its first port
/// when a `values_override` renamed them.
fn https_port(service: &Json) -> Option<&Json> {
    let ports = service.pointer("/spec/ports")?.as_array()?;
    ports
        .iter()
        .find(|p| p.get("name").and_then(Json::as_str) == Some("https"))
        .or_else(|| ports.first())
}

/// The cluster DNS name of the Service `name` in `namespace`, as pods of the host cluster
/// reach it (every cluster resolves `.svc` through its search path, whatever its domain).
pub fn in_cluster_name(name: &str, namespace: &str) -> String {
    format!("{name}.{namespace}.svc")
}

/// `https://<host>:<port>`, with an IPv6 address in brackets.
pub fn url(host: &str, port: i64) -> String {
    if host.parse::<std::net::Ipv6Addr>().is_ok() {
        format!("https://[{host}]:{port}")
    } else {
        format!("https://{host}:{port}")
    }
}

/// `kubeconfig` with every cluster's `server` set to `server`; `None` when it is no
/// kubeconfig with clusters. The result is written with sorted keys.
pub fn with_server(kubeconfig: &str, server: &str) -> Option<String> {
    let mut parsed: Json = serde_saphyr::from_str(kubeconfig).ok()?;
    let clusters = parsed.get_mut("clusters")?.as_array_mut()?;
    if clusters.is_empty() {
        return None;
    }
    for c in clusters {
        let cluster = c.get_mut("cluster")?.as_object_mut()?;
        cluster.insert("server".to_owned(), Json::String(server.to_owned()));
    }
    Some(to_yaml(&parsed))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn expose(t: ServiceType, host: Option<&str>) -> Expose {
        Expose {
            service_type: t,
            host: host.map(str::to_owned),
        }
    }

    fn service(ports: Json, ingress: Json) -> Json {
        let mut s = json!({ "spec": {}, "status": { "loadBalancer": {} } });
        s["spec"]["ports"] = ports;
        s["status"]["loadBalancer"]["ingress"] = ingress;
        s
    }

    #[test]
    fn the_url_follows_the_service_type_and_host() {
        let secret = Some("https://localhost:8443");
        let pod = json!({ "metadata": { "name": "a-0" }, "status": { "hostIP": "192.0.2.7" } });
        let node_port = service(
            json!([{ "name": "https", "port": 443, "nodePort": 31443 },
                   { "name": "kubelet", "port": 10250, "nodePort": 31250 }]),
            json!([]),
        );
        let lb = service(
            json!([{ "name": "https", "port": 443, "nodePort": 31443 }]),
            json!([{ "ip": "203.0.113.10" }]),
        );
        let lb_named = service(
            json!([{ "name": "https", "port": 443 }]),
            json!([{ "hostname": "lb-1.elb.example" }]),
        );
        let host = Some("vc.example.com");
        let cases = [
            (expose(ServiceType::ClusterIp, None), None, secret),
            (
                expose(ServiceType::ClusterIp, host),
                None,
                Some("https://vc.example.com:443"),
            ),
            (
                expose(ServiceType::NodePort, None),
                Some(&node_port),
                Some("https://192.0.2.7:31443"),
            ),
            (
                expose(ServiceType::NodePort, host),
                Some(&node_port),
                Some("https://vc.example.com:31443"),
            ),
            (
                expose(ServiceType::LoadBalancer, None),
                Some(&lb),
                Some("https://203.0.113.10:443"),
            ),
            (
                expose(ServiceType::LoadBalancer, None),
                Some(&lb_named),
                Some("https://lb-1.elb.example:443"),
            ),
            (
                expose(ServiceType::LoadBalancer, host),
                Some(&lb),
                Some("https://vc.example.com:443"),
            ),
        ];
        for (e, svc, want) in cases {
            assert_eq!(
                e.server("a", secret, svc, Some(&pod)),
                Ok(want.map(str::to_owned)),
                "{e:?}"
            );
        }
    }

    #[test]
    fn what_is_missing_is_said() {
        let pending = service(json!([{ "name": "https", "port": 443 }]), json!([]));
        let lb = expose(ServiceType::LoadBalancer, Some("vc.example.com"));
        let why = lb
            .server("a", None, Some(&pending), None)
            .expect_err("not there yet");
        assert!(
            why.contains("Service a (LoadBalancer) has no address yet"),
            "{why}"
        );
        let np = expose(ServiceType::NodePort, None);
        assert_eq!(
            np.server("a", None, Some(&pending), None)
                .expect_err("not there yet"),
            "Service a has no node port yet"
        );
        assert_eq!(
            np.server("a", None, None, None).expect_err("not there yet"),
            "Service a does not exist"
        );
        let allocated = service(json!([{ "name": "https", "nodePort": 30001 }]), json!([]));
        let pod = json!({ "metadata": { "name": "a-0" }, "status": {} });
        assert_eq!(
            np.server("a", None, Some(&allocated), Some(&pod))
                .expect_err("not there yet"),
            "pod a-0 has no host IP yet"
        );
    }

    #[test]
    fn ipv6_hosts_are_bracketed() {
        assert_eq!(url("fd00::1", 443), "https://[fd00::1]:443");
        assert_eq!(url("10.0.0.1", 30443), "https://10.0.0.1:30443");
    }

    #[test]
    fn the_server_is_replaced_in_every_cluster() {
        let kubeconfig = "apiVersion: v1\nkind: Config\nclusters:\n- name: a\n  cluster:\n    server: https://localhost:8443\n    certificate-authority-data: Q0E=\ncontexts: []\nusers: []\n";
        let out = with_server(kubeconfig, "https://203.0.113.10:443").expect("kubeconfig");
        let parsed: Json = serde_saphyr::from_str(&out).expect("YAML");
        assert_eq!(
            parsed.pointer("/clusters/0/cluster"),
            Some(
                &json!({ "server": "https://203.0.113.10:443", "certificate-authority-data": "Q0E=" })
            )
        );
        assert_eq!(parsed["kind"], "Config");
        assert_eq!(with_server("not: [a kubeconfig", "https://x:1"), None);
        assert_eq!(with_server("clusters: []", "https://x:1"), None);
    }

    #[test]
    fn observed_from_the_service_then_the_config() {
        let config = json!({ "controlPlane": {
            "service": { "spec": { "type": "NodePort" } },
            "proxy": { "extraSANs": ["vc.example.com"] },
        } });
        let svc = json!({ "spec": { "type": "LoadBalancer" } });
        assert_eq!(
            Expose::observed(Some(&svc), Some(&config)),
            expose(ServiceType::LoadBalancer, Some("vc.example.com"))
        );
        assert_eq!(
            Expose::observed(None, Some(&config)),
            expose(ServiceType::NodePort, Some("vc.example.com"))
        );
        assert_eq!(Expose::observed(None, None), Expose::default());
    }

    #[test]
    fn the_in_cluster_name_is_not_taken_for_a_host() {
        let config = json!({
            "controlPlane": { "proxy": { "extraSANs": ["a.team-a.svc"] } },
            "exportKubeConfig": { "server": "https://a.team-a.svc:443" },
        });
        assert_eq!(Expose::observed(None, Some(&config)), Expose::default());
        assert!(Expose::default().in_cluster_only());
        assert!(!expose(ServiceType::ClusterIp, Some("vc.example.com")).in_cluster_only());
        assert!(!expose(ServiceType::NodePort, None).in_cluster_only());
        assert_eq!(in_cluster_name("a", "team-a"), "a.team-a.svc");
    }
}
