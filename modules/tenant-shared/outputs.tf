output "virtual_cluster_id" {
  description = "The virtual cluster's id (`<namespace>/<name>`), for node pools and benchmarks."
  value       = gpufleet_virtual_cluster.this.id
}

output "namespace" {
  description = "The host namespace the tenant's workloads run in."
  value       = gpufleet_virtual_cluster.this.namespace
}

output "endpoint" {
  description = "URL of the tenant's Kubernetes API."
  value       = gpufleet_virtual_cluster.this.endpoint
}

output "kubeconfig" {
  description = "Admin kubeconfig of the tenant's virtual cluster; null unless admin_credentials_in_state is true."
  value       = gpufleet_virtual_cluster.this.kubeconfig
  sensitive   = true
}

output "allocatable" {
  description = "What the tenant's own shared nodes add, by resource name (empty without gpu_product)."
  value       = try(gpufleet_gpu_node_pool.shared[0].allocatable, {})
}
