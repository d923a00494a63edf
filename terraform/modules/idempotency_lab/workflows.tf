locals {
  # The definition template's variables: function ARNs computed from names (main.tf), not
  # read from the functions, so that a function may in turn start a workflow without a cycle.
  # The workflows of the chosen lessons (var.lessons, main.tf).
  workflow_specs = { for key, w in var.workflows : key => merge(w, {
    vars = merge(
      # Service integrations (arn:<partition>:states:::dynamodb:putItem) name the partition.
      { partition = local.partition },
      { for fn in w.invokes : "${fn}_arn" => local.function_arn[fn] },
      { for t in keys(w.tables) : "${t}_table" => local.name[t] },
      { for alias, fn in w.aliases : "${alias}_arn" => local.function_arn[fn] },
    )
  }) if w.lesson == null || contains(local.chosen_lessons, coalesce(w.lesson, "-")) }
}

resource "aws_cloudwatch_log_group" "workflow" {
  for_each = local.workflow_specs

  # The /aws/vendedlogs/ prefix keeps the log resource policy Step Functions writes small.
  name              = "/aws/vendedlogs/states/${local.workflow_name[each.key]}"
  retention_in_days = var.log_retention_days
  #checkov:skip=CKV_AWS_158:AWS-managed encryption of CloudWatch Logs; a customer-managed key adds a monthly fee and a key policy for workshop logs
  #checkov:skip=CKV_AWS_338:workshop logs are kept for var.log_retention_days (14 days by default), not a year
  tags = merge(local.tags, { Name = local.workflow_name[each.key] })
}

resource "aws_sfn_state_machine" "this" {
  for_each = local.workflow_specs

  name       = local.workflow_name[each.key]
  type       = each.value.type
  role_arn   = aws_iam_role.workflow[each.key].arn
  definition = templatefile("${path.module}/workflows/${each.value.definition}", each.value.vars)

  logging_configuration {
    # Step Functions requires the log group ARN with the ":*" suffix.
    log_destination        = "${aws_cloudwatch_log_group.workflow[each.key].arn}:*"
    include_execution_data = true
    level                  = "ALL"
  }

  tracing_configuration {
    enabled = true
  }

  tags = merge(local.tags, { Name = local.workflow_name[each.key] })

  # The role must be able to invoke the functions before Step Functions validates it.
  depends_on = [aws_iam_role_policy.workflow, aws_lambda_function.this]
}
