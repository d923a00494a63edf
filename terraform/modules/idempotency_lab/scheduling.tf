# Deletion schedules are one-time `at()` schedules that request_deletion creates at run time
# in this group; Terraform owns the group, the role they run as and their dead-letter queue.
resource "aws_scheduler_schedule_group" "this" {
  name = "${var.prefix}-deletions"
  tags = merge(local.tags, { Name = "${var.prefix}-deletions" })
}

locals {
  # The sweeper, its rule and its alarms exist with the deletion lesson's sweeper (var.lessons).
  sweeping = contains(keys(local.function_specs), "sweeper") && contains(keys(local.queue_specs), "sweeper_rule_dlq")
}

resource "aws_cloudwatch_event_rule" "sweeper" {
  count = local.sweeping ? 1 : 0

  name                = "${var.prefix}-sweeper"
  description         = "Finds deletion requests stuck in PROCESSING past their lease and restarts them."
  schedule_expression = var.sweeper_schedule_expression
  tags                = merge(local.tags, { Name = "${var.prefix}-sweeper" })
}

resource "aws_cloudwatch_event_target" "sweeper" {
  count = local.sweeping ? 1 : 0

  rule = aws_cloudwatch_event_rule.sweeper[0].name
  arn  = aws_lambda_function.this["sweeper"].arn

  retry_policy {
    # A missed sweep is made good by the next one; no point retrying for long.
    maximum_retry_attempts       = 2
    maximum_event_age_in_seconds = 300
  }

  dead_letter_config {
    arn = local.dead_letter_arns["sweeper_rule_dlq"]
  }
}

resource "aws_lambda_permission" "sweeper_rule" {
  count = local.sweeping ? 1 : 0

  statement_id  = "AllowSweeperRule"
  action        = "lambda:InvokeFunction"
  function_name = aws_lambda_function.this["sweeper"].function_name
  principal     = "events.amazonaws.com"
  source_arn    = aws_cloudwatch_event_rule.sweeper[0].arn
}

locals {
  # Queue policies, set inline on the queues (see queues.tf). A queue cannot refer to its own
  # ARN attribute, so the ARN is spelled out.
  queue_policies = { for key in ["sweeper_rule_dlq"] : key => jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Sid       = "AllowSweeperRuleDeadLetters"
      Effect    = "Allow"
      Principal = { Service = "events.amazonaws.com" }
      Action    = "sqs:SendMessage"
      Resource  = "arn:${local.partition}:sqs:${local.region}:${local.account_id}:${local.name["sweeper_rule_dlq"]}"
      Condition = { ArnEquals = { "aws:SourceArn" = aws_cloudwatch_event_rule.sweeper[0].arn } }
    }]
  }) if local.sweeping }
}
