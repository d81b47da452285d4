//! The lab's kubelet for vCluster control-plane pods (`vcluster-kubelet`): it runs
//! vCluster's real syncer, built from the Go module proxy, as the process of every pod
//! labelled `app=vcluster`.
//!
//! kwok plays every other pod of the lab. For a vCluster pod it only moves the pod to
//! Running with its addresses (lab/kube/stages); this kubelet then does what a node's
//! kubelet and container runtime would: it lays out the pod's volumes, requests the
//! service account token bound to the pod, starts the container's command (`/vcluster
//! start`) in a sandbox of its own namespaces with those volumes mounted, makes the host
//! API server reachable inside it, probes `/readyz` and writes the pod's Ready condition,
//! restarts a crashed syncer with back-off, and stops it when the pod goes. Everything
//! else (the virtual control plane, its certificates, syncing pods and nodes, Secret
//! `vc-<name>`) is vCluster's own doing.
//!
//! Where the lab differs from a node, and why:
//! - The image is not pulled: a pod whose syncer image is not of the built release fails
//!   with `ErrImagePull`, and the `kubernetes` init container's binaries come from the
//!   lab's own Kubernetes build (`gpufleet-kube`) and `kine`.
//! - The `kubernetes` Service is reached at `127.0.0.1:<host API port>` inside the sandbox
//!   (`KUBERNETES_SERVICE_HOST`), and the pod's port 8443 at a host loopback port, which
//!   is what the readiness probe asks (a node's kubelet probes the pod's IP) and where kwok,
//!   the node's kubelet API for the host API server, sends `pods/portforward` streams. The
//!   syncer's config is left as rendered: its exported kubeconfig names what gpufleet
//!   wrote (or the syncer's own default), reachable only as it would be on a real cluster.
//! - The syncer runs as root in its sandbox; the pod's security context is not applied.
//!
//! # Layers
//!
//! - [`netns`]: loopback up, sockets opened in another network namespace.
//! - [`sandbox`]: the sandbox's spec, its set-up inside the namespaces, start and stop.
//! - [`volumes`] and [`podspec`]: what a kubelet reads from the pod; [`etc`]: the files it
//!   manages in the container's `/etc`.
//! - [`forward`]: the two forwarders, [`ports`]: the host port of each virtual cluster;
//!   [`port_forward`]: the kwok `PortForward` that leads the pod's port 8443 there.
//! - [`isolated`]: a host program of the lab (the MPI Operator) in a sandbox with only a
//!   network namespace of its own.
//! - [`status`]: the pod status it writes; [`health`]: its own `/healthz` and `/status`.
//! - [`storage`]: the default StorageClass and its provisioner, for volume claims;
//!   [`services`]: `NodePort` and `LoadBalancer` Services of these pods, reachable.
//! - [`kubelet`]: the reconcile loop; [`component`]: running it as a lab component;
//!   [`limits`]: the kernel limits many control planes on one machine need.

pub mod component;
pub mod etc;
pub mod forward;
pub mod health;
pub mod isolated;
pub mod kubelet;
pub mod limits;
pub mod netns;
pub mod podspec;
pub mod port_forward;
pub mod ports;
pub mod sandbox;
pub mod services;
pub mod status;
pub mod storage;
pub mod volumes;

pub use kubelet::{KubeletConfig, VclusterKubelet};

/// The file name of the kubelet's binary.
pub const BIN_NAME: &str = "vcluster-kubelet";

/// The label selector of the pods it runs.
pub const POD_SELECTOR: &str = "app=vcluster";
