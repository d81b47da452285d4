# A fleet of tenants driven by one map: each entry is a tenant with its tier and the GPUs it
# pays for. Adding a tenant is adding a line; `terraform apply` creates its virtual cluster
# and claims its nodes, removing the line releases them.
#
# Against the lab, from the repository root, once scripts/demo (or the getting-started
# guide, docs/guides/getting-started.md) has built the provider and written .demo/terraformrc:
#
#   eval "$(target/debug/gpufleet-lab --dir .lab up)"
#   export TF_CLI_CONFIG_FILE="$PWD/.demo/terraformrc"
#   mkdir -p .demo/fleet && cp examples/fleet/*.tf .demo/fleet/ && cd .demo/fleet
#   ../../scripts/terraform init && ../../scripts/terraform apply
terraform {
  required_version = ">= 1.6.0"

  required_providers {
    gpufleet = { source = "gpufleet/gpufleet" }
  }
}

provider "gpufleet" {}

variable "tenants" {
  description = "Tenants by name: their tier, GPU product and node count."
  type = map(object({
    tier        = string
    gpu_product = string
    nodes       = optional(number, 1)
  }))
  default = {
    "t01" = { tier = "dedicated", gpu_product = "NVIDIA-H100-80GB-HBM3" }
    "t02" = { tier = "dedicated", gpu_product = "NVIDIA-H100-80GB-HBM3" }
    "t03" = { tier = "dedicated", gpu_product = "NVIDIA-H100-80GB-HBM3" }
    "t04" = { tier = "dedicated", gpu_product = "NVIDIA-H200" }
    "t05" = { tier = "dedicated", gpu_product = "NVIDIA-H200" }
    "t06" = { tier = "dedicated", gpu_product = "NVIDIA-H200" }
    "t07" = { tier = "dedicated", gpu_product = "NVIDIA-A100-SXM4-80GB" }
    "t08" = { tier = "dedicated", gpu_product = "NVIDIA-A100-SXM4-80GB" }
    "t09" = { tier = "dedicated", gpu_product = "NVIDIA-A100-SXM4-80GB" }
    "t10" = { tier = "dedicated", gpu_product = "NVIDIA-L40S" }
    "t11" = { tier = "shared", gpu_product = "NVIDIA-L40S" }
    "t12" = { tier = "shared", gpu_product = "NVIDIA-L40S" }
    "t13" = { tier = "shared", gpu_product = "NVIDIA-L40S" }
    "t14" = { tier = "shared", gpu_product = "NVIDIA-L40S" }
    "t15" = { tier = "shared", gpu_product = "NVIDIA-A100-SXM4-80GB" }
    "t16" = { tier = "shared", gpu_product = "NVIDIA-A100-SXM4-80GB" }
    "t17" = { tier = "shared", gpu_product = "NVIDIA-H200" }
    "t18" = { tier = "shared", gpu_product = "NVIDIA-H200" }
    "t19" = { tier = "shared", gpu_product = "NVIDIA-H100-80GB-HBM3" }
    "t20" = { tier = "shared", gpu_product = "NVIDIA-H100-80GB-HBM3" }
  }
}

resource "gpufleet_virtual_cluster" "tenant" {
  for_each = var.tenants

  name      = each.key
  isolation = each.value.tier

  quota = {
    gpus = each.value.nodes * 8 * (each.value.tier == "shared" ? 4 : 1)
    pods = 200
  }
}

resource "gpufleet_gpu_node_pool" "gpus" {
  for_each = var.tenants

  name               = "gpus"
  virtual_cluster_id = gpufleet_virtual_cluster.tenant[each.key].id
  isolation          = gpufleet_virtual_cluster.tenant[each.key].isolation
  gpu_product        = each.value.gpu_product
  node_count         = each.value.nodes
  source             = "host"

  # Shared tiers time-slice their GPUs four ways; dedicated tenants get whole GPUs.
  sharing = each.value.tier == "shared" ? { strategy = "time-slicing", replicas = 4 } : null
}

data "gpufleet_fleet_inventory" "after" {
  depends_on = [gpufleet_gpu_node_pool.gpus]
}

output "held_fraction" {
  description = "Fraction of the fleet's GPUs held by tenants."
  value       = data.gpufleet_fleet_inventory.after.held_fraction
}
