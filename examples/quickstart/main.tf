# Two tenants on one host cluster: a shared development tier and a dedicated production tier
# with its own time-sliced GPUs.
#
# Against the lab, from the repository root, once scripts/demo (or the getting-started
# guide, docs/guides/getting-started.md) has built the provider and written .demo/terraformrc:
#
#   eval "$(target/debug/gpufleet-lab --dir .lab up)"   # exports the provider settings
#   export TF_CLI_CONFIG_FILE="$PWD/.demo/terraformrc"
#   mkdir -p .demo/quickstart && cp examples/quickstart/*.tf .demo/quickstart/ && cd .demo/quickstart
#   ../../scripts/terraform init && ../../scripts/terraform apply
#
# A tenant's API server has a cluster-internal address only: examples/connect reaches it.
terraform {
  required_version = ">= 1.6.0"

  required_providers {
    gpufleet = { source = "gpufleet/gpufleet" }
  }
}

# Settings come from the environment (KUBECONFIG or GPUFLEET_KUBE_*).
provider "gpufleet" {}

# Development: pods run on the shared nodes, bounded by a quota.
resource "gpufleet_virtual_cluster" "dev" {
  name      = "dev"
  isolation = "shared"

  quota = {
    gpus   = 4
    cpu    = "32"
    memory = "128Gi"
    pods   = 100
  }
  limit_range = {
    default_request_cpu    = "100m"
    default_request_memory = "128Mi"
  }
}

# Production: pods run only on nodes dedicated to this tenant.
resource "gpufleet_virtual_cluster" "prod" {
  name         = "prod"
  isolation    = "dedicated"
  pod_security = "restricted"

  quota = {
    gpus   = 32
    cpu    = "256"
    memory = "1Ti"
    pods   = 500
  }
}

# Two host nodes for prod, each GPU shared four ways by time-slicing.
resource "gpufleet_gpu_node_pool" "prod_h100" {
  name               = "h100"
  virtual_cluster_id = gpufleet_virtual_cluster.prod.id
  isolation          = gpufleet_virtual_cluster.prod.isolation
  gpu_product        = "NVIDIA-H100-80GB-HBM3"
  node_count         = 2
  source             = "host"

  sharing = {
    strategy = "time-slicing"
    replicas = 4
  }
}

output "dev_kubeconfig" {
  value     = gpufleet_virtual_cluster.dev.kubeconfig
  sensitive = true
}

output "prod_kubeconfig" {
  value     = gpufleet_virtual_cluster.prod.kubeconfig
  sensitive = true
}
