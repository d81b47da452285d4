# Ephemeral resources need Terraform 1.10 or later.
terraform {
  required_providers {
    gpufleet   = { source = "gpufleet/gpufleet" }
    kubernetes = { source = "hashicorp/kubernetes" }
  }
}

resource "gpufleet_virtual_cluster" "team_a" {
  name      = "team-a"
  isolation = "shared"
}

# A connection for this run only: nothing of it reaches the plan or the state, and it works
# from wherever the host cluster's API server is reachable, whatever the tenant's expose.
ephemeral "gpufleet_virtual_cluster_connection" "team_a" {
  virtual_cluster_id = gpufleet_virtual_cluster.team_a.id
  credentials_ttl    = "30m"
}

# Objects inside the tenant, through the connection.
provider "kubernetes" {
  host                   = ephemeral.gpufleet_virtual_cluster_connection.team_a.host
  tls_server_name        = ephemeral.gpufleet_virtual_cluster_connection.team_a.tls_server_name
  cluster_ca_certificate = ephemeral.gpufleet_virtual_cluster_connection.team_a.cluster_ca_certificate
  token                  = ephemeral.gpufleet_virtual_cluster_connection.team_a.token
}

resource "kubernetes_namespace_v1" "training" {
  metadata {
    name = "training"
  }
}

# Or any client that reads a kubeconfig, from a provisioner.
resource "terraform_data" "smoke_test" {
  triggers_replace = [gpufleet_virtual_cluster.team_a.id]

  provisioner "local-exec" {
    command     = "kubectl --kubeconfig <(printf '%s' \"$KUBECONFIG_DATA\") get namespaces"
    interpreter = ["/bin/bash", "-c"]
    environment = {
      KUBECONFIG_DATA = ephemeral.gpufleet_virtual_cluster_connection.team_a.kubeconfig
    }
  }
}
