terraform {
  # Validation rules that refer to other variables (the lesson maps check each other's
  # keys) need 1.9; `terraform test` with mock providers (tests/) needs 1.7.
  required_version = ">= 1.9.0"

  required_providers {
    aws = {
      source = "hashicorp/aws"
      # A minimum only, as terraform-aws-modules set it: the caller's root pins the provider
      # (this lab's root: ~> 5.100, with its lock file). 5.100.0 is the release the module is
      # applied with here. On 6.x, data.aws_region.name (main.tf) plans with a deprecation
      # warning, not an error (the provider's 6.0 upgrade guide deprecates it for `region`,
      # an attribute 5.x lacks, so no one source runs warning-free on both).
      version = ">= 5.100.0"
    }
  }
}
