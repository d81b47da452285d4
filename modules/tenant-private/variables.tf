variable "name" {
  description = "The tenant's name: its virtual cluster and host namespace (`vc-<name>`) are named after it, and BCM records it as the holder of its nodes."
  type        = string

  validation {
    condition     = can(regex("^[a-z]([-a-z0-9]{0,50}[a-z0-9])?$", var.name))
    error_message = "name must be a DNS label of at most 52 characters: lowercase letters, digits and '-', starting with a letter."
  }
}

variable "hostnames" {
  description = "The bare-metal GPU servers the tenant holds alone, by BCM hostname. Each must be free (see the `gpufleet_bcm_nodes` data source) or already this tenant's."
  type        = set(string)

  validation {
    condition     = length(var.hostnames) >= 1
    error_message = "hostnames must name at least one server."
  }
}

variable "category" {
  description = "BCM category the servers are provisioned in."
  type        = string
  default     = "gpu-compute"
}

variable "software_image" {
  description = "BCM software image the servers run. Changing it reprovisions them."
  type        = string
  default     = "ubuntu2404-cuda12.8"
}

variable "network" {
  description = "The tenant's own network segment on the Netris controller: the controller tenant and VPC that own it, the site of the servers' switches, its CIDR, and optionally a fixed VLAN. The servers are its untagged members."
  type = object({
    tenant  = string
    vpc     = optional(string, "Default")
    site    = string
    cidr    = string
    vlan_id = optional(number)
  })

  validation {
    condition     = can(cidrhost(var.network.cidr, 0))
    error_message = "network.cidr must be an IPv4 network in CIDR notation, such as \"10.40.0.0/24\"."
  }
}

variable "labels" {
  description = "Extra labels for the tenant's host objects (cost centre, team, ...)."
  type        = map(string)
  default     = {}
}
