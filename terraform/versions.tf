terraform {
  required_version = ">= 1.9.0" # the module's minimum

  required_providers {
    aws = {
      source = "hashicorp/aws"
      # The 5.x line only: an open ">= 5.100" resolves to 6.x wherever the registry is
      # reachable, and the lab has only ever been applied with 5.100.
      version = "~> 5.100"
    }
  }
}
