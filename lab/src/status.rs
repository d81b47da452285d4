//! `gpufleet-lab status`: which components run, whether they are healthy, what they use,
//! and how many of the fleet's nodes are Ready.

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::components::Component;
use crate::fleet::Fleet;
use crate::ports::Ports;

/// A component's health, as its endpoint reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// Running and its health endpoint says ok.
    Healthy,
    /// No process.
    NotRunning,
    /// Running, but the endpoint says something else (or does not answer).
    Unhealthy(String),
}

/// One component's line in the status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComponentStatus {
    /// The component.
    pub component: Component,
    /// Its pid, when running.
    pub pid: Option<i32>,
    /// The port its health endpoint is on.
    pub port: u16,
    /// Its resident memory in KiB, when running.
    pub rss_kib: Option<u64>,
    /// Its health.
    pub health: Health,
}

/// The fleet's nodes as the API server sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeCounts {
    /// Nodes in the fleet spec.
    pub expected: usize,
    /// Of those, registered.
    pub registered: usize,
    /// Of those, Ready.
    pub ready: usize,
}

/// The status of one lab.
#[derive(Debug, Clone)]
pub struct LabStatus {
    /// The state directory.
    pub dir: PathBuf,
    /// The admin kubeconfig.
    pub kubeconfig: PathBuf,
    /// Its ports.
    pub ports: Ports,
    /// Its fleet.
    pub fleet: Fleet,
    /// The components, in start order.
    pub components: Vec<ComponentStatus>,
    /// The nodes, when the API server could be asked.
    pub nodes: Option<NodeCounts>,
}

impl LabStatus {
    /// Whether every component is healthy and every node Ready.
    #[must_use]
    pub fn is_healthy(&self) -> bool {
        self.components.iter().all(|c| c.health == Health::Healthy)
            && self
                .nodes
                .is_some_and(|n| n.ready == n.expected && n.registered == n.expected)
    }

    /// Total resident memory of the running components, in KiB.
    #[must_use]
    pub fn total_rss_kib(&self) -> u64 {
        self.components.iter().filter_map(|c| c.rss_kib).sum()
    }

    /// A table for humans.
    #[must_use]
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "lab {}", self.dir.display());
        let _ = writeln!(
            out,
            "{:<25} {:>8} {:>6} {:>9}  HEALTH",
            "COMPONENT", "PID", "PORT", "RSS"
        );
        for c in &self.components {
            let pid = c.pid.map_or_else(|| "-".to_owned(), |p| p.to_string());
            let rss = c
                .rss_kib
                .map_or_else(|| "-".to_owned(), |k| format!("{} MiB", k / 1024));
            let health = match &c.health {
                Health::Healthy => "ok".to_owned(),
                Health::NotRunning => "not running".to_owned(),
                Health::Unhealthy(why) => format!("UNHEALTHY: {why}"),
            };
            let _ = writeln!(
                out,
                "{:<25} {:>8} {:>6} {:>9}  {health}",
                c.component.name(),
                pid,
                c.port,
                rss
            );
        }
        let _ = writeln!(
            out,
            "{:<25} {:>8} {:>6} {:>9}",
            "total",
            "",
            "",
            format!("{} MiB", self.total_rss_kib() / 1024)
        );
        match self.nodes {
            Some(n) => {
                let _ = writeln!(
                    out,
                    "nodes: {} Ready of {} in the fleet ({} registered); {} GPUs; products: {}",
                    n.ready,
                    n.expected,
                    n.registered,
                    self.fleet.gpu_count(),
                    self.fleet.products().join(", ")
                );
            }
            None => {
                let _ = writeln!(out, "nodes: unknown (the API server is not ready)");
            }
        }
        let _ = writeln!(out, "kubeconfig: {}", self.kubeconfig.display());
        let _ = writeln!(
            out,
            "{}",
            if self.is_healthy() {
                "status: healthy"
            } else {
                "status: NOT healthy (see `gpufleet-lab logs COMPONENT`)"
            }
        );
        out
    }
}
