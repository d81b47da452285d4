# A regulated tenant: a private-tier virtual cluster with the strictest pod security, whole
# bare-metal servers held through BCM by this tenant alone and wiped (block devices cleared,
# FULL reinstall) before they return to the free pool, and a network segment of its own.

module "platform" {
  source = "../platform"
}

resource "gpufleet_virtual_cluster" "this" {
  name               = var.name
  isolation          = "private"
  kubernetes_version = module.platform.kubernetes_version
  pod_security       = "restricted"
  network_isolation  = true
  labels             = var.labels

  lifecycle {
    postcondition {
      condition     = self.vcluster_version == module.platform.vcluster_version
      error_message = "The gpufleet provider renders vCluster ${self.vcluster_version}, but the platform pins ${module.platform.vcluster_version}: bump modules/platform together with the provider."
    }
  }
}

resource "gpufleet_bcm_node" "server" {
  for_each = var.hostnames

  hostname        = each.key
  tenant          = var.name
  category        = var.category
  software_image  = var.software_image
  install_mode    = "FULL"
  power           = "on"
  wipe_on_destroy = true
}

resource "gpufleet_network_segment" "this" {
  name    = "${var.name}-net"
  tenant  = var.network.tenant
  vpc     = var.network.vpc
  site    = var.network.site
  cidr    = var.network.cidr
  vlan_id = var.network.vlan_id

  members = [for node in gpufleet_bcm_node.server : { hostname = node.hostname, untagged = true }]
}
