terraform {
  required_providers {
    gpufleet = { source = "gpufleet/gpufleet" }
  }
}

# Free B200 nodes in BCM, for capacity planning: how many a tenant could still claim.
data "gpufleet_bcm_nodes" "free_b200" {
  gpu_product = "NVIDIA-B200"
  free_only   = true
}

output "free_b200" {
  value = {
    hostnames = data.gpufleet_bcm_nodes.free_b200.hostnames
    gpus      = data.gpufleet_bcm_nodes.free_b200.gpus
  }
}
