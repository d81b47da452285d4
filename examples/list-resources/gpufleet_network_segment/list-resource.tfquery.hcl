# Every V-Net tenant acme owns in VPC "default", with the whole segment, so that
# `terraform query -generate-config-out=generated.tf` can write its configuration.
list "gpufleet_network_segment" "acme" {
  provider         = gpufleet
  include_resource = true

  config {
    tenant = "acme"
    vpc    = "Default"
  }
}
