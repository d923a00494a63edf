terraform {
  # optional() object attributes and the data-driven maps need 1.5; `terraform test` with
  # mock providers (tests/) needs 1.7.
  required_version = ">= 1.5.0"

  required_providers {
    aws = {
      source = "hashicorp/aws"
      # The oldest release this module is tested with.
      version = ">= 5.100.0"
    }
  }
}
