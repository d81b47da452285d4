output "virtual_cluster_id" {
  description = "The virtual cluster's id (`<namespace>/<name>`)."
  value       = gpufleet_virtual_cluster.this.id
}

output "kubeconfig" {
  description = "Admin kubeconfig of the tenant's virtual cluster."
  value       = gpufleet_virtual_cluster.this.kubeconfig
  sensitive   = true
}

output "servers" {
  description = "The tenant's servers by hostname: BCM id, status, GPU product and count, IP."
  value = {
    for h, n in gpufleet_bcm_node.server : h => {
      id          = n.id
      status      = n.status
      gpu_product = n.gpu_product
      gpu_count   = n.gpu_count
      ip          = n.ip
    }
  }
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
