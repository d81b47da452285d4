# Run a benchmark resource's definition again, say after a driver upgrade, without replacing
# the resource or its recorded run:
#   terraform apply -invoke=action.gpufleet_benchmark_run.allreduce_again
action "gpufleet_benchmark_run" "allreduce_again" {
  config {
    benchmark = gpufleet_benchmark.allreduce
  }
}

# A smoke test of every new pool: the pool's create runs it, and a pool whose GPUs cannot
# pass it fails the apply. Its record is kept in the ConfigMap gfb-train-smoke-run-<time>.
resource "gpufleet_gpu_node_pool" "train" {
  name               = "train"
  virtual_cluster_id = gpufleet_virtual_cluster.team_a.id
  isolation          = gpufleet_virtual_cluster.team_a.isolation
  gpu_product        = "NVIDIA-H100-80GB-HBM3"
  node_count         = 2

  lifecycle {
    action_trigger {
      events  = [after_create]
      actions = [action.gpufleet_benchmark_run.smoke]
    }
  }
}

action "gpufleet_benchmark_run" "smoke" {
  config {
    benchmark = {
      name               = "train-smoke"
      virtual_cluster_id = gpufleet_virtual_cluster.team_a.id
      node_pool_id       = gpufleet_gpu_node_pool.train.id
      suite              = "gpu-burn"
      image              = "registry.example.com/bench/gpu-burn:1.1"
      gpus_per_node      = 8
      parameters         = { seconds = "60" }
      thresholds         = { gflops_min = { min = 40000 } }
    }
    timeout = "10m"
  }
}
