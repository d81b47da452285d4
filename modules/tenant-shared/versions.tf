terraform {
  required_version = ">= 1.6.0"

  required_providers {
    gpufleet = {
      source  = "gpufleet/gpufleet"
      version = ">= 0.1.0, < 0.2.0"
    }
  }
}
