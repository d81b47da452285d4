# The provider's address: without it, Terraform looks for hashicorp/gpufleet.
terraform {
  required_providers {
    gpufleet = { source = "gpufleet/gpufleet" }
  }
}

# Every setting can also come from a GPUFLEET_* environment variable (see the table below),
# which keeps secrets out of the configuration, for example:
#
#   export GPUFLEET_BCM_CLIENT_KEY="$(cat bcm-terraform.key)"
#   export GPUFLEET_NETRIS_PASSWORD="..."
#
# Only the blocks of the backends your resources use are needed; the GPU catalog and the
# functions need none.
provider "gpufleet" {
  # The host cluster that runs the virtual control planes and GPU nodes.
  kubernetes {
    config_path = pathexpand("~/.kube/config")
    context     = "gpu-host-prod"
  }

  # NVIDIA Base Command Manager head node, logged in to with a BCM profile certificate.
  # client_key comes from GPUFLEET_BCM_CLIENT_KEY.
  bcm {
    endpoint           = "https://bcm-head.dc1.example.internal:8081"
    client_certificate = file("${path.module}/certs/bcm-terraform.pem")
    ca_certificate     = file("${path.module}/certs/bcm-ca.pem")
  }

  # The network controller; the password comes from a sensitive variable.
  netris {
    endpoint = "https://netris.dc1.example.internal"
    username = "terraform"
    password = var.netris_password
  }

  # A GPU product the built-in catalog lacks, as GPU feature discovery labels its nodes
  # (nvidia.com/gpu.product and nvidia.com/gpu.memory): pools may then use it.
  gpu_product {
    name          = "NVIDIA-L20"
    aliases       = ["L20"]
    architecture  = "ada-lovelace"
    memory_mib    = 46068
    gpus_per_node = 8
  }
}

variable "netris_password" {
  description = "Password of the Netris user \"terraform\"."
  type        = string
  sensitive   = true
}
