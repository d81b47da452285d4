# Reinstall a spare node whose disks drifted from its image:
#   terraform apply -invoke=action.gpufleet_bcm_node_reprovision.spare
action "gpufleet_bcm_node_reprovision" "spare" {
  config {
    hostname = "gpu-b3-07"
  }
}
