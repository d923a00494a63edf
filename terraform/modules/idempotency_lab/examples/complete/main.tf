# Every lesson, with the inputs a team most often sets.
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

  # Every lesson (the default of `lessons`), with the settings a team changes most.
  deletion_delay_seconds       = 60
  async_maximum_retry_attempts = 1
  alarm_actions                = var.alarm_actions
  role_path                    = "/idempotency-lab/"
  tags = {
    team = "payments"
  }
}
