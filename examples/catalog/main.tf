# A runnable example that needs no backend: look up a GPU in the catalog, list the
# MIG-capable products, and compute MIG profile resource names with a provider function.
#
# From the repository root, once scripts/demo (or the getting-started guide,
# docs/guides/getting-started.md) has built the provider and written .demo/terraformrc:
#
#   export TF_CLI_CONFIG_FILE="$PWD/.demo/terraformrc"
#   mkdir -p .demo/catalog && cp examples/catalog/*.tf .demo/catalog/ && cd .demo/catalog
#   ../../scripts/terraform init && ../../scripts/terraform apply
terraform {
  required_version = ">= 1.8.0"

  required_providers {
    gpufleet = {
      source = "gpufleet/gpufleet"
    }
  }
}

# The catalog and the functions need no backend, so nothing is configured.
provider "gpufleet" {}

variable "gpu_product" {
  description = "GPU product as in the nvidia.com/gpu.product node label."
  type        = string
  default     = "NVIDIA-H100-80GB-HBM3"
}

# One product, looked up by its GPU feature discovery name.
data "gpufleet_gpu_catalog" "this" {
  product = var.gpu_product
}

# Every product that supports MIG.
data "gpufleet_gpu_catalog" "mig" {
  mig_capable = true
}

locals {
  gpu      = data.gpufleet_gpu_catalog.this.gpu
  profiles = provider::gpufleet::mig_profiles(var.gpu_product)

  # The smallest slice the GPU offers and how many fit on one GPU.
  smallest_profile = try(local.profiles[0], null)
}

output "gpu" {
  value = {
    display_name       = local.gpu.display_name
    architecture       = local.gpu.architecture
    memory_gb          = local.gpu.memory_gb
    nvlink_domain_size = local.gpu.nvlink_domain_size
  }
}

output "mig_capable_products" {
  value = data.gpufleet_gpu_catalog.mig.products
}

output "mig_resource_names" {
  value = { for p in local.profiles : p.name => p.resource_name }
}

output "smallest_profile" {
  value = local.smallest_profile
}
