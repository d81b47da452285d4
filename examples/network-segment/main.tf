# A tenant network on the lab's Netris controller: an isolated VLAN/VXLAN segment for tenant
# "tenant-a", with a gateway, DHCP and the switch ports of two GPU servers (given by their
# hostnames, resolved through the controller's server inventory).
#
# Against the lab, from the repository root, once scripts/demo (or the getting-started
# guide, docs/guides/getting-started.md) has built the provider and written .demo/terraformrc:
#
#   eval "$(target/debug/gpufleet-lab --dir .lab up)"   # exports GPUFLEET_NETRIS_* among its settings
#   export TF_CLI_CONFIG_FILE="$PWD/.demo/terraformrc"
#   mkdir -p .demo/network-segment && cp examples/network-segment/*.tf .demo/network-segment/ && cd .demo/network-segment
#   ../../scripts/terraform init && ../../scripts/terraform apply
#
# The controller must know the tenant and the VPC (a fresh controller has only the "Admin"
# tenant and the "Default" VPC); the lab creates "tenant-a".
terraform {
  required_version = ">= 1.6.0"

  required_providers {
    gpufleet = {
      source = "gpufleet/gpufleet"
    }
  }
}

# Every netris setting comes from the GPUFLEET_NETRIS_* variables the lab prints.
provider "gpufleet" {}

variable "tenant" {
  description = "Controller tenant that owns the segment."
  type        = string
  default     = "tenant-a"
}

variable "vpc" {
  description = "VPC of the segment."
  type        = string
  default     = "Default"
}

variable "site" {
  description = "Site whose switches carry the segment."
  type        = string
  default     = "site-a"
}

variable "servers" {
  description = "Hostnames of the GPU servers to attach, untagged."
  type        = list(string)
  default     = ["gpu-rack-a1-01", "gpu-rack-a1-02"]
}

resource "gpufleet_network_segment" "tenant_a" {
  name   = "${var.tenant}-net"
  tenant = var.tenant
  vpc    = var.vpc
  site   = var.site
  cidr   = "10.20.0.0/24"

  dhcp = {
    start = "10.20.0.100"
    end   = "10.20.0.200"
  }

  members = [for h in var.servers : { hostname = h, untagged = true }]
}

output "segment" {
  value = {
    id      = gpufleet_network_segment.tenant_a.id
    vlan_id = gpufleet_network_segment.tenant_a.vlan_id
    vni     = gpufleet_network_segment.tenant_a.vni
    gateway = gpufleet_network_segment.tenant_a.gateway
    status  = gpufleet_network_segment.tenant_a.status
    ports   = sort([for p in gpufleet_network_segment.tenant_a.attached_ports : p.port])
  }
}
