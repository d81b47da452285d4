# A node is imported by its hostname. It must be held by a tenant (extra_values.gpufleet_tenant
# on the device); the tenant is read from the node.
terraform import gpufleet_bcm_node.trainer gpu-b3-001
