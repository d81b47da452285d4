variable "name" {
  description = "The tenant's name: its virtual cluster, host namespace (`vc-<name>`), node pool and network segment are named after it."
  type        = string

  validation {
    condition     = can(regex("^[a-z]([-a-z0-9]{0,50}[a-z0-9])?$", var.name))
    error_message = "name must be a DNS label of at most 52 characters: lowercase letters, digits and '-', starting with a letter."
  }
}

variable "gpu_product" {
  description = "GPU product of the tenant's dedicated nodes (a `gpufleet_gpu_catalog` product, e.g. \"NVIDIA-L40S\")."
  type        = string
}

variable "node_count" {
  description = "How many dedicated host nodes the tenant holds."
  type        = number
  default     = 2

  validation {
    condition     = var.node_count >= 1 && floor(var.node_count) == var.node_count
    error_message = "node_count must be a whole number of at least 1."
  }
}

variable "placement" {
  description = "`spread` places the nodes in as many racks as possible (failure isolation for inference); `pack` in as few as possible."
  type        = string
  default     = "spread"

  validation {
    condition     = contains(["pack", "spread"], var.placement)
    error_message = "placement must be \"pack\" or \"spread\"."
  }
}

variable "quota" {
  description = "The tenant's total requests. `gpus` null leaves GPUs unbounded by the quota: the tenant can only use the GPUs of its own nodes anyway."
  type = object({
    gpus   = optional(number)
    cpu    = optional(string, "128")
    memory = optional(string, "512Gi")
    pods   = optional(number, 500)
  })
  default = {}
}

variable "network" {
  description = "The tenant's own network segment on the Netris controller: the controller tenant and VPC that own it, the site of the nodes' switches, its CIDR, and optionally a fixed VLAN. The tenant's nodes are its untagged members."
  type = object({
    tenant  = string
    vpc     = optional(string, "Default")
    site    = string
    cidr    = string
    vlan_id = optional(number)
  })

  validation {
    condition     = can(cidrhost(var.network.cidr, 0))
    error_message = "network.cidr must be an IPv4 network in CIDR notation, such as \"10.30.0.0/24\"."
  }
}

variable "labels" {
  description = "Extra labels for the tenant's host objects and nodes (cost centre, team, ...)."
  type        = map(string)
  default     = {}
}

variable "admin_credentials_in_state" {
  description = "Record the admin kubeconfig and client key in Terraform state. Off by default: reach the tenant through the gpufleet_virtual_cluster_connection ephemeral resource, whose short-lived token never reaches state."
  type        = bool
  default     = false
}
