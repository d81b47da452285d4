//! A fleet node: its identity and the Kubernetes Node object made from it.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use gpufleet_core::catalog::GpuModel;
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::labels::{
    BLOCK_LABEL, CLIQUE_LABEL, DRIVER_LABELS, GPU_COUNT_LABEL, GPU_FAMILY_LABEL, GPU_MEMORY_LABEL,
    GPU_PRESENT_LABEL, GPU_PRODUCT_LABEL, GPU_RESOURCE, HARDWARE_ANNOTATION, KWOK_ANNOTATION,
    MAC_ANNOTATION, MANAGED_BY, MANAGED_BY_LABEL, MIG_CAPABLE_LABEL, NVLINK_DOMAIN_LABEL,
    PODS_PER_NODE, RACK_LABEL, REGION_LABEL, SITE_LABEL, ZONE_LABEL,
};
use super::spec::{NodeTaint, PowerState};

/// One node of the fleet, with everything the lab and the emulators need to know.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetNode {
    /// Node name, `gpu-<rack>-<nn>`; also its hostname and `kubernetes.io/hostname`.
    pub name: String,
    /// Site name.
    pub site: String,
    /// Zone.
    pub zone: String,
    /// Region.
    pub region: String,
    /// Rack name.
    pub rack: String,
    /// The GPU product, from the catalog.
    pub model: &'static GpuModel,
    /// GPUs on the node.
    pub gpus: u32,
    /// CPU capacity (a Kubernetes quantity).
    pub cpu: String,
    /// Memory capacity (a Kubernetes quantity).
    pub memory: String,
    /// The BMC's MAC address: locally administered, derived from the name.
    pub mac: String,
    /// The node's (and BMC's) IPv4 address. Data only: nothing connects to it.
    pub ip: Ipv4Addr,
    /// The node's pod CIDR (a /24), used by kwok to hand out pod IPs.
    pub pod_cidr: String,
    /// Power state while idle.
    pub idle_power: PowerState,
    /// The NVLink domain ([`NVLINK_DOMAIN_LABEL`]), when the product has NVLink.
    pub nvlink_domain: Option<String>,
    /// GPU feature discovery's clique ([`CLIQUE_LABEL`]), when the NVLink domain spans
    /// several nodes.
    pub nvlink_clique: Option<String>,
    /// Extra labels from the spec.
    pub extra_labels: BTreeMap<String, String>,
    /// Taints from the spec.
    pub taints: Vec<NodeTaint>,
}

impl FleetNode {
    /// The hostname: the node name.
    #[must_use]
    pub fn hostname(&self) -> &str {
        &self.name
    }

    /// Every label of the node's Kubernetes object.
    #[must_use]
    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut l = BTreeMap::new();
        let mut set = |k: &str, v: String| {
            l.insert(k.to_owned(), v);
        };
        set("kubernetes.io/hostname", self.name.clone());
        set("kubernetes.io/os", "linux".into());
        set("kubernetes.io/arch", "amd64".into());
        set("type", "kwok".into());
        set(GPU_PRESENT_LABEL, "true".into());
        set(GPU_PRODUCT_LABEL, self.model.product.into());
        set(GPU_COUNT_LABEL, self.gpus.to_string());
        set(GPU_MEMORY_LABEL, self.model.memory_mib.to_string());
        set(GPU_FAMILY_LABEL, self.model.architecture.into());
        set(MIG_CAPABLE_LABEL, self.model.mig_capable().to_string());
        for (k, v) in DRIVER_LABELS {
            set(k, (*v).into());
        }
        set(ZONE_LABEL, self.zone.clone());
        set(REGION_LABEL, self.region.clone());
        set(SITE_LABEL, self.site.clone());
        set(RACK_LABEL, self.rack.clone());
        set(BLOCK_LABEL, self.rack.clone());
        set(MANAGED_BY_LABEL, MANAGED_BY.into());
        if let Some(domain) = &self.nvlink_domain {
            set(NVLINK_DOMAIN_LABEL, domain.clone());
        }
        if let Some(clique) = &self.nvlink_clique {
            set(CLIQUE_LABEL, clique.clone());
        }
        for (k, v) in &self.extra_labels {
            l.insert(k.clone(), v.clone());
        }
        l
    }

    /// The node's capacity (also its allocatable): GPUs, CPU, memory and pods.
    #[must_use]
    pub fn capacity(&self) -> BTreeMap<String, Quantity> {
        BTreeMap::from([
            (GPU_RESOURCE.to_owned(), Quantity(self.gpus.to_string())),
            ("cpu".to_owned(), Quantity(self.cpu.clone())),
            ("memory".to_owned(), Quantity(self.memory.clone())),
            ("pods".to_owned(), Quantity(PODS_PER_NODE.to_string())),
        ])
    }

    /// The Kubernetes Node to create: labels, the kwok annotation (so kwok simulates
    /// it), no kwok taint (GPU pods schedule onto it like onto a real node), the spec's
    /// taints, pod CIDR, addresses and capacity. kwok fills in conditions and node info.
    #[must_use]
    pub fn to_node(&self) -> Node {
        let taints: Vec<Taint> = self
            .taints
            .iter()
            .map(|t| Taint {
                key: t.key.clone(),
                value: (!t.value.is_empty()).then(|| t.value.clone()),
                effect: t.effect.clone(),
                time_added: None,
            })
            .collect();
        Node {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                labels: Some(self.labels()),
                annotations: Some(BTreeMap::from([
                    (KWOK_ANNOTATION.to_owned(), "fake".to_owned()),
                    ("node.alpha.kubernetes.io/ttl".to_owned(), "0".to_owned()),
                    (MAC_ANNOTATION.to_owned(), self.mac.clone()),
                    (
                        HARDWARE_ANNOTATION.to_owned(),
                        format!("{}x{}", self.gpus, self.model.product),
                    ),
                ])),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                pod_cidr: Some(self.pod_cidr.clone()),
                pod_cidrs: Some(vec![self.pod_cidr.clone()]),
                provider_id: Some(format!("kwok://{}", self.name)),
                taints: (!taints.is_empty()).then_some(taints),
                ..NodeSpec::default()
            }),
            status: Some(NodeStatus {
                capacity: Some(self.capacity()),
                allocatable: Some(self.capacity()),
                // The API server reaches a node's kubelet (logs, exec) at its InternalIP; every
                // node's kubelet is kwok's server on loopback. The server's own address, as
                // BCM and the network know it, is the ExternalIP.
                addresses: Some(vec![
                    NodeAddress {
                        type_: "InternalIP".into(),
                        address: Ipv4Addr::LOCALHOST.to_string(),
                    },
                    NodeAddress {
                        type_: "ExternalIP".into(),
                        address: self.ip.to_string(),
                    },
                    NodeAddress {
                        type_: "Hostname".into(),
                        address: self.name.clone(),
                    },
                ]),
                ..NodeStatus::default()
            }),
        }
    }
}
