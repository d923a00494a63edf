variable "prefix" {
  description = "Prefix of every resource name, so several copies of the lab can live in one account."
  type        = string
  default     = "lab"

  validation {
    # Bucket names are the strictest consumer: lower case, digits and hyphens. This regex is
    # the rule's only copy: the harness (idemlab/settings.py) reads it from here.
    condition     = can(regex("^[a-z]([a-z0-9-]{0,18}[a-z0-9])?$", var.prefix))
    error_message = "prefix must be 1-20 characters of a-z, 0-9 and '-', start with a letter and not end with '-'."
  }
}

variable "tags" {
  description = "Tags merged into every resource of the module: with its own two and the provider's default_tags, at most 10 (S3's limit for an object)."
  type        = map(string)
  default     = {}
  nullable    = false

  validation {
    # The function zips are S3 objects, which take at most 10 tags (main.tf, local.s3_object_tag_limit):
    # the module's own and each object's Name count too. The provider's default_tags are
    # counted on the objects themselves (storage.tf), where they are known.
    condition = length(merge(var.tags, local.module_tags, { Name = "" })) <= local.s3_object_tag_limit
    error_message = format(
      "tags: at most %d entries besides the module's own (%s), since S3 allows %d tags on an object and the module tags its function zips; %d given.",
      local.s3_object_tag_limit - length(merge(local.module_tags, { Name = "" })),
      join(", ", keys(merge(local.module_tags, { Name = "" }))),
      local.s3_object_tag_limit,
      length(var.tags),
    )
  }
}

variable "artifacts_dir" {
  description = "Directory holding the function zips built by `python -m idemlab.build`, one `<lesson>.zip` per folder under functions/."
  type        = string

  validation {
    condition     = length(trimspace(var.artifacts_dir)) > 0
    error_message = "artifacts_dir must name the directory that holds the <lesson>.zip files."
  }
}

variable "lambda_runtime" {
  description = "Python runtime of every function."
  type        = string
  default     = "python3.12"

  validation {
    condition     = contains(["python3.11", "python3.12", "python3.13"], var.lambda_runtime)
    error_message = "lambda_runtime must be python3.11, python3.12 or python3.13."
  }
}

variable "lambda_memory_mb" {
  description = "Memory of every function, in MB."
  type        = number
  default     = 256

  validation {
    condition     = var.lambda_memory_mb >= 128 && var.lambda_memory_mb <= 10240
    error_message = "lambda_memory_mb must be between 128 and 10240."
  }
}

variable "async_maximum_retry_attempts" {
  description = "Retries Lambda makes for a failed asynchronous invocation before it goes to the on-failure destination."
  type        = number
  default     = 2

  validation {
    condition     = var.async_maximum_retry_attempts >= 0 && var.async_maximum_retry_attempts <= 2
    error_message = "async_maximum_retry_attempts must be 0, 1 or 2 (the Lambda limits)."
  }
}

variable "async_maximum_event_age_seconds" {
  description = "How long Lambda keeps retrying an asynchronous event before it goes to the on-failure destination."
  type        = number
  default     = 3600

  validation {
    condition     = var.async_maximum_event_age_seconds >= 60 && var.async_maximum_event_age_seconds <= 21600
    error_message = "async_maximum_event_age_seconds must be between 60 and 21600 (the Lambda limits)."
  }
}

variable "log_retention_days" {
  description = "Retention of the function and workflow log groups."
  type        = number
  default     = 14

  validation {
    condition     = contains([1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.log_retention_days)
    error_message = "log_retention_days must be one of the values CloudWatch Logs accepts (1, 3, 5, 7, 14, 30, 60, 90, ...)."
  }
}

variable "deletion_delay_seconds" {
  description = "Delay between an account deletion request and the deletion; 30 days in production, seconds in the workshop."
  type        = number
  default     = 2592000

  validation {
    condition     = var.deletion_delay_seconds >= 0 && floor(var.deletion_delay_seconds) == var.deletion_delay_seconds
    error_message = "deletion_delay_seconds must be a whole number of seconds, 0 or more."
  }
}

variable "deletion_lease_seconds" {
  description = "How long a claim on a deletion request lasts before the sweeper may hand it to another worker."
  type        = number
  default     = 300

  validation {
    condition     = var.deletion_lease_seconds >= 1 && var.deletion_lease_seconds <= 86400
    error_message = "deletion_lease_seconds must be between 1 and 86400."
  }
}

variable "deletion_max_attempts" {
  description = "Claims of one deletion request before it is marked FAILED and sent to the dead-letter queue."
  type        = number
  default     = 3

  validation {
    condition     = var.deletion_max_attempts >= 1 && var.deletion_max_attempts <= 20
    error_message = "deletion_max_attempts must be between 1 and 20."
  }
}

variable "sweeper_schedule_expression" {
  description = "EventBridge schedule of the sweeper that restarts deletions whose lease expired."
  type        = string
  default     = "rate(5 minutes)"

  validation {
    condition     = can(regex("^(rate|cron)\\(.+\\)$", var.sweeper_schedule_expression))
    error_message = "sweeper_schedule_expression must be a rate(...) or cron(...) expression."
  }
}

variable "stuck_metric_namespace" {
  description = "CloudWatch namespace of the metric the sweeper publishes (requests stuck in PROCESSING past their lease)."
  type        = string
  default     = "IdempotencyLab"

  validation {
    condition     = can(regex("^[A-Za-z0-9._/#:-]{1,255}$", var.stuck_metric_namespace)) && !startswith(var.stuck_metric_namespace, "AWS/")
    error_message = "stuck_metric_namespace must be a custom CloudWatch namespace (not AWS/...)."
  }
}

# The alarms: one per dead-letter queue, stuck deletions, a stopped sweeper. Without actions
# they change state in the console and notify no one.
variable "alarm_actions" {
  description = "ARNs notified when any of the module's alarms fires, for example one SNS topic's ARN; empty (the default) keeps the alarms silent."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for arn in var.alarm_actions : startswith(arn, "arn:")])
    error_message = "alarm_actions must be ARNs."
  }
}

variable "enable_bucket_force_destroy" {
  description = "Let `terraform destroy` delete the buckets (user files, function zips) even when they still hold objects."
  type        = bool
  default     = true
}

# 0 turns PITR off on the personal-data tables, so an erased user cannot come back from a
# restore; 1-35 keeps that many days of restorable history, which the deletion promise must
# then include.
variable "personal_data_recovery_days" {
  description = "Point-in-time recovery period, in days, of the tables holding personal data (user_records, identities): 0 (off) or 1-35."
  type        = number
  default     = 0

  validation {
    condition = var.personal_data_recovery_days == 0 || (
      var.personal_data_recovery_days >= 1 && var.personal_data_recovery_days <= 35 &&
      floor(var.personal_data_recovery_days) == var.personal_data_recovery_days
    )
    error_message = "personal_data_recovery_days must be 0 (PITR off) or a whole number of days from 1 to 35 (DynamoDB's range)."
  }
}
