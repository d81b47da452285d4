terraform {
  required_providers {
    gpufleet = { source = "gpufleet/gpufleet" }
  }
}

# A virtual cluster created elsewhere (another configuration or workspace), by name.
data "gpufleet_virtual_cluster" "team_a" {
  name = "team-a"
  # namespace defaults to vc-team-a
}

output "team_a" {
  value = {
    status    = data.gpufleet_virtual_cluster.team_a.status
    isolation = data.gpufleet_virtual_cluster.team_a.isolation
    endpoint  = data.gpufleet_virtual_cluster.team_a.endpoint
  }
}

output "team_a_kubeconfig" {
  value     = data.gpufleet_virtual_cluster.team_a.kubeconfig
  sensitive = true
}
