output "lab" {
  description = "Every name and ARN the harness, notebooks and tests need, keyed as in docs/DESIGN.md."
  value = {
    region             = local.region
    tables             = { for key, t in aws_dynamodb_table.this : key => t.name }
    functions          = { for key, f in aws_lambda_function.this : key => f.function_name }
    function_arns      = { for key, f in aws_lambda_function.this : key => f.arn }
    state_machines     = { for key, s in aws_sfn_state_machine.this : key => s.arn }
    queues             = local.queue_urls
    queue_arns         = local.queue_arns
    buckets            = { for key, b in aws_s3_bucket.this : key => b.bucket }
    schedule_group     = aws_scheduler_schedule_group.this.name
    scheduler_role_arn = aws_iam_role.scheduler.arn
    alarms = merge(
      { for key, a in aws_cloudwatch_metric_alarm.dlq_not_empty : key => a.alarm_name },
      { for a in aws_cloudwatch_metric_alarm.stuck_processing : "stuck_processing" => a.alarm_name },
      { for a in aws_cloudwatch_metric_alarm.sweeper_stopped : "sweeper_stopped" => a.alarm_name },
    )
  }
}

output "stuck_metric" {
  description = "The custom metric the sweeper publishes (also in its METRIC_NAMESPACE / STUCK_METRIC_NAME environment), with the dimension the alarm watches."
  value = {
    namespace  = var.stuck_metric_namespace
    name       = local.stuck_metric_name
    dimensions = { Prefix = var.prefix }
  }
}

# One output per kind of resource, each a map keyed as the lesson maps are (docs/DESIGN.md), for
# a caller that wires one resource into its own configuration. `lab` holds the same names
# in the one map the harness reads.
output "table_names" {
  description = "Name of each DynamoDB table, by its key in var.tables."
  value       = { for key, t in aws_dynamodb_table.this : key => t.name }
}

output "table_arns" {
  description = "ARN of each DynamoDB table, by its key in var.tables."
  value       = { for key, t in aws_dynamodb_table.this : key => t.arn }
}

output "function_names" {
  description = "Name of each Lambda function, by its key in var.functions."
  value       = { for key, f in aws_lambda_function.this : key => f.function_name }
}

output "function_arns" {
  description = "ARN of each Lambda function, by its key in var.functions."
  value       = { for key, f in aws_lambda_function.this : key => f.arn }
}

output "function_role_arns" {
  description = "ARN of each function's IAM role, by its key in var.functions."
  value       = { for key, r in aws_iam_role.function : key => r.arn }
}

output "workflow_role_arns" {
  description = "ARN of each state machine's IAM role, by its key in var.workflows."
  value       = { for key, r in aws_iam_role.workflow : key => r.arn }
}

output "scheduler_role_arn" {
  description = "ARN of the IAM role the deletion schedules run as."
  value       = aws_iam_role.scheduler.arn
}

output "queue_urls" {
  description = "URL of each SQS queue, by its key in var.queues."
  value       = local.queue_urls
}

output "queue_arns" {
  description = "ARN of each SQS queue, by its key in var.queues."
  value       = local.queue_arns
}

output "function_log_group_names" {
  description = "CloudWatch Logs group of each function, by its key in var.functions."
  value       = { for key, g in aws_cloudwatch_log_group.function : key => g.name }
}

output "workflow_log_group_names" {
  description = "CloudWatch Logs group of each state machine, by its key in var.workflows."
  value       = { for key, g in aws_cloudwatch_log_group.workflow : key => g.name }
}

output "state_machine_arns" {
  description = "ARN of each Step Functions state machine, by its key in var.workflows."
  value       = { for key, s in aws_sfn_state_machine.this : key => s.arn }
}

output "bucket_names" {
  description = "Name of each S3 bucket: user_files (the deletion lessons' user files), artifacts (the function zips)."
  value       = { for key, b in aws_s3_bucket.this : key => b.bucket }
}
