output "virtual_cluster_id" {
  description = "The virtual cluster's id (`<namespace>/<name>`)."
  value       = gpufleet_virtual_cluster.this.id
}

output "kubeconfig" {
  description = "Admin kubeconfig of the tenant's virtual cluster; null unless admin_credentials_in_state is true."
  value       = gpufleet_virtual_cluster.this.kubeconfig
  sensitive   = true
}

output "node_pool_id" {
  description = "The private pool's id, for benchmarks."
  value       = gpufleet_gpu_node_pool.private.id
}

output "nodes" {
  description = "The tenant's servers: BCM hostnames, which are also their Kubernetes node names."
  value       = gpufleet_gpu_node_pool.private.nodes
}

output "allocatable" {
  description = "What the tenant can request on its servers, by resource name."
  value       = gpufleet_gpu_node_pool.private.allocatable
}

output "network" {
  description = "The tenant's segment: its id, VLAN, VNI and gateway."
  value = {
    id      = gpufleet_network_segment.this.id
    vlan_id = gpufleet_network_segment.this.vlan_id
    vni     = gpufleet_network_segment.this.vni
    gateway = gpufleet_network_segment.this.gateway
  }
}
