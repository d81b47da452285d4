terraform {
  required_providers {
    gpufleet = { source = "gpufleet/gpufleet" }
  }
}

# The tenant the pools below belong to.
resource "gpufleet_virtual_cluster" "team_a" {
  name      = "team-a"
  isolation = "dedicated"
}

# Two H100 nodes for a dedicated tenant, packed into one rack (NVLink and rack locality for
# training): the nodes get gpufleet.dev/tenant=team-a and the matching NoSchedule taint.
# `isolation` lets a plan that changes the tenant's tier check the pool against the new tier.
resource "gpufleet_gpu_node_pool" "train" {
  name               = "train"
  virtual_cluster_id = gpufleet_virtual_cluster.team_a.id
  isolation          = gpufleet_virtual_cluster.team_a.isolation
  gpu_product        = "NVIDIA-H100-80GB-HBM3"
  node_count         = 2

  placement = {
    topology_key = "network.topology.nvidia.com/block"
    policy       = "pack"
  }

  node_labels = {
    "example.com/cost-center" = "ml-research"
  }
  drain_timeout = "10m"
}

# One L40S node shared by time-slicing: 4 GPUs x 4 replicas = 16 nvidia.com/gpu.
resource "gpufleet_gpu_node_pool" "infer" {
  name               = "infer"
  virtual_cluster_id = gpufleet_virtual_cluster.team_a.id
  gpu_product        = "NVIDIA-L40S"
  node_count         = 1

  sharing = {
    strategy = "time-slicing"
    replicas = 4
  }
}

# A100s split into seven 1g.10gb MIG instances each.
resource "gpufleet_gpu_node_pool" "notebooks" {
  name               = "notebooks"
  virtual_cluster_id = gpufleet_virtual_cluster.team_a.id
  gpu_product        = "NVIDIA-A100-SXM4-80GB"
  node_count         = 1

  sharing = {
    strategy   = "mig"
    mig_config = "all-1g.10gb"
  }
}

# Up to four 8-GPU H200 instances from Karpenter on EC2: the NodePool requires
# karpenter.k8s.aws/instance-gpu-name = h200 and instance-gpu-count = 8, on-demand only.
resource "gpufleet_gpu_node_pool" "burst" {
  name               = "burst"
  virtual_cluster_id = gpufleet_virtual_cluster.team_a.id
  gpu_product        = "NVIDIA-H200"
  source             = "auto"
  autoscaling        = { min_nodes = 0, max_nodes = 4 }

  karpenter = {
    provider = "aws"
    requirements = [
      { key = "karpenter.sh/capacity-type", operator = "In", values = ["on-demand"] },
    ]
  }
}

output "train_allocatable" {
  value = gpufleet_gpu_node_pool.train.allocatable
}
