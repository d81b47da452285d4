terraform {
  required_providers {
    gpufleet = { source = "gpufleet/gpufleet" }
  }
}

# One product, by the name GPU feature discovery puts in the nvidia.com/gpu.product label
# (case, the "NVIDIA-" prefix and a "-SHARED" suffix are ignored).
data "gpufleet_gpu_catalog" "h100" {
  product = "NVIDIA-H100-80GB-HBM3"
}

# Every product that supports MIG.
data "gpufleet_gpu_catalog" "mig" {
  mig_capable = true
}

output "h100_memory_gb" {
  value = data.gpufleet_gpu_catalog.h100.gpu.memory_gb # 80
}

output "h100_mig_profiles" {
  # ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]
  value = [for p in data.gpufleet_gpu_catalog.h100.gpu.mig_profiles : p.name]
}

output "mig_capable_products" {
  value = data.gpufleet_gpu_catalog.mig.products
}
