# A pool is imported by <host namespace>/<virtual cluster>/<pool name>.
terraform import gpufleet_gpu_node_pool.train vc-team-a/team-a/train
