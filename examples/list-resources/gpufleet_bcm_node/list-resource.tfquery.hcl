# The nodes tenant acme holds in rack r01 that are up.
list "gpufleet_bcm_node" "acme" {
  provider         = gpufleet
  include_resource = true

  config {
    tenant = "acme"
    rack   = "r01"
    status = "UP"
  }
}
