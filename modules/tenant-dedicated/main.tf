# A production inference tenant: a virtual cluster on the dedicated tier whose pods run only
# on its own host nodes (labelled and tainted for it), whole GPUs, restricted pod security,
# and a network segment of its own that carries exactly those nodes.

module "platform" {
  source = "../platform"
}

resource "gpufleet_virtual_cluster" "this" {
  name               = var.name
  isolation          = "dedicated"
  kubernetes_version = module.platform.kubernetes_version
  pod_security       = "restricted"
  network_isolation  = true
  labels             = var.labels

  quota = var.quota

  # With CPU and memory in the quota, the host refuses a pod that requests neither; default
  # requests let such pods run (their limits stay the workload's own).
  limit_range = {
    default_request_cpu    = "100m"
    default_request_memory = "256Mi"
  }

  # Users reach the tenant through gpufleet_virtual_cluster_connection unless asked otherwise.
  admin_credentials_in_state = var.admin_credentials_in_state

  lifecycle {
    postcondition {
      condition     = self.vcluster_version == module.platform.vcluster_version
      error_message = "The gpufleet provider renders vCluster ${self.vcluster_version}, but the platform pins ${module.platform.vcluster_version}: bump modules/platform together with the provider."
    }
  }
}

resource "gpufleet_gpu_node_pool" "dedicated" {
  name               = "dedicated"
  virtual_cluster_id = gpufleet_virtual_cluster.this.id
  isolation          = gpufleet_virtual_cluster.this.isolation
  gpu_product        = var.gpu_product
  node_count         = var.node_count
  source             = "host"
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

  members = [for node in gpufleet_gpu_node_pool.dedicated.nodes : { hostname = node, untagged = true }]
}
