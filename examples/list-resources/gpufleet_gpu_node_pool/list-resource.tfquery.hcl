# Every GPU node pool of one tenant, with the whole resource, so that
# `terraform query -generate-config-out=generated.tf` can write their configuration.
list "gpufleet_gpu_node_pool" "team_a" {
  provider         = gpufleet
  include_resource = true

  config {
    virtual_cluster_id = "vc-team-a/team-a"
  }
}
