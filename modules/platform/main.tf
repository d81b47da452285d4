# The platform's pinned versions, in one place. Every tenant-tier module reads them from here,
# so a tier upgrade is one change to this file: bump kubernetes_version and every virtual
# cluster plans an in-place upgrade; a new provider release that renders another vCluster
# version fails the tier modules' postcondition until vcluster_version is bumped here too.

output "kubernetes_version" {
  description = "Kubernetes minor version of every tenant's virtual control plane."
  value       = "1.36"
}

output "vcluster_version" {
  description = "The vCluster release the pinned provider renders; checked by every tier module."
  value       = "0.36.0"
}
