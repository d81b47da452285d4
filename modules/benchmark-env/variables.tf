variable "name" {
  description = "Name of the run: the ephemeral virtual cluster (host namespace `vc-<name>`), its pool and the benchmark are named after it."
  type        = string

  validation {
    condition     = can(regex("^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$", var.name))
    error_message = "name must be a DNS label of at most 40 characters (the benchmark's limit): lowercase letters, digits and '-', starting with a letter."
  }
}

variable "template" {
  description = "The pinned run template: `nccl-all-reduce`, `nvbandwidth`, `dcgm-diag`, `gpu-burn` or `aiperf`. Each fixes the suite, the image and the default parameters, so runs of one template are comparable."
  type        = string

  validation {
    condition     = contains(["nccl-all-reduce", "nvbandwidth", "dcgm-diag", "gpu-burn", "aiperf"], var.template)
    error_message = "template must be one of nccl-all-reduce, nvbandwidth, dcgm-diag, gpu-burn, aiperf."
  }
}

variable "image" {
  description = "The run's image; null takes the template's (nccl-all-reduce: NVIDIA HPC Benchmarks, dcgm-diag: DCGM). nvbandwidth, gpu-burn and aiperf have no published image and need one. Pin it by digest (`image@sha256:...`) so the hash does not follow a moving tag."
  type        = string
  default     = null
}

variable "gpu_product" {
  description = "GPU product to benchmark (a `gpufleet_gpu_catalog` product, e.g. \"NVIDIA-H100-80GB-HBM3\")."
  type        = string
}

variable "nodes" {
  description = "How many nodes the environment holds and the run uses at once (a gang above 1, one pod per node)."
  type        = number
  default     = 1

  validation {
    condition     = var.nodes >= 1 && floor(var.nodes) == var.nodes
    error_message = "nodes must be a whole number of at least 1."
  }
}

variable "repeats" {
  description = "How many times the run executes in its turn; `results` is each metric's median over them, and `spread` its range."
  type        = number
  default     = 1

  validation {
    condition     = var.repeats >= 1 && var.repeats <= 10 && floor(var.repeats) == var.repeats
    error_message = "repeats must be a whole number from 1 to 10."
  }
}

variable "gpus_per_node" {
  description = "GPUs each pod requests; null takes the template's (all 8 GPUs of an HGX node for the fabric tests, 1 for aiperf)."
  type        = number
  default     = null
}

variable "parameters" {
  description = "Suite parameters merged over the template's; overriding one changes the experiment, and so the `environment_hash`."
  type        = map(string)
  default     = {}
}

variable "thresholds" {
  description = "Pass/fail bounds by metric (see the benchmarks guide for each suite's metrics)."
  type = map(object({
    min = optional(number)
    max = optional(number)
  }))
  default = {}
}

variable "on_failure" {
  description = "`fail` makes a failing run an apply error (and the next apply reruns it); `record` only records it in `status`."
  type        = string
  default     = "fail"

  validation {
    condition     = contains(["fail", "record"], var.on_failure)
    error_message = "on_failure must be \"fail\" or \"record\"."
  }
}

variable "triggers" {
  description = "Arbitrary values; changing any of them runs the benchmark again (a nightly date, a driver rollout id)."
  type        = map(string)
  default     = {}
}
