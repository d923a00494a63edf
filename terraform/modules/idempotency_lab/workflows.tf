locals {
  # One entry per state machine. The definition is a template under workflows/; it receives
  # `<function key>_arn` for every function in `invokes`, `<table key>_table` for every table
  # in `tables` (for direct DynamoDB integrations), and `<alias>_arn` for every entry of
  # `aliases` (template name -> function key). Entries hold only literals, so that function
  # entries may use local.workflow_arn without a dependency cycle.
  workflows = {
    vehicle_registration_naive = {
      type       = "EXPRESS"
      definition = "vehicle_registration.asl.json"
      invokes    = ["rmv_check", "write_vehicle_naive", "notify"]
      aliases    = { write_vehicle = "write_vehicle_naive" }
    }
    vehicle_registration_idempotent = {
      type       = "EXPRESS"
      definition = "vehicle_registration.asl.json"
      invokes    = ["rmv_check", "write_vehicle_idempotent", "notify"]
      aliases    = { write_vehicle = "write_vehicle_idempotent" }
    }
    account_deletion = {
      # Standard: exactly-once execution, and a duplicate StartExecution with the same name is recognised.
      type       = "STANDARD"
      definition = "account_deletion.asl.json"
      invokes    = ["claim_deletion", "delete_records", "delete_files", "delete_identity", "send_goodbye", "complete_deletion"]
    }
  }

  workflow_specs = { for key, w in local.workflows : key => {
    type       = w.type
    definition = w.definition
    invokes    = w.invokes
    tables     = try(w.tables, {})
    vars = merge(
      { for fn in w.invokes : "${fn}_arn" => lookup(local.function_arn, fn, local.unknown) },
      { for t in keys(try(w.tables, {})) : "${t}_table" => lookup(local.name, t, local.unknown) },
      { for alias, fn in try(w.aliases, {}) : "${alias}_arn" => lookup(local.function_arn, fn, local.unknown) },
    )
  } }
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
