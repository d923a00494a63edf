terraform {
  # Validation rules that refer to other variables (the lesson maps check each other's
  # keys) need 1.9; `terraform test` with mock providers (tests/) needs 1.7.
  required_version = ">= 1.9.0"

  required_providers {
    aws = {
      source = "hashicorp/aws"
      # From the oldest release this module is tested with, up to the next major. 6.0 is
      # untested (no 6.x provider has been applied here), and it deprecates
      # data.aws_region.name, which main.tf reads, in favour of an attribute 5.x lacks: no
      # single source runs clean on both. Lift the bound once 6.x has been tested.
      version = ">= 5.100.0, < 6.0.0"
    }
  }
}
