# The gold-tier virtual clusters gpufleet made on the host cluster, with the whole resource,
# so that `terraform query -generate-config-out=generated.tf` can write their configuration.
list "gpufleet_virtual_cluster" "gold" {
  provider         = gpufleet
  include_resource = true

  config {
    labels = {
      "example.com/tier" = "gold"
    }
  }
}
