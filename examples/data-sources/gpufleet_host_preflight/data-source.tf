# What the host cluster lacks, shown as warnings in every plan. A workspace of MIG pools can
# refuse to plan at all while the GPU Operator's MIG manager is missing:
data "gpufleet_host_preflight" "host" {
  lifecycle {
    postcondition {
      condition     = !contains(self.missing, "mig_manager")
      error_message = "MIG pools need the GPU Operator's MIG manager: ${join("; ", [for c in self.checks : c.detail if c.name == "mig_manager"])}"
    }
  }
}

output "host_checks" {
  value = { for c in data.gpufleet_host_preflight.host.checks : c.name => "${c.status}: ${c.detail}" }
}
