# Lesson 06 (queues) alone: order fulfilment.
terraform {
  required_version = ">= 1.9.0" # the module's minimum
  required_providers {
    aws = {
      source = "hashicorp/aws"
      # A root pins its provider; the module itself asks only for a minimum.
      version = "~> 5.100"
    }
  }
}

provider "aws" {
  region = var.region
}

module "idempotency_lab" {
  source = "../.."

  prefix        = var.prefix
  artifacts_dir = var.artifacts_dir
  lessons       = ["queues"]
}
