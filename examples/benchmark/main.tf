# Reproducible benchmarks on a dedicated tenant's H100 pool in the lab: an all-reduce with a
# pinned sweep and a bandwidth floor, a DCGM diagnostic that only records failures, and a
# custom command reporting its own metrics.
#
# Against the lab, from the repository root, once scripts/demo (or the getting-started
# guide, docs/guides/getting-started.md) has built the provider and written .demo/terraformrc:
#
#   eval "$(target/debug/gpufleet-lab --dir .lab up)"
#   export TF_CLI_CONFIG_FILE="$PWD/.demo/terraformrc"
#   mkdir -p .demo/benchmark && cp examples/benchmark/*.tf .demo/benchmark/ && cd .demo/benchmark
#   ../../scripts/terraform init && ../../scripts/terraform apply
#
# In the lab, kwok plays the GPU nodes: the pods "run" instantly and their logs are the
# recorded samples of each suite (lab/benchmarks/), so results are always the same.
terraform {
  required_version = ">= 1.6.0"

  required_providers {
    gpufleet = {
      source = "gpufleet/gpufleet"
    }
  }
}

provider "gpufleet" {}

resource "gpufleet_virtual_cluster" "bench" {
  name      = "bench"
  isolation = "dedicated"
}

resource "gpufleet_gpu_node_pool" "h100" {
  name               = "h100"
  virtual_cluster_id = gpufleet_virtual_cluster.bench.id
  isolation          = gpufleet_virtual_cluster.bench.isolation
  gpu_product        = "NVIDIA-H100-80GB-HBM3"
  node_count         = 2
}

resource "gpufleet_benchmark" "allreduce" {
  name               = "allreduce"
  virtual_cluster_id = gpufleet_virtual_cluster.bench.id
  node_pool_id       = gpufleet_gpu_node_pool.h100.id
  suite              = "nccl-all-reduce"
  image              = "nvcr.io/nvidia/hpc-benchmarks:25.04"
  nodes              = 2
  gpus_per_node      = 8

  # Pin the sweep: the average bus bandwidth is a mean over every size swept.
  parameters = {
    min_bytes = "8"
    max_bytes = "16G"
  }

  thresholds = {
    largest_size_bus_bandwidth = { min = 350 }
  }
}

resource "gpufleet_benchmark" "health" {
  name               = "health"
  virtual_cluster_id = gpufleet_virtual_cluster.bench.id
  node_pool_id       = gpufleet_gpu_node_pool.h100.id
  suite              = "dcgm-diag"
  image              = "nvcr.io/nvidia/cloud-native/dcgm:4.2.3-1-ubuntu22.04"
  gpus_per_node      = 8
  parameters         = { level = "2" }
  on_failure         = "record"
}

resource "gpufleet_benchmark" "training_step" {
  name               = "training-step"
  virtual_cluster_id = gpufleet_virtual_cluster.bench.id
  node_pool_id       = gpufleet_gpu_node_pool.h100.id
  suite              = "custom"
  image              = "nvcr.io/nvidia/pytorch:25.04-py3"
  command            = ["python", "/bench/step.py"]
  thresholds         = { tokens_per_second = { min = 1500 } }
}

output "comparable_runs" {
  description = "Runs with equal hashes ran the same experiment on the same software and hardware."
  value = {
    allreduce = gpufleet_benchmark.allreduce.environment_hash
    health    = gpufleet_benchmark.health.environment_hash
  }
}

output "allreduce_busbw" {
  value = gpufleet_benchmark.allreduce.results["largest_size_bus_bandwidth"]
}
