# A segment is imported by its name (the name of its V-Net). Its IPAM allocation and subnet
# are managed too when they carry the segment's names (gf-<name>).
terraform import gpufleet_network_segment.tenant_a tenant-a-net
