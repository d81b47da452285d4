terraform {
  required_providers {
    gpufleet = { source = "gpufleet/gpufleet" }
  }
}

# Free H100 capacity before asking for a pool, and how much of the fleet is held.
data "gpufleet_fleet_inventory" "h100" {
  gpu_product = "NVIDIA-H100-80GB-HBM3"
}

output "free_h100_nodes" {
  value = data.gpufleet_fleet_inventory.h100.products[0].free_nodes
}

output "fleet_held_fraction" {
  value = data.gpufleet_fleet_inventory.h100.held_fraction
}
