output "virtual_cluster_id" {
  description = "The ephemeral virtual cluster's id (`<namespace>/<name>`)."
  value       = gpufleet_virtual_cluster.this.id
}

output "status" {
  description = "`passed`, or `failed` when the tool reported a failure or a metric broke its threshold."
  value       = gpufleet_benchmark.this.status
}

output "results" {
  description = "Metric name → value, as the tool printed it: each metric's median over the repeats, and its worst node when several ran the tool."
  value       = gpufleet_benchmark.this.results
}

output "spread" {
  description = "Metric name → its largest minus its smallest value over the repeats."
  value       = gpufleet_benchmark.this.spread
}

output "node_results" {
  description = "Node → metric name → value, when each node ran the tool on its own; `results` holds each metric's worst node."
  value       = gpufleet_benchmark.this.node_results
}

output "failures" {
  description = "Why the run failed, one entry per reason; empty when it passed."
  value       = gpufleet_benchmark.this.failures
}

output "environment" {
  description = "What the run ran on: versions, nodes, GPU product, driver and CUDA, image digest, sharing mode, times."
  value       = gpufleet_benchmark.this.environment
}

output "environment_hash" {
  description = "Equal hashes mean the same experiment on the same software and hardware: compare results only between runs whose hashes match."
  value       = gpufleet_benchmark.this.environment_hash
}

output "nodes" {
  description = "The host nodes the environment held."
  value       = gpufleet_gpu_node_pool.this.nodes
}
