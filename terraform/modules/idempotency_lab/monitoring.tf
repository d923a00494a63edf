locals {
  stuck_metric_name = "StuckDeletionRequests"
}

resource "aws_cloudwatch_metric_alarm" "dlq_not_empty" {
  for_each = { for key, q in local.queue_specs : key => q if q.is_dlq }

  alarm_name          = "${local.name[each.key]}-not-empty"
  alarm_description   = "A message reached ${local.name[each.key]}: something failed for good and waits for a redrive."
  namespace           = "AWS/SQS"
  metric_name         = "ApproximateNumberOfMessagesVisible"
  dimensions          = { QueueName = local.queue_name[each.key] }
  statistic           = "Maximum"
  period              = 60
  evaluation_periods  = 1
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_actions
  tags                = merge(local.tags, { Name = "${local.name[each.key]}-not-empty" })
}

resource "aws_cloudwatch_metric_alarm" "stuck_processing" {
  alarm_name          = "${var.prefix}-deletions-stuck-processing"
  alarm_description   = "The sweeper found deletion requests nobody works on: PROCESSING past their lease, SCHEDULED past due, or restarted without a claim."
  namespace           = var.stuck_metric_namespace
  metric_name         = local.stuck_metric_name
  dimensions          = { Prefix = var.prefix }
  statistic           = "Maximum"
  period              = 300
  evaluation_periods  = 1
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_actions
  tags                = merge(local.tags, { Name = "${var.prefix}-deletions-stuck-processing" })
}
