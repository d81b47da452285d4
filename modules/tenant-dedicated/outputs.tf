output "virtual_cluster_id" {
  description = "The virtual cluster's id (`<namespace>/<name>`)."
  value       = gpufleet_virtual_cluster.this.id
}

output "kubeconfig" {
  description = "Admin kubeconfig of the tenant's virtual cluster; null unless admin_credentials_in_state is true."
  value       = gpufleet_virtual_cluster.this.kubeconfig
  sensitive   = true
}

output "endpoint" {
  description = "URL of the tenant's Kubernetes API."
  value       = gpufleet_virtual_cluster.this.endpoint
}

output "node_pool_id" {
  description = "The dedicated pool's id, for benchmarks."
  value       = gpufleet_gpu_node_pool.dedicated.id
}

output "nodes" {
  description = "The host nodes dedicated to the tenant."
  value       = gpufleet_gpu_node_pool.dedicated.nodes
}

output "allocatable" {
  description = "What the tenant can request on its nodes, by resource name."
  value       = gpufleet_gpu_node_pool.dedicated.allocatable
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
