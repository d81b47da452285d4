//! Loopback ports for one lab's components.
//!
//! Each lab picks its own free ports on 127.0.0.1, so several labs (and test runs) can run
//! side by side. A port counts as free when this process can bind it. Candidates are drawn
//! at random from below the kernel's ephemeral range (`net.ipv4.ip_local_port_range`,
//! usually 32768–60999): ports in that range are handed out as source ports of outgoing
//! connections, and the components open many of those, so a port picked there could be
//! taken again between the check and the component's own bind. When too little room is
//! left below the range, the kernel picks (`bind 127.0.0.1:0`).
//!
//! The chosen ports are saved in the lab's state file so `status`, `down` and a later
//! `up` find them again.

use std::collections::HashSet;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// How many ports a lab has.
const COUNT: usize = 11;

/// The lowest port the random pick uses.
const RANDOM_LOW: u16 = 20_000;

/// The ports of one lab, all on 127.0.0.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ports {
    /// etcd's client URL (plain HTTP, loopback only).
    pub etcd_client: u16,
    /// etcd's peer URL (a one-member cluster, but etcd listens on it all the same).
    pub etcd_peer: u16,
    /// kube-apiserver's secure port (HTTPS).
    pub apiserver: u16,
    /// kube-controller-manager's secure port (HTTPS, `/healthz`).
    pub controller_manager: u16,
    /// kube-scheduler's secure port (HTTPS, `/healthz`).
    pub scheduler: u16,
    /// kwok's server address (plain HTTP, `/healthz` and metrics).
    pub kwok: u16,
    /// The Netris controller emulator (HTTPS: its API and `/_admin/`). Zero in the state
    /// of a lab from before the emulator joined (it gets a port on the next `up`).
    #[serde(default)]
    pub netris: u16,
    /// The BCM emulator (HTTPS: its JSON API and `/_admin/`). Zero in the state of a lab
    /// from before the emulator joined.
    #[serde(default)]
    pub bcm: u16,
    /// The vCluster kubelet (plain HTTP: `/healthz` and `/status`). Zero in the state of
    /// a lab from before it joined.
    #[serde(default)]
    pub vcluster: u16,
    /// The MPI Operator's health check, forwarded from the port it fixes inside its own
    /// network namespace (plain HTTP, `/healthz`). Zero in the state of a lab from before
    /// it got one.
    #[serde(default)]
    pub mpi_operator: u16,
    /// Karpenter's health check, forwarded like the MPI Operator's (plain HTTP,
    /// `/healthz`). Zero in the state of a lab from before it got one.
    #[serde(default)]
    pub karpenter: u16,
}

impl Ports {
    /// Picks distinct free loopback ports, one per component.
    ///
    /// All are held open until the last one is found, so they are distinct, and
    /// released together just before returning.
    ///
    /// # Errors
    /// When no port can be bound at all.
    pub fn allocate() -> io::Result<Self> {
        let mut held: Vec<TcpListener> = Vec::with_capacity(COUNT);
        let mut rng = Rng::seeded();
        let high = ephemeral_low().unwrap_or(32_768);
        let mut tries = 0;
        while held.len() < COUNT {
            let listener = if high > RANDOM_LOW + 1_000 && tries < 1_000 {
                tries += 1;
                let port = RANDOM_LOW + (rng.next() % u64::from(high - RANDOM_LOW)) as u16;
                match TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port))) {
                    Ok(l) => l,
                    Err(_) => continue,
                }
            } else {
                TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))?
            };
            held.push(listener);
        }
        let mut ports = Vec::with_capacity(COUNT);
        for listener in &held {
            ports.push(listener.local_addr()?.port());
        }
        drop(held);
        Ok(Self {
            etcd_client: ports[0],
            etcd_peer: ports[1],
            apiserver: ports[2],
            controller_manager: ports[3],
            scheduler: ports[4],
            kwok: ports[5],
            netris: ports[6],
            bcm: ports[7],
            vcluster: ports[8],
            mpi_operator: ports[9],
            karpenter: ports[10],
        })
    }

    /// Every port, in a fixed order.
    #[must_use]
    pub fn all(&self) -> [u16; COUNT] {
        [
            self.etcd_client,
            self.etcd_peer,
            self.apiserver,
            self.controller_manager,
            self.scheduler,
            self.kwok,
            self.netris,
            self.bcm,
            self.vcluster,
            self.mpi_operator,
            self.karpenter,
        ]
    }

    /// Whether the ports are distinct and each can be bound right now, so a lab
    /// that was stopped can start again on the same ports (and its kubeconfig stays
    /// valid).
    #[must_use]
    pub fn all_free(&self) -> bool {
        let distinct: HashSet<u16> = self.all().into_iter().collect();
        distinct.len() == COUNT
            && self.all().iter().all(|p| {
                *p != 0 && TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, *p))).is_ok()
            })
    }
}

/// The first port of the kernel's ephemeral range, when it can be read.
fn ephemeral_low() -> Option<u16> {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    range.split_whitespace().next()?.parse().ok()
}

/// A small xorshift generator: good enough to spread port picks, seeded from the clock
/// and the pid so two labs started at once draw different ports.
struct Rng(u64);

impl Rng {
    fn seeded() -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Self((nanos ^ (u64::from(std::process::id()) << 32)) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_seven_distinct_bindable_ports() {
        let ports = Ports::allocate().expect("allocate");
        let distinct: HashSet<u16> = ports.all().into_iter().collect();
        assert_eq!(distinct.len(), COUNT, "{ports:?}");
        assert!(ports.all_free(), "{ports:?}");
    }

    #[test]
    fn a_port_in_use_is_not_free() {
        let ports = Ports::allocate().expect("allocate");
        let _busy = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, ports.apiserver)))
            .expect("bind the apiserver port");
        assert!(!ports.all_free());
    }

    #[test]
    fn two_allocations_do_not_overlap_while_the_first_is_in_use() {
        let first = Ports::allocate().expect("first");
        let _held: Vec<TcpListener> = first
            .all()
            .iter()
            .map(|p| TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, *p))).expect("hold"))
            .collect();
        let second = Ports::allocate().expect("second");
        for p in second.all() {
            assert!(!first.all().contains(&p), "{first:?} vs {second:?}");
        }
    }

    #[test]
    fn a_state_without_the_netris_port_still_loads() {
        let old = r#"{"etcd_client":1,"etcd_peer":2,"apiserver":3,"controller_manager":4,"scheduler":5,"kwok":6}"#;
        let ports: Ports = serde_json::from_str(old).expect("parse");
        assert_eq!(ports.netris, 0);
        assert!(!ports.all_free(), "a zero port is never free");
    }

    #[test]
    fn ports_round_trip_through_json() {
        let ports = Ports::allocate().expect("allocate");
        let json = serde_json::to_string(&ports).expect("serialize");
        let back: Ports = serde_json::from_str(&json).expect("parse");
        assert_eq!(ports, back);
    }
}
