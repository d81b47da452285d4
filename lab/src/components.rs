//! The five control-plane components: their flags, and how to tell they are healthy.
//!
//! All run from the one multi-call binary `gpufleet-kube` (`gpufleet-kube COMPONENT
//! flags…`, built from `lab/kube/`). The flags are those of `lab/kube/smoke.sh`, which
//! proves them against the real binaries, with three additions: kube-controller-manager and
//! kube-scheduler get serving certificates signed by the lab CA (instead of self-signed
//! ones), so their `/healthz` is checked with TLS verification on; and kwok logs warnings
//! and errors only (`--v=WARN`: at INFO it logs every node lease renewal), with its Stages
//! file in the state directory. Everything listens on 127.0.0.1 only.
//!
//! Start order ([`Component::ALL`]): etcd, kube-apiserver, then kube-controller-manager,
//! kube-scheduler and kwok (which only need the API server).
//!
//! One more component is not Kubernetes: `netris`, the Netris controller emulator
//! ([`crate::netris`]), run from its own binary `netris-emulator` (built with this crate;
//! see [`netris_binary`]) with its state under `<dir>/netris/`, an inventory from the lab's
//! fleet and the tenants of [`LAB_TENANTS`]. It is started after the control plane.
//!
//! Another is `bcm`, the Base Command Manager emulator ([`crate::bcm`]), run from its own
//! binary `bcm-emulator` (see [`bcm_binary`]) with its state under `<dir>/bcm/`, the
//! fleet's nodes, and the lab CA (which issues its serving certificate and the client
//! certificates `pki/bcm-admin.*` and `pki/bcm-readonly.*`). It is started after Netris.
//!
//! The last is `vcluster`, the kubelet of vCluster's control-plane pods
//! ([`crate::vcluster`]), run from its own binary `vcluster-kubelet` (see
//! [`vcluster_binary`]) with its state under `<dir>/vcluster/`: it runs vCluster's real
//! syncer (built from the Go module proxy) as the process of each `app=vcluster` pod, and
//! plays the MIG manager of the lab's nodes ([`crate::mig_manager`]).
//!
//! After it come two controllers built from their releases, each in a network namespace of
//! its own ([`crate::kubelet_component`]): `mpi-operator` ([`crate::mpi_operator`]) and
//! `karpenter` ([`crate::karpenter`]).

mod binaries;
mod health;

use std::fmt;
use std::path::Path;

use crate::paths::LabPaths;
use crate::pki::Pki;
use crate::ports::Ports;

pub use self::binaries::{
    BCM_BIN_NAME, NETRIS_BIN_NAME, VCLUSTER_BIN_NAME, bcm_binary, netris_binary, vcluster_binary,
};
pub use self::health::check;
pub(crate) use self::health::{https_get, pem_to_der};

/// The kwok Stages the lab installs (`lab/kube/stages/kwok-stages.yaml`): nodes become
/// Ready (and keep a lease), pods on kwok nodes go Running at once, pods owned by a Job
/// go Succeeded, and deleted pods are removed.
pub const KWOK_STAGES_YAML: &str = include_str!("../kube/stages/kwok-stages.yaml");

/// The API server's audit policy: the provider's requests at `Metadata` level (verb,
/// resource, namespace, name, user; no bodies, so no Secret reaches the log), nothing else.
/// Benchmarks count what a plan asks of the host from it.
#[must_use]
pub fn audit_policy_yaml() -> String {
    use crate::service_accounts::{PROVIDER_ACCOUNT, PROVIDER_NAMESPACE};
    format!(
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [\"RequestReceived\"]\nrules:\n  - level: Metadata\n    users: [\"system:serviceaccount:{PROVIDER_NAMESPACE}:{PROVIDER_ACCOUNT}\"]\n  - level: None\n"
    )
}

/// The service CIDR: Kubernetes' own default (kubeadm's), as on most host clusters. No
/// kube-proxy runs, but the size matters. vCluster gives the virtual API server the host's
/// range, and a virtual Service's address that happens to equal the host Service of the
/// control plane stops the syncer for good ("provided IP is already allocated"). In a /24
/// that hit about one control plane in 250, which no production range does.
pub const SERVICE_CIDR: &str = "10.96.0.0/12";

/// The tenants the lab's Netris emulator has besides its own `Admin` (created at start
/// when missing): one per test or example that wants a tenant of its own.
pub const LAB_TENANTS: [&str; 4] = ["tenant-a", "tenant-b", "tenant-c", "tenant-d"];

/// The Netris emulator's login user.
pub const NETRIS_USER: &str = "netris";

/// The Netris emulator's login password.
pub const NETRIS_PASSWORD: &str = "newNet0ps";

/// How long a V-Net of the lab's Netris emulator stays provisioning, in milliseconds.
pub const NETRIS_PROVISIONING_MS: u64 = 500;

/// The BCM emulator's login user (for clients without a certificate).
pub const BCM_USER: &str = "root";

/// The BCM emulator's login password.
pub const BCM_PASSWORD: &str = "cmdaemon";

/// The length of one boot step of the lab's BCM emulator, in milliseconds (a boot from
/// `DOWN` to `UP` takes four).
pub const BCM_STEP_MS: u64 = 250;

/// One component of the lab.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Component {
    /// etcd, the API server's store.
    Etcd,
    /// kube-apiserver.
    KubeApiserver,
    /// kube-controller-manager (namespace, Deployment, Job, garbage collection, node
    /// lifecycle, service accounts, … controllers).
    KubeControllerManager,
    /// kube-scheduler: places pods on nodes by resources, selectors, taints and affinity.
    KubeScheduler,
    /// kwok: plays the kubelet of every fake node.
    Kwok,
    /// The Netris controller emulator (binary `netris-emulator`).
    Netris,
    /// The Base Command Manager emulator (binary `bcm-emulator`).
    Bcm,
    /// The kubelet of vCluster's control-plane pods (binary `vcluster-kubelet`).
    Vcluster,
    /// The Kubeflow MPI Operator's controller (binary `mpi-operator`, built from its
    /// release): turns `MPIJob`s into a launcher Job and worker pods.
    MpiOperator,
    /// Karpenter's controller with its KWOK cloud provider (binary `karpenter-kwok`, built
    /// from its release): launches nodes for `auto` pools' NodePools.
    Karpenter,
}

impl Component {
    /// Every component, in start order.
    pub const ALL: [Self; 10] = [
        Self::Etcd,
        Self::KubeApiserver,
        Self::KubeControllerManager,
        Self::KubeScheduler,
        Self::Kwok,
        Self::Netris,
        Self::Bcm,
        Self::Vcluster,
        Self::MpiOperator,
        Self::Karpenter,
    ];

    /// The Kubernetes components (run from `gpufleet-kube`), in start order.
    pub const CONTROL_PLANE: [Self; 5] = [
        Self::Etcd,
        Self::KubeApiserver,
        Self::KubeControllerManager,
        Self::KubeScheduler,
        Self::Kwok,
    ];

    /// The name: the first argument of `gpufleet-kube`, and the log file's stem.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Etcd => "etcd",
            Self::KubeApiserver => "kube-apiserver",
            Self::KubeControllerManager => "kube-controller-manager",
            Self::KubeScheduler => "kube-scheduler",
            Self::Kwok => "kwok",
            Self::Netris => "netris",
            Self::Bcm => "bcm",
            Self::Vcluster => "vcluster",
            Self::MpiOperator => "mpi-operator",
            Self::Karpenter => "karpenter",
        }
    }

    /// The component called `name` (also accepts the short names `apiserver`, `kcm`,
    /// `controller-manager` and `scheduler`).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "apiserver" => Some(Self::KubeApiserver),
            "kcm" | "controller-manager" => Some(Self::KubeControllerManager),
            "scheduler" => Some(Self::KubeScheduler),
            "netris-emulator" => Some(Self::Netris),
            "bcm-emulator" => Some(Self::Bcm),
            "vcluster-kubelet" => Some(Self::Vcluster),
            _ => Self::ALL.into_iter().find(|c| c.name() == name),
        }
    }

    /// The port its health endpoint is on.
    #[must_use]
    pub fn port(self, ports: &Ports) -> u16 {
        match self {
            Self::Etcd => ports.etcd_client,
            Self::KubeApiserver => ports.apiserver,
            Self::KubeControllerManager => ports.controller_manager,
            Self::KubeScheduler => ports.scheduler,
            Self::Kwok => ports.kwok,
            Self::Netris => ports.netris,
            Self::Bcm => ports.bcm,
            Self::Vcluster => ports.vcluster,
            Self::MpiOperator => ports.mpi_operator,
            Self::Karpenter => ports.karpenter,
        }
    }

    /// The health endpoint, as a URL.
    #[must_use]
    pub fn health_url(self, ports: &Ports) -> String {
        let port = self.port(ports);
        match self {
            Self::Etcd => format!("http://127.0.0.1:{port}/health"),
            Self::KubeApiserver => format!("https://127.0.0.1:{port}/readyz"),
            Self::KubeControllerManager | Self::KubeScheduler => {
                format!("https://127.0.0.1:{port}/healthz")
            }
            Self::Kwok | Self::Vcluster | Self::MpiOperator | Self::Karpenter => {
                format!("http://127.0.0.1:{port}/healthz")
            }
            Self::Netris | Self::Bcm => format!("https://127.0.0.1:{port}/_admin/healthz"),
        }
    }

    /// The arguments after the program: for the Kubernetes components (program
    /// `gpufleet-kube`) the component name, then its flags; for `netris` the flags of
    /// `netris-emulator`.
    #[must_use]
    pub fn args(self, paths: &LabPaths, ports: &Ports) -> Vec<String> {
        if self == Self::Netris {
            let mut args = vec![
                format!("--dir={}", paths.netris_dir().display()),
                format!("--listen=127.0.0.1:{}", ports.netris),
                format!("--inventory={}", paths.netris_inventory().display()),
                "--reseed-if-changed".into(),
                format!("--user={NETRIS_USER}"),
                format!("--password={NETRIS_PASSWORD}"),
                format!("--provisioning-delay-ms={NETRIS_PROVISIONING_MS}"),
            ];
            args.extend(LAB_TENANTS.iter().map(|t| format!("--tenant={t}")));
            return args;
        }
        if self == Self::Vcluster {
            return crate::vcluster::component::args(paths, ports);
        }
        if self == Self::MpiOperator {
            return crate::mpi_operator::args(paths, ports);
        }
        if self == Self::Karpenter {
            return crate::karpenter::args(paths, ports);
        }
        let pki = Pki::new(&paths.pki());
        if self == Self::Bcm {
            return vec![
                format!("--dir={}", paths.bcm_dir().display()),
                format!("--listen=127.0.0.1:{}", ports.bcm),
                format!("--inventory={}", paths.bcm_inventory().display()),
                "--reseed-if-changed".into(),
                format!("--ca-cert={}", pki.ca_cert().display()),
                format!("--ca-key={}", pki.key("ca").display()),
                format!("--user={BCM_USER}"),
                format!("--password={BCM_PASSWORD}"),
                format!("--step-ms={BCM_STEP_MS}"),
            ];
        }
        let p = |path: &Path| path.display().to_string();
        let kubeconfig = p(&paths.component_kubeconfig(self));
        let api = ports.apiserver;
        let etcd_client = format!("http://127.0.0.1:{}", ports.etcd_client);
        let etcd_peer = format!("http://127.0.0.1:{}", ports.etcd_peer);
        let mut args = vec![self.name().to_owned()];
        let flags: Vec<String> = match self {
            Self::Netris | Self::Bcm | Self::Vcluster | Self::MpiOperator | Self::Karpenter => {
                Vec::new()
            }
            Self::Etcd => vec![
                "--name=lab".into(),
                format!("--data-dir={}", p(&paths.etcd_data())),
                format!("--listen-client-urls={etcd_client}"),
                format!("--advertise-client-urls={etcd_client}"),
                format!("--listen-peer-urls={etcd_peer}"),
                format!("--initial-advertise-peer-urls={etcd_peer}"),
                format!("--initial-cluster=lab={etcd_peer}"),
                "--unsafe-no-fsync=true".into(),
                "--log-level=warn".into(),
            ],
            Self::KubeApiserver => vec![
                format!("--etcd-servers={etcd_client}"),
                "--bind-address=127.0.0.1".into(),
                // Without it the API server advertises the address of the interface of the
                // default route, and refuses to start on a host that has none. Endpoints
                // may not hold a loopback address, so the `kubernetes` Service's are not
                // kept (nothing in the lab reaches the API server through that Service).
                "--advertise-address=127.0.0.1".into(),
                "--endpoint-reconciler-type=none".into(),
                format!("--secure-port={api}"),
                format!("--tls-cert-file={}", p(&pki.cert("kube-apiserver"))),
                format!("--tls-private-key-file={}", p(&pki.key("kube-apiserver"))),
                format!("--client-ca-file={}", p(&pki.ca_cert())),
                "--authorization-mode=RBAC".into(),
                format!("--service-cluster-ip-range={SERVICE_CIDR}"),
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
                format!("--service-account-key-file={}", p(&pki.sa_pub())),
                format!("--service-account-signing-key-file={}", p(&pki.sa_key())),
                "--allow-privileged=true".into(),
                format!(
                    "--requestheader-client-ca-file={}",
                    p(&pki.cert(crate::pki::FRONT_PROXY_CA))
                ),
                format!("--requestheader-allowed-names={}", crate::pki::FRONT_PROXY_CLIENT),
                "--requestheader-username-headers=X-Remote-User".into(),
                "--requestheader-group-headers=X-Remote-Group".into(),
                "--requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
                format!(
                    "--proxy-client-cert-file={}",
                    p(&pki.cert(crate::pki::FRONT_PROXY_CLIENT))
                ),
                format!(
                    "--proxy-client-key-file={}",
                    p(&pki.key(crate::pki::FRONT_PROXY_CLIENT))
                ),
                // Logs and exec go to the node's InternalIP, where kwok answers for it.
                "--kubelet-preferred-address-types=InternalIP".into(),
                format!("--audit-policy-file={}", p(&paths.audit_policy())),
                format!("--audit-log-path={}", p(&paths.audit_log())),
                "--audit-log-maxsize=100".into(),
                "--audit-log-maxbackup=1".into(),
            ],
            Self::KubeControllerManager => vec![
                format!("--kubeconfig={kubeconfig}"),
                format!("--authentication-kubeconfig={kubeconfig}"),
                format!("--authorization-kubeconfig={kubeconfig}"),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={}", ports.controller_manager),
                format!(
                    "--tls-cert-file={}",
                    p(&pki.cert("kube-controller-manager-serving"))
                ),
                format!(
                    "--tls-private-key-file={}",
                    p(&pki.key("kube-controller-manager-serving"))
                ),
                "--leader-elect=false".into(),
                "--controllers=*,-service-lb-controller,-cloud-node-lifecycle-controller,-node-route-controller".into(),
                "--use-service-account-credentials=true".into(),
                format!("--root-ca-file={}", p(&pki.ca_cert())),
                format!("--service-account-private-key-file={}", p(&pki.sa_key())),
                format!("--cluster-signing-cert-file={}", p(&pki.ca_cert())),
                format!("--cluster-signing-key-file={}", p(&pki.key("ca"))),
                format!("--service-cluster-ip-range={SERVICE_CIDR}"),
            ],
            Self::KubeScheduler => vec![
                format!("--kubeconfig={kubeconfig}"),
                format!("--authentication-kubeconfig={kubeconfig}"),
                format!("--authorization-kubeconfig={kubeconfig}"),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={}", ports.scheduler),
                format!(
                    "--tls-cert-file={}",
                    p(&pki.cert("kube-scheduler-serving"))
                ),
                format!(
                    "--tls-private-key-file={}",
                    p(&pki.key("kube-scheduler-serving"))
                ),
                "--leader-elect=false".into(),
            ],
            Self::Kwok => vec![
                format!("--kubeconfig={kubeconfig}"),
                format!("--config={}", p(&paths.stages_file())),
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake".into(),
                "--node-lease-duration-seconds=40".into(),
                format!("--server-address=127.0.0.1:{}", ports.kwok),
                // The API server asks kwok, as the nodes' kubelet, for pod logs: nodes
                // without addresses get loopback and kwok's own port, and the sample logs
                // of benchmark containers come from the `ClusterLogs` config.
                "--node-ip=127.0.0.1".into(),
                "--node-name=localhost".into(),
                format!("--node-port={}", ports.kwok),
                format!(
                    "--config={}",
                    p(&paths
                        .root()
                        .join("benchmarks")
                        .join(crate::pod_logs::config_file_name()))
                ),
                // Port forwarding to vCluster pods: the vCluster kubelet declares, per pod,
                // where its port 8443 leads in a PortForward object (CRD installed by the
                // lab; kwok's watch picks it up once it exists).
                "--enable-crds=PortForward".into(),
                // At INFO kwok logs every lease renewal: ~2 KB/s for 72 nodes, ~30 KB/s
                // for 1,000. Warnings and errors are what a lab's log is read for.
                "--v=WARN".into(),
            ],
        };
        args.extend(flags);
        args
    }

    /// The client certificate (file stem under `pki/`) this component's kubeconfig uses;
    /// `None` for etcd, which needs none.
    #[must_use]
    pub fn client_identity(self) -> Option<&'static str> {
        match self {
            Self::Etcd
            | Self::KubeApiserver
            | Self::Netris
            | Self::Bcm
            | Self::Vcluster
            | Self::MpiOperator
            | Self::Karpenter => None,
            Self::KubeControllerManager => Some("kube-controller-manager"),
            Self::KubeScheduler => Some("kube-scheduler"),
            Self::Kwok => Some("kwok"),
        }
    }
}

impl fmt::Display for Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lab() -> (LabPaths, Ports) {
        let paths = LabPaths::new(Path::new("/tmp/some lab")).expect("paths");
        let ports = Ports {
            etcd_client: 1,
            etcd_peer: 2,
            apiserver: 3,
            controller_manager: 4,
            scheduler: 5,
            kwok: 6,
            netris: 7,
            bcm: 8,
            vcluster: 9,
            mpi_operator: 10,
            karpenter: 11,
        };
        (paths, ports)
    }

    #[test]
    fn names_round_trip() {
        for c in Component::ALL {
            assert_eq!(Component::from_name(c.name()), Some(c));
        }
        assert_eq!(
            Component::from_name("kcm"),
            Some(Component::KubeControllerManager)
        );
        assert_eq!(Component::from_name("nope"), None);
    }

    #[test]
    fn every_flag_points_into_the_lab_dir_and_at_its_ports() {
        let (paths, ports) = lab();
        for c in Component::ALL {
            let args = c.args(&paths, &ports);
            if !matches!(
                c,
                Component::Netris
                    | Component::Bcm
                    | Component::Vcluster
                    | Component::MpiOperator
                    | Component::Karpenter
            ) {
                assert_eq!(args[0], c.name());
            }
            let joined = args.join(" ");
            // `down` finds stray processes by this marker.
            assert!(joined.contains(&paths.marker()), "{c}: {joined}");
            if c == Component::MpiOperator {
                // Its health port is fixed by the operator, not given on its command line.
                continue;
            }
            let port = c.port(&ports);
            assert!(
                joined.contains(&format!("127.0.0.1:{port}"))
                    || joined.contains(&format!("--secure-port={port}")),
                "{c} listens on its port: {joined}"
            );
        }
        let api = Component::KubeApiserver.args(&paths, &ports).join(" ");
        assert!(api.contains("--etcd-servers=http://127.0.0.1:1"));
        assert!(api.contains("--secure-port=3"));
        let netris = Component::Netris.args(&paths, &ports).join(" ");
        assert!(netris.contains("--dir=/tmp/some lab/netris"), "{netris}");
        assert!(netris.contains("--tenant=tenant-a"), "{netris}");
        let bcm = Component::Bcm.args(&paths, &ports).join(" ");
        assert!(bcm.contains("--dir=/tmp/some lab/bcm"), "{bcm}");
        assert!(bcm.contains("--ca-cert=/tmp/some lab/pki/ca.crt"), "{bcm}");
        let kwok = Component::Kwok.args(&paths, &ports).join(" ");
        assert!(kwok.contains("--config=/tmp/some lab/kwok-stages.yaml"));
    }

    #[test]
    fn the_stages_complete_job_pods() {
        assert!(KWOK_STAGES_YAML.contains("name: pod-complete"));
        assert!(KWOK_STAGES_YAML.contains("name: node-initialize"));
        assert!(KWOK_STAGES_YAML.contains("name: pod-delete"));
    }
}
