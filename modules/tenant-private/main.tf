# A regulated tenant: a private-tier virtual cluster with the strictest pod security, whole
# bare-metal servers claimed through BCM for this tenant alone as its nodes, wiped (block
# devices cleared, FULL reinstall) before they return to the free pool, and a network
# segment of its own.

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

  # Users reach the tenant through gpufleet_virtual_cluster_connection unless asked otherwise.
  admin_credentials_in_state = var.admin_credentials_in_state

  lifecycle {
    postcondition {
      condition     = self.vcluster_version == module.platform.vcluster_version
      error_message = "The gpufleet provider renders vCluster ${self.vcluster_version}, but the platform pins ${module.platform.vcluster_version}: bump modules/platform together with the provider."
    }
  }
}

# Bare-metal servers of the product, claimed in BCM for this tenant alone, provisioned until
# UP and then taken as the virtual cluster's nodes; released servers are wiped (block devices
# cleared, FULL reinstall) before another tenant can claim them.
resource "gpufleet_gpu_node_pool" "private" {
  name               = "private"
  virtual_cluster_id = gpufleet_virtual_cluster.this.id
  isolation          = gpufleet_virtual_cluster.this.isolation
  gpu_product        = var.gpu_product
  node_count         = var.node_count
  source             = "bcm"
  node_labels        = var.labels

  placement = {
    policy = var.placement
  }
}

resource "gpufleet_network_segment" "this" {
  name    = "${var.name}-net"
  tenant  = var.network.tenant
  vpc     = var.network.vpc
  site    = var.network.site
  cidr    = var.network.cidr
  vlan_id = var.network.vlan_id

  members = [for node in gpufleet_gpu_node_pool.private.nodes : { hostname = node, untagged = true }]
}
