# Reach a tenant's API server from where Terraform runs, for the length of one run.
#
# A virtual cluster with the default `expose` (a ClusterIP Service) has only a cluster-internal
# address. The connection opens a local port in the provider that forwards through the host
# API server to the tenant's control plane (as `kubectl port-forward` does), with a token that
# expires after the run. Nothing of it is written to the state or the plan.
#
# After the quickstart, against the lab, from the repository root, once scripts/demo (or the
# getting-started guide, docs/guides/getting-started.md) has built the provider and written
# .demo/terraformrc; the lab's own kubectl lists prod's nodes:
#
#   eval "$(target/debug/gpufleet-lab --dir .lab up)"
#   export TF_CLI_CONFIG_FILE="$PWD/.demo/terraformrc"
#   mkdir -p .demo/connect && cp examples/connect/*.tf .demo/connect/ && cd .demo/connect
#   ../../scripts/terraform init && ../../scripts/terraform apply \
#     -var virtual_cluster_id=vc-prod/prod -var kubectl="$PWD/../../.lab/bin/kubectl"
terraform {
  # Ephemeral resources need Terraform 1.10.
  required_version = ">= 1.10.0"

  required_providers {
    gpufleet = { source = "gpufleet/gpufleet" }
  }
}

provider "gpufleet" {}

variable "virtual_cluster_id" {
  description = "The `id` of the virtual cluster to reach, `<namespace>/<name>`."
  type        = string
}

variable "kubectl" {
  description = "Path of the kubectl that lists the tenant's nodes through the connection."
  type        = string
  default     = "kubectl"
}

ephemeral "gpufleet_virtual_cluster_connection" "tenant" {
  virtual_cluster_id = var.virtual_cluster_id
}

# What the tenant's users see: its own nodes only. A `kubernetes` or `helm` provider block
# takes the same values (host, cluster_ca_certificate, token).
resource "terraform_data" "tenant_nodes" {
  triggers_replace = [var.virtual_cluster_id]

  provisioner "local-exec" {
    interpreter = ["bash", "-c"]
    # The kubeconfig is read from a pipe, so the token never lands on disk. Terraform hides
    # the output of a provisioner that ephemeral values feed, so the list goes to a file.
    command = "\"$KUBECTL\" --kubeconfig <(printf '%s' \"$TENANT_KUBECONFIG\") get nodes > tenant-nodes.txt"
    environment = {
      KUBECTL           = var.kubectl
      TENANT_KUBECONFIG = ephemeral.gpufleet_virtual_cluster_connection.tenant.kubeconfig
    }
  }
}
