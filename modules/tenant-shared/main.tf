# A development team's tenant: a virtual cluster on the shared tier, bounded by a tight quota
# and a LimitRange (so pods without requests still count), and optionally some time-sliced
# nodes it adds to the shared pool.

module "platform" {
  source = "../platform"
}

resource "gpufleet_virtual_cluster" "this" {
  name               = var.name
  isolation          = "shared"
  kubernetes_version = module.platform.kubernetes_version
  pod_security       = "baseline"
  network_isolation  = true
  labels             = var.labels

  quota = var.quota

  limit_range = {
    default_cpu            = "1"
    default_memory         = "2Gi"
    default_request_cpu    = "100m"
    default_request_memory = "256Mi"
  }

  # gpufleet does not render vCluster's sleep mode: the provider warns and renders none.
  sleep = var.sleep_after == null ? null : {
    after_inactivity = var.sleep_after
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

resource "gpufleet_gpu_node_pool" "shared" {
  count = var.gpu_product == null ? 0 : 1

  name               = "shared"
  virtual_cluster_id = gpufleet_virtual_cluster.this.id
  isolation          = gpufleet_virtual_cluster.this.isolation
  gpu_product        = var.gpu_product
  node_count         = var.node_count
  source             = "host"

  sharing = {
    strategy = "time-slicing"
    replicas = var.time_slicing_replicas
  }

  placement = {
    policy = "spread"
  }
}
