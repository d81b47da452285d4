# Move a tenant's pods off two nodes of its pool before maintenance:
#   terraform apply -invoke=action.gpufleet_gpu_node_pool_drain.before_maintenance
action "gpufleet_gpu_node_pool_drain" "before_maintenance" {
  config {
    node_pool_id = gpufleet_gpu_node_pool.train.id
    nodes        = ["gpu-rack-a1-03", "gpu-rack-a1-04"]
    timeout      = "15m"
  }
}

# And give them back to the scheduler afterwards:
#   terraform apply -invoke=action.gpufleet_gpu_node_pool_drain.after_maintenance
action "gpufleet_gpu_node_pool_drain" "after_maintenance" {
  config {
    node_pool_id = gpufleet_gpu_node_pool.train.id
    nodes        = ["gpu-rack-a1-03", "gpu-rack-a1-04"]
    operation    = "uncordon"
  }
}
