# Bare-metal GPU servers for one tenant, through the lab's BCM emulator: two free B200 nodes
# are picked with the gpufleet_bcm_nodes data source, claimed, imaged and provisioned until UP.
# `terraform destroy` wipes them (FULL reinstall) and returns them to the free pool, powered
# off again as their rack idles.
#
# Against the lab, from the repository root, once scripts/demo (or the getting-started
# guide, docs/guides/getting-started.md) has built the provider and written .demo/terraformrc:
#
#   eval "$(target/debug/gpufleet-lab --dir .lab up)"   # exports GPUFLEET_BCM_* among its settings
#   export TF_CLI_CONFIG_FILE="$PWD/.demo/terraformrc"
#   mkdir -p .demo/bcm-node && cp examples/bcm-node/*.tf .demo/bcm-node/ && cd .demo/bcm-node
#   ../../scripts/terraform init && ../../scripts/terraform apply
terraform {
  required_version = ">= 1.6.0"

  required_providers {
    gpufleet = {
      source = "gpufleet/gpufleet"
    }
  }
}

# Every bcm setting comes from the GPUFLEET_BCM_* variables the lab prints.
provider "gpufleet" {}

variable "tenant" {
  description = "The tenant that holds the nodes."
  type        = string
  default     = "tenant-a"
}

variable "node_count" {
  description = "How many free B200 nodes to claim."
  type        = number
  default     = 2
}

data "gpufleet_bcm_nodes" "free" {
  gpu_product = "NVIDIA-B200"
  free_only   = true
}

resource "gpufleet_bcm_node" "worker" {
  count = var.node_count

  hostname       = data.gpufleet_bcm_nodes.free.hostnames[count.index]
  tenant         = var.tenant
  category       = "gpu-compute"
  software_image = "ubuntu2404-cuda12.8"

  # A free node picked once stays this tenant's, even when the free list changes later.
  lifecycle {
    ignore_changes = [hostname]
  }
}

output "workers" {
  value = {
    for n in gpufleet_bcm_node.worker : n.hostname => {
      status = n.status
      rack   = n.rack
      gpus   = n.gpu_count
    }
  }
}
