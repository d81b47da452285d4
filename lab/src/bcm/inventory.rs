//! The emulator's hardware: one physical node per fleet node, with the identity the
//! fleet gives it (hostname, MAC, IP, rack), its GPUs, its block devices and idle power
//! state.

use serde::{Deserialize, Serialize};

use crate::fleet::{Fleet, PowerState};

/// The nodes to seed the emulator with (JSON, as the lab writes it for the binary).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BcmInventory {
    /// The nodes.
    #[serde(default)]
    pub nodes: Vec<InventoryNode>,
}

/// One physical node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InventoryNode {
    /// Hostname (the Kubernetes node name).
    pub hostname: String,
    /// The boot interface's MAC address.
    pub mac: String,
    /// The boot interface's IPv4 address.
    pub ip: String,
    /// Rack name.
    pub rack: String,
    /// Position in the rack, from 1.
    pub position: u32,
    /// GPU product (GPU feature discovery name).
    pub gpu_product: String,
    /// GPUs in the node.
    pub gpu_count: u32,
    /// `"on"` or `"off"`: the power state while idle.
    pub idle_power: String,
    /// The block devices, the OS disk first; empty: [`default_disks`] for the GPU count.
    #[serde(default)]
    pub disks: Vec<String>,
}

/// The block devices of a node with `gpus` GPUs when the inventory names none: a DGX-like
/// OS disk and four NVMe data disks for an 8-GPU server, one data disk for a smaller one.
#[must_use]
pub fn default_disks(gpus: u32) -> Vec<String> {
    let data = if gpus >= 8 { 4 } else { 1 };
    std::iter::once("/dev/sda".to_owned())
        .chain((0..data).map(|i| format!("/dev/nvme{i}n1")))
        .collect()
}

impl InventoryNode {
    /// The block devices, the OS disk first.
    #[must_use]
    pub fn block_devices(&self) -> Vec<String> {
        if self.disks.is_empty() {
            default_disks(self.gpu_count)
        } else {
            self.disks.clone()
        }
    }

    /// The GPUs' name as the driver reports it (GPU feature discovery's product name with
    /// blanks for dashes), e.g. `NVIDIA H100 80GB HBM3`.
    #[must_use]
    pub fn gpu_name(&self) -> String {
        self.gpu_product.replace('-', " ")
    }
}

/// Why an inventory cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InventoryError {
    /// Two nodes share a hostname.
    #[error("hostname {0} appears twice")]
    DuplicateHostname(String),
    /// A node's idle power is neither on nor off.
    #[error("node {hostname}: idle_power {value:?} is neither \"on\" nor \"off\"")]
    IdlePower {
        /// The node.
        hostname: String,
        /// What it says.
        value: String,
    },
}

impl BcmInventory {
    /// The fleet's nodes.
    #[must_use]
    pub fn from_fleet(fleet: &Fleet) -> Self {
        let mut nodes = Vec::with_capacity(fleet.nodes().len());
        let mut rack = String::new();
        let mut position = 0;
        for n in fleet.nodes() {
            if n.rack != rack {
                rack.clone_from(&n.rack);
                position = 0;
            }
            position += 1;
            nodes.push(InventoryNode {
                hostname: n.name.clone(),
                mac: n.mac.clone(),
                ip: n.ip.to_string(),
                rack: n.rack.clone(),
                position,
                gpu_product: n.model.product.to_owned(),
                gpu_count: n.gpus,
                idle_power: match n.idle_power {
                    PowerState::On => "on".into(),
                    PowerState::Off => "off".into(),
                },
                disks: Vec::new(),
            });
        }
        Self { nodes }
    }

    /// The lab's default fleet.
    #[must_use]
    pub fn default_lab() -> Self {
        Fleet::default_fleet(None)
            .map(|f| Self::from_fleet(&f))
            .unwrap_or_default()
    }

    /// Checks hostnames are unique and idle power states known.
    ///
    /// # Errors
    /// The first problem found.
    pub fn validate(&self) -> Result<(), InventoryError> {
        let mut seen = std::collections::HashSet::new();
        for n in &self.nodes {
            if !seen.insert(n.hostname.as_str()) {
                return Err(InventoryError::DuplicateHostname(n.hostname.clone()));
            }
            if n.idle_power != "on" && n.idle_power != "off" {
                return Err(InventoryError::IdlePower {
                    hostname: n.hostname.clone(),
                    value: n.idle_power.clone(),
                });
            }
        }
        Ok(())
    }
}
