terraform {
  required_providers {
    gpufleet = { source = "gpufleet/gpufleet" }
  }
}

# The tenant and its pool of two 8-GPU H100 nodes that the benchmarks run on.
resource "gpufleet_virtual_cluster" "team_a" {
  name      = "team-a"
  isolation = "dedicated"
}

resource "gpufleet_gpu_node_pool" "train" {
  name               = "train"
  virtual_cluster_id = gpufleet_virtual_cluster.team_a.id
  isolation          = gpufleet_virtual_cluster.team_a.isolation
  gpu_product        = "NVIDIA-H100-80GB-HBM3"
  node_count         = 2
}

# All-reduce bus bandwidth across the two nodes of a dedicated pool, with a pinned sweep:
# the average over the sweep depends on its sizes, so the threshold is on the largest one.
resource "gpufleet_benchmark" "allreduce" {
  name               = "allreduce"
  virtual_cluster_id = gpufleet_virtual_cluster.team_a.id
  node_pool_id       = gpufleet_gpu_node_pool.train.id
  suite              = "nccl-all-reduce"
  image              = "nvcr.io/nvidia/hpc-benchmarks:25.04"
  nodes              = 2
  gpus_per_node      = 8

  parameters = {
    min_bytes   = "8"
    max_bytes   = "16G"
    step_factor = "2"
  }

  thresholds = {
    largest_size_bus_bandwidth = { min = 350 }
    wrong_count                = { max = 0 }
  }

  # Run again whenever the pool's nodes change.
  triggers = {
    nodes = join(",", gpufleet_gpu_node_pool.train.nodes)
  }

  start_timeout = "10m"
  timeouts {
    create = "45m"
  }
}

# A DCGM level-2 diagnostic whose failures are recorded rather than failing the apply.
resource "gpufleet_benchmark" "health" {
  name               = "health"
  virtual_cluster_id = gpufleet_virtual_cluster.team_a.id
  node_pool_id       = gpufleet_gpu_node_pool.train.id
  suite              = "dcgm-diag"
  image              = "nvcr.io/nvidia/cloud-native/dcgm:4.2.3-1-ubuntu22.04"
  gpus_per_node      = 8
  parameters         = { level = "2" }
  thresholds         = { tests_failed = { max = 0 } }
  on_failure         = "record"
}

output "allreduce_busbw" {
  value = gpufleet_benchmark.allreduce.results["largest_size_bus_bandwidth"]
}
