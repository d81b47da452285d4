terraform {
  required_providers {
    gpufleet = { source = "gpufleet/gpufleet" }
  }
}

# A bare-metal GPU server held by tenant-a: claimed from BCM's free pool by hostname, put in the
# gpu-compute category with its own software image, powered on and provisioned until it is UP.
# On destroy its disks are wiped (FULL reinstall) before it returns to the free pool.
resource "gpufleet_bcm_node" "trainer" {
  hostname       = "gpu-b3-001"
  tenant         = "tenant-a"
  category       = "gpu-compute"
  software_image = "ubuntu2404-cuda12.8"
  install_mode   = "AUTO"
  power          = "on"

  timeouts {
    create = "20m"
  }
}

output "trainer" {
  value = {
    id     = gpufleet_bcm_node.trainer.id
    status = gpufleet_bcm_node.trainer.status
    ip     = gpufleet_bcm_node.trainer.ip
    gpus   = "${gpufleet_bcm_node.trainer.gpu_count} x ${gpufleet_bcm_node.trainer.gpu_product}"
  }
}
