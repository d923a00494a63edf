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
      { stuck_processing = aws_cloudwatch_metric_alarm.stuck_processing.alarm_name, sweeper_stopped = aws_cloudwatch_metric_alarm.sweeper_stopped.alarm_name },
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
