# One tenant of each tier, through the tier modules, at the platform's pinned versions:
#
# - shared: a development team on time-sliced GPUs of shared nodes, with a tight quota;
# - dedicated: production inference on nodes of its own, whole GPUs, its own network;
# - private: a regulated tenant on bare-metal nodes from BCM, wiped when released.
#
# Against the lab, from the repository root, once scripts/demo (or the getting-started
# guide, docs/guides/getting-started.md) has built the provider and written .demo/terraformrc:
#
#   eval "$(target/debug/gpufleet-lab --dir .lab up)"
#   export TF_CLI_CONFIG_FILE="$PWD/.demo/terraformrc"
#   mkdir -p .demo/tiers && cp examples/tiers/*.tf .demo/tiers/ && cd .demo/tiers
#   ../../scripts/terraform init && ../../scripts/terraform apply
terraform {
  required_version = ">= 1.6.0"

  required_providers {
    gpufleet = {
      source = "gpufleet/gpufleet"
    }
  }
}

provider "gpufleet" {}

module "dev" {
  source = "../../modules/tenant-shared"

  name        = "tier-dev"
  gpu_product = "NVIDIA-L40S"
  quota       = { gpus = 8 }
}

module "inference" {
  source = "../../modules/tenant-dedicated"

  name        = "tier-inference"
  gpu_product = "NVIDIA-L40S"
  node_count  = 1
  network = {
    tenant = "tenant-b"
    site   = "site-b"
    cidr   = "10.71.0.0/24"
  }
}

module "regulated" {
  source = "../../modules/tenant-private"

  name        = "tier-regulated"
  gpu_product = "NVIDIA-B200"
  node_count  = 1
  network = {
    tenant = "tenant-c"
    site   = "site-b"
    cidr   = "10.72.0.0/24"
  }
}

output "tenants" {
  description = "Each tenant's virtual cluster id."
  value = {
    dev       = module.dev.virtual_cluster_id
    inference = module.inference.virtual_cluster_id
    regulated = module.regulated.virtual_cluster_id
  }
}
