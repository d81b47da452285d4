variable "name" {
  description = "The tenant's name: its virtual cluster and host namespace (`vc-<name>`) are named after it."
  type        = string

  validation {
    condition     = can(regex("^[a-z]([-a-z0-9]{0,50}[a-z0-9])?$", var.name))
    error_message = "name must be a DNS label of at most 52 characters: lowercase letters, digits and '-', starting with a letter."
  }
}

variable "gpu_product" {
  description = "GPU product of the shared, time-sliced nodes this tenant adds to the shared pool (a `gpufleet_gpu_catalog` product). Null adds no nodes: the tenant then uses shared nodes other tenants brought."
  type        = string
  default     = null
}

variable "node_count" {
  description = "How many host nodes of `gpu_product` the tenant adds to the shared pool."
  type        = number
  default     = 1

  validation {
    condition     = var.node_count >= 1 && floor(var.node_count) == var.node_count
    error_message = "node_count must be a whole number of at least 1."
  }
}

variable "time_slicing_replicas" {
  description = "How many pods share one GPU of the tenant's nodes (time-slicing: no memory or fault isolation between them)."
  type        = number
  default     = 4

  validation {
    condition     = var.time_slicing_replicas >= 2 && var.time_slicing_replicas <= 48 && floor(var.time_slicing_replicas) == var.time_slicing_replicas
    error_message = "time_slicing_replicas must be a whole number from 2 to 48 (the NVIDIA device plugin refuses fewer than 2)."
  }
}

variable "quota" {
  description = "The tenant's total requests: GPUs (time-sliced replicas count one each), CPU and memory as Kubernetes quantities, and pods."
  type = object({
    gpus   = optional(number, 2)
    cpu    = optional(string, "16")
    memory = optional(string, "64Gi")
    pods   = optional(number, 50)
  })
  default = {}

  validation {
    condition     = var.quota.gpus >= 0 && var.quota.pods >= 1
    error_message = "quota.gpus must be at least 0 and quota.pods at least 1."
  }
}

variable "sleep_after" {
  description = "Sleep after this long without API activity, e.g. \"30m\". gpufleet does not render vCluster's sleep mode: the provider warns and the cluster never sleeps (use paused). null (the default) sets none."
  type        = string
  default     = null

  validation {
    condition     = var.sleep_after == null || can(regex("^([0-9]+(h|m|s))+$", var.sleep_after))
    error_message = "sleep_after must be a duration such as \"30m\" or \"1h30m\"."
  }
}

variable "labels" {
  description = "Extra labels for the tenant's host objects (cost centre, team, ...)."
  type        = map(string)
  default     = {}
}

variable "admin_credentials_in_state" {
  description = "Record the admin kubeconfig and client key in Terraform state. Off by default: reach the tenant through the gpufleet_virtual_cluster_connection ephemeral resource, whose short-lived token never reaches state."
  type        = bool
  default     = false
}
