# Bringing a tenant that was built by hand (or by another tool) under Terraform without
# touching it: its virtual cluster, its GPU pool and its network segment are imported with
# `import` blocks, so `terraform plan` shows what will be adopted, and `terraform apply`
# records them in state. The resource blocks describe the objects as they are; a plan after
# the import is empty when they do.
#
# Against the lab, from the repository root, once scripts/demo (or the getting-started
# guide, docs/guides/getting-started.md) has built the provider and written .demo/terraformrc:
#
#   eval "$(target/debug/gpufleet-lab --dir .lab up)"
#   export TF_CLI_CONFIG_FILE="$PWD/.demo/terraformrc"
#
# A fresh lab has no such tenant, so build one first: apply the resource blocks alone (this
# file without its import blocks) in a scratch directory, then drop that directory and its
# state, as if the objects had been made by hand:
#
#   mkdir -p .demo/by-hand && sed '/^import /,/^}/d' examples/import/main.tf > .demo/by-hand/main.tf
#   (cd .demo/by-hand && ../../scripts/terraform apply) && rm -r .demo/by-hand
#
# Then adopt it:
#
#   mkdir -p .demo/import && cp examples/import/*.tf .demo/import/ && cd .demo/import
#   ../../scripts/terraform init && ../../scripts/terraform plan   # "3 to import, 0 to add, 0 to change, 0 to destroy"
#   ../../scripts/terraform apply
#
# Ids: a virtual cluster is `<host namespace>/<name>`, a pool
# `<host namespace>/<virtual cluster>/<pool>`, a segment its name.
terraform {
  required_version = ">= 1.6.0"

  required_providers {
    gpufleet = {
      source = "gpufleet/gpufleet"
    }
  }
}

provider "gpufleet" {}

import {
  to = gpufleet_virtual_cluster.legacy
  id = "vc-legacy/legacy"
}

import {
  to = gpufleet_gpu_node_pool.legacy
  id = "vc-legacy/legacy/l40s"
}

import {
  to = gpufleet_network_segment.legacy
  id = "legacy-net"
}

resource "gpufleet_virtual_cluster" "legacy" {
  name      = "legacy"
  isolation = "dedicated"
}

resource "gpufleet_gpu_node_pool" "legacy" {
  name               = "l40s"
  virtual_cluster_id = gpufleet_virtual_cluster.legacy.id
  isolation          = gpufleet_virtual_cluster.legacy.isolation
  gpu_product        = "NVIDIA-L40S"
  node_count         = 1
}

resource "gpufleet_network_segment" "legacy" {
  name   = "legacy-net"
  tenant = "tenant-a"
  vpc    = "Default"
  site   = "site-b"
  cidr   = "10.70.0.0/24"
}
