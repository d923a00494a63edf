# `definition` is a template under workflows/; it receives `<function key>_arn` for every function
# in `invokes`, `<table key>_table` for every table in `tables` (for direct DynamoDB
# integrations), `<alias>_arn` for every entry of `aliases` (template name -> function key),
# and `partition` (aws, aws-cn, aws-us-gov) for the ARNs of service integrations.
variable "workflows" {
  description = "The lab's Step Functions state machines; each `definition` is a template under workflows/ given its functions' ARNs and tables' names."
  type = map(object({
    type       = string
    definition = string
    invokes    = list(string)
    tables     = optional(map(string), {}) # { <key of var.tables> = <level of local.table_actions> }
    aliases    = optional(map(string), {})
  }))
  nullable = false
  default = {
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
    # The same workflow with the write done by Step Functions itself: a DynamoDB PutItem
    # task with a condition (no Lambda), then a GetItem when the condition refuses it.
    vehicle_registration_native = {
      type       = "EXPRESS"
      definition = "vehicle_registration_native.asl.json"
      invokes    = ["rmv_check", "notify"]
      tables     = { vehicles_native = "read_write" }
    }
    account_deletion = {
      # Standard: exactly-once execution, and a duplicate StartExecution with the same name is recognised.
      type       = "STANDARD"
      definition = "account_deletion.asl.json"
      invokes    = ["claim_deletion", "delete_records", "delete_files", "delete_identity", "send_goodbye", "complete_deletion"]
    }
  }

  validation {
    condition     = alltrue([for key in keys(var.workflows) : can(regex("^[a-z][a-z0-9_]*$", key))])
    error_message = "Workflow keys must be lower_snake_case (they become `<prefix>-<key>` names and `<KEY>_STATE_MACHINE_ARN` variables)."
  }

  validation {
    condition     = contains(keys(var.workflows), "account_deletion")
    error_message = "var.workflows must keep `account_deletion`: the module's Scheduler role starts it."
  }

  validation {
    condition     = alltrue([for w in values(var.workflows) : contains(["STANDARD", "EXPRESS"], w.type)])
    error_message = "A workflow's type is STANDARD or EXPRESS."
  }

  # The rules below name the wrong entries: each list is written twice, as the same expression
  # (functions.tf says why).
  validation {
    condition = length(flatten([for key, w in var.workflows : [
      for fn in concat(w.invokes, values(w.aliases)) : "${key} invokes ${fn}" if !contains(keys(var.functions), fn)
    ]])) == 0
    error_message = format(
      "Every function a workflow invokes or aliases is a key of var.functions. Wrong: %s.",
      join("; ", flatten([for key, w in var.workflows : [
        for fn in concat(w.invokes, values(w.aliases)) : "${key} invokes ${fn}" if !contains(keys(var.functions), fn)
      ]])),
    )
  }

  validation {
    condition = length(flatten([for key, w in var.workflows : [
      for t, level in w.tables : "${key}: ${t} = \"${level}\"" if !contains(keys(var.tables), t) || !contains(keys(local.table_actions), level)
    ]])) == 0
    error_message = format(
      "Every table a workflow lists is a key of var.tables, with an access level of local.table_actions (%s). Wrong: %s.",
      join(", ", keys(local.table_actions)),
      join("; ", flatten([for key, w in var.workflows : [
        for t, level in w.tables : "${key}: ${t} = \"${level}\"" if !contains(keys(var.tables), t) || !contains(keys(local.table_actions), level)
      ]])),
    )
  }

  validation {
    condition = length(flatten([for key, f in var.functions : [
      for w in concat(f.starts, f.knows) : "${key} names ${w}" if !contains(keys(var.workflows), w)
    ]])) == 0
    error_message = format(
      "Every workflow a function starts or knows (var.functions) is a key of var.workflows. Wrong: %s.",
      join("; ", flatten([for key, f in var.functions : [
        for w in concat(f.starts, f.knows) : "${key} names ${w}" if !contains(keys(var.workflows), w)
      ]])),
    )
  }

  validation {
    condition = length([
      for key, w in var.workflows : "${key}: workflows/${w.definition}" if !fileexists("${path.module}/workflows/${w.definition}")
    ]) == 0
    error_message = format(
      "Every workflow definition is a file under workflows/. Wrong: %s.",
      join("; ", [
        for key, w in var.workflows : "${key}: workflows/${w.definition}" if !fileexists("${path.module}/workflows/${w.definition}")
      ]),
    )
  }

  # Tables, functions and queues share one map of names (main.tf, local.name), so a key used in
  # two of them would stop the plan with Terraform's bare "Duplicate object key". Workflows are
  # named apart, but one key naming one thing keeps every output and environment variable plain.
  # A rule may read only variables whose own rules never read it back (Terraform refuses the
  # cycle): no rule reads var.workflows, so the rule that spans the maps lives here.
  validation {
    condition = length([
      for key in distinct(concat(keys(var.tables), keys(var.functions), keys(var.queues), keys(var.workflows))) :
      format("%s (%s)", key, join(" and ", [
        for kind, names in { tables = keys(var.tables), functions = keys(var.functions), queues = keys(var.queues), workflows = keys(var.workflows) } :
        kind if contains(names, key)
      ]))
      if length([for names in [keys(var.tables), keys(var.functions), keys(var.queues), keys(var.workflows)] : names if contains(names, key)]) > 1
    ]) == 0
    error_message = format(
      "A key names one table, function, queue or workflow (each is named <prefix>-<key>): rename one of them. Wrong: %s.",
      join("; ", [
        for key in distinct(concat(keys(var.tables), keys(var.functions), keys(var.queues), keys(var.workflows))) :
        format("%s (%s)", key, join(" and ", [
          for kind, names in { tables = keys(var.tables), functions = keys(var.functions), queues = keys(var.queues), workflows = keys(var.workflows) } :
          kind if contains(names, key)
        ]))
        if length([for names in [keys(var.tables), keys(var.functions), keys(var.queues), keys(var.workflows)] : names if contains(names, key)]) > 1
      ]),
    )
  }
}

locals {
  # The definition template's variables: function ARNs computed from names (main.tf), not
  # read from the functions, so that a function may in turn start a workflow without a cycle.
  workflow_specs = { for key, w in var.workflows : key => merge(w, {
    vars = merge(
      # Service integrations (arn:<partition>:states:::dynamodb:putItem) name the partition.
      { partition = local.partition },
      { for fn in w.invokes : "${fn}_arn" => local.function_arn[fn] },
      { for t in keys(w.tables) : "${t}_table" => local.name[t] },
      { for alias, fn in w.aliases : "${alias}_arn" => local.function_arn[fn] },
    )
  }) }
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
