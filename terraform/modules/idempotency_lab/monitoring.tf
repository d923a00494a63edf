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

# The stuck-requests alarm treats missing data as not breaching, so a sweeper that stopped
# (its rule disabled, its function failing before it publishes, its permission gone) would
# leave it quiet for ever. This one watches the same metric for its absence: the sweeper
# publishes a value on every run, zero included, so no value for three sweeper periods means
# no sweep ran to the end. treat_missing_data = "breaching" turns that silence into an alarm
# (CloudWatch user guide, "Configuring how CloudWatch alarms treat missing data").
resource "aws_cloudwatch_metric_alarm" "sweeper_stopped" {
  alarm_name = "${var.prefix}-deletions-sweeper-stopped"
  alarm_description = join(" ", [
    "The deletion sweeper published no StuckDeletionRequests value for 15 minutes: it stopped running, or fails before it publishes.",
    "Stuck deletions would go unnoticed.",
  ])

  namespace           = var.stuck_metric_namespace
  metric_name         = local.stuck_metric_name
  dimensions          = { Prefix = var.prefix }
  statistic           = "SampleCount"
  period              = 300
  evaluation_periods  = 3
  comparison_operator = "LessThanThreshold"
  threshold           = 1
  treat_missing_data  = "breaching"
  alarm_actions       = var.alarm_actions
  tags                = merge(local.tags, { Name = "${var.prefix}-deletions-sweeper-stopped" })
}
