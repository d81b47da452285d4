terraform {
  # No provider functions: Terraform 1.6, the oldest the provider supports, is enough.
  required_version = ">= 1.6.0"
}
