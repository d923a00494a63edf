# The module on its own, as a team would call it from their own root (README.md here says
# how to apply it). Build the zips first: python -m idemlab.build (from the repository root).
terraform {
  required_version = ">= 1.9.0" # the module's minimum
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.100"
    }
  }
}

provider "aws" {
  region = "eu-west-1"
}

module "idempotency_lab" {
  source = "../.."

  prefix                       = "demo"
  artifacts_dir                = "${path.root}/../../../../../build"
  deletion_delay_seconds       = 60
  async_maximum_retry_attempts = 1
  tags = {
    team = "payments"
  }
}
