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
  count = local.sweeping ? 1 : 0

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

# The stuck-requests alarm treats missing data as not breaching, so a sweeper that stopped
# sweeping would leave it quiet for ever. This one watches the sweeper's own errors, which
# Lambda publishes per invocation (AWS/Lambda Errors by FunctionName, Sum; Lambda developer
# guide, monitoring-metrics-types): a sweep that fails every run for three periods (its code
# raising, its PutMetricData or table permission gone, a timeout) is a sweeper that stopped.
# Missing data is not breaching: a new stack, or a sweeper that ran cleanly, publishes no
# Errors at all, and must stay OK rather than page once per deploy (CloudWatch user guide,
# "Configuring how CloudWatch alarms treat missing data"). An EventBridge invoke that fails
# ends in sweeper_rule_dlq and its alarm; a rule disabled on purpose raises nothing.
resource "aws_cloudwatch_metric_alarm" "sweeper_stopped" {
  count = local.sweeping ? 1 : 0

  alarm_name = "${var.prefix}-deletions-sweeper-stopped"
  alarm_description = join(" ", [
    "The deletion sweeper failed in each of the last three 5-minute periods: it stopped sweeping.",
    "Stuck deletions would go unnoticed.",
  ])

  namespace           = "AWS/Lambda"
  metric_name         = "Errors"
  dimensions          = { FunctionName = aws_lambda_function.this["sweeper"].function_name }
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 3
  datapoints_to_alarm = 3
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_actions
  tags                = merge(local.tags, { Name = "${var.prefix}-deletions-sweeper-stopped" })
}
