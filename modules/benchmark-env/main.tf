# An ephemeral benchmark environment: a dedicated virtual cluster at the platform's pinned
# versions, a pool of whole nodes of one product, and one run of a pinned template on it.
# Destroying the module gives the nodes back exactly as they were found.

module "platform" {
  source = "../platform"
}

locals {
  # Pinned per template: suite, image and the parameters that define the experiment. Images
  # are pinned where NVIDIA publishes the tool in a container; for the others the caller
  # names (and pins) its own build in `image`.
  templates = {
    nccl-all-reduce = {
      suite         = "nccl-all-reduce"
      image         = "nvcr.io/nvidia/hpc-benchmarks:25.04"
      gpus_per_node = 8
      parameters    = { min_bytes = "8", max_bytes = "16G", step_factor = "2" }
    }
    nvbandwidth = {
      suite         = "nvbandwidth"
      image         = null
      gpus_per_node = 8
      parameters    = {}
    }
    dcgm-diag = {
      suite         = "dcgm-diag"
      image         = "nvcr.io/nvidia/cloud-native/dcgm:4.2.3-1-ubuntu22.04"
      gpus_per_node = 8
      parameters    = { level = "2" }
    }
    gpu-burn = {
      suite         = "gpu-burn"
      image         = null
      gpus_per_node = 8
      parameters    = { seconds = "60" }
    }
    aiperf = {
      suite         = "aiperf"
      image         = null
      gpus_per_node = 1
      parameters    = { concurrency = "1" }
    }
  }
  template = local.templates[var.template]
}

resource "gpufleet_virtual_cluster" "this" {
  name               = var.name
  isolation          = "dedicated"
  kubernetes_version = module.platform.kubernetes_version
  pod_security       = "baseline"

  lifecycle {
    postcondition {
      condition     = self.vcluster_version == module.platform.vcluster_version
      error_message = "The gpufleet provider renders vCluster ${self.vcluster_version}, but the platform pins ${module.platform.vcluster_version}: bump modules/platform together with the provider."
    }
  }
}

resource "gpufleet_gpu_node_pool" "this" {
  name               = "bench"
  virtual_cluster_id = gpufleet_virtual_cluster.this.id
  isolation          = gpufleet_virtual_cluster.this.isolation
  gpu_product        = var.gpu_product
  node_count         = var.nodes
  source             = "host"

  # As few racks as possible: fabric results depend on where the nodes are.
  placement = {
    policy = "pack"
  }
}

resource "gpufleet_benchmark" "this" {
  name               = var.name
  virtual_cluster_id = gpufleet_virtual_cluster.this.id
  node_pool_id       = gpufleet_gpu_node_pool.this.id
  suite              = local.template.suite
  image              = coalesce(var.image, local.template.image, "unset")
  nodes              = var.nodes
  repeats            = var.repeats
  gpus_per_node      = coalesce(var.gpus_per_node, local.template.gpus_per_node)
  parameters         = merge(local.template.parameters, var.parameters)
  thresholds         = var.thresholds
  on_failure         = var.on_failure
  triggers           = var.triggers

  lifecycle {
    precondition {
      condition     = var.image != null || local.template.image != null
      error_message = "The ${var.template} template has no published image: set image to your build of the tool, pinned by digest."
    }
    precondition {
      condition     = var.template != "aiperf" || alltrue([for k in ["model", "url"] : contains(keys(var.parameters), k)])
      error_message = "The aiperf template needs parameters.model and parameters.url: the model to profile and the URL of its OpenAI-compatible endpoint."
    }
  }
}
