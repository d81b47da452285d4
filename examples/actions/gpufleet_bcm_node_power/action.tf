# Reset a hung node that no tenant holds:
#   terraform apply -invoke=action.gpufleet_bcm_node_power.reset_spare
action "gpufleet_bcm_node_power" "reset_spare" {
  config {
    hostname  = "gpu-b3-07"
    operation = "reset"
  }
}

# A tenant's node is refused unless `force` says the operator means it.
action "gpufleet_bcm_node_power" "power_off_acme_node" {
  config {
    hostname  = "gpu-a1-03"
    operation = "off"
    force     = true
  }
}
