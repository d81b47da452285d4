# Provider-defined functions need the provider in required_providers (Terraform 1.8+).
terraform {
  required_providers {
    gpufleet = {
      source = "gpufleet/gpufleet"
    }
  }
}

locals {
  a100_profiles = provider::gpufleet::mig_profiles("NVIDIA-A100-SXM4-80GB")

  # { "1g.10gb" = "nvidia.com/mig-1g.10gb", ..., "7g.80gb" = "nvidia.com/mig-7g.80gb" }
  a100_resource_names = { for p in local.a100_profiles : p.name => p.resource_name }
}

output "a100_resource_names" {
  value = local.a100_resource_names
}

output "l40s_profiles" {
  value = provider::gpufleet::mig_profiles("NVIDIA-L40S") # [] (no MIG)
}
