variable "region" {
  description = "AWS region of the lab."
  type        = string
  default     = "us-east-1"

  validation {
    condition     = can(regex("^[a-z]{2}(-[a-z]+)+-[0-9]$", var.region))
    error_message = "region must look like us-east-1."
  }
}

# One stack (and one Terraform state) per prefix; `make deploy PARTICIPANT=<name>` sets it.
variable "prefix" {
  description = "The participant: prefix of every resource name, tag idemlab:participant on every resource, metric namespace IdempotencyLab/<prefix>."
  type        = string
  default     = "lab"
}

variable "artifacts_dir" {
  description = "Directory of the function zips built by `python -m idemlab.build` (relative to this directory or absolute)."
  type        = string
  default     = "../build"
}

variable "deletion_delay_seconds" {
  description = "Delay before an account deletion runs; the workshop uses seconds, production 30 days."
  type        = number
  default     = 30
}

# The test suite passes the default set with shorter timeouts (TF_VAR_functions,
# tests/support/suite_timeouts.py) so that its crash tests wait less.
variable "functions" {
  description = "The module's `functions` map, whole, to replace its default set (null, the default: the module's own, as the lessons describe them)."
  type        = any
  default     = null
}

# The test suite passes the default set with the lesson 6 queues' visibility timeouts kept at
# six times its longer function timeouts (TF_VAR_queues, tests/support/suite_timeouts.py).
variable "queues" {
  description = "The module's `queues` map, whole, to replace its default set (null, the default: the module's own, as the lessons describe them)."
  type        = any
  default     = null
}

# `make deploy LESSONS=vehicles,checkout` sets it (idemlab/stack.py); the module checks the slugs.
variable "lessons" {
  description = "The lessons to provision, by slug (the module's `lessons`); null, the default: every lesson."
  type        = list(string)
  default     = null
}

variable "tags" {
  description = "Extra tags for every resource."
  type        = map(string)
  default     = {}
}

variable "alarm_actions" {
  description = "ARNs notified when any alarm of the lab fires (for example one SNS topic's ARN); empty, the default, keeps the alarms silent."
  type        = list(string)
  default     = []
}
