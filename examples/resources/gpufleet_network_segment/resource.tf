terraform {
  required_providers {
    gpufleet = { source = "gpufleet/gpufleet" }
  }
}

# A tenant network: VLAN/VXLAN segment with gateway, DHCP and switch ports on the Netris
# controller configured in the provider's netris block.
resource "gpufleet_network_segment" "tenant_a" {
  name   = "tenant-a-net"
  tenant = "tenant-a"
  vpc    = "vpc-tenant-a"
  site   = "dc1"
  cidr   = "10.20.0.0/24"
  # gateway defaults to the first host address, 10.20.0.1.

  dhcp = {
    start = "10.20.0.100"
    end   = "10.20.0.200"
  }

  members = [
    # Every switch port the server is cabled to, untagged.
    { hostname = "gpu-node-001", untagged = true },
    { hostname = "gpu-node-002", untagged = true },
    # One switch port, tagged (the default).
    { port = "swp32@leaf-01" },
  ]

  timeouts {
    create = "15m"
  }
}

output "tenant_a_vlan" {
  # Allocated by the controller, then stable for the life of the segment.
  value = gpufleet_network_segment.tenant_a.vlan_id
}
