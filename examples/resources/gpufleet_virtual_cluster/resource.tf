terraform {
  required_providers {
    gpufleet = { source = "gpufleet/gpufleet" }
  }
}

# A tenant's virtual Kubernetes control plane on the host cluster configured in the
# provider's kubernetes block. Its namespace defaults to vc-<name>.
resource "gpufleet_virtual_cluster" "team_a" {
  name               = "team-a"
  kubernetes_version = "1.36"
  isolation          = "dedicated" # fixed at creation: changing it replaces the cluster

  quota = {
    gpus   = 16
    cpu    = "256"
    memory = "2Ti"
    pods   = 500
  }

  limit_range = {
    default_cpu            = "2"
    default_memory         = "8Gi"
    default_request_cpu    = "500m"
    default_request_memory = "1Gi"
  }

  pod_security = "baseline"

  labels = {
    "example.com/cost-center" = "ml-research"
  }

  # Merged into the rendered vcluster.yaml; keys gpufleet manages are refused at plan time.
  values_override = yamlencode({
    sync = { toHost = { ingresses = { enabled = true } } }
  })

  timeouts {
    create = "15m"
  }
}

output "team_a_kubeconfig" {
  value     = gpufleet_virtual_cluster.team_a.kubeconfig
  sensitive = true
}
